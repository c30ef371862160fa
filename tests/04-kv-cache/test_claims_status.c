/* verify and the demonstrations exit 1 when a claim they print does not
 * hold, after the whole output and with one line on stderr, and 0 when
 * every claim holds. A search of the options found none that makes a claim
 * fail (block sizes 1 to 256, the smallest model shapes, extreme sampling),
 * so the failing claim here is real but out of the options' reach: verify's
 * table on a model too short for its prefix-caching requests, which are
 * refused, served and alone, and so finish with no tokens to compare. */
#include <string.h>

#include "chapters/04-kv-cache/commands.h"
#include "chapters/04-kv-cache/demos.h"
#include "common/testing.h"

/* verify's prefix-caching requests need up to 200 positions at block size
 * 16; its other workloads need at most 108. */
enum { TOO_SHORT_FOR_PREFIX_CACHING = 150 };

static bool verify_on_a_short_model(const Model *model, int block_size, const Sampler *sampler, FILE *out,
                                    TableFormat format)
{
    (void)sampler;
    ModelConfig config = model->config;
    config.max_seq_len = TOO_SHORT_FOR_PREFIX_CACHING;
    Model short_model = model_create(&config);
    bool every_claim_holds = demo_verify(&short_model, block_size, out, format);
    model_free(&short_model);
    return every_claim_holds;
}

static bool verify_as_the_command_does(const Model *model, int block_size, const Sampler *sampler, FILE *out,
                                       TableFormat format)
{
    (void)sampler;
    return demo_verify(model, block_size, out, format);
}

/* test_run_child passes its body a void *, which cannot hold a function
 * pointer in ISO C: the demonstration goes in a struct. */
typedef struct {
    DemoFunction *demo;
} Demo;

/* As cli_run_command runs a subcommand: its status, through cli_exit. */
static void run_with_default_options(void *demo)
{
    char *argv[] = {"verify", NULL};
    cli_exit(run_demo(1, argv, ((Demo *)demo)->demo, false, 1));
}

/* Whether the printed row that starts with `claim` says NO. */
static bool row_says_no(const char *out, const char *claim)
{
    const char *row = strstr(out, claim);
    if (row == NULL)
        return false;
    const char *end = strchr(row, '\n');
    const char *no = strstr(row, " NO ");
    return no != NULL && (end == NULL || no < end);
}

int main(void)
{
    ChildResult failing = test_run_child(run_with_default_options, &(Demo){verify_on_a_short_model});
    EXPECT(failing.exit_status == 1, "a claim that fails: status %d, expected 1", failing.exit_status);
    EXPECT(row_says_no(failing.out, "prefix-cached = alone"), "the prefix-caching row says NO:\n%s", failing.out);
    EXPECT(failing.err_lines == 1 && strstr(failing.err, "a claim printed above does not hold") != NULL,
           "one line on stderr saying a claim failed, got: %s", failing.err);

    ChildResult passing = test_run_child(run_with_default_options, &(Demo){verify_as_the_command_does});
    EXPECT(passing.exit_status == 0, "every claim holds: status %d, expected 0", passing.exit_status);
    EXPECT(strstr(passing.out, "prefix-cached = alone") != NULL && strstr(passing.out, " NO ") == NULL,
           "the whole table, no NO:\n%s", passing.out);
    EXPECT(passing.err_lines == 0, "nothing on stderr, got: %s", passing.err);
    return test_finish();
}
