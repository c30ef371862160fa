/* The .npy interface of `layernorm apply`: inputs written as NumPy writes
 * them load bit for bit and compute the same bits, and the results
 * directory holds exactly the six result arrays, in the shapes a reader's
 * np.load expects. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chapters/02-layernorm/problem.h"
#include "common/npy.h"
#include "common/testing.h"

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

int main(void)
{
    char dir[] = "/tmp/layernorm-npy-XXXXXX";
    if (mkdtemp(dir) == NULL)
        test_skip("cannot make a temporary directory");
    char results[512];
    join(results, sizeof results, dir, "results");
    LnProblem saved = ln_problem_new(13, 781, 1e-5f);
    ln_problem_fill_random(&saved, 21, 0.0, 1.0);
    ln_problem_run_cpu(&saved);
    const char *inputs[] = {"x.npy", "gamma.npy", "beta.npy", "dy.npy"};
    const size_t matrix[2] = {saved.n, saved.d}, columns[1] = {saved.d};
    save_input(dir, inputs[0], 2, matrix, saved.x);
    save_input(dir, inputs[1], 1, columns, saved.gamma);
    save_input(dir, inputs[2], 1, columns, saved.beta);
    save_input(dir, inputs[3], 2, matrix, saved.dy);
    ln_problem_save_results(&saved, results);

    LnProblem loaded = ln_problem_load(dir, 1e-5f);
    EXPECT(loaded.n == saved.n && loaded.d == saved.d, "shape %zu x %zu read back", loaded.n, loaded.d);
    size_t nd = saved.n * saved.d;
    EXPECT(same_bits(loaded.x, saved.x, nd) && same_bits(loaded.dy, saved.dy, nd) &&
               same_bits(loaded.gamma, saved.gamma, saved.d) && same_bits(loaded.beta, saved.beta, saved.d),
           "inputs read back bit for bit");
    ln_problem_run_cpu(&loaded);
    EXPECT(same_bits(loaded.y, saved.y, nd) && same_bits(loaded.dx, saved.dx, nd) &&
               same_bits(loaded.dgamma, saved.dgamma, saved.d) && same_bits(loaded.mean, saved.mean, saved.n),
           "the loaded problem computes the same bits");

    /* Each output file: float32, the documented shape, the saved values. */
    const struct {
        const char *name;
        int ndim;
        size_t rows;
        const float *values;
    } outputs[] = {
        {"y.npy",      2, 13,  saved.y     },
        {"mean.npy",   1, 13,  saved.mean  },
        {"rstd.npy",   1, 13,  saved.rstd  },
        {"dx.npy",     2, 13,  saved.dx    },
        {"dgamma.npy", 1, 781, saved.dgamma},
        {"dbeta.npy",  1, 781, saved.dbeta }
    };
    const int output_count = (int)(sizeof outputs / sizeof outputs[0]);
    int files = count_files(results);
    EXPECT(files == output_count, "the results directory holds %d files, expected %d", files, output_count);
    for (int i = 0; i < output_count; i++) {
        char path[512], err[256];
        join(path, sizeof path, results, outputs[i].name);
        NpyArray array;
        bool read = npy_load(path, &array, err, sizeof err) == 0;
        EXPECT(read, "%s: %s", outputs[i].name, read ? "read" : err);
        if (!read)
            continue;
        bool shape_ok = array.dtype == NPY_FLOAT32 && array.ndim == outputs[i].ndim &&
                        array.shape[0] == outputs[i].rows && (array.ndim == 1 || array.shape[1] == 781);
        EXPECT(shape_ok, "%s is float32 with the documented shape", outputs[i].name);
        EXPECT(shape_ok && same_bits(array.data, outputs[i].values, npy_element_count(&array)), "%s holds the results",
               outputs[i].name);
        npy_free(&array);
        unlink(path);
    }
    rmdir(results);
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++) {
        char path[512];
        join(path, sizeof path, dir, inputs[i]);
        unlink(path);
    }
    rmdir(dir);
    ln_problem_free(&saved);
    ln_problem_free(&loaded);
    return test_finish();
}
