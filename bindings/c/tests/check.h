/* Assertions for the C tests: a failed CHECK prints where and why and exits 1. */
#ifndef CYCLES_TEST_CHECK_H
#define CYCLES_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#include "cycles.h"

#define CHECK(cond, ...)                                                      \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                     \
            fprintf(stderr, "\n");                                            \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

/* Checks a call returned CYCLES_OK, printing its error otherwise. */
#define OK(call)                                                              \
    do {                                                                      \
        cycles_error *ok_err_ = NULL;                                         \
        cycles_status ok_st_ = (call);                                        \
        if (ok_st_ != CYCLES_OK) {                                            \
            fprintf(stderr, "%s:%d: %s -> %d %s\n", __FILE__, __LINE__, #call, (int)ok_st_, \
                    ok_err_ ? "" : cycles_error_json(ERR));                   \
            exit(1);                                                          \
        }                                                                     \
        (void)ok_err_;                                                        \
    } while (0)

#endif
