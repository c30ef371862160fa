/* The .npy interface of `layernorm apply`: inputs written as NumPy writes
 * them load bit for bit and compute the same bits, and the results
 * directory holds exactly the result arrays of the norm (six for layer
 * norm; y, rstd, dx, dgamma for RMSNorm), in the shapes a reader's
 * np.load expects. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "chapters/02-layernorm/commands.h"
#include "chapters/02-layernorm/problem.h"
#include "common/npy.h"
#include "common/testing.h"
#include "tests/scratch_directory.h"

static bool same_bits(const float *a, const float *b, size_t n)
{
    return memcmp(a, b, n * sizeof *a) == 0;
}

static void join(char *path, size_t size, const char *dir, const char *name)
{
    if (snprintf(path, size, "%s/%s", dir, name) >= (int)size) {
        fprintf(stderr, "path too long: %s/%s\n", dir, name);
        exit(1);
    }
}

static void save_input(const char *dir, const char *name, int ndim, const size_t *shape, const float *values)
{
    char path[512];
    join(path, sizeof path, dir, name);
    npy_save_or_exit(path, NPY_FLOAT32, ndim, shape, values);
}

/* The files in dir, "." and ".." left out. */
static int count_files(const char *dir)
{
    DIR *listing = opendir(dir);
    if (listing == NULL)
        return -1;
    int count = 0;
    const struct dirent *entry;
    while ((entry = readdir(listing)) != NULL)
        count += strcmp(entry->d_name, ".") != 0 && strcmp(entry->d_name, "..") != 0;
    closedir(listing);
    return count;
}

/* Write p's inputs to dir as NumPy would (no beta for RMSNorm, which has none). */
static void save_inputs(const char *dir, const LnProblem *p)
{
    const size_t matrix[2] = {p->n, p->d}, columns[1] = {p->d};
    save_input(dir, "x.npy", 2, matrix, p->x);
    save_input(dir, "gamma.npy", 1, columns, p->gamma);
    if (p->norm == NORM_LAYER)
        save_input(dir, "beta.npy", 1, columns, p->beta);
    save_input(dir, "dy.npy", 2, matrix, p->dy);
}

/* Each output file of `norm`: float32, the documented shape, the saved values;
 * and no other file. */
static void expect_outputs(const char *results, const LnProblem *saved)
{
    const struct {
        const char *name;
        int ndim;
        size_t rows;
        const float *values;
        bool layer_norm_only;
    } outputs[] = {
        {"y.npy",      2, saved->n, saved->y,      false},
        {"mean.npy",   1, saved->n, saved->mean,   true },
        {"rstd.npy",   1, saved->n, saved->rstd,   false},
        {"dx.npy",     2, saved->n, saved->dx,     false},
        {"dgamma.npy", 1, saved->d, saved->dgamma, false},
        {"dbeta.npy",  1, saved->d, saved->dbeta,  true }
    };
    const char *norm = norm_kind_name(saved->norm);
    int expected = 0;
    for (size_t i = 0; i < sizeof outputs / sizeof outputs[0]; i++) {
        if (outputs[i].layer_norm_only && saved->norm == NORM_RMS)
            continue;
        expected++;
        char path[512], err[256];
        join(path, sizeof path, results, outputs[i].name);
        NpyArray array;
        bool read = npy_load(path, &array, err, sizeof err) == 0;
        EXPECT(read, "%s norm, %s: %s", norm, outputs[i].name, read ? "read" : err);
        if (!read)
            continue;
        bool shape_ok = array.dtype == NPY_FLOAT32 && array.ndim == outputs[i].ndim &&
                        array.shape[0] == outputs[i].rows && (array.ndim == 1 || array.shape[1] == saved->d);
        EXPECT(shape_ok, "%s norm: %s is float32 with the documented shape", norm, outputs[i].name);
        EXPECT(shape_ok && same_bits(array.data, outputs[i].values, npy_element_count(&array)),
               "%s norm: %s holds the results", norm, outputs[i].name);
        npy_free(&array);
    }
    int files = count_files(results);
    EXPECT(files == expected, "%s norm: the results directory holds %d files, expected %d", norm, files, expected);
}

static void test_roundtrip(NormKind norm, const char *dir)
{
    char results[512];
    join(results, sizeof results, dir, norm_kind_name(norm));
    LnProblem saved = ln_problem_new(13, 781, 1e-5f);
    saved.norm = norm;
    ln_problem_fill_random(&saved, 21, 0.0, 1.0);
    ln_problem_run_cpu(&saved);
    save_inputs(dir, &saved);
    ln_problem_save_results(&saved, results);

    LnProblem loaded = ln_problem_load(dir, norm, 1e-5f, NPY_IEEE_FLOATS);
    EXPECT(loaded.n == saved.n && loaded.d == saved.d && loaded.norm == norm, "%s norm: shape %zu x %zu read back",
           norm_kind_name(norm), loaded.n, loaded.d);
    size_t nd = saved.n * saved.d;
    EXPECT(same_bits(loaded.x, saved.x, nd) && same_bits(loaded.dy, saved.dy, nd) &&
               same_bits(loaded.gamma, saved.gamma, saved.d) && same_bits(loaded.beta, saved.beta, saved.d),
           "%s norm: inputs read back bit for bit", norm_kind_name(norm));
    ln_problem_run_cpu(&loaded);
    EXPECT(same_bits(loaded.y, saved.y, nd) && same_bits(loaded.dx, saved.dx, nd) &&
               same_bits(loaded.dgamma, saved.dgamma, saved.d) && same_bits(loaded.rstd, saved.rstd, saved.n),
           "%s norm: the loaded problem computes the same bits", norm_kind_name(norm));
    expect_outputs(results, &saved);
    ln_problem_free(&saved);
    ln_problem_free(&loaded);
}

