/* A tiny test harness: one line per case ("ok - name" / "not ok - name") and a summary
 * line "N passed, N failed" that ctest and the CI runner read. */
#pragma once
#include <stdio.h>

static int tap_passed, tap_failed;
static const char *tap_case;
static int tap_case_failed;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "    %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);          \
            tap_case_failed = 1;                                                                   \
        }                                                                                          \
    } while (0)

#define TEST(name) static void name(void)
#define RUN(name)                                                                                  \
    do {                                                                                           \
        tap_case = #name;                                                                          \
        tap_case_failed = 0;                                                                       \
        name();                                                                                    \
        if (tap_case_failed)                                                                       \
            tap_failed++;                                                                          \
        else                                                                                       \
            tap_passed++;                                                                          \
        printf("%s - %s\n", tap_case_failed ? "not ok" : "ok", tap_case);                          \
        fflush(stdout);                                                                            \
    } while (0)
#define TAP_DONE()                                                                                 \
    (printf("%d passed, %d failed\n", tap_passed, tap_failed), tap_failed ? 1 : 0)
