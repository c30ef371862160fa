"""PyTorch's scaled_dot_product_attention on the decode step that
`kv_cache --gpu --bench` times: one query per head and sequence, 32 query
heads over 8 kv heads of 128 (a Llama-3-8B layer), in fp16, with the keys and
values contiguous, [batch, kv heads, context, 128], as PyTorch wants them (the
kernels of the chapter read them through block tables instead). The same
byte count (the cache, read once), CUDA events, the median of 20 steps after
3 warm-up ones, and the device-to-device copy bandwidth of the same run.
Prints a Markdown table stamped with the device, the PyTorch and CUDA
versions, the date and the commit (--commit or $GIT_COMMIT), to put beside
the results file of `kv_cache --gpu --bench --results`.

Not needed to build or test anything; run it on the GPU machine:
    python3 torch_sdpa.py --commit "$(git rev-parse HEAD)" > torch-results.md
"""
import argparse
import datetime
import os
import statistics
import sys

import torch
import torch.nn.functional as F

HEADS, KV_HEADS, HEAD_DIM = 32, 8, 128
CASES = ((8, 16384), (1, 1024), (1, 16384), (32, 4096))  # (sequences, context)
WARMUP, RUNS = 3, 20
COPY_BYTES = 1 << 30


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
    """Device-to-device copy, counting bytes read plus written."""
    source = torch.empty(COPY_BYTES // 4, device="cuda")
    target = torch.empty_like(source)
    return 2 * COPY_BYTES / median_seconds(lambda: target.copy_(source)) * 1e-9


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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commit", default=os.environ.get("GIT_COMMIT"))
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("torch_sdpa.py: error: no CUDA device available")
    if not args.commit:
        sys.exit("torch_sdpa.py: error: say which commit was measured, with --commit or $GIT_COMMIT")
    copy = copy_bandwidth_gbs()
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"{torch.cuda.get_device_name()}, PyTorch {torch.__version__}, CUDA {torch.version.cuda}; "
          f"measured {date} at commit {args.commit}. Decode attention, {HEADS} query heads over "
          f"{KV_HEADS} kv heads of {HEAD_DIM}, fp16, contiguous; median of {RUNS} steps; "
          f"device-to-device copy {copy:.0f} GB/s in the same run.\n")
    print("| sequences | context | GQA | ms | GB/s of cache | of copy |")
    print("|--:|--:|:--|--:|--:|--:|")
    with torch.no_grad():
        for batch, context in CASES:
            step, how = decode_step(batch, context)
            seconds = median_seconds(step)
            cache_bytes = 2 * batch * KV_HEADS * context * HEAD_DIM * 2
            gbs = cache_bytes / seconds * 1e-9
            print(f"| {batch} | {context} | {how} | {seconds * 1e3:.3f} | {gbs:.0f} | {100 * gbs / copy:.0f}% |")
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
