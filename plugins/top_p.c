/* top_p: PROCESS, nucleus sampling (picoLM's -k flag): keep the smallest set
   of best candidates whose probability mass reaches top_p, sorted best first.

   The exact method: the total mass S = sum e^(logit - max) in double, then
   chunks of growing size are quickselected from the rest and sorted until
   the running mass reaches p*S.  Large unsorted lists first try two faster
   ways that keep the same candidates in the same order (so dist draws the
   same token), each giving up when it cannot be sure.  Both start from the
   max (one pass) and a sample of every STRIDE-th candidate, which tells
   which way fits and how far down the nucleus probably reaches; then one
   pass sums the masses by a polynomial exp eight at a time (S within
   2.5e-6), apart above and below a limit, and copies the candidates above
   the limit:
   - quick (a peaked list; limit NEAR below the max): the copies, sorted
     and summed exactly, hold the nucleus when the max is peaked, and the
     cut is the exact method's when it is clear of S's uncertainty;
   - binned (a flat one; limit a logit past the sample's nucleus edge): the
     copies are counted in bins of 1/64 logit with each bin's masses by a
     quartic in double in the offset within the bin; the candidates of the best bins
     that surely hold the nucleus are radix-sorted by 16 bits of their
     offset from the max (then an insertion sort by the exact order) and
     summed exactly, the rest is known from the bins and the pass's sum
     below the limit.  A cut still too close to call gets a precise second
     pass over the rest (a quartic in double per candidate) before the
     exact method.
   apply_select (top_p then dist's softmax draw with a given uniform, one
   step) takes the same paths, but the binned one sorts only the bin of the
   cut and the bin the draw lands in (bins_select).
   See docs/perf.md for the figures. */
#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "picolm/plugin.h"
#include "sampler_common.h"

#define BPU 64.0f            /* bins per logit unit */
#define N_BINS 4096          /* 64 units below the max; the last bin holds everything lower */
#define FAST_MIN 4096        /* smaller lists take the exact method directly */
#define QUICK_ROOM 4096      /* the most near candidates the quick path sorts */
#define NEAR 6.0f            /* logit units below the max: the quick path's candidates */
#define STRIDE 61            /* the sample: every STRIDE-th candidate */
#define CBINS 256            /* the sample's bins: 1/4 logit below the max */
#define BLOCK 16             /* the first pass sums BLOCK x 8 masses in float, then in double */

typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));
typedef double v2d __attribute__((vector_size(16)));
#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wpsabi" /* the 8-wide helpers are always inlined: no call passes a v8f */
#endif
typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef double v4d __attribute__((vector_size(32)));
typedef int64_t v4l __attribute__((vector_size(32)));

/* Where the fast paths read the n logits: the candidate list d, or (l
   non-NULL, apply_logits) the model's logits times scale, ids 0..n-1. */
typedef struct src {
    const picolm_token_data *d;
    const float *l;
    float scale;
    size_t n;
} src;

/* Logit i, as the list {i, l[i] * scale} would hold it; direct is a
   constant in the always-inlined bodies. */
#define LOGIT(direct, x, i) ((direct) ? (x)->l[i] * (x)->scale : (x)->d[i].logit)
static inline picolm_token_data src_td(const src *x, int direct, size_t i) { return direct ? logit_td(x->l, x->scale, i) : x->d[i]; }

/* GCC's variable-index vector shuffle (vpermps under AVX2); clang has only
   constant-index shuffles, so its builds keep the per-lane stores. */
#if defined(__GNUC__) && !defined(__clang__)
#define PACKED 1
#define SHUFFLE(a, idx) __builtin_shuffle(a, idx)
#else
#define PACKED 0
#define SHUFFLE(a, idx) (a)
#endif

struct topp_state;
typedef size_t first_pass_fn(struct topp_state *s, const src *x, float max, float thr, int sparse, double *in, double *out);
static first_pass_fn first_pass_base, first_pass_base_direct;
typedef double head_masses_fn(const picolm_token_data *t, size_t m, float max, const double *scale, double *mass);
static head_masses_fn head_masses_base;
typedef int max_fn(const src *x, float *max);
static max_fn max_base;
typedef void bin_near_fn(struct topp_state *s, size_t m, float max);
static bin_near_fn bin_near_base;
#if defined(__x86_64__) && defined(__GNUC__)
static first_pass_fn first_pass_avx2, first_pass_avx2_direct;
static head_masses_fn head_masses_avx2;
static max_fn max_avx2;
static bin_near_fn bin_near_avx2;
#endif

typedef struct topp_state {
    double p;
    first_pass_fn *first_pass[2]; /* this CPU's build of the first pass: [1] reads logits directly */
    head_masses_fn *head_masses;  /* and of head_masses */
    max_fn *max_pass;             /* and of the max pass */
    bin_near_fn *bin_near;        /* and of bin_near */
    picolm_token_data *head; /* the quick path's candidates; the binned path's over a list */
    float *near_l;           /* the first pass's copies: logits */
    int32_t *near_id;        /* and ids (cap + 8 of each: eight stored at a time) */
    int32_t *bin_next;       /* bin_near: the copies of a bin, a list through this (cap) */
    int32_t bin_first[N_BINS]; /* from the last copy of each bin (-1: none) */
    uint64_t *tmp;           /* sort scratch */
    int32_t perm[256][8];    /* lanes of a keep mask, kept ones first (the AVX2 first pass) */
    double *mass;            /* the head's exact masses e^(logit - max) */
    size_t cap;
    double scale[N_BINS];    /* e^(-b / BPU) */
    double cw[CBINS];        /* e^(-(j + 1/2) / 4): a sample bin's typical mass */
    v2d acc[N_BINS];         /* bin_near: per bin {count, sum of e^z} */
    double bin_f[N_BINS];    /* apply_select: per head bin dist's float masses summed */
} topp_state;

