/* penalties: PROCESS, llama.cpp's repetition / frequency / presence penalties
   over the last penalty_last_n accepted tokens (prompt included):
     c = occurrences of the token in the window; if c > 0:
       logit = logit > 0 ? logit / repeat : logit * repeat
       logit -= c * freq + presence
   The window's counts are kept incrementally in accept().  apply() visits
   only the window's tokens when the list is still in id order (the usual
   first stage), else it makes one pass over the candidates.
   penalty_last_n = -1: the whole history; 0: disabled. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "picolm/plugin.h"
#include "sampler_common.h"

typedef struct pen_state {
    float repeat, freq, presence;
    int32_t last_n;     /* window length; -1 = unlimited, 0 = off */
    int32_t n_vocab;
    int32_t *count;     /* occurrences per token id in the window */
    int32_t *ring;      /* the window (last_n > 0) */
    int32_t ring_len, ring_pos;
    int64_t n_seen;     /* tokens in the window (fast path when 0) */
    uint32_t *stamp;    /* apply() call that last penalized each id */
    uint32_t call;
} pen_state;




static void pen_destroy(void *state) {
    pen_state *s = state;
    if (!s) return;
    free(s->count);
    free(s->ring);
    free(s->stamp);
    free(s);
}

static int pen_create(const picolm_sampler_init *init, void **state, char *err, size_t errlen) {
    pen_state *s = calloc(1, sizeof *s);
    if (!s) { snprintf(err, errlen, "penalties: out of memory"); return 1; }
    s->repeat = 1.0f;
    long last_n = 64;
    if (param_float(init, "repeat_penalty", &s->repeat, err, errlen) ||
        param_float(init, "freq_penalty", &s->freq, err, errlen) ||
        param_float(init, "presence_penalty", &s->presence, err, errlen) ||
        param_int(init, "penalty_last_n", -1, 1L << 24, &last_n, err, errlen)) {
        pen_destroy(s);
        return 1;
    }
    s->last_n = (int32_t)last_n;
    if (s->repeat <= 0) { snprintf(err, errlen, "repeat_penalty: %g must be > 0", (double)s->repeat); pen_destroy(s); return 1; }
    if (!init->vocab || init->vocab->n_vocab <= 0) { snprintf(err, errlen, "penalties: no vocabulary"); pen_destroy(s); return 1; }
    s->n_vocab = init->vocab->n_vocab;
    s->count = calloc((size_t)s->n_vocab, sizeof *s->count);
    if (s->last_n > 0) s->ring = calloc((size_t)s->last_n, sizeof *s->ring);
    if (s->last_n > 0) s->stamp = calloc((size_t)s->n_vocab, sizeof *s->stamp);
    if (!s->count || (s->last_n > 0 && (!s->ring || !s->stamp))) { snprintf(err, errlen, "penalties: out of memory"); pen_destroy(s); return 1; }
    *state = s;
    return 0;
}

static void pen_accept(void *state, int32_t tok) {
    pen_state *s = state;
    if (s->last_n == 0 || tok < 0 || tok >= s->n_vocab) return;
    if (s->last_n > 0) {
        if (s->ring_len == s->last_n) {
            s->count[s->ring[s->ring_pos]]--; /* the oldest leaves the window */
            s->n_seen--;
        } else {
            s->ring_len++;
        }
        s->ring[s->ring_pos] = tok;
        s->ring_pos = (s->ring_pos + 1) % s->last_n;
    }
    s->count[tok]++;
    s->n_seen++;
}

static void pen_reset(void *state) {
    pen_state *s = state;
    memset(s->count, 0, (size_t)s->n_vocab * sizeof *s->count);
    s->ring_len = s->ring_pos = 0;
    s->n_seen = 0;
}

static void penalize(const pen_state *s, picolm_token_data *t) {
    const int32_t n = s->count[t->id];
    float l = t->logit;
    l = l > 0 ? l / s->repeat : l * s->repeat;
    l -= (float)n * s->freq + s->presence;
    t->logit = l;
}

/* The window's tokens only, when each sits at its id (the list in id
   order): 0 when it is not so (nothing changed). */
static int pen_apply_window(pen_state *s, picolm_candidates *c) {
    if (!s->ring || c->size != (size_t)s->n_vocab) return 0;
    for (int32_t r = 0; r < s->ring_len; r++)
        if (c->data[s->ring[r]].id != s->ring[r]) return 0;
    if (++s->call == 0) { /* the stamps wrapped: start them over */
        memset(s->stamp, 0, (size_t)s->n_vocab * sizeof *s->stamp);
        s->call = 1;
    }
    for (int32_t r = 0; r < s->ring_len; r++) {
        const int32_t id = s->ring[r];
        if (s->stamp[id] == s->call) continue; /* a repeat within the window: once */
        s->stamp[id] = s->call;
        penalize(s, &c->data[id]);
    }
    return 1;
}

/* no penalty, or no window: every list is left as it is */
static int pen_neutral(const void *state) {
    const pen_state *s = state;
    return s->last_n == 0 || (s->repeat == 1.0f && s->freq == 0.0f && s->presence == 0.0f);
}

static int pen_apply(void *state, picolm_candidates *c, char *err, size_t errlen) {
    (void)err; (void)errlen;
    pen_state *s = state;
    if (!s->n_seen || pen_neutral(s)) return 0;
    if (!pen_apply_window(s, c))
        for (size_t i = 0; i < c->size; i++) {
            const int32_t id = c->data[i].id;
            if (id >= 0 && id < s->n_vocab && s->count[id]) penalize(s, &c->data[i]);
        }
    c->sorted = 0;
    c->has_p = 0;
    return 0;
}

static const picolm_param_desc pen_params[] = {
    {"repeat_penalty", PICOLM_PARAM_FLOAT, "1", 0.01, 100, "repeat", "divide logits of recent tokens by this; 1 = off"},
    {"freq_penalty", PICOLM_PARAM_FLOAT, "0", -100, 100, "freq", "subtract this x count of each recent token; 0 = off"},
    {"presence_penalty", PICOLM_PARAM_FLOAT, "0", -100, 100, "presence", "subtract this from every recent token; 0 = off"},
    {"penalty_last_n", PICOLM_PARAM_INT, "64", -1, 1 << 24, "last", "recent tokens the penalties look at; -1 = whole context, 0 = none"},
    {0},
};

PICOLM_DEFINE_SAMPLER("penalties", "1.0", "repetition, frequency and presence penalties over the last tokens",
                      PICOLM_SAMPLER_PROCESS,
                      .params = pen_params, .create = pen_create, .destroy = pen_destroy,
                      .apply = pen_apply, .accept = pen_accept, .reset = pen_reset,
                      .neutral = pen_neutral);
