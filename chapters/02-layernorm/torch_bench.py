"""PyTorch's layer norm on the GPU, timed the way `layernorm gpu-bench`
times the CUDA kernels of this chapter: the same shapes (d = 768, 1024, 4096,
each n x d tensor 512 MiB), the same byte counts (forward: read x, write y;
backward: read x and dy, write dx) against the copy bandwidth of the same run,
timed as common/torch_side_by_side.py says (CUDA graph replays, cold L2). The
backward pass is PyTorch's kernel itself (aten.native_layer_norm_backward,
given the mean and rstd its forward saved), not autograd's bookkeeping.
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
    limits = side.begin("torch_bench.py", __doc__.splitlines()[0],
                        f"torch.nn.functional.layer_norm, float32, each n x d tensor {TENSOR_BYTES >> 20} MiB")
    print("| pass | implementation | how timed | d | rows | time | GB/s | of copy (slowest–fastest) |")
    print("|:--|:--|:--|--:|--:|--:|--:|--:|")
    aten = torch.ops.aten
    for d in WIDTHS:
        n = TENSOR_BYTES // 4 // d
        x, dy = torch.randn(n, d, device="cuda"), torch.randn(n, d, device="cuda")
        gamma, beta = torch.randn(d, device="cuda"), torch.randn(d, device="cuda")
        _, mean, rstd = aten.native_layer_norm(x, (d,), gamma, beta, 1e-5)
        forward = side.time_gpu(lambda: F.layer_norm(x, (d,), gamma, beta, 1e-5))
        backward = side.time_gpu(
            lambda: aten.native_layer_norm_backward(dy, x, (d,), mean, rstd, gamma, beta, [True, True, True]))
        for name, timing, bytes_per_element in (("forward", forward, 8), ("backward", backward, 12)):
            nbytes = bytes_per_element * n * d
            print(f"| {name} | torch.nn.functional.layer_norm | {timing.method} | {d} | {n} "
                  f"| {timing.median * 1e3:.3f} ms | {nbytes / timing.median * 1e-9:.0f} "
                  f"| {side.share_cell(nbytes, timing, limits.copy_gbs)} |")
        del x, dy, gamma, beta, mean, rstd
        torch.cuda.empty_cache()

if __name__ == "__main__":
    main()
