/* Minimal check helpers for C tests: one PASS/FAIL/SKIP line per check. */
#ifndef PICOLM_TEST_CHECK_H
#define PICOLM_TEST_CHECK_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_failures;

#define CHECK(cond, ...) do { \
    if (cond) { printf("PASS: "); printf(__VA_ARGS__); printf("\n"); } \
    else { check_failures++; printf("FAIL: "); printf(__VA_ARGS__); \
           printf(" (%s:%d: %s)\n", __FILE__, __LINE__, #cond); } \
    fflush(stdout); } while (0)
#define SKIP(...) do { printf("SKIP: "); printf(__VA_ARGS__); printf("\n"); fflush(stdout); } while (0)
#define CHECK_DONE() (check_failures ? 1 : 0)

/* The shared test data directory, or NULL (with a loud SKIP) when absent. */
static inline const char *shared_dir(const char *what) {
    const char *d = getenv("PICOLM_SHARED");
    if (!d) d = "../shared";
    char p[4096];
    snprintf(p, sizeof p, "%s/models", d);
    FILE *f = fopen(p, "r");
    if (!f) { SKIP("%s: PICOLM_SHARED=%s not found, shared data absent", what, d); return NULL; }
    fclose(f);
    return d;
}
static inline const char *build_dir(void) {
    const char *b = getenv("PICOLM_BUILD");
    return b ? b : "build";
}
#endif
