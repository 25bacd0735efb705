/* Llama: load (build_model), run state (build_ctx), forward pass. */
#include "model.h"

#include <math.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "picolm/fp16.h"
#include "threadpool.h"
#include "util.h"

/* ------------------------------------------------------------------------ */
/* Loading                                                                   */
/* ------------------------------------------------------------------------ */

/* Integer hyper-parameter "<arch>.<key>" in [lo, hi]; def < 0 = required. */
static int hp_int(const gguf_file *f, const char *arch, const char *key, int64_t def, int64_t lo, int64_t hi, int *out,
                  char *err, size_t errlen) {
    char full[128];
    snprintf(full, sizeof full, "%s.%s", arch, key);
    int64_t v;
    int r = gguf_get_i64(f, full, &v);
    if (r == -1) {
        if (def < 0) return pl_fail(err, errlen, "missing metadata '%s'", full);
        v = def;
    } else if (r) {
        return pl_fail(err, errlen, "metadata '%s' is not an integer", full);
    }
    if (v < lo || v > hi) return pl_fail(err, errlen, "metadata '%s' = %lld is out of range [%lld, %lld]", full, (long long)v, (long long)lo, (long long)hi);
    *out = (int)v;
    return 0;
}

static int hp_float(const gguf_file *f, const char *arch, const char *key, float def, float *out, char *err, size_t errlen) {
    char full[128];
    snprintf(full, sizeof full, "%s.%s", arch, key);
    int r = gguf_get_f32(f, full, out);
    if (r == -1) *out = def;
    else if (r) return pl_fail(err, errlen, "metadata '%s' is not a float", full);
    if (!isfinite(*out)) return pl_fail(err, errlen, "metadata '%s' is not finite", full);
    return 0;
}

/* Bind a matrix and check its shape: ne[0] = cols, ne[1] = rows. */
static int bind_mat(llama_model *m, qmat *q, const char *name, int64_t cols, int64_t rows, int optional, char *err, size_t errlen) {
    const gguf_tensor *t = gguf_find_tensor(&m->gguf, name);
    if (!t) {
        if (optional) return 1;
        return pl_fail(err, errlen, "missing tensor '%s'", name);
    }
    if (t->ne[0] != cols || t->ne[1] != rows || t->ne[2] != 1 || t->ne[3] != 1)
        return pl_fail(err, errlen, "tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld]", name, (long long)t->ne[0],
                    (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3], (long long)cols, (long long)rows);
    const pl_type *ty = &m->d->types[t->type];
    if (!ty->fmt || !(ty->fmt->flags & PICOLM_FMT_WEIGHT) || !ty->vec_dot || !ty->act_quant)
        return pl_fail(err, errlen, "tensor '%s' has type %s (%u), which no loaded format plugin can multiply", name,
                    ty->fmt ? ty->fmt->name : gguf_type_name(t->type), t->type);
    if (rows % ty->row_group)
        return pl_fail(err, errlen, "tensor '%s' (%s) has %lld rows, not a multiple of the %u rows its layout interleaves", name,
                       ty->fmt->name, (long long)rows, ty->row_group);
    q->data = t->data;
    q->type = t->type;
    q->cols = cols;
    q->rows = rows;
    q->row_bytes = dispatch_row_size(m->d, t->type, cols);
    q->name = name;
    m->weight_bytes += t->nbytes;
    return 0;
}

/* A norm vector: F32 in the file is used in place, anything else dequantized once. */
static int bind_vec(llama_model *m, const float **out, const char *name, int64_t n, float **owned_cursor, char *err, size_t errlen) {
    const gguf_tensor *t = gguf_find_tensor(&m->gguf, name);
    if (!t) return pl_fail(err, errlen, "missing tensor '%s'", name);
    if (t->nelements != n || t->ne[0] != n) return pl_fail(err, errlen, "tensor '%s' has %lld elements, expected %lld", name, (long long)t->nelements, (long long)n);
    if (t->type == PICOLM_TYPE_F32) {
        *out = t->data;
    } else {
        const picolm_format *f = m->d->types[t->type].fmt;
        if (!f || m->d->types[t->type].row_group > 1)
            return pl_fail(err, errlen, "tensor '%s' has type %s, which cannot hold a vector", name, f ? f->name : gguf_type_name(t->type));
        f->dequantize_row(t->data, *owned_cursor, n);
        *out = *owned_cursor;
        *owned_cursor += n;
    }
    return 0;
}

