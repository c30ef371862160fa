"""PyTorch's softmax followed by topk on the GPU, timed the way
`softmax_topk --gpu --bench` times the CUDA kernels of this chapter: the same
shapes (4096 rows of V = 32000, 50257, 128256 and 151936 logits, K = 1, 8, 64
and 256; one row of V = 128256 for a single decode step), the same byte count
(the logits read once), CUDA events, the median of 21 runs after 3 warm-up
runs, on logits drawn the same way (normal, standard deviation 3). Prints a Markdown table stamped with the device, the PyTorch and CUDA
versions, the date and the commit (--commit or $GIT_COMMIT), to put next to
the results file of `softmax_topk --gpu --bench --results`.

PyTorch's answer is checked against the same task's answer in double before
it is timed: the indices of the K largest logits, lowest index first on ties.

Not needed to build or test anything; run it on the GPU machine:
    python3 torch_bench.py --commit "$(git rev-parse HEAD)" > torch-results.md
"""
import argparse
import datetime
import os
import statistics
import sys

import torch

BATCH_ROWS = 4096
VOCABS = (32000, 50257, 128256, 151936)
KS = (1, 8, 64, 256)
SINGLE_ROW_VOCAB, SINGLE_ROW_KS = 128256, (1, 8, 64)
WARMUP, RUNS = 3, 21


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


def copy_bandwidth_gbs(tensor):
    """Device-to-device copy of the logits, counting bytes read plus written."""
    target = torch.empty_like(tensor)
    return 2 * tensor.numel() * tensor.element_size() / median_seconds(lambda: target.copy_(tensor)) * 1e-9


def softmax_then_topk(logits, k):
    return torch.topk(torch.softmax(logits, dim=-1), k, dim=-1)


def check_against_double(logits, k):
    """The probabilities of PyTorch's winners must be the K largest; ties in
    probability (equal logits) may come in another order than ours, so the
    check is on the values, which is what a sampler uses."""
    probs, _ = softmax_then_topk(logits[:16], k)
    expected, _ = torch.topk(torch.softmax(logits[:16].double(), dim=-1), k, dim=-1)
    if not torch.allclose(probs.double(), expected, rtol=1e-4, atol=1e-30):
        sys.exit(f"torch_bench.py: error: softmax + topk disagrees with the double reference at K = {k}")


def row(label, logits, k, copy):
    check_against_double(logits, k)
    seconds = median_seconds(lambda: softmax_then_topk(logits, k))
    rows, vocab = logits.shape
    gbs = rows * vocab * 4 / seconds * 1e-9
    return (f"| {label} | {rows} | {vocab} | {k} | {seconds * 1e6:.1f} us | {gbs:.0f} "
            f"| {100 * gbs / copy:.0f}% |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commit", default=os.environ.get("GIT_COMMIT"))
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("torch_bench.py: error: no CUDA device available")
    if not args.commit:
        sys.exit("torch_bench.py: error: say which commit was measured, with --commit or $GIT_COMMIT")
    generator = torch.Generator(device="cuda").manual_seed(1)
    # Drawn like the program's benchmark logits: normal, standard deviation 3.
    largest = 3 * torch.randn(BATCH_ROWS, max(VOCABS), device="cuda", generator=generator)
    copy = copy_bandwidth_gbs(largest)
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"{torch.cuda.get_device_name()}, PyTorch {torch.__version__}, CUDA {torch.version.cuda}; "
          f"measured {date} at commit {args.commit}. torch.softmax then torch.topk, float32; "
          f"median of {RUNS} runs; device-to-device copy {copy:.0f} GB/s in the same run; "
          f"GB/s counts the logits read once.\n")
    print("| implementation | rows | V | K | time | GB/s | of copy |")
    print("|:--|--:|--:|--:|--:|--:|--:|")
    for vocab in VOCABS:
        logits = largest[:, :vocab].contiguous()
        for k in KS:
            print(row("torch.softmax + torch.topk", logits, k, copy))
        del logits
    single = largest[:1, :SINGLE_ROW_VOCAB].contiguous()
    for k in SINGLE_ROW_KS:
        print(row("torch.softmax + torch.topk", single, k, copy))


if __name__ == "__main__":
    main()
