/*
 * Persistent thread pool for the forward pass.  Threads are created once;
 * threadpool_run hands work over through an atomic generation counter that
 * idle workers spin on for a short while (~1 ms; none when the pool has
 * more threads than CPUs) before sleeping on a
 * condition variable, so back-to-back calls (hundreds per token) cost about
 * a cache-line round trip while an idle pool uses no CPU.
 */
#ifndef PICOLM_THREADPOOL_H
#define PICOLM_THREADPOOL_H
#include <stdint.h>
#include "picolm/plugin.h" /* picolm_task_fn */

typedef struct threadpool threadpool;

/* n_threads counts the calling thread (n_threads - 1 workers are started);
   n_threads <= 0 means cpu_count_online().  NULL on failure. */
threadpool *build_threadpool(int n_threads);
/* Stops and joins the workers.  NULL is a no-op. */
void free_threadpool(threadpool *p);
/* Threads the pool runs on, caller included (>= 1). */
int threadpool_size(const threadpool *p);

/* Split [0, n) into threadpool_size() contiguous, balanced chunks; chunk i
   runs as fn(ctx, begin, end, i) on thread i (0 = the caller).  Empty
   chunks are skipped.  Returns when every chunk is done.  One caller at a
   time per pool; a call made from inside fn (nested) runs inline on the
   current thread as fn(ctx, 0, n, thread_id).  p == NULL runs inline too. */
void threadpool_run(threadpool *p, int64_t n, picolm_task_fn fn, void *ctx);

#endif
