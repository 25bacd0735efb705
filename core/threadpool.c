/* Persistent thread pool (see threadpool.h).
 *
 * Hand-off: the caller writes the job (fn, ctx, n), sets `pending` to the
 * worker count and bumps `gen` (release).  Workers spin on `gen`, run their
 * chunk and decrement `pending`; the caller runs chunk 0 then waits for
 * `pending` to reach 0.  Both waits spin for an adaptive budget (at most
 * spin_ns) and then sleep on a condvar.  Lost wake-ups are avoided with a store-then-load pattern on
 * seq_cst atomics: a sleeper publishes itself (sleepers / caller_waiting)
 * and then re-checks the condition; the waker changes the condition and
 * then checks for sleepers, so at least one of them sees the other.
 */
#include "threadpool.h"
#include "cpu.h"

#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CACHELINE 64

struct threadpool;
typedef struct worker_arg {
    struct threadpool *pool;
    int id;
} worker_arg;

struct threadpool {
    /* read-mostly, by everyone */
    int n_threads;
    int64_t spin_ns;        /* upper bound of the adaptive spin budgets */
    int64_t caller_budget;  /* the caller's budget (one caller at a time) */
    pthread_t *threads;
    worker_arg *args;
    /* the job; plain fields published by the release on gen */
    picolm_task_fn fn;
    void *ctx;
    int64_t total;
    /* separate lines: spinners poll gen while finishers hammer pending */
    alignas(CACHELINE) atomic_uint gen;
    atomic_int stop;
    atomic_int sleepers;
    alignas(CACHELINE) atomic_int pending;
    atomic_int caller_waiting;
    alignas(CACHELINE) pthread_mutex_t mu;  /* workers sleep on cv */
    pthread_cond_t cv;
    pthread_mutex_t done_mu;                /* the caller sleeps on done_cv */
    pthread_cond_t done_cv;
};

/* the pool this thread is currently running a chunk of (nesting check) */
static _Thread_local struct threadpool *tl_pool;
static _Thread_local int tl_id;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __asm__ volatile("pause" ::: "memory");
#elif defined(__aarch64__)
    __asm__ volatile("yield" ::: "memory");
#else
    atomic_signal_fence(memory_order_seq_cst);
#endif
}

/* Busy-wait step: pure pauses first (a hand-off between running threads
   takes well under a microsecond), then sched_yield, so that when the
   machine is oversubscribed the thread we wait for gets our core. */
static inline void spin_pause(unsigned i) {
    if (i < 512) cpu_relax();
    else sched_yield();
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void run_chunk(struct threadpool *p, int id) {
    const int64_t n = p->total, t = p->n_threads;
    const int64_t q = n / t, r = n % t;
    const int64_t begin = id * q + (id < r ? id : r);
    const int64_t end = begin + q + (id < r ? 1 : 0);
    if (begin < end) p->fn(p->ctx, begin, end, id);
}

/* Adaptive spin budget of one waiting thread.  Spinning only pays when the
   wait is short; a long wait means a gap between jobs or, worse, a loaded
   machine where a spinner that gets preempted loses the scheduler's wake-up
   preference and an idle core cannot pull the thread we wait for.  So: a
   short wait grows the budget (up to p->spin_ns), a long one halves it.
   "Short" must include a sleep and its wake-up (tens of us): with a 10 us
   bound a thread whose budget once reached 0 (after a few long gaps, e.g.
   during start-up) never spun again, and decode then slept and woke at
   every one of a token's ~110 parallel regions (177 context switches per
   token, ~8% of decode). */
#ifndef SHORT_WAIT_NS
#define SHORT_WAIT_NS 100000
#endif
static void budget_update(const struct threadpool *p, int64_t *budget, int64_t waited) {
    if (waited < SHORT_WAIT_NS) {
        *budget = *budget * 2 + 2000;
        if (*budget > p->spin_ns) *budget = p->spin_ns;
    } else {
        *budget /= 2;
        if (*budget < 1000) *budget = 0;
    }
}

/* Wait until gen != seen; returns the new generation (acquired). */
static unsigned wait_gen(struct threadpool *p, unsigned seen, int64_t *budget) {
    unsigned g = atomic_load_explicit(&p->gen, memory_order_acquire);
    if (g != seen) return g;
    const int64_t t0 = p->spin_ns > 0 ? now_ns() : 0;
    if (*budget > 0) {
        for (unsigned i = 1;; i++) {
            spin_pause(i);
            g = atomic_load_explicit(&p->gen, memory_order_acquire);
            if (g != seen) { budget_update(p, budget, now_ns() - t0); return g; }
            if ((i & 15) == 0 && now_ns() - t0 > *budget) break;
        }
    }
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add(&p->sleepers, 1);
    while ((g = atomic_load(&p->gen)) == seen)
        pthread_cond_wait(&p->cv, &p->mu);
    atomic_fetch_sub(&p->sleepers, 1);
    pthread_mutex_unlock(&p->mu);
    if (p->spin_ns > 0) budget_update(p, budget, now_ns() - t0);
    return g;
}

static void *worker_main(void *arg) {
    worker_arg *w = arg;
    struct threadpool *p = w->pool;
    tl_pool = p;
    tl_id = w->id;
    unsigned seen = 0; /* gen at creation; a run cannot pass us unseen */
    int64_t budget = p->spin_ns;
    for (;;) {
        seen = wait_gen(p, seen, &budget);
        if (atomic_load_explicit(&p->stop, memory_order_relaxed)) break;
        run_chunk(p, w->id);
        if (atomic_fetch_sub(&p->pending, 1) == 1 && atomic_load(&p->caller_waiting)) {
            pthread_mutex_lock(&p->done_mu);
            pthread_cond_signal(&p->done_cv);
            pthread_mutex_unlock(&p->done_mu);
        }
    }
    return NULL;
}

static void publish(struct threadpool *p) {
    atomic_fetch_add(&p->gen, 1);
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
}

static void stop_workers(struct threadpool *p, int started) {
    atomic_store_explicit(&p->stop, 1, memory_order_relaxed);
    atomic_fetch_add(&p->gen, 1);
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < started; i++) pthread_join(p->threads[i], NULL);
}

