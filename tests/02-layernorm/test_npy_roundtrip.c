/* --save then --load: the files hold exactly the arrays, in the shapes a
 * reader's np.load expects, and a loaded problem computes the same bits. */
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

int main(void)
{
    char dir[] = "/tmp/layernorm-npy-XXXXXX";
    if (mkdtemp(dir) == NULL)
        test_skip("cannot make a temporary directory");
    LnProblem saved = ln_problem_new(13, 781, 1e-5f);
    ln_problem_fill_random(&saved, 21, 0.0, 1.0);
    ln_problem_run_cpu(&saved);
    ln_problem_save(&saved, dir);

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
    for (size_t i = 0; i < sizeof outputs / sizeof outputs[0]; i++) {
        char path[512], err[256];
        snprintf(path, sizeof path, "%s/%s", dir, outputs[i].name);
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
    const char *inputs[] = {"x.npy", "gamma.npy", "beta.npy", "dy.npy"};
    for (size_t i = 0; i < 4; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, inputs[i]);
        unlink(path);
    }
    rmdir(dir);
    ln_problem_free(&saved);
    ln_problem_free(&loaded);
    return test_finish();
}
