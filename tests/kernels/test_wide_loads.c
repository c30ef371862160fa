/* The chapters' claims about how their kernels read memory, checked against
 * the machine code: a kernel said to read float4 must load with 128-bit
 * instructions (LDG.E.128) in its steady state, and one said to read single
 * floats must not. A float4 in the source is only a request: the compiler
 * emits a 128-bit load only when it can prove the address 16-byte aligned,
 * and falls back to four 32-bit loads otherwise, with no warning.
 *     test_wide_loads DIR   (the directory of kernels/OP.sass, from a CUDA
 *                            build configured with --sass-tools) */
#include <stdio.h>
#include <string.h>

#include "common/resource_table.h"
#include "common/sass.h"
#include "common/testing.h"

typedef enum {
    EVERY_LOAD_WIDE, /* the kernel reads nothing but float4 */
    SOME_LOADS_WIDE, /* float4 data, and a few scalars (a row's statistics) */
    NO_LOAD_WIDE,    /* single floats */
} WideLoads;

typedef struct {
    const char *record;   /* kernels/OP.sass */
    const char *function; /* every instance of it ... */
    int first_argument;   /* ... whose first template argument is this, or -1 for all */
    WideLoads claim;
    const char *source; /* where the claim is made */
} Claim;

static const Claim CLAIMS[] = {
    {"layernorm.sass",    "layernorm_forward_v3",  4,  EVERY_LOAD_WIDE,
     "chapter 2, forward 3, both norms: float4 per thread"                                                                    },
    {"layernorm.sass",    "layernorm_forward_v3",  1,  NO_LOAD_WIDE,    "chapter 2, forward 3, both norms: 1 float per thread"},
    {"layernorm.sass",    "layernorm_backward_v2", 4,  SOME_LOADS_WIDE,
     "chapter 2, backward 2, both norms: float4 per thread"                                                                   },
    {"layernorm.sass",    "layernorm_forward_v3",  8,  EVERY_LOAD_WIDE,
     "chapter 2, forward 3, both norms: 8 fp16 or bf16 (16 bytes) per vector"                                                 },
    {"layernorm.sass",    "layernorm_backward_v2", 8,  SOME_LOADS_WIDE,
     "chapter 2, backward 2, both norms: 8 fp16 or bf16 (16 bytes) per vector"                                                },
    {"layernorm.sass",    "layernorm_backward_v2", 1,  NO_LOAD_WIDE,
     "chapter 2, backward 2, both norms: 1 float per thread"                                                                  },
    {"softmax_topk.sass", "block_rows_kernel",     1,  EVERY_LOAD_WIDE, "chapter 3, version 3: logits as float4"              },
    {"softmax_topk.sass", "slice_partials_kernel", -1, EVERY_LOAD_WIDE, "chapter 3, version 4: logits as float4"              },
    {"softmax_topk.sass", "warp_per_row_kernel",   -1, NO_LOAD_WIDE,    "chapter 3, version 2: single floats"                 },
};

static bool claim_holds(WideLoads claim, const SassSteadyState *s)
{
    switch (claim) {
    case EVERY_LOAD_WIDE:
        return s->global_loads > 0 && s->wide_global_loads == s->global_loads;
    case SOME_LOADS_WIDE:
        return s->wide_global_loads > 0;
    case NO_LOAD_WIDE:
        return s->wide_global_loads == 0;
    }
    return false;
}

static bool claim_covers(const Claim *claim, const char *demangled)
{
    KernelSignature signature;
    if (!kernel_signature_parse(demangled, &signature) || strcmp(signature.function, claim->function) != 0)
        return false;
    return claim->first_argument < 0 ||
           (signature.argument_count > 0 && signature.arguments[0] == claim->first_argument);
}

/* Check one claim against every kernel of its record it covers; a claim
 * that covers no kernel is a failure too (a renamed kernel would otherwise
 * pass it). */
static void check_claim(const char *dir, const Claim *claim)
{
    char path[4096], err[512];
    snprintf(path, sizeof path, "%s/%s", dir, claim->record);
    SassRecord record;
    if (!EXPECT(sass_record_read(path, &record, err, sizeof err) == 0, "%s", err))
        return;
    int covered = 0;
    for (int i = 0; i < record.count; i++) {
        const SassKernel *k = &record.kernels[i];
        if (!claim_covers(claim, k->name))
            continue;
        covered++;
        EXPECT(claim_holds(claim->claim, &k->steady), "%s: %s has %d 128-bit loads of %d in its steady state",
               claim->source, k->name, k->steady.wide_global_loads, k->steady.global_loads);
    }
    EXPECT(covered > 0, "%s: no kernel %s in %s", claim->source, claim->function, path);
    printf("%s: %d kernels\n", claim->source, covered);
    sass_record_free(&record);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_wide_loads DIR\n");
        return 2;
    }
    for (size_t i = 0; i < sizeof CLAIMS / sizeof CLAIMS[0]; i++)
        check_claim(argv[1], &CLAIMS[i]);
    return test_finish();
}
