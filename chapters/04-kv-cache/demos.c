#include "chapters/04-kv-cache/demos.h"

#include <string.h>

#include "chapters/04-kv-cache/contiguous_cache.h"
#include "chapters/04-kv-cache/fork_decode.h"
#include "chapters/04-kv-cache/paged_cache.h"
#include "chapters/04-kv-cache/trace.h"
#include "chapters/04-kv-cache/verify.h"
#include "common/alloc.h"

#define DEMO_SEED 42
/* The prefix-caching demonstration: system prompts of ten blocks and a bit,
 * questions of about QUESTION_MEDIAN tokens, answers of up to MAX_ANSWER. */
#define SYSTEM_BLOCKS 10
#define QUESTION_MEDIAN 24
#define MAX_ANSWER 24

int demo_positions_needed(int block_size)
{
    /* Every other workload is shorter: at most 6 blocks, or 108 positions. */
    return SYSTEM_BLOCKS * block_size + 5 + QUESTION_MAX_FACTOR * QUESTION_MEDIAN + MAX_ANSWER;
}

static void print_tokens(FILE *out, const Request *r)
{
    for (int i = 0; i < r->n_generated; i++)
        fprintf(out, "%s%d", i > 0 ? " " : "", r->tokens[r->prompt_len + i]);
}

bool demo_generate(const Model *model, int prompt_len, int n_new, int block_size, const Sampler *sampler, FILE *out)
{
    const ModelConfig *c = &model->config;
    fprintf(out,
            "model: vocabulary %d, width %d, %d layers, %d query heads, %d kv heads of %d, "
            "MLP %d, up to %d positions\n",
            c->vocab_size, c->dim, c->n_layers, c->n_heads, c->n_kv_heads, c->head_dim, c->hidden_dim, c->max_seq_len);
    fprintf(out, "cache: %.0f bytes per position (2 x %d layers x %d kv heads x %d x 4 bytes)\n",
            model_kv_bytes_per_token(c), c->n_layers, c->n_kv_heads, c->head_dim);
    Rng rng;
    rng_seed(&rng, DEMO_SEED);
    Request *contiguous_run = requests_random(c, &rng, 1, prompt_len, prompt_len, n_new, n_new);
    Request *paged_run = requests_copy(c, contiguous_run, 1);

    /* No times: one run of a few milliseconds on a shared machine can take
     * a thousand times longer than the next; `bench` compares the layouts. */
    serve_each_alone(model, contiguous_run, 1, sampler);
    PagedCache paged = paged_cache_create(c, 1, paged_kv_blocks_for(prompt_len + n_new, block_size), block_size, false);
    serve(model, &paged.base, 1, paged_run, 1, sampler, &(ServeOptions){0});

    fprintf(out, "prompt: %d tokens; generated %d\n", prompt_len, n_new);
    fprintf(out, "contiguous cache: ");
    print_tokens(out, contiguous_run);
    fprintf(out, "\npaged cache, block %d: ", block_size);
    print_tokens(out, paged_run);
    Comparison same = comparison_new();
    compare_requests(&same, paged_run, contiguous_run, c->vocab_size);
    fprintf(out, "\nsame tokens: %s; logits bit-identical: %s\n", same.tokens_equal ? "yes" : "NO",
            same.bitwise ? "yes" : "NO");
    paged_cache_free(&paged);
    requests_free(contiguous_run, 1);
    requests_free(paged_run, 1);
    return same.tokens_equal && same.bitwise;
}

/* Add one claim's row; true when it holds. Bit-identical logits are shown,
 * not required (a reference that summed in another order would differ by
 * rounding): the verdicts are the same tokens and every block back. */
static bool add_verify_row(Table *t, const char *claim, Comparison c, const char *events_fmt)
{
    table_cell(t, "%s", claim);
    table_cell(t, "%d", c.sequences);
    table_cell(t, "%d", c.logit_vectors);
    table_cell(t, "%.1e", c.max_rel_error);
    table_cell(t, "%s", c.bitwise ? "yes" : "no");
    table_cell(t, "%s", c.tokens_equal ? "yes" : "NO");
    table_cell(t, "%s", c.blocks_returned ? "yes" : "NO");
    table_cell(t, events_fmt, c.events);
    return c.tokens_equal && c.blocks_returned;
}

