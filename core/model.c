/* The model: architectures (as data), load (build_model), run state
   (build_ctx), forward pass. */
#include "model.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "kvpool.h"
#include "matmul.h"
#include "threadpool.h"
#include "util.h"

/* ------------------------------------------------------------------------ */
/* Architectures                                                             */
/* ------------------------------------------------------------------------ */

/* What differs between the families (llama.cpp's llama-arch.cpp tensor
   lists and llm_build_* graphs): which tensors exist, and the RoPE pair
   layout.  Everything else (SwiGLU FFN, RMS norms, GQA) is shared. */
const llama_arch llama_archs[] = {
    /* Llama 1-3: interleaved pairs; biases optional as in llama.cpp;
       Llama 3.1+ divide each RoPE frequency by rope_freqs.weight */
    {"llama", 0, {[ARCH_T_OUTPUT] = ARCH_OPTIONAL, [ARCH_T_QKV_BIAS] = ARCH_OPTIONAL, [ARCH_T_ROPE_FREQS] = ARCH_OPTIONAL}},
    /* Qwen2, Qwen2.5: q/k/v biases, NeoX pairs */
    {"qwen2", 1, {[ARCH_T_OUTPUT] = ARCH_OPTIONAL, [ARCH_T_QKV_BIAS] = ARCH_REQUIRED}},
    /* Qwen3: an RMS norm of each q and k head before RoPE, NeoX pairs */
    {"qwen3", 1, {[ARCH_T_OUTPUT] = ARCH_OPTIONAL, [ARCH_T_QK_NORM] = ARCH_REQUIRED}},
    {NULL, 0, {0}},
};

/* The per-layer tensors: name, where it is bound, its shape (ne[0], ne[1])
   in the dimensions below (a vector has rows D_1), and which ARCH_T_*
   group decides its presence (-1: every architecture has it). */
enum { D_1, D_EMBD, D_Q, D_KV, D_FF, D_HEAD, D_ROPE_HALF, D_VOCAB, N_DIMS };

typedef struct tensor_spec {
    const char *name;    /* "blk.%d." is prepended for layer tensors */
    size_t off;          /* offsetof the qmat or const float * */
    int is_mat, cols, rows, group;
} tensor_spec;

#define LMAT(n, f, c, r) {n, offsetof(llama_layer, f), 1, c, r, -1}
#define LVEC(n, f, c, g) {n, offsetof(llama_layer, f), 0, c, D_1, g}
static const tensor_spec layer_tensors[] = {
    LVEC("attn_norm.weight", attn_norm, D_EMBD, -1),
    LMAT("attn_q.weight", wq, D_EMBD, D_Q),
    LMAT("attn_k.weight", wk, D_EMBD, D_KV),
    LMAT("attn_v.weight", wv, D_EMBD, D_KV),
    LVEC("attn_q.bias", bq, D_Q, ARCH_T_QKV_BIAS),
    LVEC("attn_k.bias", bk, D_KV, ARCH_T_QKV_BIAS),
    LVEC("attn_v.bias", bv, D_KV, ARCH_T_QKV_BIAS),
    LVEC("attn_q_norm.weight", q_norm, D_HEAD, ARCH_T_QK_NORM),
    LVEC("attn_k_norm.weight", k_norm, D_HEAD, ARCH_T_QK_NORM),
    LMAT("attn_output.weight", wo, D_Q, D_EMBD),
    LVEC("ffn_norm.weight", ffn_norm, D_EMBD, -1),
    LMAT("ffn_gate.weight", w_gate, D_EMBD, D_FF),
    LMAT("ffn_up.weight", w_up, D_EMBD, D_FF),
    LMAT("ffn_down.weight", w_down, D_FF, D_EMBD),
};
static const tensor_spec model_tensors[] = {
    {"token_embd.weight", offsetof(llama_model, tok_embd), 1, D_EMBD, D_VOCAB, -1},
    {"output.weight", offsetof(llama_model, output), 1, D_EMBD, D_VOCAB, ARCH_T_OUTPUT},
    {"output_norm.weight", offsetof(llama_model, output_norm), 0, D_EMBD, D_1, -1},
    {"rope_freqs.weight", offsetof(llama_model, rope_freqs), 0, D_ROPE_HALF, D_1, ARCH_T_ROPE_FREQS},
};
#define N_LAYER_TENSORS (sizeof layer_tensors / sizeof *layer_tensors)
#define N_MODEL_TENSORS (sizeof model_tensors / sizeof *model_tensors)

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
static int bind_mat(llama_model *m, qmat *q, const gguf_tensor *t, const char *name, int64_t cols, int64_t rows, char *err, size_t errlen) {
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
    m->weight_bytes += t->nbytes;
    return 0;
}

