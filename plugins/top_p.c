/* top_p: PROCESS, nucleus sampling (picoLM's -k flag): keep the smallest set
   of best candidates whose probability mass reaches top_p, sorted best first.

   The exact method: the total mass S = sum e^(logit - max) in double, then
   chunks of growing size are quickselected from the rest and sorted until
   the running mass reaches p*S.  Large unsorted lists first try two faster
   ways that keep the same candidates in the same order (so dist draws the
   same token), each giving up when it cannot be sure:
   - quick: one pass sums the masses with a 4-wide polynomial exp (S within
     3e-5) and copies the candidates near the max (at most QUICK_ROOM: a
     flat top leaves early); those, sorted and summed exactly, hold the
     nucleus when the max is peaked, and the cut is the exact method's when
     it is clear of S's uncertainty;
   - binned: one pass counts the candidates in bins of 1/64 logit and sums
     each bin's masses by exp4 (within DELTA); the best bins that surely
     hold the nucleus are bucket-sorted (a crowded bin by 6 more bits) and
     summed exactly, the rest is known from its bins' sums; a cut still
     open gets a second pass that bounds the rest with second-order terms
     per bin.
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
#define N_BINS 4096          /* 64 units below the anchor; the last bin holds everything lower */
#define FAST_MIN 4096        /* smaller lists take the exact method directly */
#define QUICK_ROOM 4096     /* near candidates the quick path copies before it leaves a flat top to the bins */
#define NEAR 6.0f            /* logit units below the max: the candidates a pass copies as it goes */

typedef struct topp_state {
    double p;
    picolm_token_data *head; /* the best bins' candidates, grouped by bin */
    picolm_token_data *near; /* first pass: the candidates within NEAR of the best so far */
    double *mass;            /* their exact masses e^(logit - max) */
    size_t cap;
    uint32_t cnt[N_BINS], pos[N_BINS];
    double f1[N_BINS], f2[N_BINS]; /* second pass: sums of f, f^2 (f = position in the bin, [0, 1)) */
    double scale[N_BINS];    /* e^(-b / BPU) */
    double m4[N_BINS];       /* first pass: each bin's mass e^(logit - ref) by exp4 */
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
    *state = s;
    return 0;
}

static void topp_destroy(void *state) {
    topp_state *s = state;
    if (s) {
        free(s->head);
        free(s->near);
        free(s->mass);
    }
    free(s);
}

/* The first k with mass[0..k) >= p * S for every S in [s_lo, s_hi]; 0 when
   the bounds leave it open. */
static size_t nucleus_cut(const double *mass, size_t m, double p, double s_lo, double s_hi) {
    double cum = 0;
    for (size_t j = 0; j < m; j++) {
        cum += mass[j];
        if (cum >= p * s_hi) return j + 1;
        if (!(cum < p * s_lo)) return 0;
    }
    return 0;
}

/* Second pass: tighter bounds of the mass outside the head (x >= lim),
   from 1 - y + y^2/2 - y^3/6 <= e^-y <= 1 - y + y^2/2 for y = f/64 in
   [0, 1/64), x taken exactly in double. */
static void tail_bounds(topp_state *s, const picolm_token_data *d, size_t n, float anchor, float lim, double s0, double *lo, double *hi) {
    memset(s->cnt, 0, sizeof s->cnt);
    memset(s->f1, 0, sizeof s->f1);
    memset(s->f2, 0, sizeof s->f2);
    for (size_t i = 0; i < n; i++) {
        if ((anchor - d[i].logit) * BPU < lim) continue; /* in the head: the test of the first pass */
        const double x = ((double)anchor - d[i].logit) * BPU;
        const int b = x < N_BINS - 1 ? (int)x : N_BINS - 1;
        const double f = x < N_BINS - 1 ? x - b : 0;
        s->cnt[b]++;
        s->f1[b] += f;
        s->f2[b] += f * f;
    }
    const double u = 1.0 / BPU;
    *lo = *hi = 0;
    for (int b = 0; b < N_BINS - 1; b++) {
        const double q = s->cnt[b] - s->f1[b] * u + s->f2[b] * (0.5 * u * u);
        *lo += s->scale[b] * (q - s->cnt[b] * (u * u * u / 6));
        *hi += s->scale[b] * q;
    }
    *lo *= s0;
    *hi = (*hi + s->scale[N_BINS - 1] * s->cnt[N_BINS - 1]) * s0;
}

typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));
typedef float v2f __attribute__((vector_size(8)));
typedef double v2d __attribute__((vector_size(16)));

/* e^y for y in [-87, 87] (clamped), four at a time: 2^n e^f with n the
   nearest integer to y/ln2, f = y - n ln2 (Cody-Waite) and a degree-6 Taylor
   polynomial for |f| <= 0.35 (remainder < 2e-7); a few float roundings
   more, so within 2e-6 of e^y. */
static inline v4f exp4(v4f y) {
    const v4f lo = {-87, -87, -87, -87}, hi = {87, 87, 87, 87}, magic = {12582912.0f, 12582912.0f, 12582912.0f, 12582912.0f};
    v4i m = y > lo;
    y = (v4f)(((v4i)y & m) | ((v4i)lo & ~m)); /* also NaN -> -87 */
    m = y < hi;
    y = (v4f)(((v4i)y & m) | ((v4i)hi & ~m));
    const v4f r = y * 1.44269504f + magic;    /* round to nearest: the integer lands in the low bits */
    const v4f nf = r - magic;
    const v4i ni = (v4i)r - (v4i)magic;
    const v4f f = y - nf * 0.693359375f - nf * -2.12194440e-4f;
    const v4f q = 1.0f + f * (1.0f + f * (0.5f + f * (1 / 6.0f + f * (1 / 24.0f + f * (1 / 120.0f + f * (1 / 720.0f))))));
    return q * (v4f)((ni + 127) << 23);
}

/* e^x of four logits relative to max (x <= 0) is within 2.6e-7 of exp's
   (measured over every 1.3e-6 of [-87, 87]); DELTA bounds a sum of them. A
   mass below e^-87 comes out as e^-87: TINY per candidate covers it. */
#define DELTA 1e-6
#define TINY 1.7e-38

/* Four candidates at a time (GCC/clang vector extensions: SSE2, NEON, or
   plain code): count each in its bin, x < 0 and NaN in bin 0; copy those
   within NEAR of their lane's best so far (a superset of those within NEAR
   of the best) to s->near; the best logit to *max; each bin's masses
   e^(logit - ref) by exp4 to s->m4.  1 when a logit is NaN. */
