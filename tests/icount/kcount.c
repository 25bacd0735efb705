/* Runs one weight kernel of a backend CALLS times on a row of N weights,
   for tools/icount.sh, which counts the instructions of two runs (CALLS =
   1 and 1 + K) under qemu-user: the difference / (K * N) is instructions
   per weight, independent of start-up.  The data are random bytes: the
   kernels' instruction paths do not depend on the values.
   usage: kcount BACKEND TYPE CALLS [N]   (TYPE as --list-plugins names it) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugins.h"

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: kcount BACKEND TYPE CALLS [N]\n");
        return 2;
    }
    const long calls = atol(argv[3]);
    const int64_t n = argc > 4 ? atol(argv[4]) : 4096;
    char err[512];
    pl_registry r;
    pl_dispatch d;
    if (registry_load(&r, NULL, err, sizeof err) || registry_dispatch(&r, argv[1], &d, err, sizeof err)) {
        fprintf(stderr, "kcount: %s\n", err);
        return 1;
    }
    uint32_t type = PL_TYPE_MAX;
    for (uint32_t t = 0; t < PL_TYPE_MAX; t++)
        if (d.types[t].fmt && !strcmp(registry_type_name(&r, t), argv[2])) type = t;
    if (type == PL_TYPE_MAX || !d.types[type].vec_dot) {
        fprintf(stderr, "kcount: no kernel for type %s\n", argv[2]);
        return 1;
    }
    const pl_type *t = &d.types[type];
    const size_t wb = dispatch_row_size(&d, type, n), ab = dispatch_row_size(&d, t->vec_dot_type, n);
    unsigned char *w = malloc(wb), *a = malloc(ab);
    if (!w || !a) return 1;
    srand(1);
    for (size_t i = 0; i < wb; i++) w[i] = (unsigned char)rand();
    for (size_t i = 0; i < ab; i++) a[i] = (unsigned char)rand();
    float s = 0, acc = 0;
    for (long i = 0; i < calls; i++) {
        t->vec_dot(n, &s, w, a);
        acc += s;
    }
    printf("%s %s %s n=%lld calls=%ld (%g)\n", argv[1], argv[2], t->kernel_from, (long long)n, calls, (double)acc);
    free(w);
    free(a);
    registry_free(&r);
    return 0;
}
