"""An OTLP/HTTP receiver on loopback for tests/otlp.rs.

Decodes each POST to /v1/metrics and /v1/traces with the official `opentelemetry-proto`
package, appends it to OUT as one JSON line ({"path": ..., "body": MessageToDict(...)}),
and answers with the empty protobuf response. Prints its port on the first line of stdout.
Trace and span ids are written as hex, as OTLP/JSON has them. A body sent with
`Content-Encoding: gzip` is inflated first (its line says `"content_encoding": "gzip"`
and its size on the wire, `"wire_bytes"`).

    python3 otlp_receiver.py OUT [--delay SECONDS] [--status CODE] [--refuse PATH]

--delay answers each request that many seconds late (a slow collector); --status answers
with that HTTP status and no body (a collector that refuses); --refuse answers 405 to
every POST to PATH, unlogged (a backend that takes one signal, as Phoenix or Tempo).
"""

import argparse
import base64
import gzip
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

SERVICES = {
    "/v1/metrics": (
        metrics_service_pb2.ExportMetricsServiceRequest,
        metrics_service_pb2.ExportMetricsServiceResponse,
    ),
    "/v1/traces": (
        trace_service_pb2.ExportTraceServiceRequest,
        trace_service_pb2.ExportTraceServiceResponse,
    ),
}


def hex_ids(body):
    """Trace and span ids as hex, as OTLP/JSON writes them (MessageToDict gives base64)."""
    for resource_spans in body.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return body


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--status", type=int, default=200)
    parser.add_argument("--refuse", action="append", default=[])
    args = parser.parse_args()
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            if self.path in args.refuse:
                self.answer(405, b"")
                return
            encoding = self.headers.get("Content-Encoding")
            if encoding == "gzip":
                body = gzip.decompress(body)
            elif encoding not in (None, "identity"):
                self.answer(415, b"")
                return
            service = SERVICES.get(self.path)
            if service is None:
                self.answer(404, b"")
                return
            request_type, response_type = service
            request = request_type()
            request.ParseFromString(body)
            line = {
                "path": self.path,
                "content_type": self.headers.get("Content-Type"),
                "content_encoding": encoding,
                "wire_bytes": length,
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "body": hex_ids(MessageToDict(request)),
            }
            with lock, open(args.out, "a", encoding="utf-8") as out:
                out.write(json.dumps(line) + "\n")
            if args.delay:
                time.sleep(args.delay)
            if args.status != 200:
                self.answer(args.status, b"")
            else:
                self.answer(200, response_type().SerializeToString())

        def answer(self, status, payload):
            self.send_response(status)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    # Ends when the test closes stdin (or is killed).
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdin.read()
    server.shutdown()


if __name__ == "__main__":
    main()
