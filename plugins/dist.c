/* dist: SELECT a token by drawing from the softmax of the current candidates'
   logits with a seeded PRNG (xoshiro256** seeded through splitmix64), so the
   same seed and the same logits give the same tokens on every machine. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "picolm/plugin.h"
#include "sampler_common.h"

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

/* 53 random bits -> u in [0, 1); consume: advance past them */
static double dist_draw(void *state, int consume) {
    dist_state *d = state, peek = *d;
    return (double)(next_u64(consume ? d : &peek) >> 11) * 0x1.0p-53;
}

/* a failed draw leaves the generator where it was */
static int dist_apply(void *state, picolm_candidates *c, char *err, size_t errlen) {
    if (softmax_pick(c, dist_draw(state, 0), err, errlen)) return 1;
    dist_draw(state, 1);
    return 0;
}

static void dist_reset(void *state) { reseed(state); }

PICOLM_DEFINE_SAMPLER("dist", "1.0", "draw a token from the softmax of the candidates (seeded, reproducible)",
                      PICOLM_SAMPLER_SELECT,
                      .flags = PICOLM_SAMPLER_SEEDED, .create = dist_create,
                      .destroy = dist_destroy, .apply = dist_apply, .reset = dist_reset,
                      .draw = dist_draw);
