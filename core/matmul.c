/* The matmul scheduler: see matmul.h. */
#include "matmul.h"

#include <stdatomic.h>
#include <string.h>

#include "threadpool.h"
#include "util.h"

/* ------------------------------------------------------------------------ */
/* Matrix multiplication: out[b][r] = W[r] . x[b] for a batch of nb rows     */
/* ------------------------------------------------------------------------ */

typedef struct mm_job {
    const qmat *w;
    float *out;                 /* out[b * ldo + r] */
    int ldo;
    const uint8_t *xq;          /* nb quantized activation rows */
    size_t xq_stride;
    const pl_type *t;
    size_t base_row_bytes;      /* t->to_base: bytes of one unpacked row */
} mm_job;

/* Row scheduling, in units of 16 rows (a whole row group or gemm panel):
   each thread owns a contiguous share of the joint row space and walks it
   from the front, MM_OWN units per claim, one long sequential weight stream
   per thread; a thread done with its share takes MM_STEAL units at a time
   from the back of the others', so that a preempted or slower thread's work
   is finished by the idle one and the threads end within a claim of each
   other.  front | end << 32 in one atomic word: owner and thief race on it
   with a compare-and-swap, and each thread's word has its own cache line.
   Every row is computed by the same kernel whatever the split, so results
   don't depend on it. */
#ifndef MM_OWN
#define MM_OWN 4
#endif
#ifndef MM_STEAL
#define MM_STEAL 1
#endif

typedef struct mm_task {
    mm_job job[3];
    int n_jobs, nb, nthr;
    int64_t start[4];           /* row offsets of each job in the joint row space */
    mm_part *part;              /* one per thread */
    uint8_t *unpack;            /* per-thread group buffers (pl_type.to_base) */
    size_t unpack_stride;
} mm_task;

/* A layout run through its base type's kernels: each group is unpacked
   into this thread's buffer (L1/L2-sized), then multiplied there. */
static void mm_unpacked(const mm_task *T, const mm_job *J, int64_t a, int64_t b, int tid) {
    const qmat *w = J->w;
    const pl_type *t = J->t;
    const int64_t g = t->row_group;
    const size_t brb = J->base_row_bytes;
    uint8_t *buf = T->unpack + (size_t)tid * T->unpack_stride;
    for (int64_t r = a; r < b; r += g) {
        t->to_base(w->data + (size_t)r * w->row_bytes, buf, brb, w->cols);
        if (t->gemm) {
            t->gemm(w->cols, g, T->nb, buf, brb, J->xq, J->xq_stride, J->out + r, (size_t)J->ldo);
            continue;
        }
        for (int k = 0; k < T->nb; k++)
            for (int64_t i = 0; i < g; i++)
                t->vec_dot(w->cols, &J->out[(size_t)k * J->ldo + r + i], buf + (size_t)i * brb, J->xq + (size_t)k * J->xq_stride);
    }
}

/* rows [r0, r1) of the joint row space */
static void mm_rows(const mm_task *T, int64_t r0, int64_t r1, int tid) {
    for (int j = 0; j < T->n_jobs; j++) {
        int64_t a = r0 > T->start[j] ? r0 : T->start[j];
        int64_t b = r1 < T->start[j + 1] ? r1 : T->start[j + 1];
        if (a >= b) continue;
        const mm_job *J = &T->job[j];
        a -= T->start[j];
        b -= T->start[j];
        if (b > J->w->rows) b = J->w->rows; /* the padding up to 16 */
        if (a >= b) continue;
        const qmat *w = J->w;
        if (J->t->to_base) {
            mm_unpacked(T, J, a, b, tid);
            continue;
        }
        /* gemm also for one column (decode): a backend may run several rows
           per call there */
        if (J->t->gemm) {
            J->t->gemm(w->cols, b - a, T->nb, w->data + (size_t)a * w->row_bytes, w->row_bytes, J->xq, J->xq_stride,
                       J->out + a, (size_t)J->ldo);
            continue;
        }
        /* vec_dot of a row-grouped type computes a whole group (g rows) */
        const int64_t g = J->t->row_group;
        float s[16];
        for (int64_t r = a; r < b; r += g) {
            const uint8_t *row = w->data + (size_t)r * w->row_bytes;
            for (int k = 0; k < T->nb; k++) {
                float *o = &J->out[(size_t)k * J->ldo + r];
                if (g == 1) J->t->vec_dot(w->cols, o, row, J->xq + (size_t)k * J->xq_stride);
                else {
                    J->t->vec_dot(w->cols, s, row, J->xq + (size_t)k * J->xq_stride);
                    memcpy(o, s, (size_t)g * sizeof *s);
                }
            }
        }
    }
}

