/* temperature: PROCESS, logits /= T.  T <= 0 means "no randomness": only the
   most likely candidate survives (ties -> lowest id, as greedy), so the
   default chain is greedy at temperature 0. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "picolm/plugin.h"
#include "sampler_common.h"



static int temp_create(const picolm_sampler_init *init, void **state, char *err, size_t errlen) {
    float t = 1.0f;
    if (param_float(init, "temperature", &t, err, errlen)) return 1;
    float *s = calloc(1, sizeof *s);
    if (!s) { snprintf(err, errlen, "temperature: out of memory"); return 1; }
    *s = t;
    *state = s;
    return 0;
}

static void temp_destroy(void *state) { free(state); }

static int temp_apply(void *state, picolm_candidates *c, char *err, size_t errlen) {
    const float t = *(const float *)state;
    if (!c->size) { snprintf(err, errlen, "temperature: no candidates left"); return 1; }
    if (t <= 0) {
        size_t best = 0;
        for (size_t i = 1; i < c->size; i++) {
            const picolm_token_data *a = &c->data[i], *b = &c->data[best];
            if (a->logit > b->logit || (a->logit == b->logit && a->id < b->id)) best = i;
        }
        c->data[0] = c->data[best];
        c->size = 1;
        c->sorted = 1;
    } else if (t != 1.0f) {
        const float inv = 1.0f / t;
        for (size_t i = 0; i < c->size; i++) c->data[i].logit *= inv; /* order-preserving */
    }
    c->has_p = 0;
    return 0;
}

/* apply() is a plain multiply by 1/T when T > 0 (by 1 when T is 1: a no-op) */
static float temp_scale(const void *state) {
    const float t = *(const float *)state;
    return t > 0 ? 1.0f / t : 0.0f;
}

static const picolm_param_desc temp_params[] = {
    {"temperature", PICOLM_PARAM_FLOAT, "0.8", 0, 100, NULL, "sampling temperature; 0 = greedy"},
    {0},
};

PICOLM_DEFINE_SAMPLER("temperature", "1.0", "scale logits by 1/temperature (<= 0 keeps only the best token)",
                      PICOLM_SAMPLER_PROCESS,
                      .params = temp_params, .create = temp_create, .destroy = temp_destroy,
                      .apply = temp_apply, .logit_scale = temp_scale);