/* A vector: F32 in the file is used in place, anything else dequantized once. */
static int bind_vec(llama_model *m, const float **out, const gguf_tensor *t, const char *name, int64_t n, float **owned_cursor,
                    char *err, size_t errlen) {
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

/* Binding state: the dimensions of the shapes, which file tensors were bound. */
typedef struct binder {
    llama_model *m;
    int64_t dim[N_DIMS];
    uint8_t *used;       /* per file tensor */
    float *own;          /* next free floats of m->owned */
} binder;

/* Bind the tensor of spec s (layer < 0: a model tensor) into the struct at
   base, as the architecture says: 0 bound, 1 absent and allowed to be. */
static int bind_spec(binder *B, const tensor_spec *s, int layer, void *base, char *err, size_t errlen) {
    llama_model *m = B->m;
    char name[80];
    if (layer >= 0) snprintf(name, sizeof name, "blk.%d.%s", layer, s->name);
    else snprintf(name, sizeof name, "%s", s->name);
    const int has = s->group < 0 ? ARCH_REQUIRED : m->arch->has[s->group];
    const gguf_tensor *t = gguf_find_tensor(&m->gguf, name);
    if (!t) return has == ARCH_REQUIRED ? pl_fail(err, errlen, "missing tensor '%s'", name) : 1;
    if (has == ARCH_NONE) return pl_fail(err, errlen, "tensor '%s' is not part of architecture '%s'", name, m->arch->name);
    B->used[t - m->gguf.tensors] = 1;
    void *dst = (char *)base + s->off;
    if (!s->is_mat) return bind_vec(m, dst, t, name, B->dim[s->cols], &B->own, err, errlen);
    if (bind_mat(m, dst, t, name, B->dim[s->cols], B->dim[s->rows], err, errlen)) return -1;
    ((qmat *)dst)->name = s->name; /* static: the layer's own name is on the stack */
    return 0;
}

/* Hyper-parameters from the architecture's own keys ("qwen2.embedding_length", ...). */
static int load_hparams(llama_model *m, char *e, size_t el) {
    llama_hparams *hp = &m->hp;
    const gguf_file *f = &m->gguf;
    const char *a = m->arch->name;
    const int BIG = 1 << 20;
    if (hp_int(f, a, "embedding_length", -1, 1, BIG, &hp->n_embd, e, el) ||
        hp_int(f, a, "block_count", -1, 1, 4096, &hp->n_layer, e, el) ||
        hp_int(f, a, "attention.head_count", -1, 1, 4096, &hp->n_head, e, el) ||
        hp_int(f, a, "attention.head_count_kv", hp->n_head, 1, 4096, &hp->n_head_kv, e, el) ||
        hp_int(f, a, "feed_forward_length", -1, 1, BIG, &hp->n_ff, e, el) ||
        hp_int(f, a, "context_length", 2048, 1, BIG, &hp->n_ctx_train, e, el) ||
        hp_float(f, a, "attention.layer_norm_rms_epsilon", 1e-5f, &hp->rms_eps, e, el) ||
        hp_float(f, a, "rope.freq_base", 10000.0f, &hp->rope_base, e, el) ||
        hp_float(f, a, "rope.scaling.factor", 1.0f, &hp->rope_scale, e, el))
        return -1;
    /* linear scaling divides positions by the factor (llama.cpp: freq_scale
       = 1/factor); other kinds (yarn, longrope) change the angles otherwise */
    char key[96];
    snprintf(key, sizeof key, "%s.rope.scaling.type", a);
    gguf_str st;
    const int rs = gguf_get_str(f, key, &st);
    if (rs == -2) return pl_fail(e, el, "metadata '%s' is not a string", key);
    if (rs == 0 && !gguf_str_eq(st, "linear") && !gguf_str_eq(st, "none"))
        return pl_fail(e, el, "metadata '%s' = '%.*s' is not supported (only linear and none)", key, (int)(st.len > 32 ? 32 : st.len), st.ptr);
    if (hp->n_head % hp->n_head_kv) return pl_fail(e, el, "head_count %d is not a multiple of head_count_kv %d", hp->n_head, hp->n_head_kv);
    /* head_dim: attention.key_length where given (Qwen3: wider than n_embd / n_head) */
    int key_len = 0, val_len = 0;
    if (hp_int(f, a, "attention.key_length", 0, 0, 65536, &key_len, e, el)) return -1;
    if (key_len) hp->head_dim = key_len;
    else if (hp->n_embd % hp->n_head) return pl_fail(e, el, "embedding_length %d is not divisible by head_count %d", hp->n_embd, hp->n_head);
    else hp->head_dim = hp->n_embd / hp->n_head;
    if (hp_int(f, a, "attention.value_length", hp->head_dim, 1, 65536, &val_len, e, el)) return -1;
    if (val_len != hp->head_dim) return pl_fail(e, el, "%s.attention.value_length %d differs from the key length %d", a, val_len, hp->head_dim);
    if (hp->head_dim % 2) return pl_fail(e, el, "head dimension %d is odd", hp->head_dim);
    if (hp_int(f, a, "rope.dimension_count", hp->head_dim, 2, hp->head_dim, &hp->rope_dim, e, el)) return -1;
    if (hp->rope_dim % 2) return pl_fail(e, el, "%s.rope.dimension_count %d is odd", a, hp->rope_dim);
    if (hp->rope_base <= 0 || hp->rope_scale <= 0 || hp->rms_eps < 0) return pl_fail(e, el, "invalid rope base/scale or rms epsilon");
    return 0;
}

static void rope_interleaved(float *v, int n_heads, int hd, int half, const float *cs, const float *sn);
static void rope_neox(float *v, int n_heads, int hd, int half, const float *cs, const float *sn);

static int bind_model(llama_model *m, char *e, size_t el) {
    llama_hparams *hp = &m->hp;
    const gguf_tensor *te = gguf_find_tensor(&m->gguf, "token_embd.weight");
    if (!te) return pl_fail(e, el, "missing tensor 'token_embd.weight'");
    if (te->n_dims != 2 || te->ne[1] > (1 << 24)) return pl_fail(e, el, "token_embd.weight must be 2-D [n_embd, n_vocab]");
    hp->n_vocab = (int)te->ne[1];
    int vs = 0;
    if (hp_int(&m->gguf, m->arch->name, "vocab_size", hp->n_vocab, 1, 1 << 24, &vs, e, el) || vs != hp->n_vocab)
        return pl_fail(e, el, "%s.vocab_size (%d) disagrees with token_embd.weight (%d rows)", m->arch->name, vs, hp->n_vocab);
    binder B = {.m = m};
    B.dim[D_1] = 1;
    B.dim[D_EMBD] = hp->n_embd;
    B.dim[D_Q] = (int64_t)hp->n_head * hp->head_dim;
    B.dim[D_KV] = (int64_t)hp->n_head_kv * hp->head_dim;
    B.dim[D_FF] = hp->n_ff;
    B.dim[D_HEAD] = hp->head_dim;
    B.dim[D_ROPE_HALF] = hp->rope_dim / 2;
    B.dim[D_VOCAB] = hp->n_vocab;
    /* floats for the vectors stored in a non-F32 type */
    size_t nown = 0;
    for (size_t i = 0; i < N_MODEL_TENSORS; i++) nown += model_tensors[i].is_mat ? 0 : (size_t)B.dim[model_tensors[i].cols];
    for (size_t i = 0; i < N_LAYER_TENSORS; i++) nown += layer_tensors[i].is_mat ? 0 : (size_t)B.dim[layer_tensors[i].cols] * hp->n_layer;
    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    m->owned = calloc(nown, sizeof(float));
    B.used = calloc(m->gguf.n_tensors + 1, 1);
    B.own = m->owned;
    int rc = -1;
    if (!m->layers || !m->owned || !B.used) { pl_fail(e, el, "out of memory"); goto out; }
    for (size_t i = 0; i < N_MODEL_TENSORS; i++)
        if (bind_spec(&B, &model_tensors[i], -1, m, e, el) < 0) goto out;
    for (int l = 0; l < hp->n_layer; l++)
        for (size_t i = 0; i < N_LAYER_TENSORS; i++)
            if (bind_spec(&B, &layer_tensors[i], l, &m->layers[l], e, el) < 0) goto out;
    /* a file tensor no spec bound would be silently ignored: refuse it, as llama.cpp does */
    for (uint64_t i = 0; i < m->gguf.n_tensors; i++)
        if (!B.used[i]) {
            const gguf_str n = m->gguf.tensors[i].name;
            pl_fail(e, el, "tensor '%.*s' is not part of architecture '%s'", (int)(n.len > 64 ? 64 : n.len), n.ptr, m->arch->name);
            goto out;
        }
    if (m->d->types[m->tok_embd.type].row_group > 1) {
        /* embeddings are looked up a row at a time; a grouped layout cannot be */
        pl_fail(e, el, "token_embd.weight has the row-interleaved type %s; store it in its base type", m->d->types[m->tok_embd.type].fmt->name);
        goto out;
    }
    if (!m->output.data) m->output = m->tok_embd; /* tied embeddings */
    /* token_embd is read one row per token, not whole: only count it when it is the output */
    else m->weight_bytes -= m->tok_embd.row_bytes * (uint64_t)m->tok_embd.rows;
    m->rope = m->arch->rope_neox ? rope_neox : rope_interleaved;
    rc = 0;
out:
    free(B.used);
    return rc;
}

int build_model(llama_model *m, const char *path, const pl_dispatch *d, const gguf_limits *lim, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    m->d = d;
    char e[512];
    if (gguf_open(&m->gguf, path, lim, err, errlen)) return -1;
    if (gguf_bind_types(&m->gguf, dispatch_type_size, (void *)d, e, sizeof e)) goto bad;
    gguf_str arch;
    if (gguf_get_str(&m->gguf, "general.architecture", &arch)) { snprintf(e, sizeof e, "missing general.architecture"); goto bad; }
    for (const llama_arch *a = llama_archs; a->name && !m->arch; a++)
        if (gguf_str_eq(arch, a->name)) m->arch = a;
    if (!m->arch) {
        snprintf(e, sizeof e, "architecture '%.*s' is not supported (only llama, qwen2, qwen3)", (int)(arch.len > 64 ? 64 : arch.len), arch.ptr);
        goto bad;
    }
    if (load_hparams(m, e, sizeof e) || bind_model(m, e, sizeof e)) goto bad;
    return 0;
bad:
    pl_fail(err, errlen, "%s: %s", path, e);
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

const char *llama_kv_type_name(int kv_type) { return kv_type == KV_F16 ? "f16" : kv_type == KV_Q8_0 ? "q8_0" : "unknown"; }

size_t llama_kv_bytes_per_token(const llama_hparams *hp, int kv_type) {
    const size_t kvd = (size_t)hp->n_head_kv * hp->head_dim;
    const size_t row = kv_type == KV_Q8_0 ? kvd / 32 * 34 : kvd * 2;
    return 2 * row * (size_t)hp->n_layer;
}

static size_t round64(size_t n) { return (n + 63) / 64 * 64; }

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
    return build_ctx_kv(c, m, n_ctx, n_batch, kv_type, pool, 1, err, errlen);
}

int build_ctx_kv(llama_ctx *c, const llama_model *m, int n_ctx, int n_batch, int kv_type, struct threadpool *pool, int own_kv,
                 char *err, size_t errlen) {
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
    const size_t kv = own_kv ? c->kv_row_bytes * (size_t)n_ctx * (size_t)hp->n_layer : 0;
    size_t sz[N_BUF];
    const size_t nthr = (size_t)threadpool_size(pool); /* 1 without a pool */
    scratch_sizes(m, (size_t)n_batch, nthr, sz);
    c->act_q_bytes = sz[BUF_ACTQ];
    c->k_cache = own_kv ? xalloc(c, kv) : NULL;
    c->v_cache = own_kv ? xalloc(c, kv) : NULL;
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
    c->tok_seq = xalloc(c, (size_t)n_batch * sizeof *c->tok_seq);
    c->tok_pos = xalloc(c, (size_t)n_batch * sizeof *c->tok_pos);
    c->out_rows = xalloc(c, (size_t)n_batch * sizeof *c->out_rows);
    if (!c->tok_seq || !c->tok_pos || !c->out_rows || (c->unpack_stride && !c->unpack) || (own_kv && (!c->k_cache || !c->v_cache)) || !c->rope_cos || !c->rope_sin || !c->x || !c->xb || !c->q || !c->k || !c->v ||
        !c->att || !c->hb || !c->hb2 || !c->logits || !c->act_q || !c->mm_parts) {
        free_ctx(c);
        return pl_fail(err, errlen, "out of memory allocating the context (%d tokens, %.1f MB of KV cache)", n_ctx, kv * 2 / 1e6);
    }
    /* RoPE tables: theta_i = pos / scale * base^(-2i/rope_dim) / freq_factor_i
       (ggml's rope: linear scaling multiplies by freq_scale = 1/factor, and
       rope_freqs divides each frequency), computed once in double
       (measured closer to llama.cpp's references than float). */
    const int half = hp->rope_dim / 2;
    for (int p = 0; p < n_ctx; p++)
        for (int i = 0; i < half; i++) {
            const double ff = m->rope_freqs ? m->rope_freqs[i] : 1.0;
            const double theta = (p / (double)hp->rope_scale) * pow((double)hp->rope_base, -2.0 * i / hp->rope_dim) / ff;
            c->rope_cos[(size_t)p * half + i] = (float)cos(theta);
            c->rope_sin[(size_t)p * half + i] = (float)sin(theta);
        }
    return 0;
}

void free_ctx(llama_ctx *c) {
    void *bufs[] = {c->k_cache, c->v_cache, c->rope_cos, c->rope_sin, c->x, c->xb, c->q, c->k,
                    c->v, c->att, c->hb, c->hb2, c->logits, c->act_q, c->unpack, c->mm_parts,
                    c->tok_seq, c->tok_pos, c->out_rows};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) free(bufs[i]);
    if (c->kv_pool) llama_seq_truncate(c, 0);
    free(c->blocks);
    memset(c, 0, sizeof *c);
}