static int first_pass(topp_state *s, const picolm_token_data *d, size_t n, float anchor, float ref, float *max, size_t *n_near) {
    const v4f top = {N_BINS - 1, N_BINS - 1, N_BINS - 1, N_BINS - 1};
    v4f vmax = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
    v4i nan = {0, 0, 0, 0};
    uint32_t *cnt = s->cnt;
    double *m4 = s->m4;
    picolm_token_data *near = s->near;
    size_t i = 0, m = 0;
    for (; i + 4 <= n; i += 4) {
        const v4f l = {d[i].logit, d[i + 1].logit, d[i + 2].logit, d[i + 3].logit};
        v4f x = (anchor - l) * BPU;
        x = (v4f)((v4i)x & (x > 0));                             /* x < 0, NaN -> 0 */
        const v4i low = x < top;
        x = (v4f)(((v4i)x & low) | ((v4i)top & ~low));
        const v4i b = __builtin_convertvector(x, v4i);
        cnt[b[0]]++;
        cnt[b[1]]++;
        cnt[b[2]]++;
        cnt[b[3]]++;
        const v4f e = exp4(l - ref);
        m4[b[0]] += e[0];
        m4[b[1]] += e[1];
        m4[b[2]] += e[2];
        m4[b[3]] += e[3];
        nan |= l != l;
        const v4i up = l > vmax;
        vmax = (v4f)(((v4i)l & up) | ((v4i)vmax & ~up));
        const v4i keep = l >= vmax - NEAR;
        if (keep[0] | keep[1] | keep[2] | keep[3])
            for (int j = 0; j < 4; j++)
                if (keep[j]) near[m++] = d[i + j];
    }
    float best = vmax[0];
    for (int j = 1; j < 4; j++) best = vmax[j] > best ? vmax[j] : best;
    int odd = (nan[0] | nan[1] | nan[2] | nan[3]) != 0;
    for (; i < n; i++) {
        const float l = d[i].logit, x = (anchor - l) * BPU;
        const float xc = x > 0 ? x : 0;
        const int b = (int)(xc < N_BINS - 1 ? xc : N_BINS - 1);
        cnt[b]++;
        m4[b] += exp4((v4f){l - ref, -87, -87, -87})[0];
        odd |= l != l;
        if (l > best) best = l;
        if (l >= best - NEAR) near[m++] = d[i];
    }
    *max = best;
    *n_near = m;
    return odd;
}

/* Copy the head (x < lim, x computed as the first pass does) into its bins'
   slots, best bins first. */
static void scatter_head(topp_state *s, const picolm_token_data *d, size_t n, float anchor, float lim) {
    picolm_token_data *t = s->head;
    const v4f vlim = {lim, lim, lim, lim};
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const v4f l = {d[i].logit, d[i + 1].logit, d[i + 2].logit, d[i + 3].logit};
        const v4i head = (anchor - l) * BPU < vlim;
        if (head[0] | head[1] | head[2] | head[3])
            for (int j = 0; j < 4; j++)
                if (head[j]) t[s->pos[(int)((anchor - l[j]) * BPU)]++] = d[i + j];
    }
    for (; i < n; i++) {
        const float x = (anchor - d[i].logit) * BPU;
        if (x < lim) t[s->pos[(int)x]++] = d[i];
    }
}

/* Keep the candidates >= lim of t[0..m) (in order); how many. */
static size_t drop_far(picolm_token_data *t, size_t m, float lim) {
    size_t k = 0;
    for (size_t j = 0; j < m; j++)
        if (t[j].logit >= lim) t[k++] = t[j];
    return k;
}

/* The quick path: one pass sums the masses with exp4 (S within 3e-5), finds
   the max and copies the candidates within NEAR of the max so far (a
   superset of those within NEAR of the max).  When those hold the nucleus
   and the cut is clear of S's uncertainty, it is the exact method's.  The
   k kept (in s->head), or 0 when undecided. */