threadpool *build_threadpool(int n_threads) {
    if (n_threads <= 0) n_threads = cpu_count_online();
    size_t sz = (sizeof(struct threadpool) + CACHELINE - 1) / CACHELINE * CACHELINE;
    struct threadpool *p = aligned_alloc(CACHELINE, sz);
    if (!p) return NULL;
    memset(p, 0, sizeof *p);
    p->n_threads = n_threads;
    /* PICOLM_SPIN_US: how long idle threads spin before sleeping; default
       1 ms, or 0 when we have more threads than CPUs: spinners would then
       take the core from the very thread they wait for (as libgomp throttles
       its spin count when oversubscribed).  1 ms covers the gaps between
       the ~200 parallel regions of a decoded token (docs/perf.md). */
    p->spin_ns = n_threads > cpu_count_online() ? 0 : 1000000;
    const char *s = getenv("PICOLM_SPIN_US");
    if (s && *s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (*end == '\0' && v >= 0 && v <= 1000000) p->spin_ns = (int64_t)v * 1000;
    }
    p->caller_budget = p->spin_ns;
    atomic_init(&p->gen, 0);
    atomic_init(&p->stop, 0);
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->pending, 0);
    atomic_init(&p->caller_waiting, 0);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    pthread_mutex_init(&p->done_mu, NULL);
    pthread_cond_init(&p->done_cv, NULL);

    int nw = n_threads - 1;
    if (nw > 0) {
        p->threads = calloc((size_t)nw, sizeof *p->threads);
        p->args = calloc((size_t)nw, sizeof *p->args);
        if (!p->threads || !p->args) { free_threadpool(p); return NULL; }
        for (int i = 0; i < nw; i++) {
            p->args[i].pool = p;
            p->args[i].id = i + 1;
            if (pthread_create(&p->threads[i], NULL, worker_main, &p->args[i]) != 0) {
                stop_workers(p, i);
                p->n_threads = 1; /* nothing left to join in destroy */
                free_threadpool(p);
                return NULL;
            }
        }
    }
    return p;
}

void free_threadpool(threadpool *p) {
    if (!p) return;
    if (p->n_threads > 1 && p->threads) stop_workers(p, p->n_threads - 1);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->done_mu);
    pthread_cond_destroy(&p->done_cv);
    free(p->threads);
    free(p->args);
    free(p);
}

int threadpool_size(const threadpool *p) {
    return p ? p->n_threads : 1;
}

void threadpool_run(threadpool *p, int64_t n, picolm_task_fn fn, void *ctx) {
    if (n <= 0) return;
    if (!p || tl_pool == p) {
        /* no pool, or called from one of our own chunks: the workers are
           busy with the outer job, so run inline as the current thread */
        fn(ctx, 0, n, p ? tl_id : 0);
        return;
    }
    if (p->n_threads == 1 || n == 1) {
        struct threadpool *saved = tl_pool;
        int saved_id = tl_id;
        tl_pool = p;
        tl_id = 0;
        fn(ctx, 0, n, 0);
        tl_pool = saved;
        tl_id = saved_id;
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    p->total = n;
    atomic_store_explicit(&p->pending, p->n_threads - 1, memory_order_relaxed);
    publish(p);

    struct threadpool *saved = tl_pool;
    int saved_id = tl_id;
    tl_pool = p;
    tl_id = 0;
    run_chunk(p, 0);
    tl_pool = saved;
    tl_id = saved_id;

    if (atomic_load_explicit(&p->pending, memory_order_acquire) == 0) return;
    const int64_t t0 = p->spin_ns > 0 ? now_ns() : 0;
    if (p->caller_budget > 0) {
        for (unsigned i = 1;; i++) {
            spin_pause(i);
            if (atomic_load_explicit(&p->pending, memory_order_acquire) == 0) {
                budget_update(p, &p->caller_budget, now_ns() - t0);
                return;
            }
            if ((i & 15) == 0 && now_ns() - t0 > p->caller_budget) break;
        }
    }
    pthread_mutex_lock(&p->done_mu);
    atomic_store(&p->caller_waiting, 1);
    while (atomic_load(&p->pending) != 0)
        pthread_cond_wait(&p->done_cv, &p->done_mu);
    atomic_store(&p->caller_waiting, 0);
    pthread_mutex_unlock(&p->done_mu);
    if (p->spin_ns > 0) budget_update(p, &p->caller_budget, now_ns() - t0);
}
