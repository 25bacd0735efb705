/* Attention over the KV cache: see attention.h. */
#include "attention.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "picolm/fp16.h"
#include "kv.h"
#include "threadpool.h"
#include "util.h"

/* Per-thread attention scratch, in floats: a task's queries rounded to f16,
   their softmax states (max, sum), and dequantized K and V rows (q8_0). */
size_t att_tmp_floats(const llama_hparams *hp) {
    const size_t group = (size_t)(hp->n_head / hp->n_head_kv);
    return group * hp->head_dim + 2 * group + 2 * (size_t)hp->head_dim;
}

typedef struct att_task {
    llama_batch *c;
    int layer, nb;
    int qpt;                    /* query heads per task: a share of one KV head's group */
} att_task;

/* y = y * a + b * v elementwise (two roundings: no fma here), in groups
   of 8 that the compiler's block vectorizer turns into vector code at -O2 */
static void axpby(float *restrict y, float a, float b, const float *restrict v, int n) {
    int d = 0;
    for (; d + 8 <= n; d += 8)
        for (int e = 0; e < 8; e++) y[d + e] = y[d + e] * a + b * v[d + e];
    for (; d < n; d++) y[d] = y[d] * a + b * v[d];
}

/* One task = qpt query heads of one token that share a KV head. */
static void att_worker(void *ctx, int64_t i0, int64_t i1, int tid) {
    const att_task *A = ctx;
    llama_batch *c = A->c;
    const llama_model *m = c->m;
    const llama_hparams *hp = &m->hp;
    const pl_ops *ops = &m->d->ops;
    const int hd = hp->head_dim, qd = hp->n_head * hd, qpt = A->qpt;
    const int group = hp->n_head / hp->n_head_kv, parts = group / qpt;
    /* 1/sqrt(head_dim), unless the recipe scaled q already */
    const float scale = m->arch->q_scale ? 1.0f : 1.0f / sqrtf((float)hd);
    const int window = m->layers[A->layer].kind == LAYER_SWA ? hp->n_swa : 0;
    float *tmp = c->att_tmp + (size_t)tid * att_tmp_floats(hp);
    float *qr = tmp, *mx = tmp + (size_t)group * hd, *sum = mx + group, *kv = sum + group;
    for (int64_t i = i0; i < i1; i++) {
        const int b = (int)(i / (hp->n_head_kv * parts)), kvh = (int)(i / parts % hp->n_head_kv), h0 = kvh * group + (int)(i % parts) * qpt;
        /* the token's own sequence: its cache, up to its position (from
           the window's first position in a sliding-window layer) */
        const kv_seq *kc = c->tok_seq[b];
        const int pos = c->tok_pos[b], first = window && pos >= window ? pos - window + 1 : 0;
        const size_t rb = kc->pool->row_bytes;
        const picolm_format *q8 = kc->pool->kv_type == KV_Q8_0 ? m->d->types[PICOLM_TYPE_Q8_0].fmt : NULL;
        const float *qg = c->q + (size_t)b * qd + (size_t)h0 * hd;
        float *yg = c->att + (size_t)b * qd + (size_t)h0 * hd;
        memset(yg, 0, (size_t)qpt * hd * sizeof(float));
        for (int j = 0; j < qpt; j++) mx[j] = -INFINITY, sum[j] = 0;
        /* llama.cpp's CPU flash attention rounds the query to the K type
           (f16) and accumulates V in f16; doing the same keeps greedy
           continuations token-identical with its references. */
        if (!q8) {
            for (int d = 0; d < qpt * hd; d++) qr[d] = picolm_half_to_float(picolm_float_to_half(qg[d]));
            qg = qr;
        }
        /* position order, run by run (one run for a contiguous cache, one
           per block for a paged one): the same steps either way */
        for (int t0 = first, nr; t0 <= pos; t0 += nr) {
            const uint8_t *kbase, *vbase;
            nr = kv_run(kc, A->layer, t0, pos + 1, &kbase, &vbase);
            if (!q8 && ops->attn_f16) /* the loop below, in one backend call for the qpt heads */
                ops->attn_f16(qg, (size_t)hd, qpt, (const uint16_t *)kbase + (size_t)kvh * hd, (const uint16_t *)vbase + (size_t)kvh * hd,
                              rb / 2, nr, hd, scale, yg, (size_t)hd, mx, sum);
            else for (int t = 0; t < nr; t++) {
                /* position by position, all qpt queries: a q8_0 row is
                   dequantized once for them (each query's own steps and their
                   order are those of one query alone) */
                const uint8_t *krow = kbase + (size_t)t * rb, *vrow = vbase + (size_t)t * rb;
                if (q8) {
                    q8->dequantize_row(krow + (size_t)kvh * hd / 32 * 34, kv, hd);
                    q8->dequantize_row(vrow + (size_t)kvh * hd / 32 * 34, kv + hd, hd);
                }
                for (int j = 0; j < qpt; j++) {
                    const float *q = qg + (size_t)j * hd;
                    float *y = yg + (size_t)j * hd;
                    const float s = (q8 ? ops->dot_f32(q, kv, hd) : ops->dot_f32_f16(q, (const uint16_t *)krow + (size_t)kvh * hd, hd)) * scale;
                    /* online softmax: rescale the running sum when the max grows */
                    float wscale = 1.0f, w;
                    if (s > mx[j]) {
                        wscale = expf(mx[j] - s);
                        mx[j] = s;
                        w = 1.0f;
                    } else {
                        w = expf(s - mx[j]);
                    }
                    sum[j] = sum[j] * wscale + w;
                    if (!q8) ops->scale_axpy_f16(y, wscale, w, (const uint16_t *)vrow + (size_t)kvh * hd, hd);
                    else axpby(y, wscale, w, kv + hd, hd);
                }
            }
        }
        for (int j = 0; j < qpt; j++) {
            const float inv = 1.0f / sum[j];
            for (int d = 0; d < hd; d++) yg[(size_t)j * hd + d] *= inv;
        }
    }
}

/* Query heads per attention task.  A task is (token, KV head) with all or
   a share of the KV head's group of query heads (decode has a handful of
   KV heads), and it reads and converts that head's K/V rows once for its
   queries: about one query's worth of work per task.  So the group is
   halved only where that shortens the busiest thread's work, tasks per
   thread x (queries per task + 1); ties keep the larger share (a split
   that does not shorten it only repeats the K/V conversion: docs/perf.md). */
static int att_queries_per_task(int n_tok, int n_head, int group, int nthr) {
    int best = group;
    int64_t best_cost = INT64_MAX;
    for (int q = group;; q /= 2) {
        const int64_t tasks = (int64_t)n_tok * n_head / q, cost = (tasks + nthr - 1) / nthr * (q + 1);
        if (cost < best_cost) best = q, best_cost = cost;
        if (q % 2) break;
    }
    return best;
}


void attention(llama_batch *c, int layer, int n) {
    const llama_hparams *hp = &c->m->hp;
    att_task A = {c, layer, n, att_queries_per_task(n, hp->n_head, hp->n_head / hp->n_head_kv, threadpool_size(c->pool))};
    const double t0 = c->prof.on ? pl_now() : 0;
    threadpool_run(c->pool, (int64_t)n * hp->n_head / A.qpt, att_worker, &A);
    if (c->prof.on) c->prof.attention += pl_now() - t0;
}