static int topp_create(const picolm_sampler_init *init, void **state, char *err, size_t errlen) {
    double p = 0.9;
    const char *v = find_param(init, "top_p");
    if (v) {
        char *end;
        p = strtod(v, &end);
        while (isspace((unsigned char)*end)) end++;
        if (end == v || *end || !(p >= 0 && p <= 1)) { snprintf(err, errlen, "top_p: '%s' is not a number in [0, 1]", v); return 1; }
    }
    topp_state *s = calloc(1, sizeof *s);
    if (!s) { snprintf(err, errlen, "top_p: out of memory"); return 1; }
    s->p = p;
    for (int b = 0; b < N_BINS; b++) s->scale[b] = exp(-b / (double)BPU);
    for (int j = 0; j < CBINS; j++) s->cw[j] = exp(-(j + 0.5) / 4);
    s->first_pass[0] = first_pass_base;
    s->first_pass[1] = first_pass_base_direct;
    s->head_masses = head_masses_base;
    s->max_pass = max_base;
    s->bin_near = bin_near_base;
    for (int mask = 0; mask < 256; mask++)
        for (int j = 0, k = 0; j < 8; j++)
            if (mask >> j & 1) s->perm[mask][k++] = j;
#if defined(__x86_64__) && defined(__GNUC__)
    if (__builtin_cpu_supports("avx2")) {
        s->first_pass[0] = first_pass_avx2, s->first_pass[1] = first_pass_avx2_direct;
        s->head_masses = head_masses_avx2;
        s->max_pass = max_avx2;
        s->bin_near = bin_near_avx2;
    }
#endif
    *state = s;
    return 0;
}

static void topp_destroy(void *state) {
    topp_state *s = state;
    if (s) {
        free(s->head);
        free(s->near_l);
        free(s->near_id);
        free(s->bin_next);
        free(s->tmp);
        free(s->mass);
    }
    free(s);
}

/* The first k with mass[0..k) >= p * S for every S in [s_lo, s_hi]; 0 when
   the bounds leave it open.  The masses' sums are within MASS_ERR of the
   exact method's. */
#define MASS_ERR 1e-13
static size_t nucleus_cut(const double *mass, size_t m, double p, double s_lo, double s_hi) {
    double cum = 0;
    for (size_t j = 0; j < m; j++) {
        cum += mass[j];
        if (cum * (1 - MASS_ERR) >= p * s_hi) return j + 1;
        if (!(cum * (1 + MASS_ERR) < p * s_lo)) return 0;
    }
    return 0;
}

/* The head's masses e^(logit - max) in double, four at a time: with x =
   ((double)max - logit) * BPU, the mass is scale[b] e^(-y) for b the
   integer part of x (< N_BINS here) and y = (x - b) / BPU in [0, 1/64),
   e^(-y) by its degree-6 Taylor polynomial (remainder < 5e-17): within
   1e-15 of exp's (scale[b] within an ulp, the rest a few), so a sum of
   them within MASS_ERR of the exact method's.  Their sum.  Compiled twice
   like the first pass (four lanes: two SSE2 chains, or one AVX2 one). */
static inline __attribute__((always_inline)) double head_masses_body(const picolm_token_data *t, size_t m, float max,
                                                                    const double *scale, double *mass) {
    v4d sum = {0, 0, 0, 0};
    size_t j = 0;
    for (; j + 4 <= m; j += 4) {
        const v4d x = (v4d){(double)max - t[j].logit, (double)max - t[j + 1].logit, (double)max - t[j + 2].logit,
                            (double)max - t[j + 3].logit} * BPU;
        const v4i b = __builtin_convertvector(x, v4i);
        const v4d z = (__builtin_convertvector(b, v4d) - x) * (1 / (double)BPU); /* -y */
        v4d q = (v4d){0} + 1 / 720.0;
        q = q * z + 1 / 120.0;
        q = q * z + 1 / 24.0;
        q = q * z + 1 / 6.0;
        q = q * z + 0.5;
        q = q * z + 1;
        q = q * z + 1;
        const v4d e = q * (v4d){scale[b[0]], scale[b[1]], scale[b[2]], scale[b[3]]};
        memcpy(mass + j, &e, sizeof e);
        sum += e;
    }
    double total = (sum[0] + sum[1]) + (sum[2] + sum[3]);
    for (; j < m; j++) total += mass[j] = exp((double)t[j].logit - max);
    return total;
}

static double head_masses_base(const picolm_token_data *t, size_t m, float max, const double *scale, double *mass) {
    return head_masses_body(t, m, max, scale, mass);
}
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) static double head_masses_avx2(const picolm_token_data *t, size_t m, float max, const double *scale,
                                                                double *mass) {
    return head_masses_body(t, m, max, scale, mass);
}
#endif

static inline __attribute__((always_inline)) v8f select8(v8i m, v8f a, v8f b) { return (v8f)(((v8i)a & m) | ((v8i)b & ~m)); }

/* e^y for y <= 0, eight at a time: 2^n e^f with n the nearest integer to
   y/ln2, f = y - n ln2 (Cody-Waite) and a degree-6 Taylor polynomial for
   |f| <= 0.35 (remainder < 2e-7), evaluated in two halves to shorten the
   dependency chain; below -87 (and -inf) it gives e^-87. */
static inline __attribute__((always_inline)) v8f exp8(v8f y) {
    y = select8(y > -87.0f, y, (v8f){0} - 87.0f);
    const v8f r = y * 1.44269504f + 12582912.0f; /* round to nearest: the integer lands in the low bits */
    const v8f nf = r - 12582912.0f;
    const v8i ni = (v8i)r - (v8i)((v8f){0} + 12582912.0f);
    const v8f f = y - nf * 0.693359375f - nf * -2.12194440e-4f;
    const v8f f2 = f * f, f3 = f2 * f;
    const v8f a = 1.0f + f * (1.0f + f * 0.5f);
    const v8f b = 1 / 6.0f + f * (1 / 24.0f + f * (1 / 120.0f + f * (1 / 720.0f)));
    return (a + f3 * b) * (v8f)((ni + 127) << 23);
}

