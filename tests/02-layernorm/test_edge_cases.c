/* Every edge case of chapters/02-layernorm/edge_cases.c, each its own
 * test: a case fails when any of its checks fails. */
#include <stdio.h>

#include "chapters/02-layernorm/edge_cases.h"
#include "common/testing.h"

int main(void)
{
    for (int i = 0; i < edge_case_count; i++) {
        static EdgeChecks checks;
        checks.count = 0;
        edge_cases[i].run(&checks, edge_cases[i].norm);
        bool ok = checks.count > 0;
        for (int c = 0; c < checks.count; c++) {
            const EdgeCheck *check = &checks.checks[c];
            printf("%s %s, %s: %s: %s (allowed %s)\n", check->ok ? "ok  " : "FAIL", check->name, check->shape,
                   check->check, check->measured, check->allowed);
            ok = ok && check->ok;
        }
        EXPECT(ok, "edge case %s", edge_cases[i].name);
    }
    return test_finish();
}
