/* Sampler plugins against plain references, and the core's sampling chain. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "cli.h"
#include "config.h"
#include "plugins.h"
#include "sampling.h"
#include "util.h"

#define PINNED_HASH 0x71e197565a576e28ull /* test_chain_large on 82ad4c7 */

static const char *NAMES[] = {"greedy", "dist", "temperature", "top_k", "top_p", "min_p", "penalties", "json", "json_schema"};
#define N_NAMES (int)(sizeof NAMES / sizeof NAMES[0])

static pl_registry reg;

static int load_samplers(void) {
    build_registry(&reg);
    int ok = 1;
    for (int i = 0; i < N_NAMES; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/plugins/sampler-%s.so", build_dir(), NAMES[i]);
        int idx = registry_load_file(&reg, path);
        int good = idx >= 0 && reg.items[idx].ok;
        CHECK(good, "load %s (%s)", path, idx >= 0 ? reg.items[idx].why : "?");
        ok &= good;
    }
    return ok;
}

static const picolm_sampler_vtable *vt_of(const char *name) {
    const pl_plugin *p = registry_find(&reg, PICOLM_KIND_SAMPLER, name);
    return p ? p->desc->vtable : NULL;
}

/* ---- a tiny vocabulary (the processors only need n_vocab) ---- */
#define NV 5000
static const char *pieces[NV];
static uint32_t piece_len[NV];
static picolm_vocab vocab = {NV, 1, 2, pieces, piece_len, NULL};

static uint64_t rng = 88172645463325252ull;
static uint64_t xr(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }
static float frand(void) { return (float)((xr() >> 11) * 0x1.0p-53); }
static float nrand(void) { float u = frand() + 1e-7f, v = frand(); return sqrtf(-2 * logf(u)) * cosf(6.2831853f * v); }

static void fill(picolm_token_data *d, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) d[i] = (picolm_token_data){(int32_t)i, nrand() * scale, 0};
}

