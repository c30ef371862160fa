/* The table of what each kernel a chapter launches costs an SM: its
 * registers, spills, stack frame and static shared memory, from ptxas's
 * record of the build (common/kernel_resources.h), beside the threads per
 * block and dynamic shared memory its launcher uses and the occupancy those
 * allow on sm_90 (common/occupancy.h). It needs a CUDA build but no GPU.
 *
 * A chapter says which kernels its launchers select, and how, with one
 * function, a KernelLaunchRule: given a kernel of the record, read into a
 * KernelSignature, it adds a row for each way a launcher launches it (a
 * readable label, the threads per block, the dynamic shared memory), or
 * none. A kernel of the record
 * that no rule claims is listed under the table. */
#ifndef COMMON_RESOURCE_TABLE_H
#define COMMON_RESOURCE_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "common/cli.h"
#include "common/hostdevice.h"
#include "common/kernel_resources.h"
#include "common/sass.h"
#include "common/table.h"

COMMON_BEGIN_C

enum { KERNEL_SIGNATURE_MAX_ARGUMENTS = 4, KERNEL_SIGNATURE_MAX_NAME = 64 };

/* A kernel's name as a rule matches it: "void ns::partition_kernel<(KvFormat)6,
 * 256>(ns::KernelParams)" has function "partition_kernel" and arguments
 * {6, 256}. Template arguments are numbers: an integer, an enum value as
 * c++filt writes it ((KvFormat)6), or true (1) and false (0). */
typedef struct {
    char function[KERNEL_SIGNATURE_MAX_NAME]; /* without namespaces and return type */
    int arguments[KERNEL_SIGNATURE_MAX_ARGUMENTS];
    int argument_count;
} KernelSignature;

/* Read a demangled name into *out; false when it does not read as above. */
bool kernel_signature_parse(const char *demangled, KernelSignature *out);

/* True when the signature names `function` with `argument_count` arguments. */
bool kernel_signature_is(const KernelSignature *signature, const char *function, int argument_count);

typedef struct ResourceTableRows ResourceTableRows;

/* A chapter's rule: call resource_table_add once for every launch
 * configuration of `kernel` that a launcher can select, none if no
 * launcher selects it. */
typedef void KernelLaunchRule(const KernelSignature *kernel, ResourceTableRows *rows);

/* One row: `label` names the version and template arguments ("backward 2,
 * float4 x 8"), `threads_per_block` is what the launcher launches it with. */
void resource_table_add(ResourceTableRows *rows, int threads_per_block, const char *label_fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The same, for a launch that also asks for `dynamic_shared_bytes` of
 * shared memory (the third argument between <<< and >>>): ptxas's record
 * knows only the static bytes, and the SM must hold both. */
void resource_table_add_with_shared(ResourceTableRows *rows, int threads_per_block, long dynamic_shared_bytes,
                                    const char *label_fmt, ...) __attribute__((format(printf, 4, 5)));

/* The same, for a launch whose every loaded byte `readers` thread blocks
 * load (each query head of a GQA group reading its kv head's keys): the
 * budget table counts instructions and bytes in flight per byte that
 * memory delivers (instruction_budget_shared_reads). */
void resource_table_add_shared_reads(ResourceTableRows *rows, int threads_per_block, int readers, const char *label_fmt,
                                     ...) __attribute__((format(printf, 4, 5)));
/* Print the table of the kernels of `record`, rows in the natural order of
 * their labels ("head_dim 64" before "head_dim 128"), then one line naming
 * the kernels of the record that `rule` gave no row. */
void resource_table_print(const KernelResourceList *record, KernelLaunchRule *rule, FILE *out, TableFormat format);

/* The same rows, with what their machine code allows
 * (common/instruction_budget.h): the steady state's instructions and bytes,
 * its 128-bit loads, the share of the copy bandwidth that instruction issue
 * and bytes in flight allow on an H100, the prediction and its limiter. */
void resource_table_print_budget(const KernelResourceList *record, const SassRecord *code, KernelLaunchRule *rule,
                                 FILE *out, TableFormat format);

/* The subcommand, `PROG gpu-resources [--record FILE] [--budget [--sass
 * FILE]] [--markdown]`: the table of the record at `default_record` (a path
 * from the chapter's directory, where the build puts a copy) or FILE; with
 * --budget, the budget table, from the machine code beside the record (a
 * build without cuobjdump has none, and the table is skipped with one line
 * saying so) or FILE. An unreadable record is one line and exit 2. */
int resource_table_command(int argc, char **argv, const char *default_record, KernelLaunchRule *rule);

/* The same subcommand in a build without CUDA: there is no record, and it
 * says so in one line, exit 0, so that the book still builds. */
CliCommandFunction resource_table_without_cuda_command;

COMMON_END_C

#endif
