"""PyTorch's layer norm on the GPU, timed the way `layernorm gpu-bench`
times the CUDA kernels of this chapter: the same shapes (d = 768, 1024, 4096,
each n x d tensor 512 MiB), the same byte counts (forward: read x, write y;
backward: read x and dy, write dx), CUDA events, the median after warm-up runs.
Prints a Markdown table stamped with the device, the PyTorch and CUDA
versions, the date and the commit (--commit or $GIT_COMMIT), to put next to
the results file of `layernorm gpu-bench --results`.

Not needed to build or test anything; run it on the GPU machine:
    python3 torch_bench.py --commit "$(git rev-parse HEAD)" > torch-results.md
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
import torch_side_by_side as side  # noqa: E402

TENSOR_BYTES = 512 << 20
WIDTHS = (768, 1024, 4096)


def main():
    copy = side.begin("torch_bench.py", __doc__.splitlines()[0],
                      f"torch.nn.functional.layer_norm, float32, each n x d tensor {TENSOR_BYTES >> 20} MiB")
    print("| pass | implementation | d | rows | time | GB/s | of copy |")
    print("|:--|:--|--:|--:|--:|--:|--:|")
    for d in WIDTHS:
        n = TENSOR_BYTES // 4 // d
        x = torch.randn(n, d, device="cuda", requires_grad=True)
        gamma = torch.randn(d, device="cuda", requires_grad=True)
        beta = torch.randn(d, device="cuda", requires_grad=True)
        dy = torch.randn(n, d, device="cuda")
        with torch.no_grad():
            forward = side.median_seconds(lambda: F.layer_norm(x, (d,), gamma, beta, 1e-5))
        y = F.layer_norm(x, (d,), gamma, beta, 1e-5)
        backward = side.median_seconds(lambda: torch.autograd.grad(y, (x, gamma, beta), dy, retain_graph=True))
        for name, seconds, bytes_per_element in (("forward", forward, 8), ("backward", backward, 12)):
            gbs = bytes_per_element * n * d / seconds * 1e-9
            print(f"| {name} | torch.nn.functional.layer_norm | {d} | {n} | {seconds * 1e3:.3f} ms "
                  f"| {gbs:.0f} | {100 * gbs / copy:.0f}% |")
        del x, gamma, beta, dy, y
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
