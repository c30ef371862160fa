"""PyTorch's scaled_dot_product_attention on the decode step that
`kv_cache gpu-bench` times: one query per head and sequence, 32 query
heads over 8 kv heads of 128 (a Llama-3-8B layer), in fp16, with the keys and
values contiguous, [batch, kv heads, context, 128], as PyTorch wants them (the
kernels of the chapter read them through block tables instead). The same
byte count (the cache, read once), CUDA events, the median of the steps after
warm-up ones, and the device-to-device copy bandwidth of the same run.
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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
import torch_side_by_side as side  # noqa: E402

HEADS, KV_HEADS, HEAD_DIM = 32, 8, 128
CASES = ((8, 16384), (1, 1024), (1, 16384), (32, 4096))  # (sequences, context)


def decode_step(batch, context):
    """The step, and what it reads: keys and values once, in fp16."""
    q = torch.randn(batch, HEADS, 1, HEAD_DIM, device="cuda", dtype=torch.float16)
    k = torch.randn(batch, KV_HEADS, context, HEAD_DIM, device="cuda", dtype=torch.float16)
    v = torch.rand(batch, KV_HEADS, context, HEAD_DIM, device="cuda", dtype=torch.float16) * 2 - 1
    try:
        F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        return (lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)), "enable_gqa"
    except TypeError:
        # PyTorch before 2.5 has no enable_gqa: repeat the kv heads once, outside the timing. Each
        # query head then reads its own copy, so the bytes read are 4 times the cache's.
        group = HEADS // KV_HEADS
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        return (lambda: F.scaled_dot_product_attention(q, k, v)), "kv heads repeated"


def main():
    copy = side.begin("torch_sdpa.py", __doc__.splitlines()[0],
                      f"Decode attention, {HEADS} query heads over {KV_HEADS} kv heads of {HEAD_DIM}, "
                      "fp16, contiguous")
    print("| sequences | context | GQA | ms | GB/s of cache | of copy |")
    print("|--:|--:|:--|--:|--:|--:|")
    with torch.no_grad():
        for batch, context in CASES:
            step, how = decode_step(batch, context)
            seconds = side.median_seconds(step)
            cache_bytes = 2 * batch * KV_HEADS * context * HEAD_DIM * 2
            gbs = cache_bytes / seconds * 1e-9
            print(f"| {batch} | {context} | {how} | {seconds * 1e3:.3f} | {gbs:.0f} | {100 * gbs / copy:.0f}% |")
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
