"""What the PyTorch side-by-side scripts beside the chapter programs share:
GPU timing the way common/cuda_util.c times the chapters' kernels, the
bandwidths every result is compared against, and the stamp line (device,
PyTorch and CUDA versions, date, commit) that heads a results file.

The timing, and why each part:
  - The work is captured once as a CUDA graph and replayed, so that Python
    and PyTorch's dispatcher are not inside the events: what is timed is the
    kernels, as for the chapters' own. Work that cannot be captured is timed
    as called, and the row says "eager".
  - Each run starts from a cold L2: a write of twice the L2's size is queued
    before the run's first event, as cuda_bench_run does.
  - All runs are queued before the host waits, once.
  - The median, the fastest and the slowest run are kept: the spread shows.

The scripts are for a GPU machine with PyTorch; nothing in the build or the
tests needs Python. A script imports this file as
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "common"))
    import torch_side_by_side as side
"""
import argparse
import collections
import datetime
import math
import os
import statistics
import subprocess
import sys

import torch

WARMUP, RUNS = 3, 21

Timing = collections.namedtuple("Timing", "median fastest slowest method")


def _captured(work):
    """(callable, method): a replay of work captured as a CUDA graph, or work
    itself when capture fails (the reason goes to stderr)."""
    side_stream = torch.cuda.Stream()
    side_stream.wait_stream(torch.cuda.current_stream())
    # Capture needs the work's lazy initialisation (cuBLAS handles, autotuning)
    # done beforehand, on a side stream.
    with torch.cuda.stream(side_stream):
        for _ in range(WARMUP):
            work()
    torch.cuda.current_stream().wait_stream(side_stream)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            work()
    except RuntimeError as error:
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        print(f"note: timed without a CUDA graph: {reason}", file=sys.stderr)
        torch.cuda.synchronize()
        return work, "eager"
    return graph.replay, "CUDA graph"


def _l2_flush_buffer():
    l2_bytes = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
    return torch.empty(max(2 * l2_bytes, 1 << 20) // 4, device="cuda")


def time_gpu(work, warmup=WARMUP, runs=RUNS):
    """Timing of work (seconds): median, fastest, slowest, and how it ran."""
    call, method = _captured(work)
    flush = _l2_flush_buffer()
    for _ in range(warmup):
        call()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(runs)]
    for start, stop in events:
        flush.zero_()
        start.record()
        call()
        stop.record()
    torch.cuda.synchronize()
    times = sorted(start.elapsed_time(stop) * 1e-3 for start, stop in events)
    del flush
    return Timing(statistics.median(times), times[0], times[-1], method)


def share_cell(nbytes, timing, limit_gbs):
    """'median% (slowest%–fastest%)' of limit_gbs, for nbytes moved per run."""
    def percent(seconds):
        return 100 * nbytes / seconds * 1e-9 / limit_gbs
    return f"{percent(timing.median):.0f}% ({percent(timing.slowest):.0f}–{percent(timing.fastest):.0f}%)"


def copy_bandwidth_gbs(nbytes=1 << 30):
    """Device-to-device copy of nbytes, counting bytes read plus written."""
    source = torch.empty(nbytes // 4, device="cuda")
    target = torch.empty_like(source)
    seconds = time_gpu(lambda: target.copy_(source)).median
    del source, target
    torch.cuda.empty_cache()
    return 2 * nbytes / seconds * 1e-9


def read_bandwidth_gbs(nbytes=1 << 30):
    """A sum over nbytes of floats: bytes read, nothing written but the sum.
    The limit of work that only reads (top-K, decode attention)."""
    source = torch.ones(nbytes // 4, device="cuda")
    total = torch.empty((), device="cuda")
    # torch.sum takes out= only with dim= (PyTorch 2.11 refuses it without).
    seconds = time_gpu(lambda: torch.sum(source, dim=0, out=total)).median
    # Proof that the floats were read; float partial sums may round a little.
    if not math.isclose(total.item(), nbytes // 4, rel_tol=1e-3):
        sys.exit(f"read probe: the sum of {nbytes // 4} ones came out {total.item()}")
    del source, total
    torch.cuda.empty_cache()
    return nbytes / seconds * 1e-9


Limits = collections.namedtuple("Limits", "copy_gbs read_gbs")


def sm_clock_mhz():
    """The SM clock now, as NVML reports it: torch.cuda.clock_rate (which
    needs pynvml), else nvidia-smi; "unknown" where neither answers. The
    chapters' programs measure it on the GPU itself (cuda_sm_clock_mhz in
    common/cuda_util.cu); kernels limited by instructions scale with it."""
    try:
        return f"{torch.cuda.clock_rate()} MHz"
    except Exception:  # no pynvml, or NVML refused: try the command line
        pass
    query = ["nvidia-smi", "--query-gpu=clocks.sm", "--format=csv,noheader,nounits"]
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    query.append(f"--id={visible.split(',')[0] if visible else torch.cuda.current_device()}")
    try:
        answer = subprocess.run(query, capture_output=True, text=True, timeout=30, check=True).stdout
        return f"{int(answer.strip())} MHz"
    except (OSError, subprocess.SubprocessError, ValueError):
        return "unknown"


def begin(script, description, what):
    """Parse --commit (or $GIT_COMMIT), make sure there is a GPU, measure the
    copy and read bandwidths, print the stamp line; return them (GB/s).
    Errors are one line on stderr and a non-zero exit."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--commit", default=os.environ.get("GIT_COMMIT"))
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit(f"{script}: error: no CUDA device available")
    if not args.commit:
        sys.exit(f"{script}: error: say which commit was measured, with --commit or $GIT_COMMIT")
    limits = Limits(copy_bandwidth_gbs(), read_bandwidth_gbs())
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"{torch.cuda.get_device_name()}, SM clock {sm_clock_mhz()} after the bandwidth probes, "
          f"PyTorch {torch.__version__}, CUDA {torch.version.cuda}; "
          f"measured {date} at commit {args.commit}. {what}; median of {RUNS} runs (slowest–fastest) after "
          f"{WARMUP} warm-up runs, each from a cold L2, replayed as a CUDA graph unless the row says eager; "
          f"in the same run, device-to-device copy {limits.copy_gbs:.0f} GB/s (read + write) and a "
          f"read-only sum {limits.read_gbs:.0f} GB/s.\n")
    return limits
