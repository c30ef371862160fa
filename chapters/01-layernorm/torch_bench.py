"""PyTorch's layer norm on the GPU, timed the way `layernorm --gpu --bench`
times the CUDA kernels of this chapter: the same shapes (d = 768, 1024, 4096,
each n x d tensor 512 MiB), the same byte counts (forward: read x, write y;
backward: read x and dy, write dx), CUDA events, the median of 20 runs after 3
warm-up runs. Prints a Markdown table stamped with the device, the PyTorch and
CUDA versions, the date and the commit (--commit or $GIT_COMMIT), to put next
to the results file of `layernorm --gpu --bench --results`.

Not needed to build or test anything; run it on the GPU machine:
    python3 torch_bench.py --commit "$(git rev-parse HEAD)" > torch-results.md
"""
import argparse
import datetime
import os
import statistics
import sys

import torch
import torch.nn.functional as F

TENSOR_BYTES = 512 << 20
WIDTHS = (768, 1024, 4096)
WARMUP, RUNS = 3, 20


def median_seconds(work):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for run in range(WARMUP + RUNS):
        start.record()
        work()
        stop.record()
        stop.synchronize()
        if run >= WARMUP:
            times.append(start.elapsed_time(stop) * 1e-3)
    return statistics.median(times)


def copy_bandwidth_gbs():
    """Device-to-device copy of one tensor, counting bytes read plus written."""
    source = torch.empty(TENSOR_BYTES // 4, device="cuda")
    target = torch.empty_like(source)
    return 2 * TENSOR_BYTES / median_seconds(lambda: target.copy_(source)) * 1e-9


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commit", default=os.environ.get("GIT_COMMIT"))
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("torch_bench.py: error: no CUDA device available")
    if not args.commit:
        sys.exit("torch_bench.py: error: say which commit was measured, with --commit or $GIT_COMMIT")
    copy = copy_bandwidth_gbs()
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"{torch.cuda.get_device_name()}, PyTorch {torch.__version__}, CUDA {torch.version.cuda}; "
          f"measured {date} at commit {args.commit}. Each n x d tensor {TENSOR_BYTES >> 20} MiB; "
          f"median of {RUNS} runs; device-to-device copy {copy:.0f} GB/s in the same run.\n")
    print("| pass | implementation | d | rows | time | GB/s | of copy |")
    print("|:--|:--|--:|--:|--:|--:|--:|")
    for d in WIDTHS:
        n = TENSOR_BYTES // 4 // d
        x = torch.randn(n, d, device="cuda", requires_grad=True)
        gamma = torch.randn(d, device="cuda", requires_grad=True)
        beta = torch.randn(d, device="cuda", requires_grad=True)
        dy = torch.randn(n, d, device="cuda")
        with torch.no_grad():
            forward = median_seconds(lambda: F.layer_norm(x, (d,), gamma, beta, 1e-5))
        y = F.layer_norm(x, (d,), gamma, beta, 1e-5)
        backward = median_seconds(lambda: torch.autograd.grad(y, (x, gamma, beta), dy, retain_graph=True))
        for name, seconds, bytes_per_element in (("forward", forward, 8), ("backward", backward, 12)):
            gbs = bytes_per_element * n * d / seconds * 1e-9
            print(f"| {name} | torch.nn.functional.layer_norm | {d} | {n} | {seconds * 1e3:.3f} ms "
                  f"| {gbs:.0f} | {100 * gbs / copy:.0f}% |")
        del x, gamma, beta, dy, y
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
