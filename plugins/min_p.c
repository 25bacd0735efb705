/* min_p: PROCESS, keep the candidates whose probability is at least
   min_p * p(best), i.e. logit >= max_logit + ln(min_p).  No softmax, no sort;
   the relative order of the survivors is kept. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "picolm/plugin.h"
#include "sampler_common.h"



static int minp_create(const picolm_sampler_init *init, void **state, char *err, size_t errlen) {
    float p = 0.05f;
    if (param_float(init, "min_p", &p, err, errlen)) return 1;
    if (p < 0 || p > 1) { snprintf(err, errlen, "min_p: %g is outside [0, 1]", (double)p); return 1; }
    float *s = calloc(1, sizeof *s);
    if (!s) { snprintf(err, errlen, "min_p: out of memory"); return 1; }
    *s = p;
    *state = s;
    return 0;
}

static void minp_destroy(void *state) { free(state); }

static int minp_apply(void *state, picolm_candidates *c, char *err, size_t errlen) {
    const float p = *(const float *)state;
    if (!c->size) { snprintf(err, errlen, "min_p: no candidates left"); return 1; }
    if (p <= 0) return 0;
    float max = c->data[0].logit;
    for (size_t i = 1; i < c->size; i++)
        if (c->data[i].logit > max) max = c->data[i].logit;
    if (!(max > -INFINITY)) return 0;
    const float thr = max + logf(p); /* ln(p) <= 0: the best always survives */
    size_t n = 0;
    for (size_t i = 0; i < c->size; i++)
        if (c->data[i].logit >= thr) c->data[n++] = c->data[i];
    if (n != c->size) c->has_p = 0;
    c->size = n;
    return 0;
}

/* apply() without the list built: the max of the products, then only the
   survivors written, in id order. */
static int minp_apply_logits(void *state, const float *logits, float scale, picolm_candidates *c, char *err, size_t errlen) {
    const float p = *(const float *)state;
    if (p <= 0 || !c->size) {
        fill_list(c, logits, scale);
        return minp_apply(state, c, err, errlen);
    }
    float max = logits[0] * scale;
    for (size_t i = 1; i < c->size; i++)
        if (logits[i] * scale > max) max = logits[i] * scale;
    if (!(max > -INFINITY)) {
        fill_list(c, logits, scale);
        return 0;
    }
    const float thr = max + logf(p);
    size_t n = 0;
    for (size_t i = 0; i < c->size; i++)
        if (logits[i] * scale >= thr) c->data[n++] = logit_td(logits, scale, i);
    c->size = n;
    c->sorted = c->has_p = 0;
    return 0;
}

static const picolm_param_desc minp_params[] = {
    {"min_p", PICOLM_PARAM_FLOAT, "0", 0, 1, NULL, "drop tokens below min_p x the top probability; 0 = off"},
    {0},
};

static int minp_neutral(const void *state) { return *(const float *)state <= 0; }

PICOLM_DEFINE_SAMPLER("min_p", "1.0", "drop tokens less likely than min_p times the best one",
                      PICOLM_SAMPLER_PROCESS,
                      .params = minp_params, .create = minp_create, .destroy = minp_destroy,
                      .apply = minp_apply, .neutral = minp_neutral,
                      .apply_logits = minp_apply_logits);