bool demo_verify(const Model *model, int block_size, FILE *out, TableFormat format)
{
    const Sampler greedy = {0}, sampled = {.temperature = 0.8, .top_k = 40};
    const char *headers[] = {"claim",         "sequences",   "vectors compared", "max relative error",
                             "bit-identical", "same tokens", "blocks returned",  "what happened"};
    Table *t = TABLE_NEW(headers, "lrrrllll");
    bool all_hold = true;
    all_hold &=
        add_verify_row(t, "cached = uncached, 64 steps", verify_cached_vs_uncached(model, 20, 64, &greedy), "-");
    const int chunks[] = {1, 7, 13, 48};
    for (size_t i = 0; i < sizeof chunks / sizeof chunks[0]; i++) {
        char claim[64];
        snprintf(claim, sizeof claim, "prefill in chunks of %d = at once", chunks[i]);
        all_hold &= add_verify_row(t, claim, verify_chunked_prefill(model, 100, chunks[i]), "%d chunks");
    }
    all_hold &= add_verify_row(t, "batch = each alone", verify_batch_vs_alone(model, 6, &sampled), "%d in one batch");
    char claim[64];
    snprintf(claim, sizeof claim, "paged (block %d) = contiguous", block_size);
    all_hold &=
        add_verify_row(t, claim, verify_paged_vs_contiguous(model, 6, block_size, &sampled), "%d blocks, shuffled");
    all_hold &= add_verify_row(t, "4 forked samples = each alone",
                               verify_parallel_sampling(model, 37, 4, 20, block_size, &sampled), "%d block copies");
    all_hold &= add_verify_row(t, "beam search, width 4 = each beam alone",
                               verify_beam_search(model, 37, 4, 12, block_size), "%d block copies");
    all_hold &=
        add_verify_row(t, "preempted = alone", verify_preemption(model, 6, block_size, &sampled), "%d preemptions");
    all_hold &= add_verify_row(t, "prefix-cached = alone", verify_prefix_caching(model, 12, 40, block_size, &sampled),
                               "%d tokens reused");
    table_print(t, out, format);
    table_free(t);
    return all_hold;
}

/* The first generated token of r that differs from ref's, counted from 0;
 * -1 if none does. */
static int first_difference(const Request *r, const Request *ref)
{
    for (int i = 0; i < r->n_generated; i++)
        if (r->tokens[r->prompt_len + i] != ref->tokens[ref->prompt_len + i])
            return i;
    return -1;
}

/* Print one continuation's tokens, marking the first that differs from `ref`. */
static void tokens_cell(Table *t, const Request *r, const Request *ref)
{
    char text[1024] = "";
    size_t used = 0;
    int marked = first_difference(r, ref);
    for (int i = 0; i < r->n_generated && used < sizeof text - 16; i++)
        used += (size_t)snprintf(text + used, sizeof text - used, i == marked ? "%s**%d**" : "%s%d", i > 0 ? " " : "",
                                 r->tokens[r->prompt_len + i]);
    table_cell(t, "%s", text);
}

/* What the runs written in place show, in a sentence: which continuations
 * part from their runs alone, and where. */
static void print_written_in_place(FILE *out, const Request *in_place, const Request *alone, int n)
{
    fprintf(out, "written in place:");
    for (int i = 0; i < n; i++) {
        int at = first_difference(&in_place[i], &alone[i]);
        if (at < 0)
            fprintf(out, "%s continuation %d matches its run alone", i > 0 ? ";" : "", i);
        else
            fprintf(out, "%s continuation %d differs from its run alone from token %d on", i > 0 ? ";" : "", i, at + 1);
    }
    fprintf(out, "\n");
}

