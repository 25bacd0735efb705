/* Thread pool: every index covered exactly once by contiguous balanced
   chunks, under many rapid calls, odd n, tiny and oversized pools, nested
   calls, the sleep path; idle workers do not burn CPU; hand-off overhead is
   printed as information only. */
#include "check.h"
#include "cpu.h"
#include "threadpool.h"

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#define MAXT 16
#define MAXN 4096

typedef struct {
    unsigned char hits[MAXN];
    int64_t begin[MAXT], end[MAXT];
    int64_t sum[MAXT];
    int calls[MAXT];
    pthread_t who[MAXT];
} job;

static void task(void *ctx, int64_t b, int64_t e, int tid) {
    job *j = ctx;
    j->begin[tid] = b;
    j->end[tid] = e;
    j->calls[tid]++;
    j->who[tid] = pthread_self();
    int64_t s = 0;
    for (int64_t i = b; i < e; i++) {
        if (i < MAXN) j->hits[i]++;
        s += i;
    }
    j->sum[tid] = s;
}

/* one call; returns 0 when the split was exactly right */
static int run_and_verify(threadpool *p, int64_t n, const char **why) {
    static job j;
    memset(&j, 0, sizeof j);
    const int t = threadpool_size(p);
    threadpool_run(p, n, task, &j);
    int64_t total = 0;
    for (int i = 0; i < t; i++) total += j.sum[i];
    if (total != n * (n - 1) / 2) { *why = "sum"; return -1; }
    for (int64_t i = 0; i < n && i < MAXN; i++)
        if (j.hits[i] != 1) { *why = "index not hit exactly once"; return -1; }
    /* chunks are contiguous, in thread order, balanced (sizes differ by <= 1) */
    int64_t expect = 0, lo = n, hi = 0;
    for (int i = 0; i < t; i++) {
        int64_t len = j.calls[i] ? j.end[i] - j.begin[i] : 0;
        if (j.calls[i] > 1) { *why = "chunk ran twice"; return -1; }
        if (j.calls[i] && (len <= 0 || j.begin[i] != expect)) { *why = "chunk not contiguous/empty"; return -1; }
        expect += len;
        if (len < lo) lo = len;
        if (len > hi) hi = len;
    }
    if (expect != n) { *why = "chunks do not cover [0,n)"; return -1; }
    if (n >= t && hi - lo > 1) { *why = "chunks unbalanced"; return -1; }
    if (n > 0 && (!j.calls[0] || !pthread_equal(j.who[0], pthread_self()))) {
        *why = "chunk 0 not run by the caller"; return -1;
    }
    for (int a = 0; a < t; a++)
        for (int b = a + 1; b < t; b++)
            if (j.calls[a] && j.calls[b] && pthread_equal(j.who[a], j.who[b])) {
                *why = "two thread ids on one thread"; return -1;
            }
    return 0;
}

typedef struct { threadpool *p; int64_t inner_n; int64_t inner_sum[MAXT]; int bad; } nest_ctx;
static void inner(void *ctx, int64_t b, int64_t e, int tid) {
    nest_ctx *c = ctx;
    for (int64_t i = b; i < e; i++) c->inner_sum[tid] += i;
}
static void outer(void *ctx, int64_t b, int64_t e, int tid) {
    nest_ctx *c = ctx;
    for (int64_t i = b; i < e; i++) {
        int64_t before = c->inner_sum[tid];
        threadpool_run(c->p, c->inner_n, inner, c); /* must run inline, not deadlock */
        if (c->inner_sum[tid] - before != c->inner_n * (c->inner_n - 1) / 2) c->bad = 1;
    }
}

static void noop(void *ctx, int64_t b, int64_t e, int tid) {
    (void)b; (void)e;
    ((volatile int64_t *)ctx)[tid * 8] += 1; /* one cache line per thread */
}

