/* A property test of the block manager: 100,000 random operations (allocate
 * with prefix matching, append with copy-on-write, fork, free, evict), with
 * every invariant checked after each one:
 *   - each block's reference count equals the block-table entries naming it;
 *   - a block with no user is on the free list or on the LRU list of cached
 *     blocks, exactly once, and a block with users is on neither (nothing
 *     leaked, nothing both free and used, no double free);
 *   - the LRU list is a well-formed chain of cached, unused blocks;
 *   - the prefix cache's map holds exactly the cached blocks, each with the
 *     tokens it stores;
 *   - every sequence reads back exactly the tokens it wrote, through its
 *     block table, from a shadow copy of the pool's contents (so a write into
 *     a shared block, or a wrong copy, shows up). */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "chapters/04-kv-cache/block_pool.h"
#include "common/alloc.h"
#include "common/rng.h"
#include "common/testing.h"

enum { OPERATIONS = 100000, SEQS = 12, BLOCKS = 48, BLOCK_SIZE = 4, CAPACITY = 16, SHARED = 3 };
#define MAX_TOKENS (CAPACITY * BLOCK_SIZE)

typedef struct {
    BlockPool pool;
    BlockTable tables[SEQS];
    bool active[SEQS];
    int32_t tokens[SEQS][MAX_TOKENS];   /* what each sequence wrote */
    int32_t shadow[BLOCKS][BLOCK_SIZE]; /* what each block holds */
    int32_t prefixes[SHARED][3 * BLOCK_SIZE];
    Rng rng;
    long counts[5];
} World;

static const char *const op_names[5] = {"allocate", "append", "fork", "free", "evict"};

static int random_int(World *w, int n)
{
    return (int)rng_below(&w->rng, (uint64_t)n);
}

/* Tokens from a small alphabet, so that prefixes repeat and hit the cache. */
static int32_t random_token(World *w)
{
    return (int32_t)random_int(w, 3);
}

/* Write tokens[from..to) of sequence s into its blocks (after a copy, if any). */
static void write_tokens(World *w, int s, int from, int to, BlockCopy copy)
{
    if (copy.from != NO_BLOCK)
        memcpy(w->shadow[copy.to], w->shadow[copy.from], sizeof w->shadow[0]);
    const BlockTable *t = &w->tables[s];
    for (int p = from; p < to; p++)
        w->shadow[t->blocks[p / BLOCK_SIZE]][p % BLOCK_SIZE] = w->tokens[s][p];
    block_table_seal(&w->pool, &w->tables[s], w->tokens[s]);
}

static int find_slot(World *w, bool active)
{
    int start = random_int(w, SEQS);
    for (int i = 0; i < SEQS; i++)
        if (w->active[(start + i) % SEQS] == active)
            return (start + i) % SEQS;
    return -1;
}

static void op_allocate(World *w)
{
    int s = find_slot(w, false);
    if (s < 0)
        return;
    int n = 1 + random_int(w, MAX_TOKENS / 2);
    int shared = random_int(w, SHARED + 1); /* SHARED: no shared prefix */
    for (int p = 0; p < n; p++)
        w->tokens[s][p] = shared < SHARED && p < 3 * BLOCK_SIZE ? w->prefixes[shared][p] : random_token(w);
    int matched = block_table_match_prefix(&w->pool, &w->tables[s], w->tokens[s], n);
    BlockCopy copy;
    if (block_table_reserve(&w->pool, &w->tables[s], n, &copy)) {
        write_tokens(w, s, matched, n, copy);
        w->active[s] = true;
    } else {
        block_table_release(&w->pool, &w->tables[s]);
    }
}

static void op_append(World *w)
{
    int s = find_slot(w, true);
    if (s < 0)
        return;
    BlockTable *t = &w->tables[s];
    int from = t->length, to = from + 1 + random_int(w, 6);
    if (to > MAX_TOKENS)
        return;
    BlockTable before = *t;
    int32_t blocks_before[CAPACITY];
    memcpy(blocks_before, t->blocks, sizeof(int32_t) * t->n_blocks);
    BlockCopy copy;
    for (int p = from; p < to; p++)
        w->tokens[s][p] = random_token(w);
    if (block_table_reserve(&w->pool, t, to, &copy)) {
        write_tokens(w, s, from, to, copy);
    } else {
        EXPECT(t->length == before.length && t->n_blocks == before.n_blocks &&
                   memcmp(t->blocks, blocks_before, sizeof(int32_t) * t->n_blocks) == 0,
               "a reservation that fails changes nothing");
    }
}

static void op_fork(World *w)
{
    int parent = find_slot(w, true), child = find_slot(w, false);
    if (parent < 0 || child < 0)
        return;
    block_table_fork(&w->pool, &w->tables[parent], &w->tables[child]);
    memcpy(w->tokens[child], w->tokens[parent], sizeof(int32_t) * w->tables[parent].length);
    w->active[child] = true;
}

static void op_free(World *w)
{
    int s = find_slot(w, true);
    if (s < 0)
        return;
    block_table_release(&w->pool, &w->tables[s]);
    w->active[s] = false;
}

