/* Helpers several C tests share.  Header-only (static inline): every test is
   its own program, linked only with the core library. */
#ifndef PICOLM_TESTLIB_H
#define PICOLM_TESTLIB_H
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "picolm/plugin.h"

/* Rows a whole-model check takes: every row natively; every 8th under
   emulation (PICOLM_TEST_WRAPPER, qemu-user), where the reference
   quantizers run 50-100x slower: each tensor, format and block position is
   still checked on the target's code. */
static inline int64_t tl_row_step(void) {
    const char *w = getenv("PICOLM_TEST_WRAPPER");
    return w && *w ? 8 : 1;
}

/* The whole file in a malloc'd buffer (size in *n), or NULL. */
static inline void *tl_slurp(const char *path, size_t *n) {
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *p = malloc(sz > 0 ? (size_t)sz : 1);
    if (p && fread(p, 1, (size_t)sz, f) != (size_t)sz) { free(p); p = NULL; }
    fclose(f);
    *n = p && sz > 0 ? (size_t)sz : 0;
    return p;
}

/* Agreement of two logits matrices (npos x nv), the figures of
   shared/tools/cmp_logits.py: the largest per-position nRMSE (RMS error over
   the reference's standard deviation; NaN counts as infinite), the mean
   KL(ref || ours) of the softmaxes, and the top-1 agreement. */
typedef struct tl_logits_cmp {
    double nrmse_max, kl_mean, top1;
} tl_logits_cmp;

static inline tl_logits_cmp tl_compare_logits(const float *ours, const float *ref, int npos, int nv) {
    tl_logits_cmp r = {0, 0, 0};
    for (int p = 0; p < npos; p++) {
        const float *o = ours + (size_t)p * nv, *f = ref + (size_t)p * nv;
        double mean = 0, var = 0, se = 0;
        for (int i = 0; i < nv; i++) mean += f[i];
        mean /= nv;
        for (int i = 0; i < nv; i++) { var += (f[i] - mean) * (f[i] - mean); se += (double)(o[i] - f[i]) * (o[i] - f[i]); }
        double nr = sqrt(se / nv) / (sqrt(var / nv) + 1e-12);
        if (nr > r.nrmse_max || isnan(nr)) r.nrmse_max = isnan(nr) ? INFINITY : nr;
        double mo = -INFINITY, mf = -INFINITY;
        int ao = 0, af = 0;
        for (int i = 0; i < nv; i++) {
            if (o[i] > mo) { mo = o[i]; ao = i; }
            if (f[i] > mf) { mf = f[i]; af = i; }
        }
        double zo = 0, zf = 0;
        for (int i = 0; i < nv; i++) { zo += exp(o[i] - mo); zf += exp(f[i] - mf); }
        double kl = 0;
        for (int i = 0; i < nv; i++) {
            double lpf = f[i] - mf - log(zf), lpo = o[i] - mo - log(zo);
            kl += exp(lpf) * (lpf - lpo);
        }
        r.kl_mean += kl / npos;
        r.top1 += (ao == af) / (double)npos;
    }
    return r;
}

/* dlopen a plugin file and find its entry point.  *handle is NULL when
   dlopen failed; the entry is NULL when it failed or the symbol is missing
   (why says which). */
static inline picolm_entry_fn tl_plugin_entry(const char *path, void **handle, char *why, size_t n) {
    picolm_entry_fn entry = NULL;
    *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!*handle) {
        snprintf(why, n, "%s", dlerror());
        return NULL;
    }
    *(void **)&entry = dlsym(*handle, PICOLM_ENTRY);
    snprintf(why, n, "%s", entry ? "ok" : "no " PICOLM_ENTRY);
    return entry;
}

/* Format i of a format plugin's table (its stride is format_size). */
static inline const picolm_format *tl_format_at(const picolm_format_vtable *vt, uint32_t i) {
    return (const picolm_format *)((const char *)vt->formats + (size_t)i * vt->format_size);
}
#endif
