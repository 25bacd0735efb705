/*
 * The vector expf the attention kernels use (backends/x86/expf.h, each level's expf.h)
 * against libm's expf, bit for bit, exhaustively: every float with the sign
 * set (2^31 bit patterns: -0, subnormals, -inf, NaNs; attention's arguments
 * are all <= 0) and every float in [0, 1].  Each x86 level's variant as its
 * plugin builds it (tests/expf_level.c, once per level).  A level the CPU
 * lacks is SKIPped, and so is one whose run-time check
 * (x86_expf8_<level>_matches_libm, a sample) rejects this libm: its
 * attn_f16 then calls libm's expf, and the check failing is the design, not
 * an error.  Where the check accepts, the whole range must agree: the
 * sample stands for it.
 */
#include "check.h"
#include "cpu.h"
#include "picolm/plugin.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
int expf_guard_avx2(void), expf_guard_avx512(void);
uint32_t expf_diffs_avx2(const uint32_t *x, const uint32_t *want, uint32_t n, uint32_t *first);
uint32_t expf_diffs_avx512(const uint32_t *x, const uint32_t *want, uint32_t n, uint32_t *first);

typedef struct level {
    const char *name;
    uint64_t cpu;
    int (*guard)(void);
    uint32_t (*diffs)(const uint32_t *, const uint32_t *, uint32_t, uint32_t *);
    int on;
} level;

static float as_float(uint32_t b) {
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* [-0, -NaN] then [+0, 1] (and the 7 floats above 1: whole vectors) as bit
   patterns, in chunks of CH; libm once per x, for every level.  libm is most
   of the time (its underflow path sets errno), so the chunks are spread
   over the CPUs: 2^31 calls take ~10 s on one. */
static const uint64_t lo[2] = {0x80000000u, 0x00000000u}, hi[2] = {0xffffffffu, 0x3f800007u};
enum { CH = 1 << 14, NL = 2, MAXT = 8 };
static level lv[NL] = {
    {"avx2", PICOLM_CPU_AVX2 | PICOLM_CPU_FMA, expf_guard_avx2, expf_diffs_avx2, 0},
    {"avx512", PICOLM_CPU_AVX512F | PICOLM_CPU_AVX512VL, expf_guard_avx512, expf_diffs_avx512, 0},
};
/* Chunks taken: all; under a sanitizer every 16th (the kernels are vector
   arithmetic that the sanitizers do not instrument: the plain build checks
   every float, the sanitized one the code around them). */
static uint64_t every = 1;
typedef struct worker {
    pthread_t th;
    int id, n;
    uint64_t bad[NL][2];
    uint32_t first[NL][2];
} worker;

static void *work(void *arg) {
    worker *w = arg;
    static _Thread_local uint32_t x[CH], want[CH];
    for (int r = 0; r < 2; r++)
        for (uint64_t b = lo[r] + (uint64_t)w->id * CH; b <= hi[r]; b += (uint64_t)w->n * CH * every) {
            const uint32_t m = (uint32_t)(hi[r] - b + 1 < CH ? hi[r] - b + 1 : CH);
            for (uint32_t i = 0; i < m; i++) {
                x[i] = (uint32_t)(b + i);
                const float e = expf(as_float(x[i]));
                memcpy(&want[i], &e, sizeof e);
            }
            for (int l = 0; l < NL; l++) {
                uint32_t f = 0;
                const uint32_t d = lv[l].on ? lv[l].diffs(x, want, m, &f) : 0;
                if (d && !w->bad[l][r]) w->first[l][r] = f;
                w->bad[l][r] += d;
            }
        }
    return NULL;
}

int main(void) {
    const uint64_t feats = cpu_probe();
    int any = 0;
    for (int l = 0; l < NL; l++) {
        if ((feats & lv[l].cpu) != lv[l].cpu) SKIP("%s vector expf: the CPU lacks the level", lv[l].name);
        else if (!lv[l].guard()) SKIP("%s vector expf: its run-time check rejects this libm's expf (attn_f16 keeps libm)", lv[l].name);
        else any = lv[l].on = 1;
    }
    if (!any) return CHECK_DONE();
    if (getenv("PICOLM_SANITIZER")) every = 16;
    const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    const int nt = ncpu < 1 ? 1 : ncpu > MAXT ? MAXT : (int)ncpu;
    static worker ws[MAXT];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int t = 0; t < nt; t++) ws[t] = (worker){.id = t, .n = nt};
    /* a worker whose thread cannot start runs here */
    int started[MAXT] = {0};
    for (int t = 0; t < nt; t++) started[t] = !pthread_create(&ws[t].th, NULL, work, &ws[t]);
    for (int t = 0; t < nt; t++) started[t] ? (void)pthread_join(ws[t].th, NULL) : (void)work(&ws[t]);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    for (int l = 0; l < NL; l++) {
        if (!lv[l].on) continue;
        for (int r = 0; r < 2; r++) {
            uint64_t bad = 0;
            uint32_t first = 0;
            for (int t = 0; t < nt; t++) {
                if (ws[t].bad[l][r] && (!bad || ws[t].first[l][r] < first)) first = ws[t].first[l][r];
                bad += ws[t].bad[l][r];
            }
            char why[96] = "";
            if (bad) snprintf(why, sizeof why, "; %llu differ, the first x %a: libm %a", (unsigned long long)bad, as_float(first),
                              expf(as_float(first)));
            CHECK(!bad, "%s vector expf bit-identical to libm expf on %s %s%s", lv[l].name, every > 1 ? "every 16th chunk of the" : "all",
                  r ? "floats in [0, 1]" : "2^31 floats with the sign set", why);
        }
    }
    printf("# %d threads, %.1f s\n", nt, (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9);
    return CHECK_DONE();
}
#else
int main(void) {
    SKIP("vector expf: x86-64 only (the avx2 and avx512 levels)");
    return CHECK_DONE();
}
#endif