static size_t topp_quick(topp_state *s, const picolm_candidates *c, float ref) {
    const picolm_token_data *d = c->data;
    const size_t n = c->size, n4 = n - n % 4, room = n < QUICK_ROOM ? n : QUICK_ROOM;
    float max = -INFINITY;
    v4f vmax = {max, max, max, max}, vkeep = vmax;
    v4i nan = {0, 0, 0, 0};
    double sum = 0;
    picolm_token_data *near = s->near;
    size_t m = 0;
    for (size_t i = 0; i < n4;) {
        v4f acc = {0, 0, 0, 0}; /* float partial sums of 64 candidates at most, then double */
        for (const size_t end = i + 64 <= n4 ? i + 64 : n4; i < end; i += 4) {
            const v4f l = {d[i].logit, d[i + 1].logit, d[i + 2].logit, d[i + 3].logit};
            acc += exp4(l - ref);
            nan |= l != l;
            const v4i keep = l >= vkeep;
            if (!(keep[0] | keep[1] | keep[2] | keep[3])) continue;
            for (int j = 0; j < 4; j++) {
                if (!keep[j]) continue;
                if (m == room && (m = drop_far(near, m, max - NEAR)) > room / 2) return 0; /* a flat top: to the bins, early */
                near[m++] = d[i + j];
                if (l[j] > max) max = l[j];
            }
            vmax = (v4f){max, max, max, max};
            vkeep = vmax - NEAR;
        }
        sum += (double)acc[0] + acc[1] + acc[2] + acc[3];
    }
    int odd = (nan[0] | nan[1] | nan[2] | nan[3]) != 0;
    for (size_t i = n4; i < n; i++) {
        const float l = d[i].logit;
        sum += exp4((v4f){l - ref, -87, -87, -87})[0];
        odd |= l != l;
        if (l > max) max = l;
        if (l >= max - NEAR) {
            if (m == room && (m = drop_far(near, m, max - NEAR)) > room / 2) return 0;
            near[m++] = d[i];
        }
    }
    /* exp4 clamps at +-87: candidates far above the sample were not summed right */
    if (odd || !(max - ref < 80)) return 0;
    const float lim = max - NEAR;
    size_t h = 0;
    for (size_t j = 0; j < m; j++)
        if (near[j].logit >= lim) s->head[h++] = near[j];
    sort_best_first(s->head, h);
    const double rel = 3e-5, slack = 1e-9, s_mid = sum * exp((double)ref - max);
    const double s_lo = s_mid * (1 - rel) * (1 - slack), s_hi = s_mid * (1 + rel) * (1 + slack);
    double head = 0;
    for (size_t j = 0; j < h; j++) head += s->mass[j] = exp((double)s->head[j].logit - max);
    if (!(head >= s->p * s_hi)) return 0; /* the nucleus reaches further down */
    return nucleus_cut(s->mass, h, s->p, s_lo, s_hi);
}

static void insertion_sort(picolm_token_data *t, size_t n) {
    for (size_t i = 1; i < n; i++) {
        const picolm_token_data v = t[i];
        size_t j = i;
        for (; j > 0 && (t[j - 1].logit < v.logit || (t[j - 1].logit == v.logit && t[j - 1].id > v.id)); j--) t[j] = t[j - 1];
        t[j] = v;
    }
}

/* Best first, bin b's n candidates (no NaN): a crowded bin is first split
   by the next 6 bits of x (sub = floor((anchor - logit) * 64 * SUB) less the
   bin's start, clamped: monotone in the logit, so equal logits share a
   sub-bin), through tmp; then insertion sort of each short run (a heap
   sort of a long one: many equal logits). */
#define SUB 64
static void sort_bin(picolm_token_data *t, size_t n, float anchor, int b, picolm_token_data *tmp) {
    if (n <= 32) {
        insertion_sort(t, n);
        return;
    }
    uint32_t pos[SUB + 1] = {0};
    for (size_t i = 0; i < n; i++) {
        const int k = (int)((anchor - t[i].logit) * (BPU * SUB)) - b * SUB;
        pos[(k < 0 ? 0 : k > SUB - 1 ? SUB - 1 : k) + 1]++;
    }
    for (int k = 0; k < SUB; k++) pos[k + 1] += pos[k];
    for (size_t i = 0; i < n; i++) {
        const int k = (int)((anchor - t[i].logit) * (BPU * SUB)) - b * SUB;
        tmp[pos[k < 0 ? 0 : k > SUB - 1 ? SUB - 1 : k]++] = t[i];
    }
    for (int k = 0, start = 0; k < SUB; start = (int)pos[k++]) {
        const size_t len = pos[k] - (uint32_t)start;
        if (len > 64) sort_best_first(tmp + start, len); /* equal logits in bulk */
        else insertion_sort(tmp + start, len);
    }
    memcpy(t, tmp, n * sizeof *t);
}

/* The fast path (see the top).  1 when it decided c, 0 when the exact
   method must run (c untouched). */