static inline __attribute__((always_inline)) v8f logits8(const src *x, int direct, size_t i) {
    if (direct) {
        v8f l;
        memcpy(&l, x->l + i, sizeof l);
        return l * x->scale;
    }
    const picolm_token_data *d = x->d + i;
    return (v8f){d[0].logit, d[1].logit, d[2].logit, d[3].logit, d[4].logit, d[5].logit, d[6].logit, d[7].logit};
}

/* The max logit; 1 when a logit is NaN.  Two chains of eight-lane selects
   (half the latency); compiled twice like the first pass. */
static inline __attribute__((always_inline)) int max_body(const src *x, int direct, float *max) {
    const size_t n = x->n;
    v8f vmax = (v8f){0} - INFINITY, vmax2 = vmax;
    v8i nan = {0};
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const v8f l = logits8(x, direct, i), l2 = logits8(x, direct, i + 8);
        nan |= (l != l) | (l2 != l2);
        vmax = select8(l > vmax, l, vmax);
        vmax2 = select8(l2 > vmax2, l2, vmax2);
    }
    vmax = select8(vmax2 > vmax, vmax2, vmax);
    float best = vmax[0];
    for (int j = 1; j < 8; j++) best = vmax[j] > best ? vmax[j] : best;
    int odd = 0;
    for (int j = 0; j < 8; j++) odd |= nan[j] != 0;
    for (; i < n; i++) {
        const float l = LOGIT(direct, x, i);
        odd |= l != l;
        if (l > best) best = l;
    }
    *max = best;
    return odd;
}

static int max_base(const src *x, float *max) { return x->l ? max_body(x, 1, max) : max_body(x, 0, max); }
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) static int max_avx2(const src *x, float *max) {
    return x->l ? max_body(x, 1, max) : max_body(x, 0, max);
}
#endif

/* From the sample, in 1/4-logit bins below the max: whether the quick path
   fits (few candidates within NEAR, whose mass likely holds the nucleus),
   and a first-pass copy limit in 1/64-logit bins: the estimated nucleus
   edge plus a logit of margin.  The max itself weighs 1. */
static int sample_pass(const topp_state *s, const src *xs, float max, float *thr) {
    const size_t n = xs->n;
    uint32_t cs[CBINS] = {0};
    size_t ns = 0;
    for (size_t i = 0; i < n; i += STRIDE, ns++) {
        const float x = (max - LOGIT(xs->l != NULL, xs, i)) * 4;
        cs[x < CBINS - 1 ? (int)x : CBINS - 1]++;
    }
    const double w = (double)n / ns;
    double near = 1, far = 0;
    size_t n_near = 0;
    for (int j = 0; j < CBINS - 1; j++) {
        if (j < 4 * NEAR) {
            near += w * cs[j] * s->cw[j];
            n_near += cs[j];
        } else {
            far += w * cs[j] * s->cw[j];
        }
    }
    const double total = near + far;
    double cum = 1;
    int j = 0;
    for (; j < CBINS - 1 && cum < s->p * total; j++) cum += w * cs[j] * s->cw[j];
    const float t = (float)(j + 4) * (BPU / 4);
    *thr = t < N_BINS - 1 ? t : N_BINS - 1;
    return n_near * w <= QUICK_ROOM / 4 && far <= (1 - s->p) * near;
}