bool demo_copy_on_write(const Model *model, int block_size, const Sampler *sampler, FILE *out, TableFormat format)
{
    const ModelConfig *c = &model->config;
    const int n = 2, n_new = 12;
    int prompt_len = 2 * block_size + block_size / 2; /* the last block is half full */
    Rng rng;
    rng_seed(&rng, DEMO_SEED);
    Request *first = requests_random(c, &rng, 1, prompt_len, prompt_len, n_new, n_new);
    Request *runs[3];
    for (int k = 0; k < 3; k++) {
        runs[k] = ALLOC_ARRAY(n, Request);
        for (int i = 0; i < n; i++)
            runs[k][i] = request_create(c, first->tokens, prompt_len, n_new, DEMO_SEED + i);
    }
    serve_each_alone(model, runs[0], n, sampler);
    for (int k = 1; k < 3; k++) {
        int blocks = n * paged_kv_blocks_for(prompt_len + n_new, block_size);
        PagedCache cache = paged_cache_create(c, n, blocks, block_size, false);
        cache.pool.copy_on_write = k == 1;
        sample_parallel(model, &cache, runs[k], n, sampler);
        paged_cache_free(&cache);
    }
    const char *headers[] = {"continuation", "how", "tokens (first difference in bold)", "max relative error"};
    Table *t = TABLE_NEW(headers, "llll");
    const char *how[] = {"alone", "forked, copy-on-write", "forked, written in place"};
    Comparison copied = comparison_new();
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 3; k++) {
            table_cell(t, "%d", i);
            table_cell(t, "%s", how[k]);
            tokens_cell(t, &runs[k][i], &runs[0][i]);
            Comparison cmp = comparison_new();
            compare_requests(&cmp, &runs[k][i], &runs[0][i], c->vocab_size);
            table_cell(t, "%.1e", cmp.max_rel_error);
            if (k == 1)
                compare_requests(&copied, &runs[k][i], &runs[0][i], c->vocab_size);
        }
    fprintf(out,
            "prompt %d tokens, block size %d: its last block holds %d positions, shared by "
            "both continuations\n\n",
            prompt_len, block_size, prompt_len % block_size);
    table_print(t, out, format);
    table_free(t);
    bool copy_holds = copied.bitwise && copied.tokens_equal;
    fprintf(out, "\ncopy-on-write: every continuation's tokens and logits bit-identical to its run alone: %s\n",
            copy_holds ? "yes" : "NO");
    fprintf(out, "\n");
    print_written_in_place(out, runs[2], runs[0], n);
    for (int k = 0; k < 3; k++)
        requests_free(runs[k], n);
    requests_free(first, 1);
    return copy_holds;
}

bool demo_prefix_caching(const Model *model, int block_size, const Sampler *sampler, FILE *out, TableFormat format)
{
    const ModelConfig *c = &model->config;
    const int n_requests = 32, n_system = 3, system_len = SYSTEM_BLOCKS * block_size + 5, slots = 4;
    int num_blocks = 4 * slots * paged_kv_blocks_for(system_len + 60, block_size) / 3;
    fprintf(out,
            "%d requests, each one of %d system prompts of %d tokens and its own question; "
            "%d at a time; a pool of %d blocks of %d\n\n",
            n_requests, n_system, system_len, slots, num_blocks, block_size);
    const char *headers[] = {"prefix caching", "prompt tokens", "computed in prefill", "taken from the cache",
                             "hit rate",       "evictions",     "same tokens"};
    /* The work saved is the column "computed in prefill", not seconds: one
     * run of each on a shared machine has shown either one far ahead. */
    Table *t = TABLE_NEW(headers, "lrrrrrl");
    Request *reference = NULL;
    bool same_as_reference = true;
    for (int with = 0; with < 2; with++) {
        Rng rng;
        rng_seed(&rng, DEMO_SEED);
        Request *requests =
            requests_shared_prefixes(c, &rng, n_requests, n_system, system_len, QUESTION_MEDIAN, 8, MAX_ANSWER);
        PagedCache cache = paged_cache_create(c, slots, num_blocks, block_size, with);
        ServeStats s = serve(model, &cache.base, slots, requests, n_requests, sampler,
                             &(ServeOptions){.prefix_cache = with ? &cache : NULL});
        Comparison same = comparison_new();
        if (reference) {
            for (int i = 0; i < n_requests; i++)
                compare_requests(&same, &requests[i], &reference[i], c->vocab_size);
            same_as_reference = same.tokens_equal && same.bitwise;
        }
        table_cell(t, "%s", with ? "on" : "off");
        table_cell(t, "%ld", s.prompt_tokens);
        table_cell(t, "%ld", s.prefill_tokens);
        table_cell(t, "%ld", s.reused_tokens);
        table_cell(t, "%.1f%%", 100.0 * s.reused_tokens / (s.reused_tokens + s.prefill_tokens));
        table_cell(t, "%ld", cache.pool.stats.evictions);
        table_cell(t, "%s", !reference ? "(reference)" : same_as_reference ? "yes" : "NO");
        paged_cache_free(&cache);
        if (reference)
            requests_free(requests, n_requests);
        else
            reference = requests;
    }
    table_print(t, out, format);
    table_free(t);
    requests_free(reference, n_requests);
    return same_as_reference;
}

