/* An interface for checking the attention independently (with NumPy, say),
 * `kv_cache attend --load DIR --save DIR`: read q.npy [batch, n_heads,
 * head_dim], k.npy and v.npy [batch, n_kv_heads, max_len, head_dim] and
 * lens.npy [batch] (int32) from load_dir; write out_contiguous.npy and
 * out_paged.npy [batch, n_heads, head_dim] to save_dir: each query attends
 * over the first lens[b] positions with softmax scale 1/sqrt(head_dim); and
 * out_int8.npy and out_int4.npy, the same through INT8 and INT4 blocks (INT4
 * groups of int4_group channels), and out_fp8_e4m3.npy and out_fp8_e5m2.npy
 * through FP8 blocks whose scales, calibrated on k and v, are per tensor or
 * per kv head as fp8_scales says (KV_SCALE_PER_TENSOR or _PER_HEAD). Bad input: one line on stderr, exit 2; a
 * file that cannot be written: one line, exit 1. */
#ifndef CHAPTERS_04_KV_CACHE_ATTEND_NPY_H
#define CHAPTERS_04_KV_CACHE_ATTEND_NPY_H

#include "kernels/kv_quant.h"

void attend_npy(const char *load_dir, const char *save_dir, int block_size, int int4_group, KvScaleAxis fp8_scales);

#endif