/* Take every block that can be had, evicting cached ones, then give them back. */
static void op_evict(World *w)
{
    BlockTable grab = block_table_create(BLOCKS);
    int blocks = block_pool_available(&w->pool);
    BlockCopy copy;
    if (blocks > 0)
        EXPECT(block_table_reserve(&w->pool, &grab, blocks * BLOCK_SIZE, &copy), "every available block can be taken");
    block_table_release(&w->pool, &grab);
    block_table_free(&grab);
}

/* All the invariants; false at the first broken one, with a line saying which. */
static bool invariants_hold(const World *w, long step)
{
    const BlockPool *p = &w->pool;
    int refs[BLOCKS] = {0}, on_free[BLOCKS] = {0}, on_lru[BLOCKS] = {0}, in_map[BLOCKS] = {0};
    bool ok = true;
    for (int s = 0; s < SEQS; s++) {
        if (!w->active[s])
            continue;
        const BlockTable *t = &w->tables[s];
        for (int i = 0; i < t->n_blocks; i++)
            refs[t->blocks[i]]++;
        for (int q = 0; q < t->length; q++)
            ok = ok && w->shadow[t->blocks[q / BLOCK_SIZE]][q % BLOCK_SIZE] == w->tokens[s][q];
        if (!ok)
            return EXPECT(false, "step %ld: sequence %d reads back what it wrote", step, s);
    }
    for (int i = 0; i < p->free_count; i++)
        on_free[p->free_stack[i]]++;
    int lru_length = 0;
    for (int32_t b = p->lru_head, prev = NO_BLOCK; b != NO_BLOCK; prev = b, b = p->lru_next[b]) {
        if (p->lru_prev[b] != prev || ++lru_length > BLOCKS)
            return EXPECT(false, "step %ld: the LRU list is a well-formed chain", step);
        on_lru[b]++;
    }
    for (int bucket = 0; bucket < p->n_buckets; bucket++)
        for (int32_t b = p->bucket_head[bucket]; b != NO_BLOCK; b = p->bucket_next[b])
            if (++in_map[b] > 1)
                return EXPECT(false, "step %ld: block %d in the map once", step, b);
    ok = lru_length == p->idle_count;
    for (int b = 0; ok && b < BLOCKS; b++) {
        bool unused = refs[b] == 0;
        ok = p->ref_count[b] == refs[b] && on_free[b] + on_lru[b] == (unused ? 1 : 0) && (!on_lru[b] || p->cached[b]) &&
             (!on_free[b] || !p->cached[b]) && in_map[b] == (p->cached[b] ? 1 : 0) &&
             (!p->cached[b] || memcmp(p->tokens + (size_t)b * BLOCK_SIZE, w->shadow[b], sizeof w->shadow[0]) == 0);
        if (!ok)
            return EXPECT(false, "step %ld: block %d: ref %d (tables %d), free %d, lru %d, cached %d, map %d", step, b,
                          p->ref_count[b], refs[b], on_free[b], on_lru[b], p->cached[b], in_map[b]);
    }
    return EXPECT(ok, "step %ld: the LRU list holds idle_count blocks", step);
}

int main(void)
{
    World *w = ALLOC_ARRAY(1, World);
    w->pool = block_pool_create(BLOCKS, BLOCK_SIZE, true);
    rng_seed(&w->rng, 12345);
    for (int s = 0; s < SEQS; s++)
        w->tables[s] = block_table_create(CAPACITY);
    for (int k = 0; k < SHARED; k++)
        for (int i = 0; i < 3 * BLOCK_SIZE; i++)
            w->prefixes[k][i] = random_token(w);
    void (*const ops[5])(World *) = {op_allocate, op_append, op_fork, op_free, op_evict};
    const int weights[5] = {30, 40, 10, 17, 3}; /* per 100 */
    long step = 0;
    for (; step < OPERATIONS; step++) {
        int r = random_int(w, 100), op = 0;
        while (r >= weights[op])
            r -= weights[op++];
        ops[op](w);
        w->counts[op]++;
        if (!invariants_hold(w, step))
            break;
    }
    printf("%ld operations (", step);
    for (int op = 0; op < 5; op++)
        printf("%s%s %ld", op > 0 ? ", " : "", op_names[op], w->counts[op]);
    printf("); %ld copies-on-write, %ld evictions; invariants checked after each\n", w->pool.stats.copies,
           w->pool.stats.evictions);
    EXPECT(step == OPERATIONS, "all %d operations ran with the invariants intact", OPERATIONS);
    EXPECT(w->pool.stats.copies > 0 && w->pool.stats.evictions > 0,
           "the operations exercised copy-on-write and eviction");
    for (int s = 0; s < SEQS; s++) {
        if (w->active[s])
            block_table_release(&w->pool, &w->tables[s]);
        block_table_free(&w->tables[s]);
    }
    EXPECT(block_pool_unused(&w->pool), "after freeing every sequence, no block has a user");
    block_pool_free(&w->pool);
    array_free(w);
    return test_finish();
}
