/* top_k: PROCESS, keep exactly the k best candidates (ties -> lower id), sorted
   best first.  Quickselect (O(n)) then a heap sort of the k survivors: no
   full-vocabulary sort, no allocation. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "picolm/plugin.h"

/* ---- candidate ordering helpers (same code in top_p.c) ---- */

/* Total order: higher logit first, then lower id; NaN ranks as -inf. */
static inline int better(const picolm_token_data *a, const picolm_token_data *b) {
    float x = a->logit, y = b->logit;
    if (x != x) x = -INFINITY;
    if (y != y) y = -INFINITY;
    return x > y || (x == y && a->id < b->id);
}

static inline void swap_td(picolm_token_data *a, picolm_token_data *b) {
    picolm_token_data t = *a;
    *a = *b;
    *b = t;
}

/* Rearrange d[0..n) so that d[0..k) holds the k best (in any order). */
static void select_best(picolm_token_data *d, size_t n, size_t k) {
    size_t lo = 0, hi = n;
    while (k > lo && k < hi && hi - lo > 1) {
        const size_t mid = lo + (hi - lo) / 2, last = hi - 1;
        /* median of three to d[last] */
        if (better(&d[mid], &d[lo])) swap_td(&d[mid], &d[lo]);
        if (better(&d[last], &d[lo])) swap_td(&d[last], &d[lo]);
        if (better(&d[mid], &d[last])) swap_td(&d[mid], &d[last]);
        size_t store = lo;
        for (size_t i = lo; i < last; i++)
            if (better(&d[i], &d[last])) swap_td(&d[i], &d[store++]);
        swap_td(&d[store], &d[last]);
        /* d[lo..store) beat the pivot, now at d[store] */
        if (k <= store) hi = store;
        else lo = store + 1;
    }
}

/* Heap sort, best first. */
static void sift(picolm_token_data *d, size_t i, size_t n) {
    for (;;) {
        size_t w = i, l = 2 * i + 1, r = l + 1;
        if (l < n && better(&d[w], &d[l])) w = l; /* root holds the worst */
        if (r < n && better(&d[w], &d[r])) w = r;
        if (w == i) return;
        swap_td(&d[i], &d[w]);
        i = w;
    }
}

static void sort_best_first(picolm_token_data *d, size_t n) {
    if (n < 2) return;
    for (size_t i = n / 2; i-- > 0;) sift(d, i, n);
    for (size_t end = n - 1; end > 0; end--) {
        swap_td(&d[0], &d[end]);
        sift(d, 0, end);
    }
}

/* ---- parameters ---- */

static const char *find_param(const picolm_sampler_init *in, const char *key) {
    const char *v = NULL; /* the last occurrence wins */
    for (int i = 0; in->params && i < in->n_params; i++)
        if (in->params[i].key && in->params[i].value && !strcmp(in->params[i].key, key)) v = in->params[i].value;
    return v;
}

static int topk_create(const picolm_sampler_init *init, void **state, char *err, size_t errlen) {
    long k = 40;
    const char *v = find_param(init, "top_k");
    if (v) {
        char *end;
        k = strtol(v, &end, 10);
        while (isspace((unsigned char)*end)) end++;
        if (end == v || *end || k < 0 || k > (1L << 30)) { snprintf(err, errlen, "top_k: '%s' is not an integer >= 0", v); return 1; }
    }
    size_t *s = calloc(1, sizeof *s);
    if (!s) { snprintf(err, errlen, "top_k: out of memory"); return 1; }
    *s = (size_t)k;
    *state = s;
    return 0;
}

static void topk_destroy(void *state) { free(state); }

static int topk_apply(void *state, picolm_candidates *c, char *err, size_t errlen) {
    const size_t k = *(const size_t *)state;
    if (!c->size) { snprintf(err, errlen, "top_k: no candidates left"); return 1; }
    if (k == 0 || k >= c->size) return 0; /* 0 = disabled */
    if (!c->sorted) {
        select_best(c->data, c->size, k);
        sort_best_first(c->data, k);
        c->sorted = 1;
    }
    c->size = k;
    c->has_p = 0;
    return 0;
}

static const char *const topk_keys[] = {"top_k", NULL};

static const picolm_sampler_vtable topk_vtable = {
    .struct_size = sizeof(picolm_sampler_vtable),
    .role = PICOLM_SAMPLER_PROCESS,
    .param_keys = topk_keys,
    .create = topk_create,
    .destroy = topk_destroy,
    .apply = topk_apply,
};

static const picolm_plugin topk_desc = {
    .abi_version = PICOLM_ABI_VERSION,
    .struct_size = sizeof(picolm_plugin),
    .kind = PICOLM_KIND_SAMPLER,
    .name = "top_k",
    .version = "1.0",
    .description = "keep the k most likely tokens",
    .vtable = &topk_vtable,
};

PICOLM_EXPORT const picolm_plugin *picolm_plugin_v1(void) { return &topk_desc; }
