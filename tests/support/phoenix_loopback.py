"""`phoenix serve`, with every port it opens on loopback, for tests/phoenix.rs.

Phoenix binds its HTTP port to PHOENIX_HOST, but its OTLP/gRPC port to `[::]` whatever
the settings say (phoenix/server/grpc_server.py in 20.26.1 writes `[::]:{port}`), so
this launcher has gRPC bind the same port on 127.0.0.1 instead, then runs Phoenix's own
entry point as `phoenix serve`. The test checks with `ss -ltnp` that every listening
socket of the process is on 127.0.0.1.

    PHOENIX_HOST=127.0.0.1 PHOENIX_PORT=... PHOENIX_GRPC_PORT=... \
    PHOENIX_WORKING_DIR=... python phoenix_loopback.py
"""

import sys

import grpc.aio

_server = grpc.aio.server


def _loopback_server(*args, **kwargs):
    server = _server(*args, **kwargs)
    add_insecure_port = server.add_insecure_port

    def on_loopback(address):
        host, _, port = address.rpartition(":")
        return add_insecure_port(f"127.0.0.1:{port}")

    server.add_insecure_port = on_loopback
    return server


grpc.aio.server = _loopback_server

from phoenix.server.main import main  # noqa: E402 (after the patch, on purpose)

sys.argv = ["phoenix", "serve"]
sys.exit(main())