/* better() for logits that are not NaN (the head's). */
static inline int ahead(const picolm_token_data *a, const picolm_token_data *b) {
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

/* Insertion sort, best first, of t[0..n) (no NaN) when it is nearly
   sorted: 0, or 1 (t still a permutation of its candidates) once it has
   moved more than budget candidates. */
static int settle(picolm_token_data *t, size_t n, size_t budget) {
    for (size_t i = 1; i < n; i++) {
        if (!ahead(&t[i], &t[i - 1])) continue;
        const picolm_token_data v = t[i];
        size_t j = i;
        do t[j] = t[j - 1];
        while (--j > 0 && ahead(&v, &t[j - 1]));
        t[j] = v;
        if ((budget -= budget < i - j ? budget : i - j) == 0) return 1;
    }
    return 0;
}

/* The m copies with x = (max - logit) * BPU < lim (the first pass's
   arithmetic: exactly the head's bins), best first, into t[0..m).  An LSD
   radix sort by two bytes of the key x * 2^sh (sh the most that keeps the
   key in 16 bits: x * 2^sh is exact and monotone in the logit, so equal
   logits share a key), then an insertion sort by the full order (logit,
   then id) settles the few candidates that share a key; a list whose
   shared keys hold many candidates out of id order (never the model's
   logits, which arrive in id order and stay so: the passes are stable) is
   heap-sorted instead. */
static void sort_head(topp_state *s, size_t n_near, float max, float lim, size_t m, picolm_token_data *t) {
    float k2 = 65536.0f;
    while (lim * k2 > 65536.0f) k2 *= 0.5f; /* 2^sh, lim <= N_BINS */
    uint32_t lo[256] = {0}, hi[257] = {0};
    float *nl = s->near_l;
    int32_t *ni = s->near_id;
    /* the head's copies moved to the front (in place, in order) without a
       branch (about half of the copies are kept), then both bytes counted */
    size_t j = 0;
    for (size_t i = 0; i < n_near; i++) {
        const float l = nl[i];
        nl[j] = l;
        ni[j] = ni[i];
        j += (max - l) * BPU < lim;
    }
    for (size_t i = 0; i < m * sizeof *t; i += 64) { /* the scatters' targets into cache, during the count */
        __builtin_prefetch((char *)s->tmp + i * 2 / 3, 1);
        __builtin_prefetch((char *)t + i, 1);
    }
    for (size_t i = 0; i < m; i++) {
        const uint32_t key = (uint32_t)((max - nl[i]) * BPU * k2);
        lo[key & 255]++;
        hi[(key >> 8) + 1]++;
    }
    for (uint32_t b = 0, sum = 0; b < 256; b++) {
        const uint32_t c = lo[b];
        lo[b] = sum;
        sum += c;
    }
    for (int b = 0; b < 256; b++) hi[b + 1] += hi[b];
    uint64_t *tmp = s->tmp; /* {id, logit} as 8 bytes: the key is computed again */
    for (size_t i = 0; i < m; i++) {
        const float l = nl[i];
        const uint32_t key = (uint32_t)((max - l) * BPU * k2);
        uint32_t bits;
        memcpy(&bits, &l, sizeof bits);
        tmp[lo[key & 255]++] = (uint64_t)bits << 32 | (uint32_t)ni[i];
    }
    for (size_t i = 0; i < m; i++) {
        const uint32_t bits = (uint32_t)(tmp[i] >> 32);
        float l;
        memcpy(&l, &bits, sizeof l);
        t[hi[(uint32_t)((max - l) * BPU * k2) >> 8]++] = (picolm_token_data){(int32_t)(uint32_t)tmp[i], l, 0.0f};
    }
    if (settle(t, m, 4 * m + 1024)) sort_best_first(t, m);
}

/* One pass, eight candidates at a time: the masses e^(logit - max) by
   exp8, summed apart for x = (max - logit) * 64 < thr and x >= thr (*in,
   *out), and the candidates with x < thr copied to s->near_l/near_id in
   list order, without a branch to mispredict: packed (AVX2 under GCC:
   see PACKED), the kept lanes are permuted to the front and all eight
   stored; else each is stored and kept by the count (unless sparse says
   that eight in a row are seldom kept).  How many were copied.  Compiled
   twice: for any x86-64 (or other CPU) and for AVX2. */
static inline __attribute__((always_inline)) size_t first_pass_body(topp_state *s, const src *x, int direct, int packed, float max,
                                                                   float thr, int sparse, double *in, double *out) {
    const size_t n = x->n;
    float *nl = s->near_l;
    int32_t *ni = s->near_id;
    v4d sum_in = {0, 0, 0, 0}, sum_out = sum_in;
    size_t i = 0, m = 0;
    while (i + 8 <= n) {
        /* a block of BLOCK x 8 masses summed in float per lane (see REL4), then in double */
        v8f fin = {0}, fout = {0};
        const size_t end = i + 8 * BLOCK < n ? i + 8 * BLOCK : n;
        for (; i + 8 <= end; i += 8) {
            v8f l;
            v8i id;
            if (direct) {
                memcpy(&l, x->l + i, sizeof l);
                l *= x->scale; /* logit_td's product */
                id = (v8i){0, 1, 2, 3, 4, 5, 6, 7} + (int32_t)i;
            } else {
                const picolm_token_data *d = x->d + i;
                l = (v8f){d[0].logit, d[1].logit, d[2].logit, d[3].logit, d[4].logit, d[5].logit, d[6].logit, d[7].logit};
                id = (v8i){d[0].id, d[1].id, d[2].id, d[3].id, d[4].id, d[5].id, d[6].id, d[7].id};
            }
            const v8f e = exp8(l - max);
            const v8i keep = (max - l) * BPU < thr;
            const v8f ei = (v8f)((v8i)e & keep), eo = (v8f)((v8i)e & ~keep);
            fin += ei;
            fout += eo;
            if (packed) {
                const v8i bit = keep & (v8i){1, 2, 4, 8, 16, 32, 64, 128};
                const v4i o = (v4i){bit[0], bit[1], bit[2], bit[3]} | (v4i){bit[4], bit[5], bit[6], bit[7]};
                const int mask = (o[0] | o[1]) | (o[2] | o[3]);
                v8i idx;
                memcpy(&idx, s->perm[mask], sizeof idx);
                const v8f pl = SHUFFLE(l, idx);
                const v8i pi = SHUFFLE(id, idx);
                memcpy(nl + m, &pl, sizeof pl);
                memcpy(ni + m, &pi, sizeof pi);
                m += (size_t)__builtin_popcount((unsigned)mask);
                continue;
            }
            if (sparse && !(keep[0] | keep[1] | keep[2] | keep[3] | keep[4] | keep[5] | keep[6] | keep[7])) continue;
            for (int j = 0; j < 8; j++) {
                nl[m] = l[j];
                ni[m] = id[j];
                m -= keep[j]; /* -1 when kept */
            }
        }
        sum_in += __builtin_convertvector((v4f){fin[0], fin[1], fin[2], fin[3]}, v4d) + __builtin_convertvector((v4f){fin[4], fin[5], fin[6], fin[7]}, v4d);
        sum_out += __builtin_convertvector((v4f){fout[0], fout[1], fout[2], fout[3]}, v4d) + __builtin_convertvector((v4f){fout[4], fout[5], fout[6], fout[7]}, v4d);
    }
    *in = sum_in[0] + sum_in[1] + sum_in[2] + sum_in[3];
    *out = sum_out[0] + sum_out[1] + sum_out[2] + sum_out[3];
    for (; i < n; i++) {
        const picolm_token_data t = src_td(x, direct, i);
        const float l = nl[m] = t.logit;
        ni[m] = t.id;
        const double e = exp8((v8f){0} + (l - max))[0];
        if ((max - l) * BPU < thr) *in += e, m++;
        else *out += e;
    }
    return m;
}

static size_t first_pass_base(topp_state *s, const src *x, float max, float thr, int sparse, double *in, double *out) {
    return first_pass_body(s, x, 0, 0, max, thr, sparse, in, out);
}
static size_t first_pass_base_direct(topp_state *s, const src *x, float max, float thr, int sparse, double *in, double *out) {
    return first_pass_body(s, x, 1, 0, max, thr, sparse, in, out);
}
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) static size_t first_pass_avx2(topp_state *s, const src *x, float max, float thr, int sparse, double *in,
                                                              double *out) {
    return first_pass_body(s, x, 0, PACKED, max, thr, sparse, in, out);
}
__attribute__((target("avx2"))) static size_t first_pass_avx2_direct(topp_state *s, const src *x, float max, float thr, int sparse,
                                                                     double *in, double *out) {
    return first_pass_body(s, x, 1, PACKED, max, thr, sparse, in, out);
}
#endif