/* ------------------------------------------------------------------------ */
/* The forward pass                                                          */
/* ------------------------------------------------------------------------ */

/* Llama GGUF files store each head's rotated pairs interleaved, (x[2i], x[2i+1]). */
static void rope_interleaved(float *v, int n_heads, int hd, int half, const float *cs, const float *sn) {
    for (int h = 0; h < n_heads; h++) {
        float *x = v + (size_t)h * hd;
        for (int i = 0; i < half; i++) {
            const float x0 = x[2 * i], x1 = x[2 * i + 1];
            x[2 * i] = x0 * cs[i] - x1 * sn[i];
            x[2 * i + 1] = x0 * sn[i] + x1 * cs[i];
        }
    }
}

/* NeoX layout (Qwen): pair i is (x[i], x[i + half]). */
static void rope_neox(float *v, int n_heads, int hd, int half, const float *cs, const float *sn) {
    for (int h = 0; h < n_heads; h++) {
        float *x = v + (size_t)h * hd;
        for (int i = 0; i < half; i++) {
            const float x0 = x[i], x1 = x[i + half];
            x[i] = x0 * cs[i] - x1 * sn[i];
            x[i + half] = x0 * sn[i] + x1 * cs[i];
        }
    }
}

/* x[b] += bias for the n rows of dim floats (bias NULL: none) */
static void add_bias(float *x, const float *bias, int n, int dim) {
    if (!bias) return;
    for (int b = 0; b < n; b++)
        for (int i = 0; i < dim; i++) x[(size_t)b * dim + i] += bias[i];
}

