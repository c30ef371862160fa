/* The CUDA decode kernels against the double-precision reference: every
 * cache format, every version, versions 2 to 4 with default and with small
 * partitions, head_dim 64, 128 and 256, GQA groups of 1, 4, 6 and 8, batches of
 * 1 to 8 sequences whose lengths are not multiples of the block size
 * (kv_cache gpu-check prints the same cases); the same output twice, bit for bit;
 * and the partition and version arguments. Needs a GPU; skipped without. */
#include <stdio.h>
#include <string.h>

#include "chapters/04-kv-cache/decode_batch.h"
#include "chapters/04-kv-cache/gpu.h"
#include "common/alloc.h"
#include "common/cli.h"
#include "common/cuda_util.h"
#include "common/testing.h"
#include "kernels/paged_attention_gpu.h"

static void runs_and_arguments(void)
{
    const int32_t lengths[2] = {700, 33};
    const DecodeBatchShape shape = {2, 8, 2, 128, 16, KV_FORMAT_INT8, 32, 5, false};
    DecodeBatch b = decode_batch_create(&shape, lengths);
    PagedAttentionProblem problem = {
        .batch = b.batch,
        .n_heads = b.n_heads,
        .shape = b.shape,
        .format = b.format,
        .int4_group = 32,
        .queries = b.queries,
        .key_pool = b.key_pool,
        .value_pool = b.value_pool,
        .num_blocks = b.num_blocks,
        .block_tables = b.block_tables,
        .max_blocks = b.max_blocks,
        .lengths = b.lengths,
    };
    PagedAttentionGpuRun *run;
    const char *why = paged_attention_gpu_run_new(&run, &problem);
    EXPECT(why == NULL, "a valid problem is taken: %s", why);
    if (why != NULL)
        return;
    int used = 0;
    why = paged_attention_gpu_partition(run, 0, &used);
    EXPECT(why == NULL && used == 512, "the default partition: 512 positions");
    why = paged_attention_gpu_partition(run, 40, &used);
    EXPECT(why != NULL && strstr(why, "multiple of the block size 16") != NULL,
           "a partition that is not a multiple of the block size is refused: %s", why);
    size_t floats = (size_t)b.batch * b.n_heads * 128;
    float *first = ALLOC_ARRAY(floats, float), *second = ALLOC_ARRAY(floats, float);
    why = paged_attention_gpu_run_once(run, PAGED_ATTENTION_GPU_VERSIONS + 1, 0, first);
    EXPECT(why != NULL && strstr(why, "no version") != NULL, "there is no version %d: %s",
           PAGED_ATTENTION_GPU_VERSIONS + 1, why);
    why = paged_attention_gpu_run_launch(run, 2, 40);
    EXPECT(why != NULL && strstr(why, "40 positions") != NULL, "a launch with a bad partition is refused: %s", why);
    for (int version = 1; version <= PAGED_ATTENTION_GPU_VERSIONS; version++) {
        EXPECT(paged_attention_gpu_run_once(run, version, 48, first) == NULL, "version %d runs", version);
        EXPECT(paged_attention_gpu_run_launch(run, version, 48) == NULL, "version %d launches", version);
        paged_attention_gpu_run_once(run, version, 48, second);
        EXPECT(memcmp(first, second, sizeof(float) * floats) == 0,
               "version %d: the same output twice, bit for bit (no atomics, fixed merge order)", version);
    }
    array_free(first);
    array_free(second);
    paged_attention_gpu_run_free(run);
    decode_batch_free(&b);
}

int main(int argc, char **argv)
{
    long widest_heads = GPU_CHECK_WIDEST_HEADS;
    const CliOption options[] = {
        {"--widest-heads", CLI_INT, &widest_heads, 4, GPU_CHECK_WIDEST_HEADS,
         "query heads of the widest case, a multiple of 4 (fewer on the CUDA emulator)"},
    };
    cli_parse(argc, argv, options, CLI_COUNT(options), "paged decode attention on the GPU against the CPU");
    if (widest_heads % 4 != 0)
        cli_fail("--widest-heads must be a multiple of 4, got %ld", widest_heads);
    if (!cuda_device_available())
        test_skip("no CUDA device");
    EXPECT(gpu_check(stdout, (int)widest_heads) == 0, "every case matches the double reference");
    runs_and_arguments();
    return test_finish();
}