static double now_s(clockid_t c) {
    struct timespec ts;
    clock_gettime(c, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(void) {
    const int ncpu = cpu_count_online();
    threadpool *p0 = build_threadpool(0);
    CHECK(p0 && threadpool_size(p0) == ncpu, "create(0) uses all %d online CPUs", ncpu);
    free_threadpool(p0);
    free_threadpool(NULL);
    CHECK(threadpool_size(NULL) == 1, "size(NULL) == 1");

    const int sizes[] = {1, 2, 3, 4, 7};
    const int64_t odd_n[] = {0, 1, 2, 3, 5, 6, 7, 8, 13, 64, 1000, MAXN};
    uint64_t rng = 12345;
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        const int t = sizes[si];
        threadpool *p = build_threadpool(t);
        CHECK(p && threadpool_size(p) == t, "pool of %d created", t);
        if (!p) continue;
        const char *why = "";
        int bad = 0;
        for (size_t k = 0; k < sizeof odd_n / sizeof odd_n[0] && !bad; k++)
            if (run_and_verify(p, odd_n[k], &why)) {
                bad = 1;
                CHECK(0, "pool %d, n=%lld: %s", t, (long long)odd_n[k], why);
            }
        if (!bad) CHECK(1, "pool %d: n = 0, 1, < threads, odd, large all split correctly", t);
        /* many rapid calls with random n */
        const int calls = t > ncpu ? 2000 : 20000;
        bad = 0;
        for (int c = 0; c < calls && !bad; c++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            int64_t n = (int64_t)((rng >> 33) % 40);
            if (run_and_verify(p, n, &why)) {
                bad = 1;
                CHECK(0, "pool %d, rapid call %d, n=%lld: %s", t, c, (long long)n, why);
            }
        }
        if (!bad) CHECK(1, "pool %d: %d rapid calls correct", t, calls);
        /* after the workers went to sleep, a call still wakes them */
        struct timespec ms = {0, 3000000};
        bad = 0;
        for (int c = 0; c < 5 && !bad; c++) {
            nanosleep(&ms, NULL);
            if (run_and_verify(p, 100 + c, &why)) bad = 1;
        }
        CHECK(!bad, "pool %d: calls after idle sleeps correct %s", t, bad ? why : "");
        /* a big sum over a large range */
        {
            static job j;
            memset(&j, 0, sizeof j);
            const int64_t n = 10000000;
            threadpool_run(p, n, task, &j);
            int64_t s = 0;
            for (int i = 0; i < t; i++) s += j.sum[i];
            CHECK(s == n * (n - 1) / 2, "pool %d: sum over [0,1e7) = %lld", t, (long long)s);
        }
        /* nested call from inside a chunk runs inline */
        {
            nest_ctx c;
            memset(&c, 0, sizeof c);
            c.p = p;
            c.inner_n = 10;
            threadpool_run(p, 2 * t, outer, &c);
            int64_t s = 0;
            for (int i = 0; i < t; i++) s += c.inner_sum[i];
            CHECK(!c.bad && s == 2 * t * 45, "pool %d: nested run inline, sums right", t);
        }
        free_threadpool(p);
    }

    /* never-spin mode (PICOLM_SPIN_US=0): every hand-off goes through the condvar */
    setenv("PICOLM_SPIN_US", "0", 1);
    {
        threadpool *p = build_threadpool(3);
        const char *why = "";
        int bad = 0;
        for (int c = 0; c < 3000 && !bad; c++)
            if (run_and_verify(p, c % 17, &why)) bad = 1;
        CHECK(!bad, "PICOLM_SPIN_US=0: 3000 calls through the sleep path %s", bad ? why : "");
        free_threadpool(p);
    }
    unsetenv("PICOLM_SPIN_US");

    /* idle pool sleeps: CPU time over 300 ms idle must be far below wall time */
    {
        threadpool *p = build_threadpool(ncpu > 1 ? ncpu : 2);
        int64_t counters[MAXT * 8] = {0};
        threadpool_run(p, 64, noop, counters);
        struct timespec settle = {0, 20000000};
        nanosleep(&settle, NULL);
        double c0 = now_s(CLOCK_PROCESS_CPUTIME_ID);
        struct timespec idle = {0, 300000000};
        nanosleep(&idle, NULL);
        double used = now_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
        CHECK(used < 0.05, "idle pool used %.1f ms CPU in 300 ms (workers sleep)", used * 1e3);
        free_threadpool(p);
    }

    /* informational: per-call overhead of an almost empty job */
    {
        const int t = ncpu;
        threadpool *p = build_threadpool(t);
        int64_t counters[MAXT * 8] = {0};
        /* up to 100k calls or ~0.5 s, whichever first (a loaded machine) */
        int iters = 0;
        for (int i = 0; i < 1000; i++) threadpool_run(p, t, noop, counters);
        double w0 = now_s(CLOCK_MONOTONIC), dt = 0;
        while (iters < 100000 && dt < 0.5) {
            for (int i = 0; i < 1000; i++) threadpool_run(p, t, noop, counters);
            iters += 1000;
            dt = now_s(CLOCK_MONOTONIC) - w0;
        }
        printf("info: threadpool_run overhead %.0f ns/call with %d threads (%d calls)\n",
               dt / iters * 1e9, t, iters);
        int64_t total = 0;
        for (int i = 0; i < t; i++) total += counters[i * 8];
        CHECK(total == (int64_t)(iters + 1000) * t, "overhead loop ran every chunk (%lld)", (long long)total);
        free_threadpool(p);
    }
    return CHECK_DONE();
}