/* RMS norm of each of n_heads heads of hd floats, in place (w NULL: none) */
static void head_norm(const pl_ops *ops, float *x, const float *w, int n_heads, int hd, float eps) {
    if (!w) return;
    for (int h = 0; h < n_heads; h++) ops->rmsnorm(x + (size_t)h * hd, x + (size_t)h * hd, w, hd, eps);
}

/* The forward pass over c's batch: token b in the KV cache of
   c->tok_seq[b] at position c->tok_pos[b]; logits of the n_out rows
   c->out_rows[] into logits (n_out x n_vocab). */
static int forward(llama_ctx *c, const int32_t *tokens, int n, int n_out, float *logits, char *err, size_t errlen) {
    const llama_model *m = c->m;
    const llama_hparams *hp = &m->hp;
    const pl_ops *ops = &m->d->ops;
    const int dim = hp->n_embd, kvd = hp->n_head_kv * hp->head_dim, qd = hp->n_head * hp->head_dim, ff = hp->n_ff;
    const int half = hp->rope_dim / 2;

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
        /* 3. Q, K, V projections (one parallel region), plus their biases (qwen2) */
        const qmat *qkv[3] = {&L->wq, &L->wk, &L->wv};
        float *qkv_out[3] = {c->q, c->k, c->v};
        matmul_n(c, 3, qkv, qkv_out, c->xb, n);
        add_bias(c->q, L->bq, n, qd);
        add_bias(c->k, L->bk, n, kvd);
        add_bias(c->v, L->bv, n, kvd);
        for (int b = 0; b < n; b++) {
            llama_ctx *sq = c->tok_seq[b];
            float *q = c->q + (size_t)b * qd, *k = c->k + (size_t)b * kvd;
            const float *cs = sq->rope_cos + (size_t)c->tok_pos[b] * half, *sn = sq->rope_sin + (size_t)c->tok_pos[b] * half;
            /* 4. RMS norm of each q and k head (qwen3) */
            head_norm(ops, q, L->q_norm, hp->n_head, hp->head_dim, hp->rms_eps);
            head_norm(ops, k, L->k_norm, hp->n_head_kv, hp->head_dim, hp->rms_eps);
            /* 5. RoPE on Q and K in the architecture's pair layout, then K/V into the cache */
            m->rope(q, hp->n_head, hp->head_dim, half, cs, sn);
            m->rope(k, hp->n_head_kv, hp->head_dim, half, cs, sn);
            store_kv(sq, l, c->tok_pos[b], k, c->v + (size_t)b * kvd);
        }
        /* 6. attention over each token's cache (GQA: query head h reads KV head h / group) */
        attention(c, l, n);
        /* In the last layer only the rows whose logits are wanted go on
           (every layer's K and V are in the cache by now): they move to
           the front, in order, and the others' FFN is never computed.
           Each row's bits do not depend on the rows beside it. */
        int nr = n;
        if (l == hp->n_layer - 1 && n_out < n) {
            for (int r = 0; r < n_out; r++) {
                const int b = c->out_rows[r]; /* ascending, so b >= r */
                if (b == r) continue;
                memcpy(c->att + (size_t)r * qd, c->att + (size_t)b * qd, (size_t)qd * sizeof(float));
                memcpy(c->x + (size_t)r * dim, c->x + (size_t)b * dim, (size_t)dim * sizeof(float));
            }
            nr = n_out;
            if (!nr) break;
        }
        /* 7. output projection and residual */
        matmul(c, &L->wo, c->xb, c->att, nr);
        for (size_t i = 0; i < (size_t)nr * dim; i++) c->x[i] += c->xb[i];
        /* 8. FFN rmsnorm, SwiGLU: down(silu(gate x) * up x), residual */
        for (int b = 0; b < nr; b++) ops->rmsnorm(c->xb + (size_t)b * dim, c->x + (size_t)b * dim, L->ffn_norm, dim, hp->rms_eps);
        const qmat *gu[2] = {&L->w_gate, &L->w_up};
        float *gu_out[2] = {c->hb, c->hb2};
        matmul_n(c, 2, gu, gu_out, c->xb, nr);
        for (int b = 0; b < nr; b++) ops->swiglu(c->hb + (size_t)b * ff, c->hb2 + (size_t)b * ff, ff);
        matmul(c, &L->w_down, c->xb, c->hb, nr);
        for (size_t i = 0; i < (size_t)nr * dim; i++) c->x[i] += c->xb[i];
    }
    for (int b = 0; b < n; b++) c->tok_seq[b]->n_past++;

    /* 9. final rmsnorm and the output matrix, for the rows asked for (the
       first n_out rows of x since the last layer) */
    for (int r = 0; r < n_out; r++)
        ops->rmsnorm(c->xb + (size_t)r * dim, c->x + (size_t)r * dim, m->output_norm, dim, hp->rms_eps);
    if (n_out) matmul(c, &m->output, logits, c->xb, n_out);
    c->logit_rows += (uint64_t)n_out;
    return 0;
}

