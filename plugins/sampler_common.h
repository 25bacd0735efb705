/* Helpers shared by the in-tree sampler plugins (header-only: each plugin is
   its own shared object and links nothing but libc/libm). */
#ifndef PICOLM_SAMPLER_COMMON_H
#define PICOLM_SAMPLER_COMMON_H
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "picolm/plugin.h"

/* ---- parameters: the last occurrence wins (the core appends the
   effective value last) ---- */

static inline const char *find_param(const picolm_sampler_init *in, const char *key) {
    const char *v = NULL;
    for (int i = 0; in->params && i < in->n_params; i++)
        if (in->params[i].key && in->params[i].value && !strcmp(in->params[i].key, key)) v = in->params[i].value;
    return v;
}

/* Leaves *out alone when the key is absent; 1 + message when malformed. */
static inline int param_float(const picolm_sampler_init *in, const char *key, float *out, char *err, size_t errlen) {
    const char *v = find_param(in, key);
    if (!v) return 0;
    char *end;
    const double d = strtod(v, &end);
    while (isspace((unsigned char)*end)) end++;
    if (end == v || *end || !isfinite(d)) { snprintf(err, errlen, "%s: '%s' is not a number", key, v); return 1; }
    *out = (float)d;
    return 0;
}

static inline int param_int(const picolm_sampler_init *in, const char *key, long lo, long hi, long *out, char *err, size_t errlen) {
    const char *v = find_param(in, key);
    if (!v) return 0;
    char *end;
    const long l = strtol(v, &end, 10);
    while (isspace((unsigned char)*end)) end++;
    if (end == v || *end || l < lo || l > hi) { snprintf(err, errlen, "%s: '%s' is not an integer >= %ld", key, v, lo); return 1; }
    *out = l;
    return 0;
}

/* ---- apply_logits: the list apply() would have been given ---- */

/* Candidate i of that list: {i, logits[i] * scale, 0}. */
static inline picolm_token_data logit_td(const float *logits, float scale, size_t i) {
    return (picolm_token_data){(int32_t)i, logits[i] * scale, 0.0f};
}

/* Build the whole list in c (c->size logits), for a stage whose fast path
   does not apply and falls back to its apply(). */
static inline void fill_list(picolm_candidates *c, const float *logits, float scale) {
    for (size_t i = 0; i < c->size; i++) c->data[i] = logit_td(logits, scale, i);
    c->sorted = c->has_p = 0;
}

/* ---- candidate ordering ---- */

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
static inline void select_best(picolm_token_data *d, size_t n, size_t k) {
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
static inline void sift_worst_root(picolm_token_data *d, size_t i, size_t n) {
    for (;;) {
        size_t w = i, l = 2 * i + 1, r = l + 1;
        if (l < n && better(&d[w], &d[l])) w = l; /* root holds the worst */
        if (r < n && better(&d[w], &d[r])) w = r;
        if (w == i) return;
        swap_td(&d[i], &d[w]);
        i = w;
    }
}

static inline void sort_best_first(picolm_token_data *d, size_t n) {
    if (n < 2) return;
    for (size_t i = n / 2; i-- > 0;) sift_worst_root(d, i, n);
    for (size_t end = n - 1; end > 0; end--) {
        swap_td(&d[0], &d[end]);
        sift_worst_root(d, 0, end);
    }
}

/* ---- the softmax rule (picolm_sampler_vtable.draw): dist's apply() with
   the uniform u drawn; also top_p's apply_select when it falls back ---- */

static inline int softmax_pick(picolm_candidates *c, double u, char *err, size_t errlen) {
    if (!c->size) { snprintf(err, errlen, "dist: no candidates left"); return 1; }
    /* a list sorted best first starts with its max (unless NaN, which ranks last) */
    const int head_max = c->sorted && c->data[0].logit == c->data[0].logit;
    float max = head_max ? c->data[0].logit : -INFINITY;
    for (size_t i = 0; !head_max && i < c->size; i++)
        if (c->data[i].logit > max) max = c->data[i].logit;
    if (!(max > -INFINITY)) { snprintf(err, errlen, "dist: every candidate has probability 0"); return 1; }
    double sum = 0;
    for (size_t i = 0; i < c->size; i++) {
        float e = c->data[i].logit > -INFINITY ? expf(c->data[i].logit - max) : 0.0f;
        c->data[i].p = e;
        sum += e;
    }
    const double r = u * sum;
    double acc = 0;
    size_t pick = c->size, last = 0;
    for (size_t i = 0; i < c->size; i++) {
        if (c->data[i].p <= 0) continue;
        last = i;
        acc += c->data[i].p;
        if (acc > r) { pick = i; break; }
    }
    if (pick == c->size) pick = last; /* rounding left r just past the total */
    const float inv = (float)(1.0 / sum);
    for (size_t i = 0; i < c->size; i++) c->data[i].p *= inv;
    c->has_p = 1;
    c->selected = c->data[pick].id;
    return 0;
}
#endif
