/* Problems the decode kernels cannot take are refused before anything is
 * copied to a GPU, with one line saying why: a head_dim or INT4 group the
 * kernels were not built for, kv heads that do not divide the query heads,
 * lengths outside the block tables, blocks outside the pool, FP8 scales
 * that are not positive and finite, per tensor or per kv head. Runs without
 * a GPU. */
#include <math.h>
#include <string.h>

#include "common/testing.h"
#include "kernels/paged_attention_gpu.h"

static const float queries[8 * 64];
static const uint8_t pool[4 * 4096];
static const int32_t tables[2 * 2] = {0, 1, 2, 3};

static PagedAttentionProblem valid(void)
{
    static const int32_t lengths[2] = {20, 32};
    return (PagedAttentionProblem){
        .batch = 2,
        .n_heads = 4,
        .shape = {16, 2, 64},
        .format = KV_FORMAT_INT4,
        .int4_group = 32,
        .queries = queries,
        .key_pool = pool,
        .value_pool = pool,
        .num_blocks = 4,
        .block_tables = tables,
        .max_blocks = 2,
        .lengths = lengths,
    };
}

static void refused(PagedAttentionProblem problem, const char *expected)
{
    PagedAttentionGpuRun *run = NULL;
    const char *why = paged_attention_gpu_run_new(&run, &problem);
    EXPECT(why != NULL && strstr(why, expected) != NULL && strchr(why, '\n') == NULL && run == NULL,
           "refused in one line, mentioning '%s': %s", expected, why != NULL ? why : "(taken)");
    paged_attention_gpu_run_free(run);
}

int main(void)
{
    PagedAttentionProblem p = valid();
    p.shape.head_dim = 96;
    refused(p, "head_dim 96");
    p = valid();
    p.int4_group = 16;
    refused(p, "INT4 groups of 16");
    p = valid();
    p.n_heads = 3;
    refused(p, "kv heads dividing");
    p = valid();
    const int32_t too_long[2] = {20, 33}, empty[2] = {0, 5};
    p.lengths = too_long;
    refused(p, "length 33 outside 1..32");
    p.lengths = empty;
    refused(p, "length 0");
    p = valid();
    p.num_blocks = 3;
    refused(p, "outside the pool of 3");
    p = valid();
    p.format = KV_FORMAT_COUNT;
    refused(p, "unknown cache format");
    p = valid();
    p.format = KV_FORMAT_FP8_E4M3;
    p.key_scale = 0.0f, p.value_scale = 1.0f;
    refused(p, "FP8 scales 0 and 1");
    static const float head_scales[2] = {1.0f, 0.5f}, bad_head_scales[2] = {1.0f, INFINITY};
    p.key_scale = 1.0f;
    p.key_head_scales = head_scales;
    refused(p, "for keys and values, or for neither");
    p.value_head_scales = bad_head_scales;
    refused(p, "FP8 scales 0.5 and inf of kv head 1");
    return test_finish();
}