/* Claims up to `want` units from the front (or the back) of *p; 0 when empty. */
static int mm_claim(mm_part *p, uint32_t want, int back, int64_t *u0, int64_t *u1) {
    uint64_t v = atomic_load_explicit(&p->fe, memory_order_relaxed);
    for (;;) {
        const uint32_t f = (uint32_t)v, e = (uint32_t)(v >> 32);
        if (f >= e) return 0;
        const uint32_t take = e - f < want ? e - f : want;
        const uint64_t nv = back ? (uint64_t)(e - take) << 32 | f : (uint64_t)e << 32 | (f + take);
        if (atomic_compare_exchange_weak_explicit(&p->fe, &v, nv, memory_order_relaxed, memory_order_relaxed)) {
            *u0 = back ? e - take : f;
            *u1 = back ? e : f + take;
            return 1;
        }
    }
}

/* units [a, b): rows [16a, 16b), the last unit cut at the end of the row space */
static void mm_units(const mm_task *T, int64_t a, int64_t b, int tid) {
    const int64_t n = T->start[T->n_jobs];
    mm_rows(T, a * 16, b * 16 < n ? b * 16 : n, tid);
}

static void mm_worker(void *ctx, int64_t u0, int64_t u1, int tid) {
    (void)u0, (void)u1;
    const mm_task *T = ctx;
    int64_t a, b;
    while (mm_claim(&T->part[tid], MM_OWN, 0, &a, &b)) mm_units(T, a, b, tid);
    for (int k = 1; k < T->nthr; k++) {
        mm_part *v = &T->part[(tid + k) % T->nthr];
        while (mm_claim(v, MM_STEAL, 1, &a, &b)) mm_units(T, a, b, tid);
    }
}

/* Activation quantization of a batch: rows [u0, u1) of up to 3 types */
typedef struct aq_task {
    picolm_from_float_fn fn[3];
    uint8_t *q[3];
    size_t stride[3];
    int n_q, cols;
    const float *x;
} aq_task;

static void aq_worker(void *ctx, int64_t u0, int64_t u1, int tid) {
    (void)tid;
    const aq_task *A = ctx;
    for (int64_t b = u0; b < u1; b++)
        for (int k = 0; k < A->n_q; k++) A->fn[k](A->x + (size_t)b * A->cols, A->q[k] + (size_t)b * A->stride[k], A->cols);
}

/* Up to 3 matrices sharing the same input (Q/K/V, gate/up) in one parallel
   region: the input is quantized once per distinct activation type. */
static void matmul_n_run(llama_batch *c, int n, const qmat *const *w, float *const *out, const float *x, int nb) {
    mm_task T;
    T.n_jobs = n;
    T.nb = nb;
    T.start[0] = 0;
    const int cols = (int)w[0]->cols;
    const int nthr = threadpool_size(c->pool);
    uint8_t *q = c->act_q;
    size_t stride = 0;
    uint32_t qtype = UINT32_MAX;
    aq_task A = {.n_q = 0, .cols = cols, .x = x};
    for (int j = 0; j < n; j++) {
        const pl_type *t = &c->m->d->types[w[j]->type];
        if (t->vec_dot_type != qtype) { /* quantize x to this kernel's activation type */
            if (qtype != UINT32_MAX) q += stride * (size_t)nb;
            qtype = t->vec_dot_type;
            stride = dispatch_row_size(c->m->d, qtype, cols);
            A.fn[A.n_q] = t->act_quant;
            A.q[A.n_q] = q;
            A.stride[A.n_q++] = stride;
        }
        T.job[j] = (mm_job){w[j], out[j], (int)w[j]->rows, q, stride, t,
                            t->to_base ? dispatch_row_size(c->m->d, t->base_type, cols) : 0};
        /* each job starts on a multiple of 16 rows of the joint space, so
           that chunks (multiples of 16) never split a row group */
        T.start[j + 1] = T.start[j] + ((w[j]->rows + 15) & ~(int64_t)15);
    }
    /* a prefill batch is quantized by all threads (serial, it was a few %
       of the prefill time with 2 threads); one row (decode) inline */
    if (nthr > 1 && nb >= 2 * nthr) threadpool_run(c->pool, nb, aq_worker, &A);
    else aq_worker(&A, 0, nb, 0);
    /* thread t owns units [t * units / nthr, (t + 1) * units / nthr) */
    const int64_t units = (T.start[n] + 15) / 16;
    T.part = c->mm_parts;
    T.nthr = nthr;
    T.unpack = c->unpack;
    T.unpack_stride = c->unpack_stride;
    if (nthr <= 1) {
        mm_rows(&T, 0, T.start[n], 0);
        return;
    }
    for (int t = 0; t < nthr; t++)
        atomic_store_explicit(&T.part[t].fe, (uint64_t)(units * (t + 1) / nthr) << 32 | (uint64_t)(units * t / nthr), memory_order_relaxed);
    threadpool_run(c->pool, nthr, mm_worker, &T);
}

void matmul_n(llama_batch *c, int n, const qmat *const *w, float *const *out, const float *x, int nb) {
    const double t0 = c->prof.on ? pl_now() : 0;
    matmul_n_run(c, n, w, out, x, nb);
    if (c->prof.on) c->prof.matmul += pl_now() - t0;
}

void matmul(llama_batch *c, const qmat *w, float *out, const float *x, int nb) {
    matmul_n(c, 1, &w, &out, x, nb);
}