static int ref_better(const void *a, const void *b) {
    const picolm_token_data *x = a, *y = b;
    if (x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Instance of a plugin with params "k=v" pairs. */
static void *make(const char *name, const char *key, const char *val, uint64_t seed) {
    picolm_param p = {key, val};
    picolm_sampler_init in = {sizeof in, &reg.host, &vocab, key ? &p : NULL, key ? 1 : 0, seed};
    char err[256] = "";
    void *st = NULL;
    const picolm_sampler_vtable *vt = vt_of(name);
    if (!vt || vt->create(&in, &st, err, sizeof err)) {
        printf("# create %s: %s\n", name, err);
        return NULL;
    }
    return st;
}

static int apply(const char *name, void *st, picolm_candidates *c) {
    char err[256] = "";
    int rc = vt_of(name)->apply(st, c, err, sizeof err);
    if (rc) printf("# %s: %s\n", name, err);
    return rc;
}

static void destroy(const char *name, void *st) {
    if (vt_of(name)->destroy) vt_of(name)->destroy(st);
}

static picolm_token_data d[NV], ref[NV];

static void test_greedy(void) {
    void *st = make("greedy", NULL, NULL, 0);
    int bad = 0;
    for (int t = 0; t < 50; t++) {
        fill(d, NV, 3);
        if (t % 5 == 0) { d[4000].logit = 100; d[17].logit = 100; } /* tie: lowest id */
        picolm_candidates c = {d, NV, 0, 0, -1, -1};
        int32_t best = 0;
        for (int i = 1; i < NV; i++) if (d[i].logit > d[best].logit) best = i;
        if (apply("greedy", st, &c) || c.selected != best) bad++;
    }
    CHECK(!bad, "greedy = argmax, ties -> lowest id (50 rounds, %d wrong)", bad);
    destroy("greedy", st);
}

static void test_top_k(void) {
    const int ks[] = {1, 2, 5, 40, 999, 4999, 5000, 7000, 0};
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
        char v[16];
        snprintf(v, sizeof v, "%d", ks[ki]);
        void *st = make("top_k", "top_k", v, 0);
        int bad = 0;
        for (int t = 0; t < 20; t++) {
            fill(d, NV, t % 2 ? 1 : 10);
            if (t == 3) for (int i = 0; i < NV; i++) d[i].logit = (float)(i % 7); /* many ties */
            memcpy(ref, d, sizeof d);
            qsort(ref, NV, sizeof *ref, ref_better);
            picolm_candidates c = {d, NV, 0, 0, -1, -1};
            if (apply("top_k", st, &c)) { bad++; continue; }
            size_t want = ks[ki] <= 0 || ks[ki] >= NV ? NV : (size_t)ks[ki];
            if (c.size != want) { bad++; continue; }
            if (want < NV) { /* exactly the k best, best first */
                for (size_t i = 0; i < want; i++)
                    if (d[i].id != ref[i].id) { bad++; break; }
            }
        }
        CHECK(!bad, "top_k %d keeps exactly the k best, sorted (20 rounds, %d bad)", ks[ki], bad);
        destroy("top_k", st);
    }
}

/* smallest prefix of ref (sorted) with mass >= p */
static size_t ref_top_p(const picolm_token_data *r, size_t n, double p) {
    double sum = 0, cum = 0;
    for (size_t i = 0; i < n; i++) sum += exp((double)r[i].logit - r[0].logit);
    for (size_t i = 0; i < n; i++) {
        cum += exp((double)r[i].logit - r[0].logit);
        if (cum >= p * sum) return i + 1;
    }
    return n;
}

static void test_top_p(void) {
    const double ps[] = {0.0, 0.1, 0.5, 0.9, 0.95, 0.999};
    for (size_t pi = 0; pi < sizeof ps / sizeof ps[0]; pi++) {
        char v[16];
        snprintf(v, sizeof v, "%g", ps[pi]);
        void *st = make("top_p", "top_p", v, 0);
        int bad = 0;
        size_t smallest = NV, largest = 0;
        for (int t = 0; t < 30; t++) {
            const float scale = t % 3 == 0 ? 0.3f : t % 3 == 1 ? 2.0f : 8.0f; /* flat .. peaked */
            fill(d, NV, scale);
            memcpy(ref, d, sizeof d);
            qsort(ref, NV, sizeof *ref, ref_better);
            const size_t want = ref_top_p(ref, NV, ps[pi]);
            picolm_candidates c = {d, NV, t == 29, 0, -1, -1};
            if (t == 29) memcpy(d, ref, sizeof d); /* the already-sorted path */
            if (apply("top_p", st, &c) || c.size != want || !c.sorted) { bad++; continue; }
            for (size_t i = 0; i < want; i++)
                if (d[i].id != ref[i].id) { bad++; break; }
            if (want < smallest) smallest = want;
            if (want > largest) largest = want;
        }
        CHECK(!bad, "top_p %g keeps the smallest best prefix with mass >= p (30 rounds, nucleus %zu..%zu, %d bad)", ps[pi],
              smallest, largest, bad);
        destroy("top_p", st);
    }
    void *st = make("top_p", "top_p", "1.5", 0);
    CHECK(st == NULL, "top_p 1.5 is rejected");
}

/* Large lists take top_p's binned fast path; an already sorted copy takes
   the exact method.  Both must keep the same candidates in the same order,
   and dist must then draw the same token with the same seed. */
#define NBIG 40000
static picolm_token_data big_a[NBIG], big_b[NBIG];

static void big_logits(int shape) {
    for (int i = 0; i < NBIG; i++) {
        float l;
        switch (shape % 5) {
        case 0: l = 2.0f * nrand(); break;                          /* broad body only */
        case 1: l = 2.0f * nrand() + (i % 997 == 0 ? 12.0f : 0); break; /* a few leads: peaked */
        case 2: l = 0.05f * nrand(); break;                         /* nearly flat: a huge nucleus */
        case 3: l = (float)(xr() % 8) * 0.5f; break;                /* many exact ties */
        default: l = i % 3 ? -INFINITY : 3.0f * nrand(); break;     /* masked tokens */
        }
        big_a[i] = (picolm_token_data){i, l, 0};
    }
}

static void test_top_p_fast(void) {
    const double ps[] = {0.0, 0.3, 0.5, 0.9, 0.95, 0.999};
    int bad = 0, rounds = 0, dist_bad = 0;
    size_t smallest = NBIG, largest = 0;
    for (size_t pi = 0; pi < sizeof ps / sizeof ps[0]; pi++) {
        char v[16];
        snprintf(v, sizeof v, "%g", ps[pi]);
        void *st = make("top_p", "top_p", v, 0);
        for (int t = 0; t < 15 && st; t++, rounds++) {
            big_logits(t);
            memcpy(big_b, big_a, sizeof big_a);
            qsort(big_b, NBIG, sizeof *big_b, ref_better);
            picolm_candidates fast = {big_a, NBIG, 0, 0, -1, -1}, exact = {big_b, NBIG, 1, 0, -1, -1};
            if (apply("top_p", st, &fast) || apply("top_p", st, &exact) || fast.size != exact.size || !fast.sorted) { bad++; continue; }
            for (size_t i = 0; i < fast.size; i++)
                if (big_a[i].id != big_b[i].id) { bad++; break; }
            if (fast.size < smallest) smallest = fast.size;
            if (fast.size > largest) largest = fast.size;
            void *da = make("dist", NULL, NULL, 1000 + t), *db = make("dist", NULL, NULL, 1000 + t);
            dist_bad += apply("dist", da, &fast) || apply("dist", db, &exact) || fast.selected != exact.selected;
            destroy("dist", da);
            destroy("dist", db);
        }
        destroy("top_p", st);
    }
    CHECK(!bad && rounds == 90, "top_p on %d candidates: the binned path keeps exactly what the exact method keeps (%d rounds, nucleus %zu..%zu, %d bad)",
          NBIG, rounds, smallest, largest, bad);
    CHECK(!dist_bad, "and dist draws the same token with the same seed (%d differ)", dist_bad);

    /* an exact boundary: two equal logits hold all the mass, top_p 0.5 keeps one */
    void *st = make("top_p", "top_p", "0.5", 0);
    picolm_token_data two[2] = {{0, 1.5f, 0}, {1, 1.5f, 0}};
    picolm_candidates c = {two, 2, 0, 0, -1, -1};
    CHECK(st && !apply("top_p", st, &c) && c.size == 1 && two[0].id == 0, "top_p 0.5 over two equal logits keeps exactly one (%zu)", c.size);
    for (int i = 0; i < NBIG; i++) big_a[i] = (picolm_token_data){i, i == 7 || i == 20000 ? 2.0f : -INFINITY, 0};
    c = (picolm_candidates){big_a, NBIG, 0, 0, -1, -1};
    CHECK(st && !apply("top_p", st, &c) && c.size == 1 && big_a[0].id == 7, "the same among %d candidates, the rest -inf (%zu)", NBIG, c.size);
    /* a NaN logit counts as -inf (no mass), as in the exact method */
    for (int i = 0; i < NBIG; i++) big_a[i] = big_b[i] = (picolm_token_data){i, 0.01f * (float)(i % 100), 0};
    big_a[5].logit = NAN;
    big_b[5].logit = -INFINITY;
    c = (picolm_candidates){big_a, NBIG, 0, 0, -1, -1};
    picolm_candidates c2 = {big_b, NBIG, 0, 0, -1, -1};
    int same = st && !apply("top_p", st, &c) && !apply("top_p", st, &c2) && c.size == c2.size;
    for (size_t i = 0; same && i < c.size; i++) same = big_a[i].id == big_b[i].id && big_a[i].id != 5;
    CHECK(same, "a NaN logit weighs nothing, like -inf (%zu kept)", c.size);
    destroy("top_p", st);
}

/* top_p over NBIG candidates in big_a (unsorted: the fast paths) against
   a sorted copy (the exact method), and dist's draw over both; 1 when the
   same.  *kept: the nucleus size. */
static int same_as_exact(double p, uint64_t seed, size_t n, size_t *kept) {
    char v[32];
    snprintf(v, sizeof v, "%.17g", p);
    void *st = make("top_p", "top_p", v, 0);
    memcpy(big_b, big_a, n * sizeof *big_a);
    qsort(big_b, n, sizeof *big_b, ref_better);
    picolm_candidates fast = {big_a, n, 0, 0, -1, -1}, exact = {big_b, n, 1, 0, -1, -1};
    int ok = st && !apply("top_p", st, &fast) && !apply("top_p", st, &exact) && fast.size == exact.size && fast.sorted;
    for (size_t i = 0; ok && i < fast.size; i++) ok = big_a[i].id == big_b[i].id;
    *kept = fast.size;
    void *da = make("dist", NULL, NULL, seed), *db = make("dist", NULL, NULL, seed);
    ok = ok && !apply("dist", da, &fast) && !apply("dist", db, &exact) && fast.selected == exact.selected;
    destroy("dist", da);
    destroy("dist", db);
    if (st) destroy("top_p", st);
    return ok;
}

/* The fast paths' edges: each shape against the exact method. */
static void test_top_p_edges(void) {
    size_t k = 0;
    int bad = 0;
    /* ties: 3000 equal logits at the top over a body; the nucleus among them, lowest ids first */
    for (int i = 0; i < NBIG; i++) big_a[i] = (picolm_token_data){i, i % 13 == 5 ? 4.0f : nrand(), 0};
    for (double p = 0.05; p < 1; p += 0.3) bad += !same_as_exact(p, 7, NBIG, &k);
    CHECK(!bad, "top_p: ties at the top keep the lowest ids first, as the exact method (%d bad, last nucleus %zu)", bad, k);

    /* the same ties, and a flat body on 1/256 steps (thousands of equal
       logits in every sort key), with the list in reversed and shuffled id
       order: the head's radix sort keeps list order within a key, so the
       lowest ids must come first by the final comparison, or the heap sort
       when too many are out of order */
    bad = 0;
    for (int shape = 0; shape < 2; shape++)
        for (int order = 0; order < 2; order++) {
            for (int i = 0; i < NBIG; i++) {
                const float l = shape ? (float)(int)(nrand() * 512) / 256 : i % 13 == 5 ? 4.0f : nrand();
                big_a[order ? i : NBIG - 1 - i] = (picolm_token_data){i, l, 0};
            }
            for (int i = NBIG - 1; order && i > 0; i--) {
                const int j = (int)(xr() % (uint64_t)(i + 1));
                const picolm_token_data t = big_a[i];
                big_a[i] = big_a[j], big_a[j] = t;
            }
            for (double p = 0.05; p < 1; p += 0.3) bad += !same_as_exact(p, 61 + order, NBIG, &k);
        }
    CHECK(!bad, "top_p: ties in reversed and shuffled lists keep the lowest ids first (%d bad, last nucleus %zu)", bad, k);

    /* logits exactly on 1/64 bin edges, and p set so that the cut lands exactly
       at the end of a bin: the fast path must agree or defer to the exact method */
    bad = 0;
    for (int r = 0; r < 6; r++) {
        size_t a = 0, b = 0;
        for (int i = 0; i < NBIG; i++) {
            const int edge = (int)(xr() % 3);
            big_a[i] = (picolm_token_data){i, 3.0f - (float)edge / 64 - (float)r / 64, 0};
            a += edge == 0;
            b += edge == 1;
        }
        const double ma = (double)a, mb = (double)b * exp(-1.0 / 64), mc = (double)(NBIG - a - b) * exp(-2.0 / 64);
        bad += !same_as_exact(ma / (ma + mb + mc), 11 + r, NBIG, &k);
        bad += !same_as_exact((ma + mb) / (ma + mb + mc), 17 + r, NBIG, &k);
    }
    CHECK(!bad, "top_p: a cut exactly at a bin edge, logits on the edges (12 cases, %d bad)", bad);

    /* huge and tiny temperatures: the logits of a body and a few leads scaled by 1/T */
    const float temps[] = {1000.0f, 100.0f, 0.01f, 0.001f};
    bad = 0;
    for (int ti = 0; ti < 4; ti++) {
        for (int i = 0; i < NBIG; i++) big_a[i] = (picolm_token_data){i, (2.0f * nrand() + (i % 997 == 3 ? 8.0f : 0)) / temps[ti], 0};
        for (double p = 0.1; p < 1; p += 0.2) bad += !same_as_exact(p, 23 + ti, NBIG, &k);
    }
    CHECK(!bad, "top_p: logits at temperatures 1000, 100, 0.01, 0.001 (20 cases, %d bad)", bad);

    /* -inf: most candidates masked; all but one masked (a nucleus of 1) */
    bad = 0;
    for (int i = 0; i < NBIG; i++) big_a[i] = (picolm_token_data){i, i % 5 ? -INFINITY : nrand(), 0};
    bad += !same_as_exact(0.9, 31, NBIG, &k);
    for (int i = 0; i < NBIG; i++) big_a[i] = (picolm_token_data){i, i == 12345 ? -3.0f : -INFINITY, 0};
    bad += !same_as_exact(0.9, 37, NBIG, &k) || k != 1 || big_a[0].id != 12345;
    CHECK(!bad, "top_p: -inf logits weigh nothing; a single finite one is the nucleus (%d bad)", bad);

    /* a nucleus of 1: one token far above a flat body */
    bad = 0;
    for (int i = 0; i < NBIG; i++) big_a[i] = (picolm_token_data){i, i == 777 ? 30.0f : 0.1f * nrand(), 0};
    bad += !same_as_exact(0.9, 41, NBIG, &k) || k != 1;
    /* ... and one that just misses p: the body completes the nucleus */
    for (int i = 0; i < NBIG; i++) big_a[i] = (picolm_token_data){i, i == 777 ? 12.0f : 0.1f * nrand(), 0};
    bad += !same_as_exact(0.9, 43, NBIG, &k) || k < 2;
    CHECK(!bad, "top_p: a dominant token alone, and one the body must complete (%d bad, nucleus %zu)", bad, k);

    /* the sample (every 61st candidate) sees only the top level: the nucleus
       reaches further down than it estimates */
    bad = 0;
    for (int i = 0; i < NBIG; i++) big_a[i] = (picolm_token_data){i, i % 61 == 0 ? 5.0f : i % 2 ? 4.0f : -20.0f + nrand(), 0};
    for (double p = 0.2; p < 1; p += 0.25) bad += !same_as_exact(p, 47, NBIG, &k);
    CHECK(!bad, "top_p: a nucleus below the sample's estimate (%d bad, last nucleus %zu)", bad, k);

    /* a list of one, and of exactly the fast paths' minimum */
    bad = 0;
    big_a[0] = (picolm_token_data){0, 1.0f, 0};
    bad += !same_as_exact(0.5, 53, 1, &k) || k != 1;
    for (int i = 0; i < 4096; i++) big_a[i] = (picolm_token_data){i, nrand(), 0};
    bad += !same_as_exact(0.9, 59, 4096, &k);
    CHECK(!bad, "top_p: one candidate, and 4096 (%d bad)", bad);
}

static void test_min_p(void) {
    const float ps[] = {0.0f, 0.01f, 0.05f, 0.3f, 1.0f};
    for (size_t pi = 0; pi < sizeof ps / sizeof ps[0]; pi++) {
        char v[16];
        snprintf(v, sizeof v, "%g", (double)ps[pi]);
        void *st = make("min_p", "min_p", v, 0);
        int bad = 0;
        for (int t = 0; t < 20; t++) {
            fill(d, NV, t % 2 ? 1.5f : 4.0f);
            memcpy(ref, d, sizeof d);
            float max = -INFINITY;
            for (int i = 0; i < NV; i++) if (d[i].logit > max) max = d[i].logit;
            /* reference in probability space: p_i >= min_p * p_max */
            size_t want = 0;
            for (int i = 0; i < NV; i++) want += ps[pi] <= 0 || exp((double)ref[i].logit - max) >= ps[pi] * (1 - 1e-6);
            picolm_candidates c = {d, NV, 0, 0, -1, -1};
            if (apply("min_p", st, &c) || c.size != want) { bad++; continue; }
            for (size_t i = 0; i < c.size; i++)
                if (exp((double)d[i].logit - max) < ps[pi] * (1 - 1e-6)) { bad++; break; }
            for (size_t i = 1; i < c.size; i++) /* order kept */
                if (d[i].id <= d[i - 1].id) { bad++; break; }
        }
        CHECK(!bad, "min_p %g keeps p >= min_p * p_max, in order (20 rounds, %d bad)", (double)ps[pi], bad);
        destroy("min_p", st);
    }
}

static void test_temperature(void) {
    void *st = make("temperature", "temperature", "0.5", 0);
    fill(d, NV, 2);
    memcpy(ref, d, sizeof d);
    picolm_candidates c = {d, NV, 0, 0, -1, -1};
    int bad = apply("temperature", st, &c) || c.size != NV;
    for (int i = 0; i < NV && !bad; i++) bad = fabsf(d[i].logit - ref[i].logit / 0.5f) > 1e-5f * fabsf(ref[i].logit) + 1e-6f;
    CHECK(!bad, "temperature 0.5 doubles the logits");
    destroy("temperature", st);
    st = make("temperature", "temperature", "0", 0);
    fill(d, NV, 2);
    int32_t best = 0;
    for (int i = 1; i < NV; i++) if (d[i].logit > d[best].logit) best = i;
    c = (picolm_candidates){d, NV, 0, 0, -1, -1};
    CHECK(!apply("temperature", st, &c) && c.size == 1 && d[0].id == best, "temperature 0 keeps only the argmax");
    destroy("temperature", st);
    CHECK(make("temperature", "temperature", "abc", 0) == NULL, "temperature 'abc' is rejected");
}

static void test_penalties(void) {
    picolm_param p[4] = {{"repeat_penalty", "1.3"}, {"freq_penalty", "0.2"}, {"presence_penalty", "0.5"}, {"penalty_last_n", "8"}};
    picolm_sampler_init in = {sizeof in, &reg.host, &vocab, p, 4, 0};
    char err[256] = "";
    void *st = NULL;
    const picolm_sampler_vtable *vt = vt_of("penalties");
    CHECK(vt && !vt->create(&in, &st, err, sizeof err), "penalties create (%s)", err);
    if (!st) return;
    int32_t hist[40];
    for (int i = 0; i < 40; i++) hist[i] = (int32_t)(xr() % 12); /* many repeats */
    int bad = 0;
    for (int n = 0; n <= 40; n++) {
        if (n) vt->accept(st, hist[n - 1]);
        fill(d, 16, 3);
        memcpy(ref, d, 16 * sizeof *d);
        picolm_candidates c = {d, 16, 0, 0, -1, -1};
        if (vt->apply(st, &c, err, sizeof err)) { bad++; continue; }
        for (int t = 0; t < 16; t++) {
            int cnt = 0;
            for (int k = n - 8 < 0 ? 0 : n - 8; k < n; k++) cnt += hist[k] == t;
            float l = ref[t].logit;
            if (cnt) {
                l = l > 0 ? l / 1.3f : l * 1.3f;
                l -= cnt * 0.2f + 0.5f;
            }
            if (fabsf(l - d[t].logit) > 1e-5f) { bad++; break; }
        }
    }
    CHECK(!bad, "penalties: repeat/freq/presence over the last 8 tokens match the reference (41 steps, %d bad)", bad);
    vt->reset(st);
    fill(d, 16, 3);
    memcpy(ref, d, 16 * sizeof *d);
    picolm_candidates c = {d, 16, 0, 0, -1, -1};
    vt->apply(st, &c, err, sizeof err);
    CHECK(!memcmp(d, ref, 16 * sizeof *d), "penalties: reset forgets the history");

    /* the whole vocabulary in id order (only the window's tokens are visited)
       gives the same logits as the same list reversed (every candidate is) */
    bad = 0;
    for (int n = 0; n < 40; n++) {
        vt->accept(st, (int32_t)(xr() % 40));
        fill(d, NV, 3);
        for (int i = 0; i < NV; i++) ref[NV - 1 - i] = d[i];
        picolm_candidates in_order = {d, NV, 0, 0, -1, -1}, reversed = {ref, NV, 0, 0, -1, -1};
        if (vt->apply(st, &in_order, err, sizeof err) || vt->apply(st, &reversed, err, sizeof err)) { bad++; continue; }
        for (int i = 0; i < NV; i++)
            if (d[i].id != i || memcmp(&d[i].logit, &ref[NV - 1 - i].logit, sizeof(float))) { bad++; break; }
    }
    CHECK(!bad, "penalties: visiting only the window equals a pass over every candidate (40 steps, %d bad)", bad);
    vt->destroy(st);
}

static void test_dist(void) {
    void *a = make("dist", NULL, NULL, 42), *b = make("dist", NULL, NULL, 42), *c2 = make("dist", NULL, NULL, 43);
    int same = 1, differ = 0;
    for (int t = 0; t < 200; t++) {
        fill(d, 64, 1);
        memcpy(ref, d, 64 * sizeof *d);
        picolm_candidates ca = {d, 64, 0, 0, -1, -1};
        apply("dist", a, &ca);
        memcpy(d, ref, 64 * sizeof *d);
        picolm_candidates cb = {d, 64, 0, 0, -1, -1};
        apply("dist", b, &cb);
        memcpy(d, ref, 64 * sizeof *d);
        picolm_candidates cc = {d, 64, 0, 0, -1, -1};
        apply("dist", c2, &cc);
        same &= ca.selected == cb.selected;
        differ += ca.selected != cc.selected;
    }
    CHECK(same, "dist: same seed, same 200 tokens");
    CHECK(differ > 50, "dist: another seed gives another sequence (%d/200 differ)", differ);
    /* frequencies vs softmax */
    const float logits[8] = {2.0f, 1.0f, 0.5f, 0.0f, -0.5f, -1.0f, -3.0f, -INFINITY};
    double pr[8], sum = 0;
    for (int i = 0; i < 8; i++) sum += pr[i] = exp(logits[i]);
    int cnt[8] = {0};
    const int N = 200000;
    for (int t = 0; t < N; t++) {
        for (int i = 0; i < 8; i++) d[i] = (picolm_token_data){i, logits[i], 0};
        picolm_candidates cc = {d, 8, 0, 0, -1, -1};
        if (apply("dist", a, &cc)) break;
        cnt[cc.selected]++;
    }
    double worst = 0;
    for (int i = 0; i < 8; i++) {
        double f = (double)cnt[i] / N, e = fabs(f - pr[i] / sum) / sqrt(pr[i] / sum * (1 - pr[i] / sum) / N + 1e-12);
        if (pr[i] > 0 && e > worst) worst = e;
    }
    CHECK(worst < 5.0 && cnt[7] == 0, "dist: frequencies over %d draws match the softmax (worst %.2f sigma, -inf drawn %d times)", N, worst, cnt[7]);
    destroy("dist", a);
    destroy("dist", b);
    destroy("dist", c2);
}

/* dist reset: same seed from the start again */
static void test_dist_reset(void) {
    void *a = make("dist", NULL, NULL, 7);
    int32_t s1[50], s2[50];
    for (int pass = 0; pass < 2; pass++) {
        rng = 1234567;
        for (int t = 0; t < 50; t++) {
            fill(d, 100, 1);
            picolm_candidates c = {d, 100, 0, 0, -1, -1};
            apply("dist", a, &c);
            (pass ? s2 : s1)[t] = c.selected;
        }
        vt_of("dist")->reset(a);
    }
    CHECK(!memcmp(s1, s2, sizeof s1), "dist: reset restarts the seeded sequence");
    destroy("dist", a);
}

/* ---- the chain ---- */

static void base_cfg(picolm_config *c) {
    memset(c, 0, sizeof *c);
    snprintf(c->sampler_chain, sizeof c->sampler_chain, "auto");
    c->temperature = 0.8f;
    c->top_p = 0.9f;
    c->top_k = 40;
    c->min_p = 0.0f;
    c->repeat_penalty = 1.0f;
    c->penalty_last_n = 64;
    c->seed = 42;
}

/* The chain the front end asks for with c (cli_sampler_spec_of), built by
   the core over the test's registry and vocabulary. */
static int cli_sampling_build(sampling **s, const pl_registry *r, const picolm_config *c, const picolm_vocab *v, char *err,
                              size_t errlen) {
    static cli_sampler_spec spec;
    sampling_param sp[CLI_SAMPLER_PARAMS];
    *s = NULL;
    int rc = cli_sampler_spec_of(c, NULL, 0, &spec, err, errlen);
    for (int i = 0; !rc && i < spec.p.n_params; i++) sp[i] = (sampling_param){spec.kv[i].key, spec.kv[i].value, spec.where[i]};
    const sampling_settings set = {.chain = spec.p.chain, .params = sp, .n_params = spec.p.n_params, .seed = spec.p.seed};
    rc = rc ? rc : build_sampling(s, r, &set, v, err, errlen);
    cli_sampler_spec_free(&spec);
    return rc;
}

static void chain_str(const picolm_config *c, char *buf, size_t n, char *err, size_t errlen) {
    sampling *s = NULL;
    buf[0] = 0;
    err[0] = 0;
    if (cli_sampling_build(&s, &reg, c, &vocab, err, errlen)) return;
    sampling_describe(s, buf, n);
    free_sampling(s);
}

/* The core's side: a chain of names and key = value settings, checked
   against what each sampler declares (no sampler is known by name). */
static void test_declared_params(void) {
    char buf[512], err[512] = "";
    sampling *s = NULL;
    sampling_settings set = {.chain = "penalties, top_k ,dist", .seed = 7};
    CHECK(!build_sampling(&s, &reg, &set, &vocab, err, sizeof err), "chain without settings builds: %s", err);
    if (s) sampling_describe(s, buf, sizeof buf);
    CHECK(s && !strcmp(buf, "dist(seed 7)") && sampling_n_stages(s) == 1,
          "stages their declared defaults switch off (penalties 1/0/0, top_k 0) are left out: '%s'", s ? buf : "");
    free_sampling(s);
    const sampling_param one = {"presence_penalty", "0.5", "x.ini:2"};
    set.params = &one, set.n_params = 1;
    s = NULL;
    CHECK(!build_sampling(&s, &reg, &set, &vocab, err, sizeof err), "chain with one setting builds: %s", err);
    if (s) sampling_describe(s, buf, sizeof buf);
    CHECK(s && !strcmp(buf, "penalties(repeat 1, freq 0, presence 0.5, last 64) -> dist(seed 7)"),
          "unset keys take the declared defaults: '%s'", s ? buf : "");
    free_sampling(s);
    set.params = NULL, set.n_params = 0;
    set.chain = "top_k,greedy";
    s = NULL;
    CHECK(!build_sampling(&s, &reg, &set, &vocab, err, sizeof err) && sampling_n_stages(s) == 1,
          "a neutral stage before the selector is left out: %s", err);
    free_sampling(s);
    const char *sampler = NULL;
    const picolm_param_desc *d = sampling_find_param(&reg, "penalty_last_n", &sampler);
    CHECK(d && d->type == PICOLM_PARAM_INT && d->lo == -1 && sampler && !strcmp(sampler, "penalties") && d->help && d->help[0],
          "penalties declares penalty_last_n (int, from -1, with help)");
    const sampling_param bad_int = {"top_k", "4.5", "x.ini:3"};
    set.params = &bad_int, set.n_params = 1;
    s = NULL;
    CHECK(build_sampling(&s, &reg, &set, &vocab, err, sizeof err) && !s &&
              !strncmp(err, "x.ini:3: sampler key 'top_k': '4.5' is not an integer", 53),
          "a declared key with a malformed value is refused where it was set: %s", err);
    const sampling_param bad_range = {"min_p", "1.5", "command line"};
    set.params = &bad_range;
    CHECK(build_sampling(&s, &reg, &set, &vocab, err, sizeof err) && strstr(err, "command line: sampler key 'min_p': '1.5'") &&
              strstr(err, "[0, 1]"), "a value out of the declared range is refused: %s", err);
    const sampling_param edge = {"repeat_penalty", "0.00999999978", "command line"};
    set.params = &edge;
    CHECK(!build_sampling(&s, &reg, &set, &vocab, err, sizeof err), "a float bound admits its float value: %s", err);
    free_sampling(s);
}

static void test_chain(void) {
    picolm_config c;
    char buf[512], err[512];
    base_cfg(&c);
    chain_str(&c, buf, sizeof buf, err, sizeof err);
    CHECK(!strcmp(buf, "top_k(40) -> temperature(0.8) -> top_p(0.9) -> dist(seed 42)"), "default chain: '%s' %s", buf, err);
    c.repeat_penalty = 1.1f;
    c.min_p = 0.05f;
    c.json_mode = 1;
    chain_str(&c, buf, sizeof buf, err, sizeof err);
    CHECK(!strcmp(buf, "json(object 0) -> penalties(repeat 1.1, freq 0, presence 0, last 64) -> top_k(40) -> temperature(0.8) -> top_p(0.9) -> min_p(0.05) -> dist(seed 42)"),
          "auto chain with json, penalties, min_p: '%s' %s", buf, err);
    c.json_mode = 0;
    c.penalty_last_n = 0;
    c.temperature = 0;
    chain_str(&c, buf, sizeof buf, err, sizeof err);
    CHECK(!strcmp(buf, "top_k(40) -> temperature(0) -> top_p(0.9) -> min_p(0.05) -> dist(seed 42)"), "default chain at temperature 0: '%s' %s", buf, err);
    {   /* temperature 0 draws what greedy picks, ties included (lowest id) */
        picolm_config g;
        base_cfg(&g);
        snprintf(g.sampler_chain, sizeof g.sampler_chain, "greedy");
        c.top_k = 0;
        sampling *a = NULL, *b = NULL;
        int bad = cli_sampling_build(&a, &reg, &c, &vocab, err, sizeof err) || cli_sampling_build(&b, &reg, &g, &vocab, err, sizeof err);
        static float tl[NV];
        for (int t = 0; t < 40 && !bad; t++) {
            for (int i = 0; i < NV; i++) tl[i] = (float)(int)(nrand() * 2); /* many ties */
            int32_t x = -1, y = -2;
            bad |= sampling_sample(a, tl, -1, &x, err, sizeof err) || sampling_sample(b, tl, -1, &y, err, sizeof err) || x != y;
        }
        CHECK(!bad, "the default chain at temperature 0 picks greedy's token on 40 lists with ties (%s)", err);
        free_sampling(a);
        free_sampling(b);
    }
    base_cfg(&c);
    c.top_k = 0;
    c.top_p = 1.0f;
    chain_str(&c, buf, sizeof buf, err, sizeof err);
    CHECK(!strcmp(buf, "temperature(0.8) -> dist(seed 42)"), "auto chain without top_k/top_p: '%s' %s", buf, err);

    base_cfg(&c);
    snprintf(c.sampler_chain, sizeof c.sampler_chain, " min_p , top_k,greedy ");
    c.json_mode = 1;
    chain_str(&c, buf, sizeof buf, err, sizeof err);
    CHECK(!strcmp(buf, "json(object 0) -> top_k(40) -> greedy"), "explicit chain + --json (min_p 0 left out): '%s' %s", buf, err);
    c.json_mode = 0;
    snprintf(c.sampler_chain, sizeof c.sampler_chain, "top_k,bogus,dist");
    chain_str(&c, buf, sizeof buf, err, sizeof err);
    CHECK(!buf[0] && strstr(err, "unknown sampler 'bogus'") && strstr(err, "available samplers:") && strstr(err, "top_p"),
          "unknown sampler is an error listing the available ones: %s", err);
    snprintf(c.sampler_chain, sizeof c.sampler_chain, "top_k,top_p");
    chain_str(&c, buf, sizeof buf, err, sizeof err);
    CHECK(!buf[0] && strstr(err, "greedy or dist"), "chain without a selector is an error: %s", err);
    snprintf(c.sampler_chain, sizeof c.sampler_chain, "greedy,top_k,dist");
    chain_str(&c, buf, sizeof buf, err, sizeof err);
    CHECK(!buf[0] && strstr(err, "last stage"), "selector in the middle is an error: %s", err);

    base_cfg(&c);
    c.n_params = 2;
    snprintf(c.params[0].key, 64, "top_p");
    snprintf(c.params[0].value, 256, "0.5");
    snprintf(c.params[0].file, 256, "conf/x.ini");
    c.params[0].line = 3;
    snprintf(c.params[1].key, 64, "top_q");
    snprintf(c.params[1].value, 256, "0.5");
    snprintf(c.params[1].file, 256, "conf/x.ini");
    c.params[1].line = 7;
    chain_str(&c, buf, sizeof buf, err, sizeof err);
    CHECK(!buf[0] && !strncmp(err, "conf/x.ini:7: unknown sampler key 'top_q'", 41), "unknown [sampler] key: %s", err);
    c.params[1].line = 0;
    snprintf(c.params[1].file, 256, "command line");
    chain_str(&c, buf, sizeof buf, err, sizeof err);
    CHECK(!buf[0] && strstr(err, "command line: unknown sampler key 'top_q'"), "unknown CLI sampler key: %s", err);
    snprintf(c.params[1].key, 64, "chain");
    chain_str(&c, buf, sizeof buf, err, sizeof err);
    CHECK(buf[0], "known keys (top_p, chain) pass: %s", err);

    /* the typed value wins over a stale [sampler] duplicate (CLI flags set the typed field) */
    base_cfg(&c);
    c.top_k = 1;
    c.n_params = 1;
    snprintf(c.params[0].key, 64, "top_k");
    snprintf(c.params[0].value, 256, "1000");
    sampling *s = NULL;
    int bad = cli_sampling_build(&s, &reg, &c, &vocab, err, sizeof err);
    static float logits[NV];
    for (int t = 0; t < 30 && !bad; t++) {
        for (int i = 0; i < NV; i++) logits[i] = nrand();
        int32_t best = 0, tok = -1;
        for (int i = 1; i < NV; i++) if (logits[i] > logits[best]) best = i;
        bad |= sampling_sample(s, logits, -1, &tok, err, sizeof err) || tok != best;
    }
    CHECK(!bad, "chain top_k(1) -> ... -> dist always picks the argmax (%s)", err);
    free_sampling(s);

    /* same seed, same tokens through the whole chain; accept feeds penalties */
    base_cfg(&c);
    c.repeat_penalty = 1.2f;
    int32_t seq[2][100];
    for (int r = 0; r < 2; r++) {
        rng = 999;
        cli_sampling_build(&s, &reg, &c, &vocab, err, sizeof err);
        for (int t = 0; t < 100; t++) {
            for (int i = 0; i < NV; i++) logits[i] = 2 * nrand();
            seq[r][t] = -1;
            sampling_sample(s, logits, 100 - t, &seq[r][t], err, sizeof err);
            sampling_accept(s, seq[r][t]);
        }
        free_sampling(s);
    }
    CHECK(!memcmp(seq[0], seq[1], sizeof seq[0]) && seq[0][0] >= 0, "full chain: same seed -> same 100 tokens");

    /* speed on a 32000-token vocabulary */
    static const char *pc[32000];
    static uint32_t pl[32000];
    picolm_vocab big = {32000, 1, 2, pc, pl, NULL};
    static float bl[32000];
    base_cfg(&c);
    c.repeat_penalty = 1.1f;
    c.min_p = 0.05f;
    if (!cli_sampling_build(&s, &reg, &c, &big, err, sizeof err)) {
        double worst = 0;
        for (int t = 0; t < 100; t++) {
            const float scale = t % 2 ? 1.0f : 0.3f; /* flat distributions: a large nucleus */
            for (int i = 0; i < 32000; i++) bl[i] = scale * nrand();
            struct timespec t0, t1;
            clock_gettime(CLOCK_MONOTONIC, &t0);
            int32_t tok;
            sampling_sample(s, bl, -1, &tok, err, sizeof err);
            clock_gettime(CLOCK_MONOTONIC, &t1);
            sampling_accept(s, tok);
            double ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
            if (ms > worst) worst = ms;
        }
        printf("info: auto chain on 32000 logits: worst %.3f ms per token\n", worst); /* a figure, not a timed assertion */
        free_sampling(s);
    }
    /* top_p alone on a flat 32000 distribution (the nucleus is most of it) */
    snprintf(c.sampler_chain, sizeof c.sampler_chain, "top_p,dist");
    c.top_p = 0.95f;
    if (!cli_sampling_build(&s, &reg, &c, &big, err, sizeof err)) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int t = 0; t < 20; t++) {
            for (int i = 0; i < 32000; i++) bl[i] = 0.1f * nrand();
            int32_t tok;
            sampling_sample(s, bl, -1, &tok, err, sizeof err);
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ms = ((t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6) / 20;
        printf("info: top_p 0.95 on a flat 32000 distribution: %.3f ms per token (incl. logit generation)\n", ms);
        free_sampling(s);
    }
}

/* Logits shaped like a language model's: a broad body over the whole
   vocabulary and a few likely tokens above it.  lead 16: a peaked step
   (the nucleus is a few tokens); lead 6: a flat one (thousands). */
static void lm_logits(float *l, int n, float lead) {
    for (int i = 0; i < n; i++) l[i] = 2.0f * nrand();
    for (int k = 0; k < 8; k++) l[xr() % (uint64_t)n] = lead + 2 * nrand();
}

/* CPU time: the machine may be shared */
static double cpu_ms(void) { return pl_thread_now() * 1e3; }

/* ---- the chain on real vocabulary sizes against a plain reference ----
   Every stage written the obvious way (qsort, one pass each), with the
   plugins' arithmetic: same candidates, same order, so dist (the same
   xoshiro256** stream) must draw the same token.  Any change of a selected
   token on a 152k vocabulary is caught here, whatever path a plugin takes. */

typedef struct ref_chain {
    float temp, top_p, min_p, repeat, freq, presence;
    int top_k, last_n;
    int32_t window[64];
    int n_window;
    uint64_t s[4];
} ref_chain;

static uint64_t ref_splitmix(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t ref_next(ref_chain *r) {
    uint64_t *s = r->s;
    const uint64_t x = s[1] * 5, res = ((x << 7) | (x >> 57)) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t; s[3] = (s[3] << 45) | (s[3] >> 19);
    return res;
}

static void ref_init(ref_chain *r, const picolm_config *c) {
    memset(r, 0, sizeof *r);
    r->temp = c->temperature, r->top_p = c->top_p, r->min_p = c->min_p;
    r->repeat = c->repeat_penalty, r->freq = c->freq_penalty, r->presence = c->presence_penalty;
    r->top_k = c->top_k, r->last_n = c->penalty_last_n;
    uint64_t x = c->seed;
    for (int i = 0; i < 4; i++) r->s[i] = ref_splitmix(&x);
}

static void ref_accept(ref_chain *r, int32_t tok) {
    if (r->n_window == r->last_n) memmove(r->window, r->window + 1, (size_t)--r->n_window * sizeof *r->window);
    r->window[r->n_window++] = tok;
}

static int32_t ref_sample(ref_chain *r, picolm_token_data *d, size_t n) {
    int sorted = 0;
    if (r->repeat != 1.0f || r->freq != 0.0f || r->presence != 0.0f) { /* penalties */
        for (size_t i = 0; i < n; i++) {
            int cnt = 0;
            for (int w = 0; w < r->n_window; w++) cnt += r->window[w] == d[i].id;
            if (!cnt) continue;
            float l = d[i].logit;
            l = l > 0 ? l / r->repeat : l * r->repeat;
            d[i].logit = l - ((float)cnt * r->freq + r->presence);
        }
    }
    if (r->top_k > 0 && (size_t)r->top_k < n) { /* top_k */
        qsort(d, n, sizeof *d, ref_better);
        n = (size_t)r->top_k;
        sorted = 1;
    }
    const float inv = 1.0f / r->temp; /* temperature */
    for (size_t i = 0; i < n; i++) d[i].logit *= inv;
    if (r->top_p < 1.0f) { /* top_p: the total in list order, the cut best first */
        float max = -INFINITY;
        for (size_t i = 0; i < n; i++) max = d[i].logit > max ? d[i].logit : max;
        double sum = 0, cum = 0;
        for (size_t i = 0; i < n; i++) sum += d[i].logit > -INFINITY ? exp((double)d[i].logit - max) : 0.0;
        if (!sorted) qsort(d, n, sizeof *d, ref_better);
        sorted = 1;
        const double target = (double)r->top_p * sum;
        for (size_t i = 0; i < n; i++) {
            cum += d[i].logit > -INFINITY ? exp((double)d[i].logit - max) : 0.0;
            if (cum >= target) { n = i + 1; break; }
        }
    }
    if (r->min_p > 0) { /* min_p: order kept */
        float max = -INFINITY;
        for (size_t i = 0; i < n; i++) max = d[i].logit > max ? d[i].logit : max;
        const float thr = max + logf(r->min_p);
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (d[i].logit >= thr) d[m++] = d[i];
        n = m;
    }
    float max = -INFINITY; /* dist */
    for (size_t i = 0; i < n; i++) max = d[i].logit > max ? d[i].logit : max;
    double sum = 0, acc = 0;
    for (size_t i = 0; i < n; i++) sum += d[i].p = d[i].logit > -INFINITY ? expf(d[i].logit - max) : 0.0f;
    const double u = (double)(ref_next(r) >> 11) * 0x1.0p-53 * sum;
    size_t last = 0;
    for (size_t i = 0; i < n; i++) {
        if (d[i].p <= 0) continue;
        last = i;
        acc += d[i].p;
        if (acc > u) return d[i].id;
    }
    return d[last].id;
}

/* Body N(0, 2) over the vocabulary, 8 leads drawn from the ids 100..163
   (the ones the penalty window holds): lead 16 peaked, 6 flat, 1 very flat. */
static void pin_logits(float *l, int n, float lead) {
    for (int i = 0; i < n; i++) l[i] = 2.0f * nrand();
    for (int k = 0; k < 8; k++) l[100 + xr() % 64] = lead + 2 * nrand();
}

/* A request's keys (a tool call's schema, response_format) go after the
   configuration's, and a json_schema among them puts that stage first in
   place of --json's grammar; the chain is built from them as given. */
static void test_chain_extra(void) {
    picolm_config c;
    char err[512] = "";
    static cli_sampler_spec spec;
    base_cfg(&c);
    c.json_mode = 1;
    const picolm_param extra[2] = {{"json_schema", "{\"type\": \"object\"}"}, {"json_schema_optional", "1"}};
    int rc = cli_sampler_spec_of(&c, extra, 2, &spec, err, sizeof err);
    const int np = spec.p.n_params;
    CHECK(!rc && !strcmp(spec.p.chain, "json_schema," PICOLM_DEFAULT_CHAIN) && np >= 2 &&
              !strcmp(spec.kv[np - 2].key, "json_schema") && !strcmp(spec.kv[np - 1].key, "json_schema_optional") &&
              !strcmp(spec.where[np - 1], "request"),
          "a request's json_schema goes last and puts its stage first instead of json: '%s' %s", spec.p.chain, err);
    sampling *s = NULL;
    sampling_param sp[CLI_SAMPLER_PARAMS];
    for (int i = 0; !rc && i < np; i++) sp[i] = (sampling_param){spec.kv[i].key, spec.kv[i].value, spec.where[i]};
    const sampling_settings set = {.chain = spec.p.chain, .params = sp, .n_params = np, .seed = spec.p.seed};
    CHECK(!rc && !build_sampling(&s, &reg, &set, &vocab, err, sizeof err) && !strcmp(sampling_stage_name(s, 0), "json_schema"),
          "that chain builds with json_schema as its first stage: %s", err);
    free_sampling(s);
    cli_sampler_spec_free(&spec);
    snprintf(c.sampler_chain, sizeof c.sampler_chain, "top_k,json_schema,greedy");
    rc = cli_sampler_spec_of(&c, extra, 1, &spec, err, sizeof err);
    CHECK(!rc && !strcmp(spec.p.chain, "top_k,json_schema,greedy"), "a chain that names json_schema keeps its order: '%s'", spec.p.chain);
    cli_sampler_spec_free(&spec);
    const picolm_param many[CLI_EXTRA_KEYS + 1] = {{"a", "1"}, {"b", "1"}, {"c", "1"}, {"d", "1"}, {"e", "1"}};
    rc = cli_sampler_spec_of(&c, many, CLI_EXTRA_KEYS + 1, &spec, err, sizeof err);
    CHECK(rc && strstr(err, "extra sampler keys"), "more extra keys than the spec holds are refused: %s", err);
    cli_sampler_spec_free(&spec);
}

static void test_chain_large(void) {
    const int nv = 151936, steps = 8;
    float *l = malloc(nv * sizeof *l);
    picolm_token_data *d = malloc(nv * sizeof *d);
    const char **pc = calloc(nv, sizeof *pc);
    uint32_t *pl = calloc(nv, sizeof *pl);
    if (!l || !d || !pc || !pl) { CHECK(0, "chain on %d: out of memory", nv); goto done; }
    picolm_vocab big = {nv, 1, 2, pc, pl, NULL};
    /* temperature, top_p, top_k, min_p, repeat, freq, presence */
    static const float confs[][7] = {
        {0.8f, 0.9f, 0, 0, 1, 0, 0},         /* picolm's default chain */
        {0.8f, 0.9f, 40, 0.05f, 1.1f, 0, 0}, /* a configured one */
        {1.0f, 0.95f, 0, 0.05f, 1, 0.5f, 0.3f},
        {0.7f, 0.5f, 0, 0, 1, 0, 0},
        {1.2f, 1.0f, 0, 0.1f, 1, 0, 0},      /* min_p on the unsorted list, dist over its order */
        {0.9f, 1.0f, 0, 0, 1, 0, 0},         /* dist over the whole list in id order */
        {0.8f, 0.9f, 2000, 0, 1, 0, 0},      /* a large k */
    };
    static const float leads[] = {16.0f, 6.0f, 1.0f};
    int bad = 0, bad_off = 0, total = 0;
    uint64_t hash = 1469598103934665603ull; /* FNV-1a of every selected token */
    for (size_t ci = 0; ci < sizeof confs / sizeof confs[0]; ci++) {
        picolm_config c;
        base_cfg(&c);
        c.temperature = confs[ci][0], c.top_p = confs[ci][1], c.top_k = (int)confs[ci][2], c.min_p = confs[ci][3];
        c.repeat_penalty = confs[ci][4], c.freq_penalty = confs[ci][5], c.presence_penalty = confs[ci][6];
        c.seed = 1000 + ci;
        for (size_t li = 0; li < sizeof leads / sizeof leads[0]; li++) {
            sampling *s = NULL;
            char err[256];
            if (cli_sampling_build(&s, &reg, &c, &big, err, sizeof err)) { CHECK(0, "chain on %d: %s", nv, err); bad++; continue; }
            sampling *o = NULL; /* the same chain, every stage's apply() over the full list */
            if (cli_sampling_build(&o, &reg, &c, &big, err, sizeof err)) { CHECK(0, "chain on %d: %s", nv, err); bad++; free_sampling(s); continue; }
            sampling_direct(o, 0);
            ref_chain r;
            ref_init(&r, &c);
            rng = 777 + ci * 10 + li;
            for (int i = 0; i < 32; i++) { /* a prompt over the leads' ids */
                const int32_t t = 100 + (int32_t)(xr() % 64);
                sampling_accept(s, t);
                sampling_accept(o, t);
                ref_accept(&r, t);
            }
            for (int t = 0; t < steps; t++, total++) {
                pin_logits(l, nv, leads[li]);
                for (int i = 0; i < nv; i++) d[i] = (picolm_token_data){i, l[i], 0};
                const int32_t want = ref_sample(&r, d, nv);
                int32_t got = -1, off = -2;
                if (sampling_sample(s, l, -1, &got, err, sizeof err) || got != want) bad++;
                if (sampling_sample(o, l, -1, &off, err, sizeof err) || off != got) bad_off++;
                for (int b = 0; b < 4; b++) hash = (hash ^ (uint8_t)(got >> (8 * b))) * 1099511628211ull;
                sampling_accept(s, got);
                sampling_accept(o, got);
                ref_accept(&r, want);
            }
            free_sampling(s);
            free_sampling(o);
        }
    }
    CHECK(!bad, "chains on %d candidates (7 configurations x peaked, flat, very flat) draw the reference's tokens (%d of %d differ)",
          nv, bad, total);
    CHECK(!bad_off, "and the same tokens with the direct path off (logit_scale / apply_logits unused; %d of %d differ)", bad_off, total);
    /* the same tokens as the chain drew before its fast paths were tuned (82ad4c7) */
    CHECK(hash == PINNED_HASH, "and the same tokens as before (hash %016llx)", (unsigned long long)hash);
done:
    free(l);
    free(d);
    free(pc);
    free(pl);
}

/* The direct path (a first stage's logit_scale folded into the list, the
   first stage's apply_logits reading the logits) against every stage's
   apply() over the full list: the same token, or the same error, for
   chains that fold or not, with top_p, top_k or min_p first, on lists
   below and above top_p's fast-path size, and on odd logits. */
static void test_direct(void) {
    static const char *const chains[][2] = {
        {"temperature,top_p,dist", "temperature=0.8 top_p=0.9"},
        {"temperature,top_p,dist", "temperature=1 top_p=0.5"},
        {"temperature,top_p,dist", "temperature=100 top_p=0.99"},
        {"temperature,top_p,dist", "temperature=0.001 top_p=0.9"},
        {"temperature,top_p,dist", "temperature=0 top_p=0.9"}, /* not a scale: no fold */
        {"temperature,temperature,top_p,dist", "temperature=0.7 top_p=0.9"}, /* only the first folds */
        {"top_p,temperature,dist", "temperature=0.8 top_p=0.9"},            /* no fold, apply_logits at scale 1 */
        {"temperature,dist", "temperature=0.8"},
        {"temperature,min_p,dist", "temperature=1.2 min_p=0.1"},
        {"temperature,top_k,top_p,dist", "temperature=0.8 top_k=40 top_p=0.9"},
        {"top_k,temperature,dist", "temperature=0.8 top_k=2000"},
        {"min_p,temperature,greedy", "temperature=0.8 min_p=0.05"},
    };
    static const int sizes[] = {1000, 4096, 151936};
    const int nv_max = 151936;
    float *l = malloc(nv_max * sizeof *l);
    const char **pc = calloc(nv_max, sizeof *pc);
    uint32_t *pl = calloc(nv_max, sizeof *pl);
    if (!l || !pc || !pl) { CHECK(0, "direct: out of memory"); goto done; }
    int bad = 0, total = 0, failed = 0;
    for (size_t ci = 0; ci < sizeof chains / sizeof chains[0]; ci++) {
        sampling_param sp[4];
        char kv[4][2][32];
        int np = 0;
        char buf[128];
        snprintf(buf, sizeof buf, "%s", chains[ci][1]);
        for (char *save = NULL, *tok = strtok_r(buf, " ", &save); tok && np < 4; tok = strtok_r(NULL, " ", &save), np++) {
            char *eq = strchr(tok, '=');
            *eq = 0;
            snprintf(kv[np][0], sizeof kv[np][0], "%s", tok);
            snprintf(kv[np][1], sizeof kv[np][1], "%s", eq + 1);
            sp[np] = (sampling_param){kv[np][0], kv[np][1], "test"};
        }
        const sampling_settings set = {.chain = chains[ci][0], .params = sp, .n_params = np, .seed = 5 + ci};
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            const int nv = sizes[si];
            picolm_vocab big = {nv, 1, 2, pc, pl, NULL};
            sampling *s[2] = {NULL, NULL};
            char err[2][256] = {"", ""};
            if (build_sampling(&s[0], &reg, &set, &big, err[0], sizeof err[0]) || build_sampling(&s[1], &reg, &set, &big, err[0], sizeof err[0])) {
                CHECK(0, "direct: chain %s: %s", chains[ci][0], err[0]);
                bad++;
            } else {
                sampling_direct(s[1], 0);
                rng = 4242 + ci;
                for (int shape = 0; shape < 9; shape++, total++) {
                    /* peaked, flat, very flat, ties, NaN, -inf, +inf, all -inf but one, all -inf (dist fails) */
                    for (int i = 0; i < nv; i++) l[i] = shape == 3 ? (float)(int)(nrand() * 2) : 2.0f * nrand();
                    for (int k = 0; k < 8; k++) l[xr() % (uint64_t)nv] = (shape == 0 ? 16.0f : shape == 2 ? 1.0f : 6.0f) + 2 * nrand();
                    if (shape == 4) l[xr() % (uint64_t)nv] = NAN;
                    if (shape == 5 || shape >= 7)
                        for (int i = 0; i < nv; i += shape == 5 ? 3 : 1) l[i] = -INFINITY;
                    if (shape == 7) l[nv / 2] = 0.5f;
                    if (shape == 6) l[xr() % (uint64_t)nv] = INFINITY;
                    int32_t tok[2] = {-1, -2};
                    int rc[2];
                    for (int k = 0; k < 2; k++) rc[k] = sampling_sample(s[k], l, -1, &tok[k], err[k], sizeof err[k]);
                    if (rc[0] != rc[1] || (!rc[0] && tok[0] != tok[1]) || (rc[0] && strcmp(err[0], err[1]))) {
                        printf("  direct: %s (%s) on %d, shape %d: %d/%d vs %d/%d (%s | %s)\n", chains[ci][0], chains[ci][1], nv, shape,
                               rc[0], tok[0], rc[1], tok[1], err[0], err[1]);
                        bad++;
                    }
                    failed += rc[0] != 0;
                    for (int k = 0; k < 2; k++)
                        if (!rc[k]) sampling_accept(s[k], tok[k]);
                }
            }
            free_sampling(s[0]);
            free_sampling(s[1]);
        }
    }
    CHECK(!bad && total == 12 * 3 * 9 && failed > 0, "direct path on and off: the same token (or error) on %d lists of 1000, 4096 and 151936 "
                                       "logits, 12 chains, odd logits included (%d differ, %d errors alike)", total, bad, failed);
done:
    free(l);
    free(pc);
    free(pl);
}

/* ---- the tokens and nuclei of today's top_p, recorded ----
   Logits from plain arithmetic only (no libm: the same bits on every
   target): z ~ N(0, 1) as the sum of four uniforms.  Shapes: peaked, flat,
   very flat, flat on 1/64 steps (ties, logits on the binned path's edges),
   integer ties, nearly uniform. */
static float zrand(void) { return (frand() + frand() + frand() + frand() - 2.0f) * 1.7320508f; }

static void rec_logits(float *l, int n, int shape) {
    for (int i = 0; i < n; i++) {
        const float z = 2.0f * zrand();
        l[i] = shape == 3 ? (float)(int)(z * 64) / 64 : shape == 4 ? (float)(int)z : shape == 5 ? 0.05f * z : z;
    }
    if (shape < 3)
        for (int k = 0; k < 8; k++) l[xr() % (uint64_t)n] = (shape == 0 ? 16.0f : shape == 1 ? 6.0f : 1.0f) + 0.25f * (float)k;
}

static uint64_t fnv(uint64_t h, uint32_t v) {
    for (int b = 0; b < 4; b++) h = (h ^ (uint8_t)(v >> (8 * b))) * 1099511628211ull;
    return h;
}

/* Per vocabulary size and shape, the hash of: each chain's tokens (direct
   path on and off, which must agree) and top_p's nucleus (size, ids in
   order) over the list in id order and shuffled.  Recorded from main at
   b8412a3 (before top_p's radix sort), on x86-64. */
static void test_recorded(void) {
    static const int sizes[] = {5000, 32000, 151936};
    static const char *const shapes[] = {"peaked", "flat", "very flat", "1/64 steps", "integer ties", "nearly uniform"};
    static const struct { const char *t, *p; } chains[] = {{"0.8", "0.9"}, {"1", "0.95"}, {"0.6", "0.5"}};
    static const uint64_t want[3][6] = {
        {0xd13fc506ed70bc16ull, 0xb53b8a390b58294full, 0x3278b468439c7604ull, 0xa53f3410efe5da20ull, 0x05b3740250e3c6edull, 0xd8830c2eb230787full},
        {0x3e0ac1b6118b5be5ull, 0x4936a321cb2e5626ull, 0x30bcc542d9bc14e5ull, 0x4ca960476384e480ull, 0x3cfff197ed74cbaaull, 0x4b0521818f49b89aull},
        {0x31e366ef3966aa87ull, 0x2d0514ecc3be4c3bull, 0x92052ade3db60a53ull, 0xd48fe60a1df1e26bull, 0x3889b6669b0994e5ull, 0x76d9a4d85097eda0ull},
    };
    const int nv_max = 151936;
    float *l = malloc(nv_max * sizeof *l);
    const char **pc = calloc(nv_max, sizeof *pc);
    uint32_t *pl = calloc(nv_max, sizeof *pl);
    picolm_token_data *td = malloc(nv_max * sizeof *td);
    int32_t *perm = malloc(nv_max * sizeof *perm);
    if (!l || !pc || !pl || !td || !perm) { CHECK(0, "recorded: out of memory"); goto done; }
    int bad = 0, differ = 0, total = 0;
    for (int si = 0; si < 3; si++) {
        const int nv = sizes[si];
        picolm_vocab v = {nv, 1, 2, pc, pl, NULL};
        for (int sh = 0; sh < 6; sh++) {
            uint64_t h = 1469598103934665603ull;
            rng = 0x5eed0000ull + (uint64_t)(si * 16 + sh);
            for (size_t ci = 0; ci < sizeof chains / sizeof chains[0]; ci++) {
                sampling_param sp[2] = {{"temperature", chains[ci].t, "test"}, {"top_p", chains[ci].p, "test"}};
                const sampling_settings set = {.chain = "temperature,top_p,dist", .params = sp, .n_params = 2, .seed = 100 + ci};
                sampling *s[2] = {NULL, NULL};
                char err[256] = "";
                if (build_sampling(&s[0], &reg, &set, &v, err, sizeof err) || build_sampling(&s[1], &reg, &set, &v, err, sizeof err)) {
                    CHECK(0, "recorded: %s", err);
                    bad++;
                    free_sampling(s[0]);
                    continue;
                }
                sampling_direct(s[1], 0);
                void *tp = make("top_p", "top_p", chains[ci].p, 0);
                const float inv = 1.0f / (float)atof(chains[ci].t);
                for (int step = 0; step < 2; step++, total++) {
                    rec_logits(l, nv, sh);
                    int32_t tok[2] = {-1, -2};
                    for (int k = 0; k < 2; k++)
                        if (sampling_sample(s[k], l, -1, &tok[k], err, sizeof err)) { CHECK(0, "recorded: %s", err); bad++; }
                    differ += tok[0] != tok[1];
                    h = fnv(h, (uint32_t)tok[0]);
                    for (int k = 0; k < 2; k++) sampling_accept(s[k], tok[0]);
                    /* top_p alone: the list in id order, then shuffled */
                    for (int sf = 0; sf < 2 && tp; sf++) {
                        for (int i = 0; i < nv; i++) perm[i] = i;
                        for (int i = nv - 1; sf && i > 0; i--) {
                            const int j = (int)(xr() % (uint64_t)(i + 1)), t = perm[i];
                            perm[i] = perm[j], perm[j] = t;
                        }
                        for (int i = 0; i < nv; i++) td[i] = (picolm_token_data){perm[i], l[perm[i]] * inv, 0};
                        picolm_candidates c = {td, (size_t)nv, 0, 0, -1, -1};
                        if (apply("top_p", tp, &c)) { bad++; continue; }
                        h = fnv(h, (uint32_t)c.size);
                        for (size_t i = 0; i < c.size; i++) h = fnv(h, (uint32_t)td[i].id);
                    }
                }
                if (tp) destroy("top_p", tp);
                free_sampling(s[0]);
                free_sampling(s[1]);
            }
            if (h != want[si][sh]) {
                printf("  recorded: %d logits, %s: hash %016llx, recorded %016llx\n", nv, shapes[sh], (unsigned long long)h,
                       (unsigned long long)want[si][sh]);
                bad++;
            }
        }
    }
    CHECK(!bad && !differ, "the tokens and top_p's nuclei of b8412a3 on %d draws (3 sizes x 6 shapes x 3 chains; %d cases differ, "
                           "direct on/off differ %d times)", total, bad, differ);
done:
    free(l);
    free(pc);
    free(pl);
    free(td);
    free(perm);
}

/* ---- top_p's apply_select (top_p then dist's softmax rule as one step) ----
   The rule of picolm_sampler_vtable.draw, written out plainly: float masses
   expf(logit - max) (into p), their running sums in list order in double
   (acc, once per list); the first candidate with a mass whose running sum exceeds
   u * S, else the last with a mass. */
static double rule_sums(picolm_token_data *t, size_t n, double *acc) {
    float max = -INFINITY;
    for (size_t i = 0; i < n; i++)
        if (t[i].logit > max) max = t[i].logit;
    double sum = 0;
    for (size_t i = 0; i < n; i++) acc[i] = sum += t[i].p = t[i].logit > -INFINITY ? expf(t[i].logit - max) : 0.0f;
    return sum;
}

static int32_t ref_rule(const picolm_token_data *t, size_t n, const double *acc, double u) {
    const double r = u * acc[n - 1];
    size_t last = 0;
    for (size_t i = 0; i < n; i++) {
        if (t[i].p <= 0) continue;
        last = i;
        if (acc[i] > r) return t[i].id;
    }
    return t[last].id;
}

/* Logits for fused_shape: rec_logits' six shapes, then two levels (a
   nucleus reaching ~14 logits below the max at top_p 0.999999, where
   dist's float masses no longer sum exactly: the fused step's fallback). */
static void fused_logits(float *l, int n, int shape) {
    if (shape < 6) { rec_logits(l, n, shape); return; }
    for (int i = 0; i < n; i++) l[i] = (xr() % 25 == 0 ? 0.0f : -14.0f) + 0.5f * zrand();
}

/* apply_select against top_p's apply_logits and the rule above: on 3 sizes
   x 7 shapes x 4 settings (one for the two-level shape), for random draws
   u, u = 0 and 1 - 2^-53, and u that put u * S on a running sum at a bin
   edge of the nucleus (where the per-bin sums decide); and the core's chain
   with the fused step on and off draws the same tokens. */
static void test_fused(void) {
    static const int sizes[] = {4096, 32000, 151936};
    static const struct { float t; const char *p; } set[] = {{0.8f, "0.9"}, {1.0f, "0.95"}, {0.6f, "0.5"}, {1.5f, "0.99"}, {1.0f, "0.999999"}};
    const picolm_sampler_vtable *vt = vt_of("top_p");
    const int nv_max = 151936;
    float *l = malloc(nv_max * sizeof *l);
    picolm_token_data *a = malloc(nv_max * sizeof *a), *b = malloc(nv_max * sizeof *b);
    double *acc = malloc(nv_max * sizeof *acc);
    const char **pc = calloc(nv_max, sizeof *pc);
    uint32_t *pl = calloc(nv_max, sizeof *pl);
    if (!l || !a || !b || !acc || !pc || !pl || !vt || !vt->apply_select || !vt->apply_logits) { CHECK(0, "fused: setup"); goto done; }
    int bad = 0, draws = 0, lists = 0, inexact = 0, chain_bad = 0, chain_draws = 0;
    rng = 0xf05edull;
    for (int si = 0; si < 3; si++) {
        const int nv = sizes[si];
        for (int sh = 0; sh < 7; sh++) {
            for (int k = sh == 6 ? 4 : 0; k < (sh == 6 ? 5 : 4); k++, lists++) {
                void *st = make("top_p", "top_p", set[k].p, 0);
                if (!st) { bad++; continue; }
                fused_logits(l, nv, sh);
                const float scale = 1.0f / set[k].t;
                char err[256] = "";
                picolm_candidates c = {a, (size_t)nv, 0, 0, -1, -1};
                if (vt->apply_logits(st, l, scale, &c, err, sizeof err)) { CHECK(0, "fused: apply_logits: %s", err); bad++; destroy("top_p", st); continue; }
                const size_t k_n = c.size;
                /* dist's sums exact over this nucleus? (every partial sum below 2^53 ulps of the least mass) */
                const double sum = rule_sums(a, k_n, acc);
                int ex;
                const float e_min = expf(a[k_n - 1].logit - a[0].logit);
                frexpf(e_min, &ex);
                inexact += !(sum < ldexp(1.0, ex - 24 + 53));
                const int n_u = nv > 100000 ? 8 : 24;
                for (int j = 0; j < n_u; j++, draws++) {
                    double u = (xr() >> 11) * 0x1.0p-53;
                    if (j == 0) u = 0;
                    if (j == 1) u = 1 - 0x1.0p-53;
                    if (j >= n_u / 2) { /* u * S on the running sum at a 1/64-logit bin's end (or just below) */
                        size_t i = (size_t)(xr() % k_n);
                        const float x0 = (a[0].logit - a[i].logit) * 64;
                        while (i > 0 && (int)((a[0].logit - a[i - 1].logit) * 64) == (int)x0) i--;
                        u = i ? acc[i - 1] / sum : 0;
                        if (j % 2) u = nextafter(u, 0);
                        if (!(u < 1)) u = 1 - 0x1.0p-53;
                    }
                    picolm_candidates f = {b, (size_t)nv, 0, 0, -1, -1};
                    const int rc = vt->apply_select(st, l, scale, u, &f, err, sizeof err);
                    const int32_t want = ref_rule(a, k_n, acc, u);
                    if (rc || f.selected != want) {
                        if (bad < 5) printf("  fused: %d logits, shape %d, top_p %s, u %.17g: rc %d, token %d, the rule gives %d\n", nv, sh, set[k].p, u, rc, (int)f.selected, (int)want);
                        bad++;
                    }
                }
                destroy("top_p", st);
                /* the core's chain, fused and not */
                char tv[32];
                snprintf(tv, sizeof tv, "%g", (double)set[k].t);
                sampling_param sp[2] = {{"temperature", tv, "test"}, {"top_p", set[k].p, "test"}};
                const sampling_settings ss = {.chain = "temperature,top_p,dist", .params = sp, .n_params = 2, .seed = 7 + (uint64_t)lists};
                picolm_vocab v = {nv, 1, 2, pc, pl, NULL};
                sampling *s2[2] = {NULL, NULL};
                if (build_sampling(&s2[0], &reg, &ss, &v, err, sizeof err) || build_sampling(&s2[1], &reg, &ss, &v, err, sizeof err)) {
                    CHECK(0, "fused: %s", err);
                    chain_bad++;
                } else {
                    sampling_fused(s2[1], 0);
                    for (int d2 = 0; d2 < 2; d2++, chain_draws++) {
                        int32_t tok[2] = {-1, -2};
                        for (int q = 0; q < 2; q++)
                            if (sampling_sample(s2[q], l, -1, &tok[q], err, sizeof err)) chain_bad++;
                        chain_bad += tok[0] != tok[1];
                    }
                }
                free_sampling(s2[0]);
                free_sampling(s2[1]);
            }
        }
    }
    CHECK(!bad && draws > 1000, "top_p's apply_select draws what its apply_logits and the softmax rule draw: %d draws over %d lists "
                                "(3 sizes x 7 shapes, bin-edge draws included; %d differ)", draws, lists, bad);
    CHECK(inexact >= 2, "and %d of those lists are nuclei whose float masses do not sum exactly (the fallback)", inexact);
    CHECK(!chain_bad && chain_draws == 2 * lists, "the chain temperature -> top_p -> dist draws the same %d tokens with the fused step "
                                                  "on and off (%d differ)", chain_draws, chain_bad);
done:
    free(l);
    free(a);
    free(b);
    free(acc);
    free(pc);
    free(pl);
}

/* Milliseconds per sampled token of the default chain (temperature 0.8 ->
   top_p 0.9 -> dist) and of a configured one (+ top_k 40, min_p 0.05,
   repeat penalty 1.1) at real vocabulary sizes.  Figures, not assertions:
   the budget (2% of a 30 ms decode step) is read in the log. */
static void bench_chain(void) {
    static const int sizes[] = {32000, 128256, 151936};
    float *l = malloc(151936 * sizeof *l);
    const char **pc = calloc(151936, sizeof *pc);
    uint32_t *pl = calloc(151936, sizeof *pl);
    for (size_t si = 0; l && pc && pl && si < sizeof sizes / sizeof sizes[0]; si++) {
        const int nv = sizes[si];
        picolm_vocab big = {nv, 1, 2, pc, pl, NULL};
        for (int conf = 0; conf < 2; conf++) {
            picolm_config c;
            base_cfg(&c);
            c.top_k = conf ? 40 : 0;
            c.min_p = conf ? 0.05f : 0;
            c.repeat_penalty = conf ? 1.1f : 1.0f;
            sampling *s = NULL;
            char err[256];
            if (cli_sampling_build(&s, &reg, &c, &big, err, sizeof err)) { CHECK(0, "bench chain: %s", err); continue; }
            double ms[2] = {0, 0};
            const int reps = 40;
            for (int t = 0; t < 2 * reps; t++) {
                lm_logits(l, nv, t % 2 ? 6.0f : 16.0f);
                const double t0 = cpu_ms();
                int32_t tok;
                sampling_sample(s, l, -1, &tok, err, sizeof err);
                ms[t % 2] += cpu_ms() - t0;
                sampling_accept(s, tok);
            }
            char desc[256];
            sampling_describe(s, desc, sizeof desc);
            printf("info: bench: %6d vocab: %.3f ms per token (peaked), %.3f (flat): %s\n", nv, ms[0] / reps, ms[1] / reps, desc);
            free_sampling(s);
        }
    }
    free(l);
    free(pc);
    free(pl);
}

int main(void) {
    if (!load_samplers()) {
        printf("FAIL: sampler plugins missing: build them first (make build/plugins/sampler-*.so)\n");
        return 1;
    }
    /* byte tokens 3..258 (the json stage needs them), "ab" elsewhere */
    static char bytes[256];
    for (int i = 0; i < NV; i++) {
        if (i >= 3 && i < 259) { bytes[i - 3] = (char)(i - 3); pieces[i] = &bytes[i - 3]; piece_len[i] = 1; }
        else { pieces[i] = i < 3 ? "" : "ab"; piece_len[i] = i < 3 ? 0 : 2; }
    }
    test_greedy();
    test_top_k();
    test_top_p();
    test_top_p_fast();
    test_top_p_edges();
    test_min_p();
    test_temperature();
    test_penalties();
    test_dist();
    test_dist_reset();
    test_chain();
    test_chain_extra();
    test_declared_params();
    test_chain_large();
    test_direct();
    test_recorded();
    test_fused();
    /* timings only mean something at native speed */
    if (!getenv("PICOLM_TEST_WRAPPER") && !getenv("PICOLM_SANITIZER")) bench_chain();
    free_registry(&reg);
    return CHECK_DONE();
}