int build_model(llama_model *m, const char *path, const pl_dispatch *d, const gguf_limits *lim, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    m->d = d;
    char e[512];
    if (gguf_open(&m->gguf, path, lim, err, errlen)) return -1;
    if (gguf_bind_types(&m->gguf, dispatch_type_size, (void *)d, e, sizeof e)) {
        pl_fail(err, errlen, "%s: %s", path, e);
        goto bad;
    }
    gguf_str arch;
    if (gguf_get_str(&m->gguf, "general.architecture", &arch)) { pl_fail(err, errlen, "%s: missing general.architecture", path); goto bad; }
    if (!gguf_str_eq(arch, "llama")) {
        pl_fail(err, errlen, "%s: architecture '%.*s' is not supported (only llama)", path, (int)(arch.len > 64 ? 64 : arch.len), arch.ptr);
        goto bad;
    }
    snprintf(m->arch, sizeof m->arch, "llama");
    llama_hparams *hp = &m->hp;
    const int BIG = 1 << 20;
    if (hp_int(&m->gguf, "llama", "embedding_length", -1, 1, BIG, &hp->n_embd, e, sizeof e) ||
        hp_int(&m->gguf, "llama", "block_count", -1, 1, 4096, &hp->n_layer, e, sizeof e) ||
        hp_int(&m->gguf, "llama", "attention.head_count", -1, 1, 4096, &hp->n_head, e, sizeof e) ||
        hp_int(&m->gguf, "llama", "attention.head_count_kv", hp->n_head, 1, 4096, &hp->n_head_kv, e, sizeof e) ||
        hp_int(&m->gguf, "llama", "feed_forward_length", -1, 1, BIG, &hp->n_ff, e, sizeof e) ||
        hp_int(&m->gguf, "llama", "context_length", 2048, 1, BIG, &hp->n_ctx_train, e, sizeof e) ||
        hp_float(&m->gguf, "llama", "attention.layer_norm_rms_epsilon", 1e-5f, &hp->rms_eps, e, sizeof e) ||
        hp_float(&m->gguf, "llama", "rope.freq_base", 10000.0f, &hp->rope_base, e, sizeof e) ||
        hp_float(&m->gguf, "llama", "rope.scaling.factor", 1.0f, &hp->rope_scale, e, sizeof e)) {
        pl_fail(err, errlen, "%s: %s", path, e);
        goto bad;
    }
    if (hp->n_head % hp->n_head_kv) {
        pl_fail(err, errlen, "%s: head_count %d is not a multiple of head_count_kv %d", path, hp->n_head, hp->n_head_kv);
        goto bad;
    }
    int key_len = 0;
    if (hp_int(&m->gguf, "llama", "attention.key_length", 0, 0, 65536, &key_len, e, sizeof e)) { pl_fail(err, errlen, "%s: %s", path, e); goto bad; }
    if (key_len) hp->head_dim = key_len;
    else if (hp->n_embd % hp->n_head) {
        pl_fail(err, errlen, "%s: embedding_length %d is not divisible by head_count %d", path, hp->n_embd, hp->n_head);
        goto bad;
    } else hp->head_dim = hp->n_embd / hp->n_head;
    if (hp->head_dim % 2) { pl_fail(err, errlen, "%s: head dimension %d is odd", path, hp->head_dim); goto bad; }
    if (hp_int(&m->gguf, "llama", "rope.dimension_count", hp->head_dim, 2, hp->head_dim, &hp->rope_dim, e, sizeof e)) {
        pl_fail(err, errlen, "%s: %s", path, e);
        goto bad;
    }
    if (hp->rope_dim % 2) { pl_fail(err, errlen, "%s: rope.dimension_count %d is odd", path, hp->rope_dim); goto bad; }
    if (hp->rope_base <= 0 || hp->rope_scale <= 0 || hp->rms_eps < 0) { pl_fail(err, errlen, "%s: invalid rope base/scale or rms epsilon", path); goto bad; }

    const gguf_tensor *te = gguf_find_tensor(&m->gguf, "token_embd.weight");
    if (!te) { pl_fail(err, errlen, "%s: missing tensor 'token_embd.weight'", path); goto bad; }
    if (te->n_dims != 2 || te->ne[1] > BIG * 16) { pl_fail(err, errlen, "%s: token_embd.weight must be 2-D [n_embd, n_vocab]", path); goto bad; }
    hp->n_vocab = (int)te->ne[1];
    int vs = 0;
    if (hp_int(&m->gguf, "llama", "vocab_size", hp->n_vocab, 1, BIG * 16, &vs, e, sizeof e) || vs != hp->n_vocab) {
        pl_fail(err, errlen, "%s: llama.vocab_size (%d) disagrees with token_embd.weight (%d rows)", path, vs, hp->n_vocab);
        goto bad;
    }
    const int64_t qd = (int64_t)hp->n_head * hp->head_dim, kvd = (int64_t)hp->n_head_kv * hp->head_dim;
    if (bind_mat(m, &m->tok_embd, "token_embd.weight", hp->n_embd, hp->n_vocab, 0, e, sizeof e)) { pl_fail(err, errlen, "%s: %s", path, e); goto bad; }
    if (m->d->types[m->tok_embd.type].row_group > 1) {
        /* embeddings are looked up a row at a time; a grouped layout cannot be */
        pl_fail(err, errlen, "%s: token_embd.weight has the row-interleaved type %s; store it in its base type", path,
                m->d->types[m->tok_embd.type].fmt->name);
        goto bad;
    }
    int r = bind_mat(m, &m->output, "output.weight", hp->n_embd, hp->n_vocab, 1, e, sizeof e);
    if (r < 0) { pl_fail(err, errlen, "%s: %s", path, e); goto bad; }
    if (r == 1) m->output = m->tok_embd; /* tied embeddings */
    /* token_embd is read one row per token, not whole: only count it when it is the output */
    if (r == 0) m->weight_bytes -= m->tok_embd.row_bytes * (uint64_t)m->tok_embd.rows;

    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    m->owned = calloc((size_t)(2 * hp->n_layer + 1) * (size_t)hp->n_embd, sizeof(float));
    if (!m->layers || !m->owned) { pl_fail(err, errlen, "out of memory"); goto bad; }
    float *own = m->owned;
    if (bind_vec(m, &m->output_norm, "output_norm.weight", hp->n_embd, &own, e, sizeof e)) { pl_fail(err, errlen, "%s: %s", path, e); goto bad; }
    for (int l = 0; l < hp->n_layer; l++) {
        llama_layer *L = &m->layers[l];
        char n[10][64];
        static const char *fmt[] = {"blk.%d.attn_norm.weight", "blk.%d.ffn_norm.weight", "blk.%d.attn_q.weight",
                                    "blk.%d.attn_k.weight", "blk.%d.attn_v.weight", "blk.%d.attn_output.weight",
                                    "blk.%d.ffn_gate.weight", "blk.%d.ffn_up.weight", "blk.%d.ffn_down.weight"};
        for (int i = 0; i < 9; i++) snprintf(n[i], sizeof n[i], fmt[i], l);
        if (bind_vec(m, &L->attn_norm, n[0], hp->n_embd, &own, e, sizeof e) ||
            bind_vec(m, &L->ffn_norm, n[1], hp->n_embd, &own, e, sizeof e) ||
            bind_mat(m, &L->wq, n[2], hp->n_embd, qd, 0, e, sizeof e) ||
            bind_mat(m, &L->wk, n[3], hp->n_embd, kvd, 0, e, sizeof e) ||
            bind_mat(m, &L->wv, n[4], hp->n_embd, kvd, 0, e, sizeof e) ||
            bind_mat(m, &L->wo, n[5], qd, hp->n_embd, 0, e, sizeof e) ||
            bind_mat(m, &L->w_gate, n[6], hp->n_embd, hp->n_ff, 0, e, sizeof e) ||
            bind_mat(m, &L->w_up, n[7], hp->n_embd, hp->n_ff, 0, e, sizeof e) ||
            bind_mat(m, &L->w_down, n[8], hp->n_ff, hp->n_embd, 0, e, sizeof e)) {
            pl_fail(err, errlen, "%s: %s", path, e);
            goto bad;
        }
        /* names point into a stack buffer: keep the static-lifetime ones only */
        L->wq.name = "attn_q"; L->wk.name = "attn_k"; L->wv.name = "attn_v"; L->wo.name = "attn_output";
        L->w_gate.name = "ffn_gate"; L->w_up.name = "ffn_up"; L->w_down.name = "ffn_down";
    }
    return 0;
bad:
    free_model(m);
    return -1;
}