/* n tokens at positions n_past.. of c's own cache: the logits of every
   token (all_logits), of the last one (last), or none */
static int forward_own(llama_ctx *c, const int32_t *tokens, int n, float *all_logits, int last, char *err, size_t errlen) {
    if (n <= 0 || n > c->n_batch) return pl_fail(err, errlen, "batch of %d tokens (allowed 1..%d)", n, c->n_batch);
    if (c->n_past + n > c->n_ctx) return pl_fail(err, errlen, "context full: %d + %d tokens exceed the context of %d", c->n_past, n, c->n_ctx);
    if (llama_seq_reserve(c, n)) return pl_fail(err, errlen, "the KV pool has no free block for %d more tokens", n);
    for (int b = 0; b < n; b++) c->tok_seq[b] = c, c->tok_pos[b] = c->n_past + b;
    const int first = all_logits ? 0 : last ? n - 1 : n;
    for (int b = first; b < n; b++) c->out_rows[b - first] = b;
    if (forward(c, tokens, n, n - first, all_logits ? all_logits : c->logits, err, errlen)) return -1;
    if (all_logits) memcpy(c->logits, all_logits + (size_t)(n - 1) * c->m->hp.n_vocab, (size_t)c->m->hp.n_vocab * sizeof(float));
    return 0;
}

