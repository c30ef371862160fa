"""What the PyTorch side-by-side scripts beside the chapter programs share:
GPU timing with CUDA events (median after warm-up runs), the device-to-device
copy bandwidth that every result is compared against, and the stamp line
(device, PyTorch and CUDA versions, date, commit) that heads a results file.

The scripts are for a GPU machine with PyTorch; nothing in the build or the
tests needs Python. A script imports this file as
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "common"))
    import torch_side_by_side as side
"""
import argparse
import datetime
import os
import statistics
import sys

import torch

WARMUP, RUNS = 3, 21


def median_seconds(work, warmup=WARMUP, runs=RUNS):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for run in range(warmup + runs):
        start.record()
        work()
        stop.record()
        stop.synchronize()
        if run >= warmup:
            times.append(start.elapsed_time(stop) * 1e-3)
    return statistics.median(times)


def copy_bandwidth_gbs(nbytes=1 << 30):
    """Device-to-device copy of nbytes, counting bytes read plus written."""
    source = torch.empty(nbytes // 4, device="cuda")
    target = torch.empty_like(source)
    seconds = median_seconds(lambda: target.copy_(source))
    del source, target
    torch.cuda.empty_cache()
    return 2 * nbytes / seconds * 1e-9


def begin(script, description, what):
    """Parse --commit (or $GIT_COMMIT), make sure there is a GPU, measure the
    copy bandwidth, print the stamp line; return the copy bandwidth in GB/s.
    Errors are one line on stderr and a non-zero exit."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--commit", default=os.environ.get("GIT_COMMIT"))
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit(f"{script}: error: no CUDA device available")
    if not args.commit:
        sys.exit(f"{script}: error: say which commit was measured, with --commit or $GIT_COMMIT")
    copy = copy_bandwidth_gbs()
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"{torch.cuda.get_device_name()}, PyTorch {torch.__version__}, CUDA {torch.version.cuda}; "
          f"measured {date} at commit {args.commit}. {what}; median of {RUNS} runs after {WARMUP} warm-up "
          f"runs; device-to-device copy {copy:.0f} GB/s in the same run.\n")
    return copy