/* A sum of masses by the first pass is within REL4 of exp's (exp8 2.6e-7,
   the float logit - max 6e-8 per unit of it up to 16, the float sum of a
   block's BLOCK masses per lane (BLOCK - 1) x 2^-24 = 9e-7: 2.1e-6), plus
   ABS4 per candidate (those more than 16 below the max, and those below
   e^-87 counted as e^-87). */
#define REL4 2.5e-6
#define ABS4 1e-12

/* One candidate's mass e^(logit - max) in double, as head_masses computes
   it (within 1e-15 of exp's). */
static inline double head_mass(const double *scale, float max, float l) {
    const double x = ((double)max - l) * BPU;
    const int b = (int)x;
    const double z = ((double)b - x) * (1 / (double)BPU);
    const double q = 1 + z * (1 + z * (0.5 + z * (1 / 6.0 + z * (1 / 24.0 + z * (1 / 120.0 + z * (1 / 720.0))))));
    return q * scale[b];
}

/* e^z by its degree-4 Taylor polynomial, for |z| <= 1/64 (and a hair):
   within 8e-12, plus a few roundings. */
#define QUARTIC(z) (1 + (z) * (1 + (z) * (0.5 + (z) * (1 / 6.0 + (z) * (1 / 24.0)))))

/* Bin the m copies (x = (max - logit) * BPU < N_BINS - 1 each, in float as
   the first pass computes it): per bin b its count and the sum of e^z,
   z = (b - x) / BPU with x in double (so scale[b] e^z is the mass
   e^(logit - max); |z| <= 1/64 and the float x's rounding), four at a time.
   Compiled twice like the first pass. */
static inline __attribute__((always_inline)) double bin_z(int b, float max, float l) {
    return ((double)b - ((double)max - l) * BPU) * (1 / (double)BPU);
}
static inline __attribute__((always_inline)) void bin_near_body(topp_state *s, size_t m, float max) {
    const float *l = s->near_l;
    v2d *acc = s->acc;
    int32_t *first = s->bin_first, *next = s->bin_next;
    memset(acc, 0, sizeof s->acc);
    memset(first, 0xff, sizeof s->bin_first);
    size_t i = 0;
    for (; i + 4 <= m; i += 4) {
        v4f v;
        memcpy(&v, l + i, sizeof v);
        const v4i b = __builtin_convertvector((max - v) * BPU, v4i);
        const v4d z = (__builtin_convertvector(b, v4d) - ((v4d){0} + (double)max - __builtin_convertvector(v, v4d)) * BPU) * (1 / (double)BPU);
        const v4d q = QUARTIC(z);
        for (int j = 0; j < 4; j++) {
            acc[b[j]] += (v2d){1, q[j]};
            next[i + j] = first[b[j]];
            first[b[j]] = (int32_t)(i + j);
        }
    }
    for (; i < m; i++) {
        const int b = (int)((max - l[i]) * BPU);
        const double z = bin_z(b, max, l[i]);
        acc[b] += (v2d){1, QUARTIC(z)};
        next[i] = first[b];
        first[b] = (int32_t)i;
    }
}

static void bin_near_base(topp_state *s, size_t m, float max) { bin_near_body(s, m, max); }
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) static void bin_near_avx2(topp_state *s, size_t m, float max) { bin_near_body(s, m, max); }
#endif

/* Bin b's mass, from bin_near. */
static inline double bin_mass(const topp_state *s, int b) { return s->scale[b] * s->acc[b][1]; }

/* The relative error of bin b's mass: QUARTIC's 8e-12 (and scale's ulp,
   the double logit - max's 2^-53 per logit unit), plus a rounding per
   addition. */
static inline double bin_err(const topp_state *s, int b) { return 1e-11 + s->acc[b][0] * 0x1.0p-52; }

/* [lo, hi]: bin b's real mass, its bin_near sum within bin_err. */
static inline void bin_range(const topp_state *s, int b, double *lo, double *hi) {
    const double v = bin_mass(s, b), e = bin_err(s, b);
    *lo = v * (1 - e), *hi = v * (1 + e);
}

/* The mass of the candidates with x >= lim (x computed as the first pass
   does), precisely: scale[b] e^(-f/64) from (double)max - logit, by a
   quartic (within 1e-11); [*lo, *hi]. */
static void tail_precise(const topp_state *s, const src *xs, float max, float lim, double *lo, double *hi) {
    const int direct = xs->l != NULL;
    v4d sum4 = {0, 0, 0, 0};
    v4l far4 = {0, 0, 0, 0};
    size_t i = 0;
    for (; i + 4 <= xs->n; i += 4) { /* the scalar loop's arithmetic, four lanes, without branches */
        v4f l;
        if (direct) {
            memcpy(&l, xs->l + i, sizeof l);
            l *= xs->scale;
        } else {
            l = (v4f){xs->d[i].logit, xs->d[i + 1].logit, xs->d[i + 2].logit, xs->d[i + 3].logit};
        }
        const v4l keep = __builtin_convertvector((max - l) * BPU >= lim, v4l);
        const v4d x = ((v4d){0} + (double)max - __builtin_convertvector(l, v4d)) * BPU;
        const v4l near = x < N_BINS - 1; /* -inf: x is +inf */
        const v4d xc = (v4d)((v4l)x & near);
        const v4i b = __builtin_convertvector(xc, v4i);
        const v4d y = (xc - __builtin_convertvector(b, v4d)) * (1 / (double)BPU);
        const v4d e = (v4d){s->scale[b[0]], s->scale[b[1]], s->scale[b[2]], s->scale[b[3]]} *
                      (1 + y * (-1 + y * (0.5 + y * (-1 / 6.0 + y * (1 / 24.0)))));
        sum4 += (v4d)((v4l)e & keep & near);
        far4 -= keep & ~near;
    }
    double sum = (sum4[0] + sum4[1]) + (sum4[2] + sum4[3]);
    size_t far = (size_t)(far4[0] + far4[1] + far4[2] + far4[3]);
    for (; i < xs->n; i++) {
        const float l = LOGIT(direct, xs, i);
        if ((max - l) * BPU < lim) continue;
        const double x = ((double)max - l) * BPU;
        if (!(x < N_BINS - 1)) { far++; continue; } /* -inf too */
        const int b = (int)x;
        const double y = (x - b) * (1 / (double)BPU);
        sum += s->scale[b] * (1 + y * (-1 + y * (0.5 + y * (-1 / 6.0 + y * (1 / 24.0)))));
    }
    *lo = sum * (1 - 1e-10);
    *hi = sum * (1 + 1e-10) + far * s->scale[N_BINS - 1];
}