/* `layernorm apply` on p's inputs, saved in the scratch directory `name`:
 * its exit status, and its results in name/out checked against p's own
 * (computed here, in memory, by the same kernels). */
static int apply_and_expect_outputs(const char *name, LnProblem *p)
{
    char dir[512], results[512];
    join(dir, sizeof dir, scratch_directory, name);
    join(results, sizeof results, dir, "out");
    if (mkdir(dir, 0700) != 0)
        test_skip("cannot make a directory in the scratch directory");
    save_inputs(dir, p);
    ApplyArgs args = {.load = dir, .save = results, .eps = p->eps, .norm = p->norm};
    int status = apply_run(&args, "apply vs double reference:", ln_problem_run_cpu);
    ln_problem_run_cpu(p);
    expect_outputs(results, p);
    return status;
}

static bool all_nan(const float *values, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isnan(values[i]))
            return false;
    return true;
}

static bool all_finite(const float *values, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(values[i]))
            return false;
    return true;
}

/* eps = 0, as PyTorch accepts it. Row 0 has no spread (constant for layer
 * norm, zero for RMSNorm): var (or the mean square) is 0, rstd = 1/sqrt(0)
 * = inf, and PyTorch's (x - mean) * rsqrt(var + eps) is 0 * inf = NaN, in
 * y, dx and, summed over the rows, dgamma. Row 1 is untouched. The status
 * is 0: the non-finite policy, not a defect. */
static void test_eps_zero(NormKind norm)
{
    const char *name = norm_kind_name(norm);
    LnProblem p = ln_problem_new(2, 8, 0.0f);
    p.norm = norm;
    ln_problem_fill_random(&p, 22, 0.0, 1.0);
    for (size_t j = 0; j < p.d; j++)
        p.x[j] = norm == NORM_RMS ? 0.0f : 3.0f;
    char dir[32];
    snprintf(dir, sizeof dir, "eps0-%s", name);
    int status = apply_and_expect_outputs(dir, &p);
    EXPECT(status == 0, "%s norm, eps 0: apply exits %d, expected 0", name, status);
    double torch_y = (3.0 - 3.0) * (1.0 / sqrt(0.0 + 0.0)); /* PyTorch's formula, in double */
    EXPECT(isnan(torch_y) && all_nan(p.y, p.d) && all_nan(p.dx, p.d) && p.rstd[0] == INFINITY,
           "%s norm, eps 0: the row of no spread has rstd %g, y NaN and dx NaN, as PyTorch's formula gives %g", name,
           p.rstd[0], torch_y);
    EXPECT(all_finite(p.y + p.d, p.d) && all_finite(p.dx + p.d, p.d) && isfinite(p.rstd[1]),
           "%s norm, eps 0: the other row is finite", name);
    EXPECT(all_nan(p.dgamma, p.d), "%s norm, eps 0: dgamma, a sum over both rows, is NaN", name);
    ln_problem_free(&p);
}

/* No rows, as PyTorch accepts them: status 0, empty y, rstd, dx (and mean)
 * of the right shapes, and dgamma (and dbeta), sums over no rows, zero. */
static void test_no_rows(NormKind norm)
{
    const char *name = norm_kind_name(norm);
    LnProblem p = ln_problem_new(0, 5, 1e-5f);
    p.norm = norm;
    ln_problem_fill_random(&p, 23, 0.0, 1.0);
    char dir[32];
    snprintf(dir, sizeof dir, "no-rows-%s", name);
    int status = apply_and_expect_outputs(dir, &p);
    EXPECT(status == 0, "%s norm, no rows: apply exits %d, expected 0", name, status);
    float zeros[5] = {0};
    EXPECT(same_bits(p.dgamma, zeros, 5) && same_bits(p.dbeta, zeros, 5), "%s norm, no rows: dgamma = dbeta = 0", name);
    ln_problem_free(&p);
}

/* x = 1e4 + N(0, 1): the float mean's rounding alone puts y 6e-4 from the
 * double reference, which a fixed tolerance called a defect (exit 1). It
 * is the inherent cost of float at this conditioning: exit 0. */
static void test_large_offset_exits_0(NormKind norm)
{
    LnProblem p = ln_problem_new(64, 1024, 1e-5f);
    p.norm = norm;
    ln_problem_fill_random(&p, 24, 1e4, 1.0);
    char dir[32];
    snprintf(dir, sizeof dir, "offset-%s", norm_kind_name(norm));
    int status = apply_and_expect_outputs(dir, &p);
    EXPECT(status == 0, "%s norm, offset 1e4: apply exits %d, expected 0", norm_kind_name(norm), status);
    ln_problem_free(&p);
}

int main(void)
{
    if (!scratch_directory_make("/tmp/layernorm-npy-XXXXXX"))
        test_skip("cannot make a temporary directory");
    test_roundtrip(NORM_LAYER, scratch_directory);
    /* RMSNorm: the same directory, beta.npy removed, so loading must not need it. */
    remove(scratch_path("beta.npy"));
    test_roundtrip(NORM_RMS, scratch_directory);
    for (NormKind norm = NORM_LAYER; norm <= NORM_RMS; norm++) {
        test_eps_zero(norm);
        test_no_rows(norm);
        test_large_offset_exits_0(norm);
    }
    scratch_directory_remove();
    return test_finish();
}
