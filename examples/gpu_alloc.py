#!/usr/bin/env python3
"""Holds a known amount of GPU memory for a while, for a check of stemmon's GPU figures
against the real NVIDIA driver.

    python3 examples/gpu_alloc.py [MIB] [SECONDS] [DEVICE]

Allocates MIB mebibytes (default 512) on CUDA device DEVICE (default 0) with PyTorch,
or CuPy where PyTorch is missing, writes to every byte so that the memory is really
taken, prints one line `ready pid=PID device=DEVICE mib=MIB library=NAME` on stdout
(flushed), holds it for SECONDS (default 10), and frees it.

Run it under `stemmon run -- python3 examples/gpu_alloc.py 1024 5` and the report's
`peak_tree_gpu_bytes` is about the 1024 MiB plus the CUDA context's own memory (a few hundred
MiB, depending on the GPU and the library), and `processes[]` lists this pid with it.
Exits 2 with a message on stderr when neither library or no GPU is there.
"""

import os
import sys
import time


def fail(why):
    print(f"gpu_alloc: {why}", file=sys.stderr)
    sys.exit(2)


def allocate(mib, device):
    """A buffer of `mib` MiB on `device`, every byte written, and the library's name."""
    size = mib << 20
    try:
        import torch

        if not torch.cuda.is_available():
            fail("PyTorch sees no CUDA GPU")
        buffer = torch.ones(size, dtype=torch.uint8, device=f"cuda:{device}")
        torch.cuda.synchronize(device)
        return buffer, "torch"
    except ImportError:
        pass
    try:
        import cupy

        with cupy.cuda.Device(device):
            buffer = cupy.ones(size, dtype=cupy.uint8)
            cupy.cuda.Device(device).synchronize()
        return buffer, "cupy"
    except ImportError:
        pass
    fail("neither PyTorch nor CuPy is installed")


def main():
    mib = int(sys.argv[1]) if len(sys.argv) > 1 else 512
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 10.0
    device = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    buffer, library = allocate(mib, device)
    print(f"ready pid={os.getpid()} device={device} mib={mib} library={library}", flush=True)
    time.sleep(seconds)
    del buffer


if __name__ == "__main__":
    main()
