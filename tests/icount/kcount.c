/* Runs one weight kernel of a backend CALLS times, for tools/icount.sh,
   which counts the instructions of two runs (CALLS = 1 and 1 + K) under
   qemu-user: the difference / (K * N * ROWS * NC) is instructions per
   weight and token, independent of start-up.  Each call multiplies ROWS
   rows of N weights by NC activation columns the way core/matmul.c does:
   the backend's gemm when it has one (for NC = 1, decode, too), else
   vec_dot per row and column.  NC = 0: vec_dot of one row (ROWS ignored).
   The data are random bytes: the kernels' instruction paths do not depend
   on the values.
   usage: kcount BACKEND TYPE CALLS [N [NC [ROWS]]]   (TYPE as --list-plugins names it) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugins.h"

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: kcount BACKEND TYPE CALLS [N [NC [ROWS]]]\n");
        return 2;
    }
    const long calls = atol(argv[3]);
    const int64_t n = argc > 4 ? atol(argv[4]) : 4096;
    const int64_t nc = argc > 5 ? atol(argv[5]) : 0, rows = nc && argc > 6 ? atol(argv[6]) : 1;
    if (n <= 0 || nc < 0 || nc > 4096 || rows <= 0 || rows > 4096) {
        fprintf(stderr, "kcount: N, NC, ROWS out of range\n");
        return 2;
    }
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
    const int64_t ncols = nc ? nc : 1;
    unsigned char *w = malloc(wb * rows), *a = malloc(ab * ncols);
    float *out = malloc(sizeof *out * rows * ncols);
    if (!w || !a || !out) return 1;
    srand(1);
    for (size_t i = 0; i < wb * rows; i++) w[i] = (unsigned char)rand();
    for (size_t i = 0; i < ab * ncols; i++) a[i] = (unsigned char)rand();
    float acc = 0;
    for (long i = 0; i < calls; i++) {
        if (nc && t->gemm) t->gemm(n, rows, nc, w, wb, a, ab, out, rows);
        else
            for (int64_t r = 0; r < rows; r++)
                for (int64_t c = 0; c < ncols; c++) t->vec_dot(n, &out[c * rows + r], w + r * wb, a + c * ab);
        acc += out[0];
    }
    printf("%s %s %s%s n=%lld nc=%lld rows=%lld calls=%ld (%g)\n", argv[1], argv[2], t->kernel_from,
           nc && t->gemm ? " gemm" : "", (long long)n, (long long)nc, (long long)rows, calls, (double)acc);
    free(out);
    free(w);
    free(a);
    free_registry(&r);
    return 0;
}