void free_model(llama_model *m) {
    gguf_close(&m->gguf);
    free(m->layers);
    free(m->owned);
    memset(m, 0, sizeof *m);
}

/* ------------------------------------------------------------------------ */
/* Run state                                                                 */
/* ------------------------------------------------------------------------ */

size_t llama_kv_bytes_per_token(const llama_hparams *hp, int kv_type) {
    const size_t kvd = (size_t)hp->n_head_kv * hp->head_dim;
    const size_t row = kv_type == KV_Q8_0 ? kvd / 32 * 34 : kvd * 2;
    return 2 * row * (size_t)hp->n_layer;
}

static size_t round64(size_t n) { return (n + 63) / 64 * 64; }

/* one thread's share of the running matmul (mm_worker), on its own line */
typedef struct mm_part {
    alignas(64) _Atomic uint64_t fe; /* units [front, end) not yet claimed */
} mm_part;

static void *xalloc(llama_ctx *c, size_t n) {
    size_t r = round64(n);
    void *p = aligned_alloc(64, r ? r : 64);
    if (p) {
        memset(p, 0, r);
        c->anon_bytes += r;
    }
    return p;
}

/* Bytes of one quantized activation row for matrix w. */
static size_t act_row(const llama_model *m, const qmat *w) {
    return dispatch_row_size(m->d, m->d->types[w->type].vec_dot_type, w->cols);
}

