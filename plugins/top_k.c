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

/* The k best of d[0..n) into h (a heap, worst at the root), in one pass. */
static void stream_best(const picolm_token_data *d, size_t n, picolm_token_data *h, size_t k) {
    memcpy(h, d, k * sizeof *h);
    for (size_t i = k / 2; i-- > 0;) sift_worst_root(h, i, k);
    for (size_t i = k; i < n; i++)
        if (better(&d[i], &h[0])) {
            h[0] = d[i];
            sift_worst_root(h, 0, k);
        }
}

static int topk_apply(void *state, picolm_candidates *c, char *err, size_t errlen) {
    topk_state *s = state;
    const size_t k = s->k;
    if (!c->size) { snprintf(err, errlen, "top_k: no candidates left"); return 1; }
    if (k == 0 || k >= c->size) return 0; /* 0 = disabled */
    if (!c->sorted) {
        /* streaming costs about n + k log(n/k) log k comparisons */
        if (k <= c->size / 64 && !s->heap) s->heap = malloc(k * sizeof *s->heap);
        if (k <= c->size / 64 && s->heap) {
            stream_best(c->data, c->size, s->heap, k);
            memcpy(c->data, s->heap, k * sizeof *s->heap);
        } else {
            select_best(c->data, c->size, k);
        }
        sort_best_first(c->data, k);
        c->sorted = 1;
    }
    c->size = k;
    c->has_p = 0;
    return 0;
}

static const picolm_param_desc topk_params[] = {
    {"top_k", PICOLM_PARAM_INT, "0", 0, 1 << 24, NULL, "keep the k most likely tokens; 0 = off"},
    {0},
};

static int topk_neutral(const void *state) { return ((const topk_state *)state)->k == 0; }

static const picolm_sampler_vtable topk_vtable = {
    .struct_size = sizeof(picolm_sampler_vtable),
    .role = PICOLM_SAMPLER_PROCESS,
    .params = topk_params,
    .create = topk_create,
    .destroy = topk_destroy,
    .apply = topk_apply,
    .neutral = topk_neutral,
};

PICOLM_DEFINE_PLUGIN(PICOLM_KIND_SAMPLER, "top_k", "1.0", "keep the k most likely tokens", 0, 0, &topk_vtable);
