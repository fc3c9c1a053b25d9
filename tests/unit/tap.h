/* A tiny test harness: one line per case ("ok - name" / "not ok - name") and a summary
 * line "N passed, N failed" that ctest and the CI runner read. */
#pragma once
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_passed, tap_failed, tap_skipped;
static const char *tap_case;
static int tap_case_failed;
static const char *tap_case_skip; /* set by TAP_SKIP_HERE: why the running case was skipped */

/* Inside a case: it cannot run on this host (say why); reported "ok - name # SKIP why", and
 * scripts/test fails the lane unless tests/skips.allow lists it. Returns from the case. */
#define TAP_SKIP_HERE(why)                                                                         \
    do {                                                                                           \
        tap_case_skip = (why);                                                                     \
        return;                                                                                    \
    } while (0)

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "    %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);           \
            tap_case_failed = 1;                                                                   \
        }                                                                                          \
    } while (0)

/* TAP_SKIP="a,b": those cases are not run and are reported as skipped, e.g. where the
 * machine cannot meet their timing (scripts/test-cgroup2 under emulation says which). */
static inline int tap_skip(const char *name)
{
    const char *list = getenv("TAP_SKIP");
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0)
            return 1;
        p = end ? end + 1 : NULL;
    }
    return 0;
}

#define TEST(name) static void name(void)
#define RUN(name)                                                                                  \
    do {                                                                                           \
        if (tap_skip(#name)) {                                                                     \
            tap_skipped++;                                                                         \
            printf("ok - %s # SKIP (TAP_SKIP)\n", #name);                                          \
            fflush(stdout);                                                                        \
            break;                                                                                 \
        }                                                                                          \
        tap_case = #name;                                                                          \
        tap_case_failed = 0;                                                                       \
        tap_case_skip = NULL;                                                                      \
        name();                                                                                    \
        if (tap_case_skip && !tap_case_failed) {                                                   \
            tap_skipped++;                                                                         \
            printf("ok - %s # SKIP %s\n", tap_case, tap_case_skip);                                \
            fflush(stdout);                                                                        \
            break;                                                                                 \
        }                                                                                          \
        if (tap_case_failed)                                                                       \
            tap_failed++;                                                                          \
        else                                                                                       \
            tap_passed++;                                                                          \
        printf("%s - %s\n", tap_case_failed ? "not ok" : "ok", tap_case);                          \
        fflush(stdout);                                                                            \
    } while (0)
#define TAP_DONE()                                                                                 \
    (tap_skipped                                                                                   \
         ? printf("%d passed, %d failed, %d skipped\n", tap_passed, tap_failed, tap_skipped)       \
         : printf("%d passed, %d failed\n", tap_passed, tap_failed),                               \
     tap_failed ? 1 : 0)