/* The preemption demonstration: prompts of PREEMPT_PROMPT_MIN tokens to
 * PREEMPT_BLOCKS blocks, answers of 8 tokens to as many blocks. */
#define PREEMPT_PROMPT_MIN 10
#define PREEMPT_BLOCKS 3

int demo_preemption_least_block_size(void)
{
    return (PREEMPT_PROMPT_MIN + PREEMPT_BLOCKS - 1) / PREEMPT_BLOCKS;
}

bool demo_preemption(const Model *model, int block_size, const Sampler *sampler, FILE *out, TableFormat format)
{
    const ModelConfig *c = &model->config;
    const int n_requests = 8, num_blocks = 10;
    Rng rng;
    rng_seed(&rng, DEMO_SEED);
    Request *requests = requests_random(c, &rng, n_requests, PREEMPT_PROMPT_MIN, PREEMPT_BLOCKS * block_size, 8,
                                        PREEMPT_BLOCKS * block_size);
    /* One more that can never fit: longer than the whole pool. */
    request_free(&requests[n_requests - 1]);
    int32_t *long_prompt = ALLOC_ARRAY(num_blocks * block_size, int32_t);
    requests[n_requests - 1] = request_create(c, long_prompt, num_blocks * block_size, 4, 1);
    Request *alone = requests_copy(c, requests, n_requests);

    PagedCache cache = paged_cache_create(c, n_requests, num_blocks, block_size, false);
    ServeStats s = serve(model, &cache.base, n_requests, requests, n_requests, sampler, &(ServeOptions){0});
    serve_each_alone(model, alone, n_requests - 1, sampler);

    fprintf(out, "a pool of %d blocks of %d positions; %d requests arrive at once\n\n", num_blocks, block_size,
            n_requests);
    const char *headers[] = {"request", "prompt", "new tokens", "preempted", "outcome"};
    Table *t = TABLE_NEW(headers, "rrrrl");
    bool all_same_as_alone = true;
    for (int i = 0; i < n_requests; i++) {
        const Request *r = &requests[i];
        table_cell(t, "%d", i);
        table_cell(t, "%d", r->prompt_len);
        table_cell(t, "%d", r->max_new);
        table_cell(t, "%d", r->preemptions);
        if (r->state == REQUEST_REFUSED) {
            table_cell(t, "refused: %s", r->refusal);
        } else {
            Comparison same = comparison_new();
            compare_requests(&same, r, &alone[i], c->vocab_size);
            bool same_as_alone = same.tokens_equal && same.bitwise;
            all_same_as_alone &= same_as_alone;
            table_cell(t, "finished; same as alone: %s", same_as_alone ? "yes" : "NO");
        }
    }
    table_print(t, out, format);
    table_free(t);
    fprintf(out,
            "\n%d forward passes, at most %d requests in one; %d preemptions, %d refused; "
            "%d of %d blocks free at the end\n",
            s.steps, s.max_running, s.preemptions, s.refused, block_pool_available(&cache.pool), num_blocks);
    paged_cache_free(&cache);
    array_free(long_prompt);
    requests_free(requests, n_requests);
    requests_free(alone, n_requests);
    return all_same_as_alone;
}
