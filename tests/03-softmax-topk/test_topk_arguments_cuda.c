/* The GPU launchers refuse bad arguments with one line, before touching the
 * device: this runs in every CUDA build, with or without a GPU. */
#include <stdio.h>
#include <string.h>

#include "common/testing.h"
#include "kernels/softmax_topk_gpu.h"

/* Refused with one line that contains `words`, by the all-in-one call and
 * by the constructor alike, which makes no run. */
static bool refused(int version, size_t rows, size_t vocab, int k, SoftmaxTopkGpuConfig config, const char *words)
{
    float logits[1] = {0}, probs[1];
    int64_t indices[1];
    const char *why = softmax_topk_gpu(version, logits, rows, vocab, k, &config, probs, indices);
    SoftmaxTopkGpuRun *run = NULL;
    const char *constructor = softmax_topk_gpu_run_new(&run, version, logits, rows, vocab, k, &config);
    if (why == NULL || strstr(why, words) == NULL || strchr(why, '\n') != NULL) {
        printf("refused with \"%s\", expected \"%s\"\n", why != NULL ? why : "(nothing)", words);
        return false;
    }
    return constructor != NULL && strcmp(constructor, why) == 0 && run == NULL;
}

int main(void)
{
    SoftmaxTopkGpuConfig automatic = {0, 0};
    EXPECT(refused(0, 1, 10, 1, automatic, "version 0 does not exist"), "version 0");
    EXPECT(refused(SOFTMAX_TOPK_GPU_VERSIONS + 1, 1, 10, 1, automatic, "does not exist"), "version after the last");
    EXPECT(refused(3, 1, 10, 11, automatic, "K = 11 must be in [1, V = 10]"), "K > V");
    EXPECT(refused(3, 1, 10, 0, automatic, "K = 0"), "K = 0");
    EXPECT(refused(2, 1, 1000, 33, automatic, "version 2 supports K <= 32"), "K above version 2's limit");
    EXPECT(refused(3, 1, 1000, 257, automatic, "version 3 supports K <= 256"), "K above version 3's limit");
    EXPECT(refused(5, 1, 2000, 1025, automatic, "version 5 supports K <= 1024"), "K above version 5's limit");
    EXPECT(refused(5, 1, 1000, 1001, automatic, "K = 1001 must be in [1, V = 1000]"), "K > V for version 5");
    EXPECT(refused(3, 0, 10, 1, automatic, "rows 0"), "no rows");
    EXPECT(refused(4, 1, 10, 1, (SoftmaxTopkGpuConfig){0, 11}, "at most 10 splits"), "more splits than logits");
    EXPECT(refused(4, 1, 100000, 256, (SoftmaxTopkGpuConfig){0, 200}, "at most 112 splits"),
           "splits over shared memory");
    EXPECT(refused(3, 1, 10, 1, (SoftmaxTopkGpuConfig){-1, 0}, ">= 0"), "negative max_blocks");
    EXPECT(refused(9, 1, 1u << 23, 2, automatic, "version 9 keeps a key per 128 logits"),
           "version 9's step keys over shared memory");
    EXPECT(softmax_topk_gpu_step_floor_bytes(128256, 256) <= softmax_topk_gpu_shared_limit() &&
               softmax_topk_gpu_step_floor_bytes(1 << 23, 2) > softmax_topk_gpu_shared_limit() &&
               softmax_topk_gpu_step_floor_bytes(1 << 23, 1) == 0,
           "version 9's shared memory: V = 128256 fits at K = 256, 2^23 does not, the argmax needs none");
    EXPECT(softmax_topk_gpu_max_k(2) == 32 && softmax_topk_gpu_max_k(3) == 256 && softmax_topk_gpu_max_k(5) == 1024 &&
               softmax_topk_gpu_max_k(9) == 256,
           "limits");
    return test_finish();
}