/* The quick path: the first pass keeps the candidates within NEAR of the
   max.  When those hold the nucleus and the cut is clear of S's
   uncertainty, it is the exact method's.  The k kept (in s->head), or 0
   when undecided. */
static size_t topp_quick(topp_state *s, const src *x, float max) {
    const size_t n = x->n;
    double in, out;
    const size_t m = s->first_pass[x->l != NULL](s, x, max, NEAR * BPU, 1, &in, &out);
    if (m > QUICK_ROOM) return 0;
    picolm_token_data *h = s->head;
    for (size_t j = 0; j < m; j++) h[j] = (picolm_token_data){s->near_id[j], s->near_l[j], 0.0f};
    sort_best_first(h, m);
    const double slack = 1e-9, sum = in + out, s_lo = (sum * (1 - REL4) - n * ABS4) * (1 - slack);
    const double s_hi = (sum * (1 + REL4) + n * ABS4) * (1 + slack);
    double head = 0;
    for (size_t j = 0; j < m; j++) head += s->mass[j] = exp((double)h[j].logit - max);
    if (!(head >= s->p * s_hi)) return 0; /* the nucleus reaches further down */
    return nucleus_cut(s->mass, m, s->p, s_lo, s_hi);
}


/* Bounds of bin b's masses (b in the head): [lo, hi] of the real
   e^(logit - max) summed (bin_near's sum, within bin_err), [flo, fhi] of
   dist's float masses summed.  Dist's expf(logit - max) in float is within
   |logit - max| 2^-24 of the real exponent, and libm's expf within 2 ulp
   (glibc's and musl's: 0.502), so its masses are within g of the real
   ones; exact, their sum is bin_f (see bins_select). */
static inline void bin_bounds(const topp_state *s, int b, int exact, double *lo, double *hi, double *flo, double *fhi) {
    const double g = ((b + 1) / (double)BPU * 0x1.0p-24 + 0x1.0p-22) * 1.01;
    bin_range(s, b, lo, hi);
    *flo = exact ? s->bin_f[b] : *lo * (1 - g);
    *fhi = exact ? s->bin_f[b] : *hi * (1 + g);
}

/* bin_f over bins 0..last: dist's float masses, summed. */
static void bins_by_float(topp_state *s, float max, int last) {
    for (int b = 0; b <= last; b++) {
        double sum = 0;
        for (int32_t i = s->bin_first[b]; i >= 0; i = s->bin_next[i]) sum += expf(s->near_l[i] - max);
        s->bin_f[b] = sum;
    }
}

/* The copies in bin b (x = (max - logit) * BPU as the first pass computes
   it), best first, into t, each with dist's mass in p; how many. */
static size_t bin_sorted(const topp_state *s, float max, int b, picolm_token_data *t) {
    size_t k = 0;
    for (int32_t i = s->bin_first[b]; i >= 0; i = s->bin_next[i]) t[k++] = (picolm_token_data){s->near_id[i], s->near_l[i], 0.0f};
    sort_best_first(t, k);
    for (size_t j = 0; j < k; j++) t[j].p = expf(t[j].logit - max);
    return k;
}

/* One try of bins_select with bin_bounds(exact): 1 (the token in *pick),
   0 (dist's sums could be inexact: give up), -1 (the cut undecided), -2
   (the draw's bin or candidate undecided). */
static int select_try(topp_state *s, float max, int last, int exact, size_t m, double tail_lo, double tail_hi, double u,
                      int32_t *pick) {
    const double p = s->p, slack = 1e-9, err = (2.0 * m + N_BINS) * 0x1.0p-52 + 1e-14, fslack = 1e-12;
    double lo, hi, flo, fhi, head_lo = 0, head_hi = 0;
    for (int b = 0; b <= last; b++) {
        bin_bounds(s, b, exact, &lo, &hi, &flo, &fhi);
        head_lo += lo, head_hi += hi;
    }
    const double s_lo = (head_lo + tail_lo) * (1 - slack), s_hi = (head_hi + tail_hi) * (1 + slack);
    /* the cut: in bin c, after kc of its candidates; the bins before it are whole in the nucleus */
    double cum_lo = 0, cum_hi = 0, f_lo = 0, f_hi = 0;
    int c = 0;
    for (; c <= last; c++) {
        bin_bounds(s, c, exact, &lo, &hi, &flo, &fhi);
        if (!((cum_hi + hi) * (1 + err) < p * s_lo)) break;
        cum_lo += lo, cum_hi += hi, f_lo += flo, f_hi += fhi;
    }
    if (c > last) return -1;
    picolm_token_data *t = s->head;
    const size_t nc = bin_sorted(s, max, c, t);
    size_t kc = 0;
    for (size_t j = 0; j < nc && !kc; j++) {
        const double mj = head_mass(s->scale, max, t[j].logit);
        cum_lo += mj * (1 - 1e-15), cum_hi += mj * (1 + 1e-15);
        if (cum_lo * (1 - err) >= p * s_hi) kc = j + 1;
        else if (!(cum_hi * (1 + err) < p * s_lo)) return -1;
    }
    if (!kc) return -1;
    /* dist's sum S over the nucleus, and r = u S */
    double sc = 0;
    for (size_t j = 0; j < kc; j++) sc += t[j].p;
    const double S_lo = f_lo + sc, S_hi = f_hi + sc;
    int ex;
    const float e_min = t[kc - 1].p; /* the smallest: expf and the rounding of logit - max are monotone */
    frexpf(e_min, &ex);              /* e_min in [2^(ex-1), 2^ex): its ulp is 2^(ex-24), or 2^-149 below FLT_MIN */
    if (!(e_min > 0) || !(S_hi * (1 + fslack) < ldexp(1.0, (ex - 24 > -149 ? ex - 24 : -149) + 53))) return 0;
    const double r_lo = u * S_lo * (1 - fslack), r_hi = u * S_hi * (1 + fslack);
    /* the bin of the draw: the first whose running sum surely exceeds r, all before it surely not */
    double a_lo = 0, a_hi = 0;
    int b = 0;
    for (; b < c; b++) {
        bin_bounds(s, b, exact, &lo, &hi, &flo, &fhi);
        if ((a_hi + fhi) * (1 + fslack) <= r_lo) { a_lo += flo, a_hi += fhi; continue; }
        if (!((a_lo + flo) * (1 - fslack) > r_hi)) return -2;
        break;
    }
    size_t nb = kc;
    if (b < c) nb = bin_sorted(s, max, b, t); /* a whole bin, all in the nucleus */
    for (size_t j = 0; j < nb; j++) {
        a_lo += t[j].p, a_hi += t[j].p;
        if (a_lo * (1 - fslack) > r_hi) { *pick = t[j].id; return 1; }
        if (!(a_hi * (1 + fslack) <= r_lo)) return -2;
    }
    if (b < c) return -2;
    *pick = t[kc - 1].id; /* r at S, surely (rounding): dist takes the last */
    return 1;
}