int llama_forward(llama_ctx *c, const int32_t *tokens, int n, float *all_logits, char *err, size_t errlen) {
    return forward_own(c, tokens, n, all_logits, 1, err, errlen);
}

int llama_prefill(llama_ctx *c, const int32_t *tokens, int n, char *err, size_t errlen) {
    if (n < 0) return pl_fail(err, errlen, "a negative token count (%d)", n);
    if (n > c->n_ctx - c->n_past) return pl_fail(err, errlen, "%d tokens do not fit after %d of a context of %d", n, c->n_past, c->n_ctx);
    for (int i = 0; i < n; i += c->n_batch) {
        const int nb = n - i < c->n_batch ? n - i : c->n_batch;
        if (forward_own(c, tokens + i, nb, NULL, i + nb == n, err, errlen)) return -1;
    }
    return 0;
}

int llama_forward_seqs(llama_ctx *c, llama_ctx *const *seq, const int32_t *tokens, int n, const uint8_t *want,
                       float *logits, char *err, size_t errlen) {
    if (n <= 0 || n > c->n_batch) return pl_fail(err, errlen, "batch of %d tokens (allowed 1..%d)", n, c->n_batch);
    int n_out = 0;
    for (int b = 0; b < n; b++) {
        llama_ctx *sq = seq[b];
        if (sq->m != c->m || sq->kv_type != c->kv_type) return pl_fail(err, errlen, "a sequence of another model or KV type");
        /* the sequence's next position: after its cache and its earlier tokens here */
        int pos = sq->n_past;
        for (int e = 0; e < b; e++) pos += seq[e] == sq;
        if (pos >= sq->n_ctx) return pl_fail(err, errlen, "context full: a sequence's context of %d is used up", sq->n_ctx);
        if (pos == sq->n_past) { /* its first token here: its blocks for all of them */
            int k = 0;
            for (int e = b; e < n; e++) k += seq[e] == sq;
            if (llama_seq_reserve(sq, k)) return pl_fail(err, errlen, "the KV pool has no free block for %d more tokens", k);
        }
        c->tok_seq[b] = sq;
        c->tok_pos[b] = pos;
        if (want && want[b]) c->out_rows[n_out++] = b;
    }
    return forward(c, tokens, n, n_out, logits, err, errlen);
}
