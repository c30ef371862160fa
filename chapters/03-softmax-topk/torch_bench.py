"""PyTorch's softmax followed by topk on the GPU, timed the way
`softmax_topk gpu-bench` times the CUDA kernels of this chapter: the same
shapes (4096 rows of V = 32000, 50257, 128256 and 151936 logits, K = 1, 8, 64
and 256; one row of V = 128256 for a single decode step), the same byte count
(the logits read once) against the read bandwidth of the same run, timed as
common/torch_side_by_side.py says (CUDA graph replays, cold L2), on logits
drawn the same way (normal, standard deviation 3). Prints a Markdown table stamped with the device, the PyTorch and CUDA
versions, the date and the commit (--commit or $GIT_COMMIT), to put next to
the results file of `softmax_topk gpu-bench --results`.

PyTorch's answer is checked against the same task's answer in double before
it is timed: the indices of the K largest logits, lowest index first on ties.

Not needed to build or test anything; run it on the GPU machine:
    python3 torch_bench.py --commit "$(git rev-parse HEAD)" > torch-results.md
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
import torch_side_by_side as side  # noqa: E402

BATCH_ROWS = 4096
VOCABS = (32000, 50257, 128256, 151936)
KS = (1, 8, 64, 256)
SINGLE_ROW_VOCAB, SINGLE_ROW_KS = 128256, (1, 8, 64)


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


def row(label, logits, k, read_gbs):
    check_against_double(logits, k)
    timing = side.time_gpu(lambda: softmax_then_topk(logits, k))
    rows, vocab = logits.shape
    nbytes = rows * vocab * 4
    return (f"| {label} | {timing.method} | {rows} | {vocab} | {k} | {timing.median * 1e6:.1f} us "
            f"| {nbytes / timing.median * 1e-9:.0f} | {side.share_cell(nbytes, timing, read_gbs)} |")


def main():
    limits = side.begin("torch_bench.py", __doc__.splitlines()[0],
                      "torch.softmax then torch.topk, float32; GB/s counts the logits read once")
    generator = torch.Generator(device="cuda").manual_seed(1)
    # Drawn like the program's benchmark logits: normal, standard deviation 3.
    largest = 3 * torch.randn(BATCH_ROWS, max(VOCABS), device="cuda", generator=generator)
    print("| implementation | how timed | rows | V | K | time | GB/s | of read bandwidth (slowest–fastest) |")
    print("|:--|:--|--:|--:|--:|--:|--:|--:|")
    for vocab in VOCABS:
        logits = largest[:, :vocab].contiguous()
        for k in KS:
            print(row("torch.softmax + torch.topk", logits, k, limits.read_gbs))
        del logits
    single = largest[:1, :SINGLE_ROW_VOCAB].contiguous()
    for k in SINGLE_ROW_KS:
        print(row("torch.softmax + torch.topk", single, k, limits.read_gbs))


if __name__ == "__main__":
    main()