static int topp_binned(topp_state *s, picolm_candidates *c) {
    picolm_token_data *d = c->data;
    const size_t n = c->size;
    const double p = s->p;
    if (s->cap < n) {
        picolm_token_data *h = realloc(s->head, n * sizeof *h), *nr = realloc(s->near, n * sizeof *nr);
        if (h) s->head = h;
        if (nr) s->near = nr;
        double *m = realloc(s->mass, n * sizeof *m);
        if (m) s->mass = m;
        if (!h || !nr || !m) return 0;
        s->cap = n;
    }
    float sample = -INFINITY;
    for (size_t i = 0; i < n; i += 61)
        if (d[i].logit > sample) sample = d[i].logit;
    if (!(sample > -INFINITY) || sample == INFINITY) return 0;
    size_t k = topp_quick(s, c, sample);
    if (k) {
        memcpy(d, s->head, k * sizeof *d);
        c->size = k;
        c->sorted = 1;
        c->has_p = 0;
        return 1;
    }
    const float anchor = sample + 32;

    /* first pass: x = (anchor - logit) * 64, bin floor(x) */
    memset(s->cnt, 0, sizeof s->cnt);
    memset(s->m4, 0, sizeof s->m4);
    float max;
    size_t n_near;
    if (first_pass(s, d, n, anchor, sample, &max, &n_near)) return 0;
    if (!(max <= anchor) || max == INFINITY) return 0; /* a candidate above the anchor: x < 0 was binned wrong */

    /* a bin's candidates each weigh e^(logit - max) in s0 * [e^(-(b+1)/64), e^(-b/64)],
       s0 = e^(anchor - max); rel covers the float rounding of x (<= 2^-24 of 4096 bins) */
    const double s0 = exp((double)anchor - max), rel = 1e-5, slack = 1e-9;
    const double lo_f = exp(-1.0 / BPU) * (1 - rel), hi_f = 1 + rel;
    double s_lo = 0, s_hi = 0;
    for (int b = 0; b < N_BINS - 1; b++) {
        s_lo += s->scale[b] * s->cnt[b];
    }
    s_hi = s_lo * s0 * hi_f + s->scale[N_BINS - 1] * s->cnt[N_BINS - 1] * s0;
    s_lo *= s0 * lo_f;
    /* the exp4 sum is far tighter, unless exp4 clamped masses far above the sample */
    double s4_lo = 0, s4_hi = INFINITY, sum4 = 0;
    const double sc = exp((double)sample - max);
    const int have4 = max - sample < 80;
    for (int b = 0; b < N_BINS; b++) sum4 += s->m4[b];
    if (have4) {
        s4_lo = (sum4 * (1 - DELTA) - n * TINY) * sc;
        s4_hi = (sum4 * (1 + DELTA) + n * TINY) * sc;
    }
    const double bins_lo = s_lo, bins_hi = s_hi;
    if (s4_lo > s_lo) s_lo = s4_lo;
    if (s4_hi < s_hi) s_hi = s4_hi;

    /* the head: the best bins whose lower bound surely reaches p * S */
    int last = -1;
    double head_lo = 0;
    for (int b = 0; b < N_BINS - 1 && last < 0; b++) {
        head_lo += s->scale[b] * s->cnt[b] * s0 * lo_f;
        if (head_lo >= p * s_hi) last = b;
    }
    if (last < 0) return 0;
    size_t m = 0;
    double head_hi = 0;
    for (int b = 0; b <= last; b++) {
        s->pos[b] = (uint32_t)m;
        m += s->cnt[b];
        head_hi += s->scale[b] * s->cnt[b] * s0 * hi_f;
    }
    const float lim = (float)(last + 1);
    picolm_token_data *t = s->head;
    /* every candidate >= max - NEAR was kept; the head needs them down to about
       anchor - lim/64 (one bin of margin for rounding) */
    const int near_enough = ((double)anchor - max + NEAR) * BPU - 1 >= lim;
    if (near_enough) {
        for (size_t i = 0; i < n_near; i++) {
            const float x = (anchor - s->near[i].logit) * BPU; /* the same arithmetic as the first pass */
            if (x < lim) t[s->pos[(int)x]++] = s->near[i];
        }
    } else {
        scatter_head(s, d, n, anchor, lim);
    }
    double tail = -1; /* the mass outside the head (bins after last) by exp4, relative to max */
    if (have4) {
        tail = 0;
        for (int b = last + 1; b < N_BINS; b++) tail += s->m4[b];
        tail *= sc;
    }
    /* best first within each bin, then exact masses in that order */
    size_t start = 0;
    double head = 0;
    for (int b = 0; b <= last; b++) {
        sort_bin(t + start, s->cnt[b], anchor, b, s->near);
        start += s->cnt[b];
    }
    for (size_t j = 0; j < m; j++) {
        s->mass[j] = exp((double)t[j].logit - max);
        head += s->mass[j];
    }
    /* S = head + the rest: the tightest of the bounds at hand */
    double lo = head + (bins_lo - head_lo), hi = head + (bins_hi - head_hi);
    if (s_lo > lo) lo = s_lo;
    if (s_hi < hi) hi = s_hi;
    if (tail >= 0) {
        if (head + tail * (1 - DELTA) - n * TINY * sc > lo) lo = head + tail * (1 - DELTA) - n * TINY * sc;
        if (head + tail * (1 + DELTA) + n * TINY * sc < hi) hi = head + tail * (1 + DELTA) + n * TINY * sc;
    }
    k = nucleus_cut(s->mass, m, p, lo * (1 - slack), hi * (1 + slack));
    if (!k) {
        double tail_lo, tail_hi;
        tail_bounds(s, d, n, anchor, lim, s0, &tail_lo, &tail_hi);
        if (head + tail_lo > lo) lo = head + tail_lo;
        if (head + tail_hi < hi) hi = head + tail_hi;
        k = nucleus_cut(s->mass, m, p, lo * (1 - slack), hi * (1 + slack));
    }
    if (!k) return 0;
    memcpy(d, t, k * sizeof *d);
    c->size = k;
    c->sorted = 1;
    c->has_p = 0;
    return 1;
}