/* apply_select's binned path: the nucleus cut and the softmax draw (the
   rule of picolm_sampler_vtable.draw, with u) decided from per-bin sums,
   sorting only the bin of the cut and the bin the draw lands in.  The head
   is bins 0..last of the n_near copies (m of them); [tail_lo, tail_hi]
   bounds the rest.
   - The cut: the exact method sums exp() in double best first; the bins'
     bounds and the walk of the cut's bin by head_mass differ from its
     running sums by at most (its additions + these) x 2^-53 of the sum,
     plus the masses' 1e-15 each: select_try's err.
   - The draw: dist's masses are floats e >= e_min > 0 (the nucleus' last)
     summed in double; each is a multiple of e_min's ulp, so every partial
     sum below 2^53 such ulps is exact, in any order: dist's running sum at
     a bin's end is the bin sums' total, and lies in the bounds summed.
     (When that fails, e_min <= 2^-29 S; the candidates after the cut
     weigh at most e_min each and hold more than (1 - top_p) S, so top_p >
     1 - N 2^-29 for N candidates: 0.9997 for N = 152k.  Then, or when the
     test fails for any reason, the caller's sorted path runs.)
   When the bounds leave the cut open, the tail's precise bounds follow;
   when they leave the draw open, dist's masses summed per bin.  The
   selected id in *pick (1), or 0 (still open, or dist's sums inexact: the
   caller sorts the head). */
static int bins_select(topp_state *s, const src *x, float max, int last, size_t m, double tail_lo, double tail_hi,
                       double u, int32_t *pick) {
    int exact = 0, tail_done = 0;
    for (;;) {
        const int r = select_try(s, max, last, exact, m, tail_lo, tail_hi, u, pick);
        if (r >= 0) return r;
        if (r == -1 && !tail_done) {
            tail_precise(s, x, max, (float)(last + 1), &tail_lo, &tail_hi);
            tail_done = 1;
        } else if (r == -2 && !exact) {
            bins_by_float(s, max, last);
            exact = 1;
        } else {
            return 0;
        }
    }
}

/* The binned path (see the top), after the max and the sample.  The k kept
   (in t: s->head, or the output list when the logits are read directly), or
   0 when undecided; given u (apply_select), 1 with the token drawn in *pick
   when bins_select decided. */
static size_t topp_bins(topp_state *s, const src *x, float max, float thr, picolm_token_data *t, const double *u, int32_t *pick) {
    const size_t n = x->n;
    const double p = s->p, slack = 1e-9;
    double in, out;
    size_t n_near = s->first_pass[x->l != NULL](s, x, max, thr, 0, &in, &out);
    double out_lo = out * (1 - REL4) - n * ABS4, out_hi = out * (1 + REL4) + n * ABS4; /* the mass outside near */
    s->bin_near(s, n_near, max);

    /* the head: the best bins whose lower bound surely reaches p * S */
    double s_hi = out_hi, lo, hi;
    for (int b = 0; b < (int)thr; b++) bin_range(s, b, &lo, &hi), s_hi += hi;
    int last = -1;
    double head_lo = 0;
    for (int b = 0; b < (int)thr && last < 0; b++) {
        bin_range(s, b, &lo, &hi);
        head_lo += lo;
        if (head_lo >= p * s_hi) last = b;
    }
    if (last < 0 && thr < N_BINS - 1) return topp_bins(s, x, max, N_BINS - 1, t, u, pick); /* the sample guessed too high: all bins */
    if (last < 0) return 0;
    size_t m = 0;
    for (int b = 0; b <= last; b++) m += (size_t)s->acc[b][0];
    const float lim = (float)(last + 1);
    double tail_lo = out_lo, tail_hi = out_hi; /* the mass outside the head */
    for (int b = last + 1; b < (int)thr; b++) {
        bin_range(s, b, &lo, &hi);
        tail_lo += lo, tail_hi += hi;
    }
    if (u && bins_select(s, x, max, last, m, tail_lo, tail_hi, *u, pick)) return 1;
    /* best first, then exact masses in that order */
    sort_head(s, n_near, max, lim, m, t);
    double head = 0;
    head = s->head_masses(t, m, max, s->scale, s->mass);
    size_t k = nucleus_cut(s->mass, m, p, (head + tail_lo) * (1 - slack), (head + tail_hi) * (1 + slack));
    if (!k) { /* too close to call: the rest's mass precisely */
        tail_precise(s, x, max, lim, &tail_lo, &tail_hi);
        k = nucleus_cut(s->mass, m, p, (head + tail_lo) * (1 - slack), (head + tail_hi) * (1 + slack));
    }
    return k;
}