/* Bytes of one group of w unpacked to its base type when its kernels are
   the base type's (pl_type.to_base), else 0. */
static size_t unpack_group(const llama_model *m, const qmat *w) {
    const pl_type *t = &m->d->types[w->type];
    return t->to_base ? t->row_group * dispatch_row_size(m->d, t->base_type, w->cols) : 0;
}

/* The largest f(matrix) over every matrix the model multiplies. */
static size_t mats_max(const llama_model *m, size_t (*f)(const llama_model *, const qmat *)) {
    size_t mx = f(m, &m->output);
    for (int l = 0; l < m->hp.n_layer; l++) {
        const llama_layer *L = &m->layers[l];
        const qmat *lm[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (int i = 0; i < 7; i++)
            if (f(m, lm[i]) > mx) mx = f(m, lm[i]);
    }
    return mx;
}

/* Sizes of the scratch buffers for a batch of B tokens: one place for
   build_ctx (which allocates them) and the memory plan (which adds them). */
enum { BUF_X, BUF_XB, BUF_Q, BUF_K, BUF_V, BUF_ATT, BUF_HB, BUF_HB2, BUF_LOGITS, BUF_ACTQ, BUF_UNPACK, N_BUF };

/* Per-thread attention scratch, in floats: a task's queries rounded to f16,
   their softmax states (max, sum), and dequantized K and V rows (q8_0). */
static size_t att_tmp_floats(const llama_hparams *hp) {
    const size_t group = (size_t)(hp->n_head / hp->n_head_kv);
    return group * hp->head_dim + 2 * group + 2 * (size_t)hp->head_dim;
}

static void scratch_sizes(const llama_model *m, size_t B, size_t nthr, size_t sz[N_BUF]) {
    const llama_hparams *hp = &m->hp;
    const size_t qd = (size_t)hp->n_head * hp->head_dim, kvd = (size_t)hp->n_head_kv * hp->head_dim;
    const size_t wide = (size_t)hp->n_ff > qd ? (size_t)hp->n_ff : qd;
    sz[BUF_X] = B * (size_t)hp->n_embd * sizeof(float);
    sz[BUF_XB] = B * wide * sizeof(float);
    sz[BUF_Q] = B * qd * sizeof(float);
    sz[BUF_K] = sz[BUF_V] = B * kvd * sizeof(float);
    /* attention output rows, then per-thread scratch (att_tmp_floats) */
    sz[BUF_ATT] = (B * qd + nthr * att_tmp_floats(hp)) * sizeof(float);
    sz[BUF_HB] = sz[BUF_HB2] = B * (size_t)hp->n_ff * sizeof(float);
    sz[BUF_LOGITS] = (size_t)hp->n_vocab * sizeof(float);
    sz[BUF_ACTQ] = 3 * mats_max(m, act_row) * B; /* up to 3 activation types per region */
    sz[BUF_UNPACK] = nthr * round64(mats_max(m, unpack_group)); /* one group per thread */
}

size_t llama_scratch_bytes(const llama_model *m, int n_batch, int n_threads) {
    size_t sz[N_BUF], total = 0;
    scratch_sizes(m, (size_t)(n_batch > 0 ? n_batch : 1), (size_t)(n_threads > 0 ? n_threads : 1), sz);
    for (int i = 0; i < N_BUF; i++) total += round64(sz[i]);
    return total;
}

int build_ctx(llama_ctx *c, const llama_model *m, int n_ctx, int n_batch, int kv_type, struct threadpool *pool, char *err, size_t errlen) {
    memset(c, 0, sizeof *c);
    const llama_hparams *hp = &m->hp;
    if (n_ctx <= 0) n_ctx = hp->n_ctx_train;
    if (n_batch <= 0) n_batch = 1;
    if (n_batch > n_ctx) n_batch = n_ctx;
    const int kvd = hp->n_head_kv * hp->head_dim;
    if (kv_type == KV_Q8_0 && (kvd % 32 || hp->head_dim % 32 || !m->d->types[PICOLM_TYPE_Q8_0].fmt ||
                               !m->d->types[PICOLM_TYPE_Q8_0].fmt->quantize_row))
        return pl_fail(err, errlen, "kv_type q8_0 needs head_dim %% 32 == 0 and the Q8_0 format plugin");
    c->m = m;
    c->pool = pool;
    c->n_ctx = n_ctx;
    c->n_batch = n_batch;
    c->kv_type = kv_type;
    c->kv_row_bytes = kv_type == KV_Q8_0 ? (size_t)kvd / 32 * 34 : (size_t)kvd * 2;
    const size_t kv = c->kv_row_bytes * (size_t)n_ctx * (size_t)hp->n_layer;
    size_t sz[N_BUF];
    const size_t nthr = (size_t)threadpool_size(pool); /* 1 without a pool */
    scratch_sizes(m, (size_t)n_batch, nthr, sz);
    c->act_q_bytes = sz[BUF_ACTQ];
    c->k_cache = xalloc(c, kv);
    c->v_cache = xalloc(c, kv);
    c->rope_cos = xalloc(c, (size_t)n_ctx * (size_t)(hp->rope_dim / 2) * sizeof(float));
    c->rope_sin = xalloc(c, (size_t)n_ctx * (size_t)(hp->rope_dim / 2) * sizeof(float));
    c->x = xalloc(c, sz[BUF_X]);
    c->xb = xalloc(c, sz[BUF_XB]);
    c->q = xalloc(c, sz[BUF_Q]);
    c->k = xalloc(c, sz[BUF_K]);
    c->v = xalloc(c, sz[BUF_V]);
    c->att = xalloc(c, sz[BUF_ATT]);
    c->hb = xalloc(c, sz[BUF_HB]);
    c->hb2 = xalloc(c, sz[BUF_HB2]);
    c->logits = xalloc(c, sz[BUF_LOGITS]);
    c->act_q = xalloc(c, sz[BUF_ACTQ]);
    c->unpack_stride = sz[BUF_UNPACK] / nthr;
    c->unpack = c->unpack_stride ? xalloc(c, sz[BUF_UNPACK]) : NULL;
    c->mm_parts = xalloc(c, nthr * sizeof *c->mm_parts);
    if ((c->unpack_stride && !c->unpack) || !c->k_cache || !c->v_cache || !c->rope_cos || !c->rope_sin || !c->x || !c->xb || !c->q || !c->k || !c->v ||
        !c->att || !c->hb || !c->hb2 || !c->logits || !c->act_q || !c->mm_parts) {
        free_ctx(c);
        return pl_fail(err, errlen, "out of memory allocating the context (%d tokens, %.1f MB of KV cache)", n_ctx, kv * 2 / 1e6);
    }
    /* RoPE tables: theta_i = pos * base^(-2i/rope_dim), computed once in
       double (measured closer to llama.cpp's references than float). */
    const int half = hp->rope_dim / 2;
    for (int p = 0; p < n_ctx; p++)
        for (int i = 0; i < half; i++) {
            const double theta = (p / (double)hp->rope_scale) * pow((double)hp->rope_base, -2.0 * i / hp->rope_dim);
            c->rope_cos[(size_t)p * half + i] = (float)cos(theta);
            c->rope_sin[(size_t)p * half + i] = (float)sin(theta);
        }
    return 0;
}

void free_ctx(llama_ctx *c) {
    void *bufs[] = {c->k_cache, c->v_cache, c->rope_cos, c->rope_sin, c->x, c->xb, c->q, c->k,
                    c->v, c->att, c->hb, c->hb2, c->logits, c->act_q, c->unpack, c->mm_parts};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) free(bufs[i]);
    memset(c, 0, sizeof *c);
}

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
static void matmul_n_run(llama_ctx *c, int n, const qmat *const *w, float *const *out, const float *x, int nb) {
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

static void matmul_n(llama_ctx *c, int n, const qmat *const *w, float *const *out, const float *x, int nb) {
    const double t0 = c->prof.on ? pl_now() : 0;
    matmul_n_run(c, n, w, out, x, nb);
    if (c->prof.on) c->prof.matmul += pl_now() - t0;
}

static void matmul(llama_ctx *c, const qmat *w, float *out, const float *x, int nb) {
    matmul_n(c, 1, &w, &out, x, nb);
}

/* ------------------------------------------------------------------------ */
/* Attention: one task per (token, query head), online softmax over the cache */
/* ------------------------------------------------------------------------ */

typedef struct att_task {
    llama_ctx *c;
    int layer, nb, pos0;
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
    llama_ctx *c = A->c;
    const llama_hparams *hp = &c->m->hp;
    const pl_ops *ops = &c->m->d->ops;
    const int hd = hp->head_dim, qd = hp->n_head * hd, qpt = A->qpt;
    const int group = hp->n_head / hp->n_head_kv, parts = group / qpt;
    const float scale = 1.0f / sqrtf((float)hd);
    const size_t layer_off = (size_t)A->layer * c->n_ctx * c->kv_row_bytes;
    float *tmp = c->att + (size_t)c->n_batch * qd + (size_t)tid * att_tmp_floats(hp);
    float *qr = tmp, *mx = tmp + (size_t)group * hd, *sum = mx + group, *kv = sum + group;
    const picolm_format *q8 = c->kv_type == KV_Q8_0 ? c->m->d->types[PICOLM_TYPE_Q8_0].fmt : NULL;
    for (int64_t i = i0; i < i1; i++) {
        const int b = (int)(i / (hp->n_head_kv * parts)), kvh = (int)(i / parts % hp->n_head_kv), h0 = kvh * group + (int)(i % parts) * qpt;
        const int pos = A->pos0 + b;
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
        const uint8_t *kbase = c->k_cache + layer_off, *vbase = c->v_cache + layer_off;
        if (!q8 && ops->attn_f16) /* the loop below, in one backend call for the qpt heads */
            ops->attn_f16(qg, (size_t)hd, qpt, (const uint16_t *)kbase + (size_t)kvh * hd, (const uint16_t *)vbase + (size_t)kvh * hd,
                          c->kv_row_bytes / 2, pos + 1, hd, scale, yg, (size_t)hd, mx, sum);
        else for (int t = 0; t <= pos; t++) {
            /* position by position, all qpt queries: a q8_0 row is
               dequantized once for them (each query's own steps and their
               order are those of one query alone) */
            const uint8_t *krow = kbase + (size_t)t * c->kv_row_bytes, *vrow = vbase + (size_t)t * c->kv_row_bytes;
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
   thread x (queries per task + 1); ties keep the larger share.  Splitting
   TinyLlama's groups of 8 for 2 threads (8 tasks, not 4: the same balance)
   cost 3-9% of decode at a short context and 11-12% at 1024 tokens. */
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

/* Rotate interleaved pairs (x[2i], x[2i+1]) of every head by pos * theta_i. */
static void rope(const llama_ctx *c, float *v, int n_heads, int pos) {
    const int hd = c->m->hp.head_dim, half = c->m->hp.rope_dim / 2;
    const float *cs = c->rope_cos + (size_t)pos * half, *sn = c->rope_sin + (size_t)pos * half;
    for (int h = 0; h < n_heads; h++) {
        float *x = v + (size_t)h * hd;
        for (int i = 0; i < half; i++) {
            const float x0 = x[2 * i], x1 = x[2 * i + 1];
            x[2 * i] = x0 * cs[i] - x1 * sn[i];
            x[2 * i + 1] = x0 * sn[i] + x1 * cs[i];
        }
    }
}

static void store_kv(llama_ctx *c, int layer, int pos, const float *k, const float *v) {
    const size_t off = ((size_t)layer * c->n_ctx + (size_t)pos) * c->kv_row_bytes;
    const int kvd = c->m->hp.n_head_kv * c->m->hp.head_dim;
    if (c->kv_type == KV_Q8_0) {
        const picolm_format *q8 = c->m->d->types[PICOLM_TYPE_Q8_0].fmt;
        q8->quantize_row(k, c->k_cache + off, kvd);
        q8->quantize_row(v, c->v_cache + off, kvd);
    } else {
        c->m->d->ops.f32_to_f16((uint16_t *)(c->k_cache + off), k, kvd);
        c->m->d->ops.f32_to_f16((uint16_t *)(c->v_cache + off), v, kvd);
    }
}

/* ------------------------------------------------------------------------ */
/* The forward pass                                                          */
/* ------------------------------------------------------------------------ */

int llama_forward(llama_ctx *c, const int32_t *tokens, int n, float *all_logits, char *err, size_t errlen) {
    const llama_model *m = c->m;
    const llama_hparams *hp = &m->hp;
    const pl_ops *ops = &m->d->ops;
    if (n <= 0 || n > c->n_batch) return pl_fail(err, errlen, "batch of %d tokens (allowed 1..%d)", n, c->n_batch);
    if (c->n_past + n > c->n_ctx) return pl_fail(err, errlen, "context full: %d + %d tokens exceed the context of %d", c->n_past, n, c->n_ctx);
    const int dim = hp->n_embd, hd = hp->head_dim, kvd = hp->n_head_kv * hd, qd = hp->n_head * hd, ff = hp->n_ff;
    const int pos0 = c->n_past;

    /* 1. embed: dequantize each token's row of token_embd */
    const picolm_format *ef = m->d->types[m->tok_embd.type].fmt;
    for (int b = 0; b < n; b++) {
        if (tokens[b] < 0 || tokens[b] >= hp->n_vocab) return pl_fail(err, errlen, "token id %d outside the vocabulary (%d)", tokens[b], hp->n_vocab);
        ef->dequantize_row(m->tok_embd.data + (size_t)tokens[b] * m->tok_embd.row_bytes, c->x + (size_t)b * dim, dim);
    }

    for (int l = 0; l < hp->n_layer; l++) {
        const llama_layer *L = &m->layers[l];
        /* 2. attention rmsnorm */
        for (int b = 0; b < n; b++) ops->rmsnorm(c->xb + (size_t)b * dim, c->x + (size_t)b * dim, L->attn_norm, dim, hp->rms_eps);
        /* 3. Q, K, V projections (one parallel region) */
        const qmat *qkv[3] = {&L->wq, &L->wk, &L->wv};
        float *qkv_out[3] = {c->q, c->k, c->v};
        matmul_n(c, 3, qkv, qkv_out, c->xb, n);
        /* 4. RoPE on Q and K, then K/V into the cache */
        for (int b = 0; b < n; b++) {
            rope(c, c->q + (size_t)b * qd, hp->n_head, pos0 + b);
            rope(c, c->k + (size_t)b * kvd, hp->n_head_kv, pos0 + b);
            store_kv(c, l, pos0 + b, c->k + (size_t)b * kvd, c->v + (size_t)b * kvd);
        }
        /* 5. attention over the cache (GQA: query head h reads KV head h / group) */
        att_task A = {c, l, n, pos0, att_queries_per_task(n, hp->n_head, hp->n_head / hp->n_head_kv, threadpool_size(c->pool))};
        const double ta = c->prof.on ? pl_now() : 0;
        threadpool_run(c->pool, (int64_t)n * hp->n_head / A.qpt, att_worker, &A);
        if (c->prof.on) c->prof.attention += pl_now() - ta;
        /* 6. output projection and residual */
        matmul(c, &L->wo, c->xb, c->att, n);
        for (size_t i = 0; i < (size_t)n * dim; i++) c->x[i] += c->xb[i];
        /* 7. FFN rmsnorm, SwiGLU: down(silu(gate x) * up x), residual */
        for (int b = 0; b < n; b++) ops->rmsnorm(c->xb + (size_t)b * dim, c->x + (size_t)b * dim, L->ffn_norm, dim, hp->rms_eps);
        const qmat *gu[2] = {&L->w_gate, &L->w_up};
        float *gu_out[2] = {c->hb, c->hb2};
        matmul_n(c, 2, gu, gu_out, c->xb, n);
        for (int b = 0; b < n; b++) ops->swiglu(c->hb + (size_t)b * ff, c->hb2 + (size_t)b * ff, ff);
        matmul(c, &L->w_down, c->xb, c->hb, n);
        for (size_t i = 0; i < (size_t)n * dim; i++) c->x[i] += c->xb[i];
    }
    c->n_past += n;

    /* 8. final rmsnorm and the output matrix: every token or just the last */
    const int first = all_logits ? 0 : n - 1;
    for (int b = first; b < n; b++) ops->rmsnorm(c->xb + (size_t)(b - first) * dim, c->x + (size_t)b * dim, m->output_norm, dim, hp->rms_eps);
    if (all_logits) {
        matmul(c, &m->output, all_logits, c->xb, n);
        memcpy(c->logits, all_logits + (size_t)(n - 1) * hp->n_vocab, (size_t)hp->n_vocab * sizeof(float));
    } else {
        matmul(c, &m->output, c->logits, c->xb, 1);
    }
    return 0;
}
