/* The subcommands of softmax_topk (main.c's table), one function each, and
 * what `run` and `apply` share with their GPU twins in gpu.c. */
#ifndef CHAPTERS_03_SOFTMAX_TOPK_COMMANDS_H
#define CHAPTERS_03_SOFTMAX_TOPK_COMMANDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/cli.h"

CliCommandFunction run_command, apply_command, hard_inputs_command, traffic_command, accuracy_command, bench_command,
    merge_demo_command, admissions_data_command;

/* Where the top K is computed: the CPU versions, or the GPU kernels. */
typedef struct {
    const char *version_help; /* the --version line of --help */
    long default_version, version_count;
    bool takes_threads;
    void (*require)(void); /* NULL, or what must hold before any work (a CUDA device) */
    /* logits [rows, vocab] -> probs, indices [rows, k]; prints one line
     * naming what ran, and returns the relative tolerance its sums need. */
    double (*compute)(long version, long threads, const float *logits, size_t rows, size_t vocab, int k, float *probs,
                      int64_t *indices);
} TopkDevice;

/* `run`: the top K of random logits, a few rows printed, all checked
 * against the double reference; 0 if they match, 1 if not. */
int topk_random_command(int argc, char **argv, const TopkDevice *device);

/* `apply --load FILE -k K --save DIR`: the same for float32 logits
 * [rows, V] from a .npy file, written to DIR/probs.npy (float32) and
 * DIR/indices.npy (int64), both [rows, K]. */
int topk_apply_command(int argc, char **argv, const TopkDevice *device);

#endif
