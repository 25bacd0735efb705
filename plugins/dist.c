/* dist: SELECT a token by drawing from the softmax of the current candidates'
   logits with a seeded PRNG (xoshiro256** seeded through splitmix64), so the
   same seed and the same logits give the same tokens on every machine. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "picolm/plugin.h"

typedef struct dist_state {
    uint64_t seed;
    uint64_t s[4];
} dist_state;

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t next_u64(dist_state *d) {
    uint64_t *s = d->s;
    const uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t; s[3] = rotl(s[3], 45);
    return r;
}

static void reseed(dist_state *d) {
    uint64_t x = d->seed;
    for (int i = 0; i < 4; i++) d->s[i] = splitmix64(&x);
}

static int dist_create(const picolm_sampler_init *init, void **state, char *err, size_t errlen) {
    dist_state *d = calloc(1, sizeof *d);
    if (!d) { snprintf(err, errlen, "dist: out of memory"); return 1; }
    d->seed = init->struct_size >= offsetof(picolm_sampler_init, seed) + sizeof(uint64_t) ? init->seed : 0;
    reseed(d);
    *state = d;
    return 0;
}

static void dist_destroy(void *state) { free(state); }

static int dist_apply(void *state, picolm_candidates *c, char *err, size_t errlen) {
    dist_state *d = state;
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
    /* 53 random bits -> u in [0, 1) */
    const double r = (double)(next_u64(d) >> 11) * 0x1.0p-53 * sum;
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

static void dist_reset(void *state) { reseed(state); }

static const picolm_sampler_vtable dist_vtable = {
    .struct_size = sizeof(picolm_sampler_vtable),
    .role = PICOLM_SAMPLER_SELECT,
    .flags = PICOLM_SAMPLER_SEEDED,
    .create = dist_create,
    .destroy = dist_destroy,
    .apply = dist_apply,
    .reset = dist_reset,
};

PICOLM_DEFINE_PLUGIN(PICOLM_KIND_SAMPLER, "dist", "1.0",
                     "draw a token from the softmax of the candidates (seeded, reproducible)", 0, 0, &dist_vtable);