static int topp_apply(void *state, picolm_candidates *c, char *err, size_t errlen) {
    topp_state *st = state;
    const double p = st->p;
    if (!c->size) { snprintf(err, errlen, "top_p: no candidates left"); return 1; }
    if (p >= 1.0) return 0;
    if (!c->sorted && c->size >= FAST_MIN && topp_binned(st, c)) return 0;
    picolm_token_data *d = c->data;
    const size_t n = c->size;
    float max = -INFINITY;
    for (size_t i = 0; i < n; i++)
        if (d[i].logit > max) max = d[i].logit;
    if (!(max > -INFINITY)) return 0;
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
                return 0;
            }
        }
        done = end;
        chunk *= 2;
    }
    c->sorted = 1; /* rounding kept everything */
    return 0;
}

static const picolm_param_desc topp_params[] = {
    {"top_p", PICOLM_PARAM_FLOAT, "0.9", 0, 1, NULL, "nucleus sampling probability mass; 1 = off"},
    {0},
};

static int topp_neutral(const void *state) { return ((const topp_state *)state)->p >= 1.0; }

static const picolm_sampler_vtable topp_vtable = {
    .struct_size = sizeof(picolm_sampler_vtable),
    .role = PICOLM_SAMPLER_PROCESS,
    .params = topp_params,
    .create = topp_create,
    .destroy = topp_destroy,
    .apply = topp_apply,
    .neutral = topp_neutral,
};

PICOLM_DEFINE_PLUGIN(PICOLM_KIND_SAMPLER, "top_p", "1.0",
                     "nucleus: keep the most likely tokens up to probability mass p (picoLM's -k)", 0, 0, &topp_vtable);
