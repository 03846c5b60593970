#!/usr/bin/env python3
"""Wall time of a CPU-bound command bare and under `stemmon run` (1 s sampling).

Runs alternate (bare, monitored, bare, ...) so that drifts in the machine's load hit
both alike; prints each pair and the medians.
usage: overhead.py STEMMON_BINARY [ROUNDS]
"""
import os, resource, statistics, subprocess, sys, tempfile, time

stemmon = sys.argv[1]
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 10
work = ["sh", "-c", "i=0; while [ $i -lt 7000000 ]; do i=$((i+1)); done"]
with tempfile.TemporaryDirectory() as out:
    monitored = [stemmon, "run", "--sample-interval", "1", "--log-interval", "none",
                 "-o", os.path.join(out, "report.json"), "--"] + work
    bare_times, run_times, bare_cpu, run_cpu = [], [], [], []
    cpu = lambda: (lambda r: r.ru_utime + r.ru_stime)(resource.getrusage(resource.RUSAGE_CHILDREN))
    for _ in range(rounds):
        for command, times, cpus in ((work, bare_times, bare_cpu), (monitored, run_times, run_cpu)):
            start, start_cpu = time.perf_counter(), cpu()
            subprocess.run(command, check=True)
            times.append(time.perf_counter() - start)
            cpus.append(cpu() - start_cpu)
        print(f"bare {bare_times[-1]:.3f} s ({bare_cpu[-1]:.3f} s CPU)  "
              f"run {run_times[-1]:.3f} s ({run_cpu[-1]:.3f} s CPU, stemmon included)", flush=True)
bare, run = statistics.median(bare_times), statistics.median(run_times)
print(f"rounds {rounds}; median bare {bare:.3f} s; median under stemmon run {run:.3f} s; "
      f"overhead {(run - bare) / bare * 100:+.2f} %")
bc, rc = statistics.median(bare_cpu), statistics.median(run_cpu)
print(f"CPU (command, plus stemmon when monitored): median bare {bc:.3f} s; monitored {rc:.3f} s; "
      f"overhead {(rc - bc) / bc * 100:+.2f} %")
