"""Times one psutil sample of a process tree: children(recursive=True) + memory_info().

Run by the tree_sample bench (through `bash bench/run`, which makes the virtualenv) on
the same tree that stemmon and sysinfo read in the same run. Prints one JSON object.
"""

import argparse
import json
import statistics
import time

import psutil


def sample(root):
    """One tree sample: (process count, total RSS in bytes)."""
    total = root.memory_info().rss
    count = 1
    for child in root.children(recursive=True):
        count += 1
        try:
            total += child.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return count, total


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--root", type=int, required=True, help="pid of the tree's root")
    parser.add_argument("--seconds", type=float, default=4.0, help="measurement time")
    args = parser.parse_args()

    # A monitor keeps its Process object between samples, as stemmon keeps its reader.
    root = psutil.Process(args.root)
    warm_until = time.perf_counter() + 0.5
    while time.perf_counter() < warm_until:
        count, _ = sample(root)

    times = []
    stop = time.perf_counter() + args.seconds
    while time.perf_counter() < stop:
        started = time.perf_counter_ns()
        count, _ = sample(root)
        times.append(time.perf_counter_ns() - started)

    print(json.dumps({
        "psutil_version": psutil.__version__,
        "process_count": count,
        "samples": len(times),
        "median_ns": statistics.median(times),
        "mean_ns": statistics.fmean(times),
        "min_ns": min(times),
    }))


if __name__ == "__main__":
    main()
