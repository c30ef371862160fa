/* Address arithmetic of a paged KV cache, shared by the CPU code and the
 * CUDA decode kernels.
 *
 * One layer's pool of keys (and, separately, of values) is an array
 *     [physical block][kv head][slot][head_dim]
 * of floats. A sequence owns a block table: logical block i (its positions
 * i*block_size .. i*block_size + block_size - 1) lives in physical block
 * block_table[i]. Inside a block, one kv head's slots are contiguous, so an
 * attention kernel streams block_size * head_dim floats per block and head.
 *
 * A contiguous cache is the special case of one block per sequence with
 * block_size = max_len and block_table = {sequence}. */
#ifndef KERNELS_PAGED_KV_H
#define KERNELS_PAGED_KV_H

#include <stddef.h>
#include <stdint.h>

#include "common/hostdevice.h"

typedef struct {
    int block_size; /* positions per block */
    int n_kv_heads;
    int head_dim;
} PagedKvShape;

/* Blocks needed to hold `tokens` positions. */
HOST_DEVICE static inline int paged_kv_blocks_for(int tokens, int block_size)
{
    return (tokens + block_size - 1) / block_size;
}

/* Positions of a sequence of `length` that fall in its logical block `block`:
 * block_size, except in the last, partly filled block. */
HOST_DEVICE static inline int paged_kv_positions_in_block(int length, int block, int block_size)
{
    int rest = length - block * block_size;
    return rest < block_size ? rest : block_size;
}

/* Floats in one physical block (all kv heads, all slots) of one layer. */
HOST_DEVICE static inline size_t paged_kv_block_floats(PagedKvShape shape)
{
    return (size_t)shape.n_kv_heads * shape.block_size * shape.head_dim;
}

// ANCHOR: locate_slot_in_pool
/* Offset, in floats from the start of one layer's pool, of the vector of
 * (physical block, kv head, slot). */
HOST_DEVICE static inline size_t paged_kv_offset(PagedKvShape shape, int32_t physical_block, int kv_head, int slot)
{
    return (((size_t)physical_block * shape.n_kv_heads + kv_head) * shape.block_size + slot) * shape.head_dim;
}

/* Offset of a sequence's position, looked up through its block table. */
HOST_DEVICE static inline size_t paged_kv_position_offset(PagedKvShape shape, const int32_t *block_table, int kv_head,
                                                          int position)
{
    int32_t physical_block = block_table[position / shape.block_size];
    return paged_kv_offset(shape, physical_block, kv_head, position % shape.block_size);
}
// ANCHOR_END: locate_slot_in_pool

#endif
