/* top_k: PROCESS, keep exactly the k best candidates (ties -> lower id), sorted
   best first.  A small k streams the list through a heap of the k best so
   far (one comparison per candidate once the heap is warm); a large k
   quickselects (O(n)).  Then a heap sort of the k survivors: no
   full-vocabulary sort. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "picolm/plugin.h"
#include "sampler_common.h"

typedef struct topk_state {
    size_t k;
    picolm_token_data *heap; /* k entries, the worst at the root */
} topk_state;

static int topk_create(const picolm_sampler_init *init, void **state, char *err, size_t errlen) {
    long k = 40;
    if (param_int(init, "top_k", 0, 1L << 30, &k, err, errlen)) return 1;
    topk_state *s = calloc(1, sizeof *s);
    if (!s) { snprintf(err, errlen, "top_k: out of memory"); return 1; }
    s->k = (size_t)k;
    *state = s;
    return 0;
}

static void topk_destroy(void *state) {
    topk_state *s = state;
    if (s) free(s->heap);
    free(s);
}

/* The k best of d[0..n) (or, d NULL, of the list {i, l[i] * scale}) into
   h (a heap, worst at the root), in one pass. */
static inline __attribute__((always_inline)) void stream_body(const picolm_token_data *d, const float *l, float scale, size_t n,
                                                             picolm_token_data *h, size_t k) {
    for (size_t i = 0; i < k; i++) h[i] = d ? d[i] : logit_td(l, scale, i);
    for (size_t i = k / 2; i-- > 0;) sift_worst_root(h, i, k);
    for (size_t i = k; i < n; i++) {
        const picolm_token_data t = d ? d[i] : logit_td(l, scale, i);
        if (better(&t, &h[0])) {
            h[0] = t;
            sift_worst_root(h, 0, k);
        }
    }
}
static void stream_best(const picolm_token_data *d, size_t n, picolm_token_data *h, size_t k) { stream_body(d, NULL, 0, n, h, k); }
static void stream_logits(const float *l, float scale, size_t n, picolm_token_data *h, size_t k) { stream_body(NULL, l, scale, n, h, k); }

/* Streaming costs about n + k log(n/k) log k comparisons: for k <= n/64. */
static picolm_token_data *stream_heap(topk_state *s, size_t n) {
    if (s->k > n / 64) return NULL;
    if (!s->heap) s->heap = malloc(s->k * sizeof *s->heap);
    return s->heap;
}

/* The k best, sorted, from the heap into c. */
static void take_heap(const topk_state *s, picolm_candidates *c) {
    memcpy(c->data, s->heap, s->k * sizeof *s->heap);
    sort_best_first(c->data, s->k);
    c->size = s->k;
    c->sorted = 1;
    c->has_p = 0;
}

static int topk_apply(void *state, picolm_candidates *c, char *err, size_t errlen) {
    topk_state *s = state;
    const size_t k = s->k;
    if (!c->size) { snprintf(err, errlen, "top_k: no candidates left"); return 1; }
    if (k == 0 || k >= c->size) return 0; /* 0 = disabled */
    if (!c->sorted && stream_heap(s, c->size)) {
        stream_best(c->data, c->size, s->heap, k);
        take_heap(s, c);
        return 0;
    }
    if (!c->sorted) {
        select_best(c->data, c->size, k);
        sort_best_first(c->data, k);
        c->sorted = 1;
    }
    c->size = k;
    c->has_p = 0;
    return 0;
}

/* apply() without the list built when streaming fits; else the list. */
static int topk_apply_logits(void *state, const float *logits, float scale, picolm_candidates *c, char *err, size_t errlen) {
    topk_state *s = state;
    if (s->k && s->k < c->size && stream_heap(s, c->size)) {
        stream_logits(logits, scale, c->size, s->heap, s->k);
        take_heap(s, c);
        return 0;
    }
    fill_list(c, logits, scale);
    return topk_apply(state, c, err, errlen);
}

static const picolm_param_desc topk_params[] = {
    {"top_k", PICOLM_PARAM_INT, "0", 0, 1 << 24, NULL, "keep the k most likely tokens; 0 = off"},
    {0},
};

static int topk_neutral(const void *state) { return ((const topk_state *)state)->k == 0; }

PICOLM_DEFINE_SAMPLER("top_k", "1.0", "keep the k most likely tokens",
                      PICOLM_SAMPLER_PROCESS,
                      .params = topk_params, .create = topk_create, .destroy = topk_destroy,
                      .apply = topk_apply, .neutral = topk_neutral,
                      .apply_logits = topk_apply_logits);
