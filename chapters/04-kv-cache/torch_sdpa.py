"""PyTorch's scaled_dot_product_attention on the decode step that
`kv_cache gpu-bench` times: one query per head and sequence, 32 query
heads over 8 kv heads of 128 (a Llama-3-8B layer), in fp16, with the keys and
values contiguous, [batch, kv heads, context, 128], as PyTorch wants them (the
kernels of the chapter read them through block tables instead). The same
byte count (the cache, read once) against the read bandwidth of the same run,
timed as common/torch_side_by_side.py says (CUDA graph replays, cold L2).

PyTorch picks among several attention kernels (backends) by the shapes and
dtypes; which one it picked changes the result by a large factor. Each
backend is pinned with torch.nn.attention.sdpa_kernel in turn and timed where
it accepts the step; its name is in the row, and a backend that refuses the
step is listed with the reason.

Prints a Markdown table stamped with the device, the PyTorch and CUDA
versions, the date and the commit (--commit or $GIT_COMMIT), to put beside
the results file of `kv_cache gpu-bench --results`.

Not needed to build or test anything; run it on the GPU machine:
    python3 torch_sdpa.py --commit "$(git rev-parse HEAD)" > torch-results.md
"""
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
import torch_side_by_side as side  # noqa: E402

HEADS, KV_HEADS, HEAD_DIM = 32, 8, 128
CASES = ((8, 16384), (1, 1024), (1, 16384), (32, 4096))  # (sequences, context)
BACKENDS = (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION,
            SDPBackend.MATH)


def decode_inputs(batch, context):
    q = torch.randn(batch, HEADS, 1, HEAD_DIM, device="cuda", dtype=torch.float16)
    k = torch.randn(batch, KV_HEADS, context, HEAD_DIM, device="cuda", dtype=torch.float16)
    v = torch.rand(batch, KV_HEADS, context, HEAD_DIM, device="cuda", dtype=torch.float16) * 2 - 1
    return q, k, v


def pinned_step(backend, q, k, v):
    """The step with only `backend` allowed, run once to see that it accepts
    the shapes: (step, None), or (None, the reason it refused)."""
    def step():
        with sdpa_kernel([backend]):
            return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    try:
        step()
        torch.cuda.synchronize()
    except (RuntimeError, NotImplementedError, ValueError) as error:  # each backend refuses its own way
        return None, (str(error).splitlines()[0] or type(error).__name__)[:120]
    return step, None


def main():
    limits = side.begin("torch_sdpa.py", __doc__.splitlines()[0],
                        f"Decode attention, {HEADS} query heads over {KV_HEADS} kv heads of {HEAD_DIM}, "
                        "fp16, contiguous, enable_gqa")
    print("| sequences | context | backend | how timed | ms | GB/s of cache | of read bandwidth (slowest–fastest) |")
    print("|--:|--:|:--|:--|--:|--:|--:|")
    with torch.no_grad():
        for batch, context in CASES:
            q, k, v = decode_inputs(batch, context)
            cache_bytes = 2 * batch * KV_HEADS * context * HEAD_DIM * 2
            for backend in BACKENDS:
                step, refusal = pinned_step(backend, q, k, v)
                if step is None:
                    print(f"| {batch} | {context} | {backend.name} | refused: {refusal} | - | - | - |")
                    continue
                timing = side.time_gpu(step)
                gbs = cache_bytes / timing.median * 1e-9
                print(f"| {batch} | {context} | {backend.name} | {timing.method} | {timing.median * 1e3:.3f} "
                      f"| {gbs:.0f} | {side.share_cell(cache_bytes, timing, limits.read_gbs)} |")
            del q, k, v
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
