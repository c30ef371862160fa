/* The subcommands of softmax_topk (main.c's table), one function each, and
 * what `run` and `apply` share with their GPU twins in gpu.c. */
#ifndef CHAPTERS_03_SOFTMAX_TOPK_COMMANDS_H
#define CHAPTERS_03_SOFTMAX_TOPK_COMMANDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chapters/03-softmax-topk/sampling.h"
#include "chapters/03-softmax-topk/softmax_topk.h"
#include "common/cli.h"
#include "common/npy.h"

CliCommandFunction run_command, apply_command, sample_command, hard_inputs_command, traffic_command, accuracy_command,
    bench_command, merge_demo_command, admissions_data_command, ties_command, merge_tree_diagram_command,
    radix_data_command, lanes_diagram_command, rejection_command;

/* Rows of logits, loaded from a .npy file or made at random: as stored,
 * which the fused version reads, and as float32, which everything else
 * reads (the same numbers: widening is exact). */
typedef struct {
    StoredLogits stored;
    float *logits; /* NULL until widen_logits_file, for a file of 16-bit logits */
    size_t rows, vocab;
    NpyArray file; /* when loaded */
} Logits;

/* Logits [rows, V] from a .npy file of float32, fp16 or, with dtype "bf16",
 * bfloat16 bits, kept as they are stored; a float32 file is also x.logits.
 * At least one row and 1 <= V <= SOFTMAX_TOPK_MAX_VOCAB, or one line and
 * exit 2 (as are the dtypes npy_load_as_float32 refuses). dtype is the text
 * of the --dtype option: "auto" or "bf16". */
Logits load_logits(const char *path, const char *dtype);

/* Set x->logits, widening 16-bit logits into a float32 copy. */
void widen_logits_file(Logits *x);

/* The --help lines of --load and --dtype, the same in apply and sample. */
#define LOGITS_FILE_HELP "the logits: a .npy file [rows, V] of float32 or float16, or of bfloat16 bits (--dtype bf16)"
#define LOGITS_DTYPE_HELP                                                              \
    "auto: the file's float32 or float16; bf16: bfloat16 bits in int16 or uint16, as " \
    "t.view(torch.int16).numpy() saves them"

void free_logits(Logits *x);

/* Refuse K > V: one line and exit 2. */
void require_k_at_most_vocab(long k, const Logits *x);

/* The non-finite policy's note (README, "Non-finite values") for rows whose
 * logits or whose k probabilities hold an inf or a NaN. */
void note_nonfinite_logits(const Logits *x, int k, const float *probs);

/* Where the top K is computed: the CPU versions, or the GPU kernels. */
typedef struct {
    const char *version_help; /* the --version line of --help */
    long default_version, version_count;
    long default_sample_version; /* a GPU's sample: the version that draws in its top-K kernel */
    bool takes_threads;
    void (*require)(void); /* NULL, or what must hold before any work (a CUDA device) */
    /* logits [rows, vocab] -> probs, indices [rows, k]; prints one line
     * naming what ran, and returns the relative tolerance its sums need.
     * x->logits is set; x->stored may be 16-bit. */
    double (*compute)(long version, long threads, const Logits *x, int k, float *probs, int64_t *indices);
    /* sample_rows' contract (sampling.h) after version's top K; may widen
     * x's logits. The CPU's (takes_threads) always reads the fused pass and
     * takes --method and --threads; a GPU's takes --version and draws by
     * the inverse CDF. */
    void (*draw)(long version, long threads, Logits *x, SamplingParams params, DrawMethod method, uint64_t seed,
                 int samples, int64_t *tokens, float *probs, int64_t *indices);
} TopkDevice;

/* `run`: the top K of random logits, a few rows printed, all checked
 * against the double reference; 0 if they match, 1 if not. */
int topk_random_command(int argc, char **argv, const TopkDevice *device);

/* `apply --load FILE [--dtype bf16] -k K [--temperature T] --save DIR`:
 * the same for logits [rows, V] from a .npy file (load_logits), divided by T (default 1:
 * unchanged), written to DIR/probs.npy (float32) and DIR/indices.npy
 * (int64), both [rows, K]. */
int topk_apply_command(int argc, char **argv, const TopkDevice *device);

/* `sample --load FILE [--dtype bf16] [-k K] [--top-p P] [--min-p M]
 * [--temperature T] --seed S --samples N --save DIR`: tokens.npy,
 * probs.npy and indices.npy, the same files for the same seed on every
 * device. */
int topk_sample_command(int argc, char **argv, const TopkDevice *device);

#endif