/* The fast paths (see the top) over x, the result into c.  1 when one
   decided, 0 when the exact method must run (c untouched); given u
   (apply_select), 2 when the binned path drew c->selected itself. */
static int topp_fast(topp_state *s, const src *x, picolm_candidates *c, const double *u) {
    const size_t n = x->n;
    if (s->cap < n) {
        picolm_token_data *h = realloc(s->head, n * sizeof *h);
        uint64_t *t = realloc(s->tmp, n * sizeof *t);
        if (h) s->head = h;
        if (t) s->tmp = t;
        float *nl = realloc(s->near_l, (n + 8) * sizeof *nl);
        if (nl) s->near_l = nl;
        int32_t *ni = realloc(s->near_id, (n + 8) * sizeof *ni);
        if (ni) s->near_id = ni;
        int32_t *bn = realloc(s->bin_next, n * sizeof *bn);
        if (bn) s->bin_next = bn;
        double *m = realloc(s->mass, n * sizeof *m);
        if (m) s->mass = m;
        if (!h || !t || !nl || !ni || !m || !bn) return 0;
        s->cap = n;
    }
    float max, thr;
    if (s->max_pass(x, &max) || !(max > -INFINITY) || max == INFINITY) return 0; /* NaN, all -inf, +inf */
    size_t k = 0;
    if (sample_pass(s, x, max, &thr)) k = topp_quick(s, x, max);
    picolm_token_data *h = s->head;
    int32_t pick = -1;
    if (!k) k = topp_bins(s, x, max, thr, h = x->l ? c->data : s->head, u, &pick);
    if (!k) return 0;
    if (pick >= 0) {
        c->selected = pick;
        return 2;
    }
    if (h != c->data) memcpy(c->data, h, k * sizeof *c->data);
    c->size = k;
    c->sorted = 1;
    c->has_p = 0;
    return 1;
}

/* The exact method (see the top). */
static void topp_exact(const topp_state *st, picolm_candidates *c) {
    const double p = st->p;
    picolm_token_data *d = c->data;
    const size_t n = c->size;
    float max = -INFINITY;
    for (size_t i = 0; i < n; i++)
        if (d[i].logit > max) max = d[i].logit;
    if (!(max > -INFINITY)) return;
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += d[i].logit > -INFINITY ? exp((double)d[i].logit - max) : 0.0;
    const double target = p * sum;
    double cum = 0;
    size_t done = 0, chunk = c->sorted ? n : 64;
    while (done < n) {
        size_t end = done + chunk < n ? done + chunk : n;
        if (!c->sorted) {
            select_best(d + done, n - done, end - done);
            sort_best_first(d + done, end - done);
        }
        for (size_t i = done; i < end; i++) {
            cum += d[i].logit > -INFINITY ? exp((double)d[i].logit - max) : 0.0;
            if (cum >= target) {
                c->size = i + 1;
                c->sorted = 1;
                c->has_p = 0;
                return;
            }
        }
        done = end;
        chunk *= 2;
    }
    c->sorted = 1; /* rounding kept everything */
}

static int topp_apply(void *state, picolm_candidates *c, char *err, size_t errlen) {
    topp_state *st = state;
    if (!c->size) { snprintf(err, errlen, "top_p: no candidates left"); return 1; }
    if (st->p >= 1.0) return 0;
    const src x = {c->data, NULL, 0, c->size};
    if (!c->sorted && c->size >= FAST_MIN && topp_fast(st, &x, c, NULL)) return 0;
    topp_exact(st, c);
    return 0;
}

/* The list built from the logits, then the exact method. */
static int topp_exact_logits(const topp_state *st, const float *logits, float scale, picolm_candidates *c, char *err, size_t errlen) {
    if (!c->size) { snprintf(err, errlen, "top_p: no candidates left"); return 1; }
    fill_list(c, logits, scale);
    if (st->p < 1.0) topp_exact(st, c);
    return 0;
}

/* apply() without the list built: the fast paths read the logits; the
   list is built only for the exact method. */
static int topp_apply_logits(void *state, const float *logits, float scale, picolm_candidates *c, char *err, size_t errlen) {
    topp_state *st = state;
    const src x = {NULL, logits, scale, c->size};
    if (st->p < 1.0 && c->size >= FAST_MIN && topp_fast(st, &x, c, NULL)) return 0;
    return topp_exact_logits(st, logits, scale, c, err, errlen);
}

/* apply_logits() then the softmax rule with u; on a large list the binned
   path draws from per-bin sums instead of sorting the whole nucleus. */
static int topp_apply_select(void *state, const float *logits, float scale, double u, picolm_candidates *c, char *err, size_t errlen) {
    topp_state *st = state;
    const src x = {NULL, logits, scale, c->size};
    const int r = st->p < 1.0 && c->size >= FAST_MIN ? topp_fast(st, &x, c, &u) : 0;
    if (r == 2) return 0;
    if (!r && topp_exact_logits(st, logits, scale, c, err, errlen)) return 1;
    return softmax_pick(c, u, err, errlen) ? 2 : 0;
}

static const picolm_param_desc topp_params[] = {
    {"top_p", PICOLM_PARAM_FLOAT, "0.9", 0, 1, NULL, "nucleus sampling probability mass; 1 = off"},
    {0},
};

static int topp_neutral(const void *state) { return ((const topp_state *)state)->p >= 1.0; }

PICOLM_DEFINE_SAMPLER("top_p", "1.0", "nucleus: keep the most likely tokens up to probability mass p (picoLM's -k)",
                      PICOLM_SAMPLER_PROCESS,
                      .params = topp_params, .create = topp_create, .destroy = topp_destroy,
                      .apply = topp_apply, .neutral = topp_neutral,
                      .apply_logits = topp_apply_logits, .apply_select = topp_apply_select);
