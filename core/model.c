/* The model: architectures (as data), load (build_model), run state
   (build_ctx), forward pass. */
#include "model.h"

#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "kv.h"
#include "picolm/fp16.h"
#include "matmul.h"
#include "threadpool.h"
#include "util.h"

/* ------------------------------------------------------------------------ */
/* Architectures                                                             */
/* ------------------------------------------------------------------------ */

/* Each family as a recipe (llama.cpp's llama-arch.cpp tensor lists,
   load_hparams and llm_build_* graphs): which tensors exist, the RoPE pair
   layout, the FFN's gate activation, the embedding and query scales, which
   layers attend to everything, to a sliding window, or convolve, and which
   layers skip RoPE.  Everything else (RMS norms, GQA, the residual stream)
   is shared. */
#define OPT ARCH_OPTIONAL
#define REQ ARCH_REQUIRED
const llama_arch llama_archs[] = {
    /* Llama 1-3, SmolLM/SmolLM2, TinyLlama: interleaved pairs; biases
       optional as in llama.cpp; Llama 3.1+ divide each RoPE frequency by
       rope_freqs.weight */
    {.name = "llama", .has = {[ARCH_T_OUTPUT] = OPT, [ARCH_T_QKV_BIAS] = OPT, [ARCH_T_ROPE_FREQS] = OPT},
     .output_norm = "output_norm.weight"},
    /* Qwen2, Qwen2.5: q/k/v biases, NeoX pairs */
    {.name = "qwen2", .has = {[ARCH_T_OUTPUT] = OPT, [ARCH_T_QKV_BIAS] = REQ}, .rope_neox = 1, .output_norm = "output_norm.weight"},
    /* Qwen3: an RMS norm of each q and k head before RoPE, NeoX pairs */
    {.name = "qwen3", .has = {[ARCH_T_OUTPUT] = OPT, [ARCH_T_QK_NORM] = REQ}, .rope_neox = 1, .output_norm = "output_norm.weight"},
    /* SmolLM3: Llama with no RoPE in every 4th layer */
    {.name = "smollm3", .has = {[ARCH_T_OUTPUT] = OPT}, .nope_period = 4, .output_norm = "output_norm.weight"},
    /* Gemma 3: GeGLU, norms after attention and FFN too, q/k head norms,
       embeddings times sqrt(dim), q scaled before attention; with a
       sliding window, 5 of every 6 layers attend to it, with their own
       RoPE base (10000 unless rope.freq_base_swa says) */
    {.name = "gemma3", .has = {[ARCH_T_OUTPUT] = OPT, [ARCH_T_QK_NORM] = REQ, [ARCH_T_POST_NORM] = REQ}, .rope_neox = 1,
     .ffn_act = FFN_GELU, .embd_scale = 1, .q_scale = 1, .kinds = KINDS_SWA_PERIOD, .period = 6, .swa_rope = 1,
     .output_norm = "output_norm.weight"},
    /* LFM2: gated short convolutions in the layers whose head_count_kv is 0,
       attention with q/k head norms in the others (over a sliding window
       when the model has one, with the same RoPE); the final norm is
       token_embd_norm */
    {.name = "lfm2", .has = {[ARCH_T_OUTPUT] = OPT, [ARCH_T_QK_NORM] = REQ}, .rope_neox = 1, .kinds = KINDS_KV_HEADS,
     .output_norm = "token_embd_norm.weight"},
    {.name = NULL},
};
#undef OPT
#undef REQ

/* The per-layer tensors: name, where it is bound, its shape (ne[0], ne[1])
   in the dimensions below (a vector has rows D_1), which ARCH_T_* group
   decides its presence (-1: every architecture has it), and the layer
   kinds that have it. */
enum { D_1, D_EMBD, D_Q, D_KV, D_FF, D_HEAD, D_ROPE_HALF, D_VOCAB, D_CONV_IN, D_CONV_LEN, N_DIMS };

typedef struct tensor_spec {
    const char *name;    /* "blk.%d." is prepended for layer tensors */
    size_t off;          /* offsetof the qmat or const float * */
    int is_mat, cols, rows, group;
    unsigned kinds;      /* bit (1 << LAYER_*) of the layers that have it */
    int qkv_part;        /* 1..3: q, k or v, which a fused attn_qkv tensor holds instead */
} tensor_spec;

#define K_ALL ((1u << N_LAYER_KINDS) - 1)
#define K_ATT ((1u << LAYER_FULL) | (1u << LAYER_SWA))
#define K_CONV (1u << LAYER_CONV)
#define LMAT(n, f, c, r, k) {n, offsetof(llama_layer, f), 1, c, r, -1, k, 0}
#define LVEC(n, f, c, g, k) {n, offsetof(llama_layer, f), 0, c, D_1, g, k, 0}
#define LQKV(n, f, is_mat, c, r, g, part) {n, offsetof(llama_layer, f), is_mat, c, r, g, K_ATT, part}
static const tensor_spec layer_tensors[] = {
    LVEC("attn_norm.weight", attn_norm, D_EMBD, -1, K_ALL),
    LQKV("attn_q.weight", wq, 1, D_EMBD, D_Q, -1, 1),
    LQKV("attn_k.weight", wk, 1, D_EMBD, D_KV, -1, 2),
    LQKV("attn_v.weight", wv, 1, D_EMBD, D_KV, -1, 3),
    LQKV("attn_q.bias", bq, 0, D_Q, D_1, ARCH_T_QKV_BIAS, 1),
    LQKV("attn_k.bias", bk, 0, D_KV, D_1, ARCH_T_QKV_BIAS, 2),
    LQKV("attn_v.bias", bv, 0, D_KV, D_1, ARCH_T_QKV_BIAS, 3),
    LVEC("attn_q_norm.weight", q_norm, D_HEAD, ARCH_T_QK_NORM, K_ATT),
    LVEC("attn_k_norm.weight", k_norm, D_HEAD, ARCH_T_QK_NORM, K_ATT),
    LMAT("attn_output.weight", wo, D_Q, D_EMBD, K_ATT),
    LMAT("shortconv.in_proj.weight", conv_in, D_EMBD, D_CONV_IN, K_CONV),
    {"shortconv.conv.weight", offsetof(llama_layer, conv_w), 0, D_CONV_LEN, D_EMBD, -1, K_CONV, 0},
    LMAT("shortconv.out_proj.weight", conv_out, D_EMBD, D_EMBD, K_CONV),
    LVEC("post_attention_norm.weight", attn_post_norm, D_EMBD, ARCH_T_POST_NORM, K_ALL),
    LVEC("ffn_norm.weight", ffn_norm, D_EMBD, -1, K_ALL),
    LMAT("ffn_gate.weight", w_gate, D_EMBD, D_FF, K_ALL),
    LMAT("ffn_up.weight", w_up, D_EMBD, D_FF, K_ALL),
    LMAT("ffn_down.weight", w_down, D_FF, D_EMBD, K_ALL),
    LVEC("post_ffw_norm.weight", ffn_post_norm, D_EMBD, ARCH_T_POST_NORM, K_ALL),
};
/* [1]: the final norm's name comes from the architecture */
static const tensor_spec model_tensors[] = {
    {"token_embd.weight", offsetof(llama_model, tok_embd), 1, D_EMBD, D_VOCAB, -1, K_ALL, 0},
    {NULL, offsetof(llama_model, output_norm), 0, D_EMBD, D_1, -1, K_ALL, 0},
    {"output.weight", offsetof(llama_model, output), 1, D_EMBD, D_VOCAB, ARCH_T_OUTPUT, K_ALL, 0},
    {"rope_freqs.weight", offsetof(llama_model, rope_freqs), 0, D_ROPE_HALF, D_1, ARCH_T_ROPE_FREQS, K_ALL, 0},
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

/* A vector (or a small float matrix, cols x rows): F32 in the file is used
   in place, anything else dequantized once. */
static int bind_vec(llama_model *m, const float **out, const gguf_tensor *t, const char *name, int64_t cols, int64_t rows,
                    float **owned_cursor, char *err, size_t errlen) {
    const int64_t n = cols * rows;
    if (t->nelements != n || t->ne[0] != cols) {
        if (rows == 1) return pl_fail(err, errlen, "tensor '%s' has %lld elements, expected %lld", name, (long long)t->nelements, (long long)n);
        return pl_fail(err, errlen, "tensor '%s' has %lld elements (rows of %lld), expected %lld (rows of %lld)", name,
                       (long long)t->nelements, (long long)t->ne[0], (long long)n, (long long)cols);
    }
    if (t->type == PICOLM_TYPE_F32) {
        *out = t->data;
    } else {
        const picolm_format *f = m->d->types[t->type].fmt;
        if (!f || m->d->types[t->type].row_group > 1 || cols % f->block_size)
            return pl_fail(err, errlen, "tensor '%s' has type %s, which cannot hold a vector", name, f ? f->name : gguf_type_name(t->type));
        const size_t rb = dispatch_row_size(m->d, t->type, cols);
        for (int64_t r = 0; r < rows; r++) f->dequantize_row((const uint8_t *)t->data + r * rb, *owned_cursor + r * cols, cols);
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
    int fused;           /* the layer being bound has attn_qkv: its q, k, v are slices of it */
} binder;

/* Bind the tensor of spec s (layer < 0: a model tensor) into the struct at
   base, as the architecture and the layer's kind say: 0 bound, 1 absent
   and allowed to be. */
static int bind_spec(binder *B, const tensor_spec *s, int layer, void *base, char *err, size_t errlen) {
    llama_model *m = B->m;
    char name[80];
    const char *sname = s->name ? s->name : m->arch->output_norm;
    if (layer >= 0) snprintf(name, sizeof name, "blk.%d.%s", layer, sname);
    else snprintf(name, sizeof name, "%s", sname);
    int has = s->group < 0 ? ARCH_REQUIRED : m->arch->has[s->group];
    if (layer >= 0 && !(s->kinds >> m->layers[layer].kind & 1)) has = ARCH_NONE;
    if (s->qkv_part && B->fused) has = ARCH_NONE; /* bound from attn_qkv */
    const gguf_tensor *t = gguf_find_tensor(&m->gguf, name);
    if (!t) return has == ARCH_REQUIRED ? pl_fail(err, errlen, "missing tensor '%s'", name) : 1;
    if (has == ARCH_NONE) return pl_fail(err, errlen, "tensor '%s' is not part of architecture '%s'", name, m->arch->name);
    B->used[t - m->gguf.tensors] = 1;
    void *dst = (char *)base + s->off;
    if (!s->is_mat) return bind_vec(m, dst, t, name, B->dim[s->cols], B->dim[s->rows], &B->own, err, errlen);
    if (bind_mat(m, dst, t, name, B->dim[s->cols], B->dim[s->rows], err, errlen)) return -1;
    ((qmat *)dst)->name = sname; /* static: the layer's own name is on the stack */
    return 0;
}

/* A fused attn_qkv tensor ([n_embd, q + k + v] and its optional bias), as
   llama.cpp accepts for every family: wq, wk, wv are row ranges of it (the
   same rows, so the same bits as three matrices) and the biases ranges of
   its bias.  Returns 1 when the layer has one, 0 when not, -1 on error. */
static int bind_fused_qkv(binder *B, int l, char *err, size_t errlen) {
    llama_model *m = B->m;
    llama_layer *L = &m->layers[l];
    char name[80];
    snprintf(name, sizeof name, "blk.%d.attn_qkv.weight", l);
    const gguf_tensor *t = gguf_find_tensor(&m->gguf, name);
    if (!t) return 0;
    if (L->kind == LAYER_CONV) return pl_fail(err, errlen, "tensor '%s' is not part of a convolution layer", name);
    const int64_t q = B->dim[D_Q], kv = B->dim[D_KV];
    qmat all;
    B->used[t - m->gguf.tensors] = 1;
    if (bind_mat(m, &all, t, name, B->dim[D_EMBD], q + 2 * kv, err, errlen)) return -1;
    const uint32_t g = m->d->types[all.type].row_group;
    if (q % g || kv % g) return pl_fail(err, errlen, "tensor '%s': its q, k, v rows do not split on its %u-row groups", name, g);
    const int64_t first[3] = {0, q, q + kv}, rows[3] = {q, kv, kv};
    qmat *w[3] = {&L->wq, &L->wk, &L->wv};
    static const char *names[3] = {"attn_qkv.weight (q)", "attn_qkv.weight (k)", "attn_qkv.weight (v)"};
    for (int i = 0; i < 3; i++) {
        *w[i] = all;
        w[i]->data = all.data + (size_t)(first[i] / g) * g * all.row_bytes;
        w[i]->rows = rows[i];
        w[i]->name = names[i];
    }
    snprintf(name, sizeof name, "blk.%d.attn_qkv.bias", l);
    if ((t = gguf_find_tensor(&m->gguf, name))) {
        const float *bias;
        B->used[t - m->gguf.tensors] = 1;
        if (bind_vec(m, &bias, t, name, q + 2 * kv, 1, &B->own, err, errlen)) return -1;
        L->bq = bias, L->bk = bias + q, L->bv = bias + q + kv;
    }
    return 1;
}

/* Each layer's kind (LAYER_*), by the architecture's rule, and its K/V and
   recurrent-state slots.  KINDS_KV_HEADS: head_count_kv is an array with
   a 0 for each convolution layer (the others must agree). */
static int layer_kinds(llama_model *m, char *e, size_t el) {
    llama_hparams *hp = &m->hp;
    const llama_arch *a = m->arch;
    char key[96];
    snprintf(key, sizeof key, "%s.attention.head_count_kv", a->name);
    uint64_t n = 0;
    const gguf_kv *kv = a->kinds == KINDS_KV_HEADS ? gguf_find_kv(&m->gguf, key) : NULL;
    if (kv && kv->type == GGUF_ARRAY) {
        const uint32_t et = kv->v.arr.type;
        n = kv->v.arr.n;
        if (n != (uint64_t)hp->n_layer || (et != GGUF_INT32 && et != GGUF_UINT32))
            return pl_fail(e, el, "metadata '%s' must hold one 32-bit integer per layer (%d)", key, hp->n_layer);
    }
    int period = a->period;
    if (a->kinds == KINDS_SWA_PERIOD && hp_int(&m->gguf, a->name, "attention.sliding_window_pattern", a->period, 1, 4096, &period, e, el))
        return -1;
    hp->n_head_kv = 0;
    for (int l = 0; l < hp->n_layer; l++) {
        llama_layer *L = &m->layers[l];
        int kvh = hp->n_head;
        if (kv && kv->type == GGUF_ARRAY) {
            int32_t v;
            memcpy(&v, kv->v.arr.data + 4 * (size_t)l, 4);
            if (v < 0 || v > hp->n_head) return pl_fail(e, el, "metadata '%s'[%d] = %d is out of range", key, l, v);
            kvh = v;
        } else if (kv || a->kinds != KINDS_KV_HEADS) {
            kvh = -1; /* a scalar: read below */
        }
        /* a sliding window where the model has one: every layer but each
           period-th (gemma3), or every attention layer (lfm2) */
        L->kind = kvh == 0 ? LAYER_CONV : !hp->n_swa ? LAYER_FULL
                : a->kinds == KINDS_SWA_PERIOD ? (l % period < period - 1 ? LAYER_SWA : LAYER_FULL) : LAYER_SWA;
        if (kvh > 0) {
            if (hp->n_head_kv && kvh != hp->n_head_kv) return pl_fail(e, el, "metadata '%s': attention layers with different KV head counts", key);
            hp->n_head_kv = kvh;
        }
        L->kv_idx = L->kind == LAYER_CONV ? -1 : m->n_kv_layer++;
        L->rec_idx = L->kind == LAYER_CONV ? m->n_rec_layer++ : -1;
        L->rope = L->kind == LAYER_CONV || (a->nope_period && (l + 1) % a->nope_period == 0) ? -1 : L->kind == LAYER_SWA && a->swa_rope;
    }
    if (!hp->n_head_kv && hp_int(&m->gguf, a->name, "attention.head_count_kv", hp->n_head, 1, 4096, &hp->n_head_kv, e, el)) return -1;
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
        hp_int(f, a, "feed_forward_length", -1, 1, BIG, &hp->n_ff, e, el) ||
        hp_int(f, a, "context_length", 2048, 1, BIG, &hp->n_ctx_train, e, el) ||
        hp_float(f, a, "attention.layer_norm_rms_epsilon", 1e-5f, &hp->rms_eps, e, el) ||
        hp_float(f, a, "rope.freq_base", 10000.0f, &hp->rope_base, e, el) ||
        hp_float(f, a, "rope.scaling.factor", 1.0f, &hp->rope_scale, e, el) ||
        hp_float(f, a, "final_logit_softcapping", 0.0f, &hp->softcap, e, el))
        return -1;
    if (hp_int(f, a, "attention.sliding_window", 0, 0, BIG, &hp->n_swa, e, el)) return -1;
    if (m->arch->kinds == KINDS_FULL) hp->n_swa = 0; /* a window the architecture does not use */
    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) return pl_fail(e, el, "out of memory");
    if (layer_kinds(m, e, el)) return -1;
    const int conv = m->n_rec_layer > 0;
    if (hp_int(f, a, "shortconv.l_cache", conv ? -1 : 0, conv ? 2 : 0, 64, &hp->conv_len, e, el)) return -1;
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
    if (hp->rope_base <= 0 || hp->rope_scale <= 0 || hp->rms_eps < 0 || hp->softcap < 0)
        return pl_fail(e, el, "invalid rope base/scale, rms epsilon or soft-capping");
    return 0;
}

static void gelu_ready(void);
static void rope_interleaved(float *v, int n_heads, int hd, int half, const float *cs, const float *sn);
static void rope_neox(float *v, int n_heads, int hd, int half, const float *cs, const float *sn);

/* The RoPE kinds' frequency tables: [0] full-attention layers (the
   model's base, scaling and rope_freqs), [1] sliding-window layers (their
   own base, unscaled).  Positions' angles are made per batch. */
static int build_ropes(llama_model *m, char *e, size_t el) {
    const llama_hparams *hp = &m->hp;
    const int half = hp->rope_dim / 2;
    float base_swa; /* llama.cpp's default, unless the file says */
    if (hp_float(&m->gguf, m->arch->name, "rope.freq_base_swa", 10000.0f, &base_swa, e, el)) return -1;
    const double bases[2] = {hp->rope_base, base_swa}, scales[2] = {hp->rope_scale, 1.0};
    m->n_ropes = m->arch->swa_rope && hp->n_swa ? 2 : 1;
    for (int k = 0; k < m->n_ropes; k++) {
        llama_rope *r = &m->ropes[k];
        r->scale = scales[k];
        r->ff = k == 0 ? m->rope_freqs : NULL;
        r->pw = malloc((size_t)half * sizeof *r->pw);
        if (!r->pw) return pl_fail(e, el, "out of memory");
        for (int i = 0; i < half; i++) r->pw[i] = pow(bases[k], -2.0 * i / hp->rope_dim);
    }
    return 0;
}

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
    B.dim[D_CONV_IN] = 3 * (int64_t)hp->n_embd;
    B.dim[D_CONV_LEN] = hp->conv_len;
    /* floats for the vectors stored in a non-F32 type */
    size_t nown = 0;
    for (size_t i = 0; i < N_MODEL_TENSORS; i++)
        nown += model_tensors[i].is_mat ? 0 : (size_t)(B.dim[model_tensors[i].cols] * B.dim[model_tensors[i].rows]);
    for (size_t i = 0; i < N_LAYER_TENSORS; i++)
        nown += layer_tensors[i].is_mat ? 0 : (size_t)(B.dim[layer_tensors[i].cols] * B.dim[layer_tensors[i].rows]) * hp->n_layer;
    nown += (size_t)hp->n_layer * (size_t)(B.dim[D_Q] + 2 * B.dim[D_KV]); /* a fused q/k/v bias per layer */
    m->owned = calloc(nown, sizeof(float));
    B.used = calloc(m->gguf.n_tensors + 1, 1);
    B.own = m->owned;
    int rc = -1;
    if (!m->owned || !B.used) { pl_fail(e, el, "out of memory"); goto out; }
    for (size_t i = 0; i < N_MODEL_TENSORS; i++)
        if (bind_spec(&B, &model_tensors[i], -1, m, e, el) < 0) goto out;
    for (int l = 0; l < hp->n_layer; l++) {
        if ((B.fused = bind_fused_qkv(&B, l, e, el)) < 0) goto out;
        for (size_t i = 0; i < N_LAYER_TENSORS; i++)
            if (bind_spec(&B, &layer_tensors[i], l, &m->layers[l], e, el) < 0) goto out;
    }
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
    if (m->arch->ffn_act == FFN_GELU) gelu_ready();
    /* llama.cpp scales by sqrt(n_embd) rounded to float */
    m->embd_scale = m->arch->embd_scale ? sqrtf((float)hp->n_embd) : 1.0f;
    if (build_ropes(m, e, el)) goto out;
    rc = 0;
out:
    free(B.used);
    return rc;
}

int build_model(llama_model *m, const char *path, const pl_dispatch *d, const gguf_limits *lim, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    m->d = d;
    char e[512];
    if (build_gguf(&m->gguf, path, lim, err, errlen)) return -1;
    if (gguf_bind_types(&m->gguf, dispatch_type_size, (void *)d, e, sizeof e)) goto bad;
    gguf_str arch;
    if (gguf_get_str(&m->gguf, "general.architecture", &arch)) { snprintf(e, sizeof e, "missing general.architecture"); goto bad; }
    for (const llama_arch *a = llama_archs; a->name && !m->arch; a++)
        if (gguf_str_eq(arch, a->name)) m->arch = a;
    if (!m->arch) {
        char known[160] = "";
        for (const llama_arch *a = llama_archs; a->name; a++)
            snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", a == llama_archs ? "" : ", ", a->name);
        snprintf(e, sizeof e, "architecture '%.*s' is not supported (known: %s)", (int)(arch.len > 64 ? 64 : arch.len), arch.ptr, known);
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
    free_gguf(&m->gguf);
    for (int k = 0; k < m->n_ropes; k++) free(m->ropes[k].pw);
    free(m->layers);
    free(m->owned);
    memset(m, 0, sizeof *m);
}

/* ------------------------------------------------------------------------ */
/* The batch workspace                                                       */
/* ------------------------------------------------------------------------ */

static size_t round64(size_t n) { return (n + 63) / 64 * 64; }

static void *xalloc(llama_batch *c, size_t n) {
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
    return w->data ? dispatch_row_size(m->d, m->d->types[w->type].vec_dot_type, w->cols) : 0;
}

/* Bytes of one group of w unpacked to its base type when its kernels are
   the base type's (pl_type.to_base), else 0. */
static size_t unpack_group(const llama_model *m, const qmat *w) {
    const pl_type *t = &m->d->types[w->type];
    return w->data && t->to_base ? t->row_group * dispatch_row_size(m->d, t->base_type, w->cols) : 0;
}

/* The largest f(matrix) over every matrix the model multiplies. */
static size_t mats_max(const llama_model *m, size_t (*f)(const llama_model *, const qmat *)) {
    size_t mx = f(m, &m->output);
    for (int l = 0; l < m->hp.n_layer; l++) {
        const llama_layer *L = &m->layers[l];
        const qmat *lm[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down, &L->conv_in, &L->conv_out};
        for (size_t i = 0; i < sizeof lm / sizeof *lm; i++)
            if (f(m, lm[i]) > mx) mx = f(m, lm[i]);
    }
    return mx;
}

/* Sizes of the scratch buffers for a batch of B tokens: one place for
   build_batch (which allocates them) and the memory plan (which adds them). */
enum { BUF_X, BUF_XB, BUF_Q, BUF_K, BUF_V, BUF_ATT, BUF_HB, BUF_HB2, BUF_ROPE, BUF_ACTQ, BUF_UNPACK, N_BUF };

/* One row of the mixing block's output: attention's heads, a convolution's width. */
static size_t att_row_floats(const llama_model *m) {
    const size_t qd = (size_t)m->hp.n_head * m->hp.head_dim;
    return qd > (size_t)m->hp.n_embd ? qd : (size_t)m->hp.n_embd;
}

static void scratch_sizes(const llama_model *m, size_t B, size_t nthr, size_t sz[N_BUF]) {
    const llama_hparams *hp = &m->hp;
    const size_t qd = (size_t)hp->n_head * hp->head_dim, kvd = (size_t)hp->n_head_kv * hp->head_dim;
    const size_t wide = (size_t)hp->n_ff > qd ? (size_t)hp->n_ff : qd;
    size_t hb = (size_t)hp->n_ff;
    if (m->n_rec_layer && hb < 3 * (size_t)hp->n_embd) hb = 3 * (size_t)hp->n_embd; /* a convolution's B, C, x */
    sz[BUF_X] = B * (size_t)hp->n_embd * sizeof(float);
    sz[BUF_XB] = B * wide * sizeof(float);
    sz[BUF_Q] = B * qd * sizeof(float);
    sz[BUF_K] = sz[BUF_V] = B * kvd * sizeof(float);
    /* attention output rows, then per-thread scratch (att_tmp_floats) */
    sz[BUF_ATT] = (B * att_row_floats(m) + nthr * att_tmp_floats(hp)) * sizeof(float);
    sz[BUF_HB] = B * hb * sizeof(float);
    sz[BUF_HB2] = B * (size_t)hp->n_ff * sizeof(float);
    sz[BUF_ROPE] = B * (size_t)m->n_ropes * (size_t)hp->rope_dim * sizeof(float);
    sz[BUF_ACTQ] = 3 * mats_max(m, act_row) * B; /* up to 3 activation types per region */
    sz[BUF_UNPACK] = nthr * round64(mats_max(m, unpack_group)); /* one group per thread */
}

size_t llama_batch_bytes(const llama_model *m, int n_batch, int n_threads) {
    size_t sz[N_BUF], total = 0;
    scratch_sizes(m, (size_t)(n_batch > 0 ? n_batch : 1), (size_t)(n_threads > 0 ? n_threads : 1), sz);
    for (int i = 0; i < N_BUF; i++) total += round64(sz[i]);
    return total + 64 * (size_t)(n_threads > 0 ? n_threads : 1) + 3 * 8 * (size_t)n_batch;
}

int build_batch(llama_batch *c, const llama_model *m, int n_batch, struct threadpool *pool, char *err, size_t errlen) {
    memset(c, 0, sizeof *c);
    if (n_batch <= 0) n_batch = 1;
    c->m = m;
    c->pool = pool;
    c->n_batch = n_batch;
    size_t sz[N_BUF];
    const size_t nthr = (size_t)threadpool_size(pool); /* 1 without a pool */
    scratch_sizes(m, (size_t)n_batch, nthr, sz);
    c->act_q_bytes = sz[BUF_ACTQ];
    float **fb[] = {&c->x, &c->xb, &c->q, &c->k, &c->v, &c->att, &c->hb, &c->hb2, &c->rope_cs};
    int bad = 0;
    for (int i = 0; i <= BUF_ROPE; i++) bad |= !(*fb[i] = xalloc(c, sz[i]));
    c->att_tmp = c->att ? c->att + (size_t)n_batch * att_row_floats(m) : NULL;
    c->act_q = xalloc(c, sz[BUF_ACTQ]);
    c->unpack_stride = sz[BUF_UNPACK] / nthr;
    c->unpack = c->unpack_stride ? xalloc(c, sz[BUF_UNPACK]) : NULL;
    c->mm_parts = xalloc(c, nthr * sizeof *c->mm_parts);
    c->tok_seq = xalloc(c, (size_t)n_batch * sizeof *c->tok_seq);
    c->tok_pos = xalloc(c, (size_t)n_batch * sizeof *c->tok_pos);
    c->out_rows = xalloc(c, (size_t)n_batch * sizeof *c->out_rows);
    if (bad || !c->act_q || (c->unpack_stride && !c->unpack) || !c->mm_parts || !c->tok_seq || !c->tok_pos || !c->out_rows) {
        free_batch(c);
        return pl_fail(err, errlen, "out of memory allocating the activations for a batch of %d tokens", n_batch);
    }
    return 0;
}

void free_batch(llama_batch *c) {
    void *bufs[] = {c->x, c->xb, c->q, c->k, c->v, c->att, c->hb, c->hb2, c->rope_cs,
                    c->act_q, c->unpack, c->mm_parts, c->tok_seq, c->tok_pos, c->out_rows};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) free(bufs[i]);
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

/* cos and sin of each angle of position pos (half of each), in double as
   ggml's rope cache makes them (measured closer to llama.cpp's references
   than float) */
static void rope_angles(const llama_rope *r, int half, int pos, float *cs) {
    for (int i = 0; i < half; i++) {
        const double theta = (pos / r->scale) * r->pw[i] / (r->ff ? r->ff[i] : 1.0);
        cs[i] = (float)cos(theta);
        cs[half + i] = (float)sin(theta);
    }
}

/* x[b] += bias for the n rows of dim floats (bias NULL: none) */
static void add_bias(float *x, const float *bias, int n, int dim) {
    if (!bias) return;
    for (int b = 0; b < n; b++)
        for (int i = 0; i < dim; i++) x[(size_t)b * dim + i] += bias[i];
}

/* RMS norm of each of n rows of len floats, in place (w NULL: none) */
static void norm_rows(const pl_ops *ops, float *x, const float *w, int n, int len, float eps) {
    if (!w) return;
    for (int r = 0; r < n; r++) ops->rmsnorm(x + (size_t)r * len, x + (size_t)r * len, w, len, eps);
}

/* GeGLU as ggml's CPU backend computes it (ggml_vec_geglu_f32): the GELU
   (tanh approximation) of the input rounded to f16, looked up in a table
   of f16 results made once, times u; 0 and x * u beyond +-10 */
static uint16_t gelu_f16[1 << 16];
static pthread_once_t gelu_once = PTHREAD_ONCE_INIT;

static void gelu_table(void) {
    for (int i = 0; i < 1 << 16; i++) {
        const float h = picolm_half_to_float((uint16_t)i);
        const float g = 0.5f * h * (1.0f + tanhf(0.79788456080286535587989211986876f * h * (1.0f + 0.044715f * h * h)));
        gelu_f16[i] = picolm_float_to_half(g);
    }
}

static void gelu_ready(void) { pthread_once(&gelu_once, gelu_table); }

static inline float geglu1(float x, float u) {
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x * u;
    return picolm_half_to_float(gelu_f16[picolm_float_to_half(x)]) * u;
}

/* g[i] = act(g[i]) * u[i] over n rows of ff floats */
static void ffn_gate(const llama_model *m, float *g, const float *u, int n, int ff) {
    if (m->arch->ffn_act == FFN_SILU) {
        for (int b = 0; b < n; b++) m->d->ops.swiglu(g + (size_t)b * ff, u + (size_t)b * ff, ff);
        return;
    }
    for (size_t i = 0; i < (size_t)n * ff; i++) g[i] = geglu1(g[i], u[i]);
}

/* The gated short convolution of a LAYER_CONV layer for token b (its
   sequence's state holds the previous conv_len - 1 inputs): bcx = the in
   projection's B, C and x; y = C * conv(B * x) over the last conv_len
   steps, as ggml_ssm_conv sums the taps in order. */
static void conv_step(llama_batch *c, const llama_layer *L, int l, int b, float *bcx, float *y) {
    const int dim = c->m->hp.n_embd, len = c->m->hp.conv_len;
    float *B = bcx, *C = bcx + dim, *x = bcx + 2 * (size_t)dim;
    for (int i = 0; i < dim; i++) B[i] *= x[i];
    struct kv_seq *s = c->tok_seq[b];
    const float *st = kv_state(s, l);
    for (int i = 0; i < dim; i++) {
        const float *w = L->conv_w + (size_t)i * len;
        float sum = 0.0f;
        for (int k = 0; k < len - 1; k++) sum += st[(size_t)k * dim + i] * w[k];
        sum += B[i] * w[len - 1];
        y[i] = C[i] * sum;
    }
    kv_state_push(s, l, c->tok_pos[b], B);
}

/* The forward pass over c's batch: token b in sequence c->tok_seq[b] at
   position c->tok_pos[b]; logits of the n_out rows c->out_rows[] into
   logits (n_out x n_vocab).  Each step is one knob of the recipe. */
static int forward(llama_batch *c, const int32_t *tokens, int n, int n_out, float *logits, char *err, size_t errlen) {
    const llama_model *m = c->m;
    const llama_hparams *hp = &m->hp;
    const pl_ops *ops = &m->d->ops;
    const int dim = hp->n_embd, kvd = hp->n_head_kv * hp->head_dim, qd = hp->n_head * hp->head_dim, ff = hp->n_ff;
    const int half = hp->rope_dim / 2, nr_rope = m->n_ropes;

    /* 1. embed: dequantize each token's row of token_embd (times sqrt(dim): gemma3) */
    const picolm_format *ef = m->d->types[m->tok_embd.type].fmt;
    for (int b = 0; b < n; b++) {
        if (tokens[b] < 0 || tokens[b] >= hp->n_vocab) return pl_fail(err, errlen, "token id %d outside the vocabulary (%d)", tokens[b], hp->n_vocab);
        float *x = c->x + (size_t)b * dim;
        ef->dequantize_row(m->tok_embd.data + (size_t)tokens[b] * m->tok_embd.row_bytes, x, dim);
        if (m->embd_scale != 1.0f)
            for (int i = 0; i < dim; i++) x[i] *= m->embd_scale;
        /* and the RoPE angles of its position, for each kind of layer */
        for (int k = 0; k < nr_rope; k++) rope_angles(&m->ropes[k], half, c->tok_pos[b], c->rope_cs + ((size_t)b * nr_rope + k) * hp->rope_dim);
    }

    for (int l = 0; l < hp->n_layer; l++) {
        const llama_layer *L = &m->layers[l];
        /* 2. the mixing block's rmsnorm */
        for (int b = 0; b < n; b++) ops->rmsnorm(c->xb + (size_t)b * dim, c->x + (size_t)b * dim, L->attn_norm, dim, hp->rms_eps);
        if (L->kind == LAYER_CONV) {
            /* 3c. gated short convolution (lfm2): in projection, each token
               through its sequence's state in order, out projection */
            matmul(c, &L->conv_in, c->hb, c->xb, n);
            for (int b = 0; b < n; b++) conv_step(c, L, l, b, c->hb + (size_t)b * 3 * dim, c->att + (size_t)b * dim);
        } else {
            /* 3. Q, K, V projections (one parallel region), plus their biases (qwen2) */
            const qmat *qkv[3] = {&L->wq, &L->wk, &L->wv};
            float *qkv_out[3] = {c->q, c->k, c->v};
            matmul_n(c, 3, qkv, qkv_out, c->xb, n);
            add_bias(c->q, L->bq, n, qd);
            add_bias(c->k, L->bk, n, kvd);
            add_bias(c->v, L->bv, n, kvd);
            /* 4. RMS norm of each q and k head (qwen3, gemma3, lfm2) */
            norm_rows(ops, c->q, L->q_norm, n * hp->n_head, hp->head_dim, hp->rms_eps);
            norm_rows(ops, c->k, L->k_norm, n * hp->n_head_kv, hp->head_dim, hp->rms_eps);
            for (int b = 0; b < n; b++) {
                float *q = c->q + (size_t)b * qd, *k = c->k + (size_t)b * kvd;
                /* 5. RoPE of the layer's kind (none in smollm3's every 4th layer),
                   then K/V into the sequence's cache */
                if (L->rope >= 0) {
                    const float *cs = c->rope_cs + ((size_t)b * nr_rope + L->rope) * hp->rope_dim;
                    m->rope(q, hp->n_head, hp->head_dim, half, cs, cs + half);
                    m->rope(k, hp->n_head_kv, hp->head_dim, half, cs, cs + half);
                }
                if (m->arch->q_scale) {
                    const float s = 1.0f / sqrtf((float)hp->head_dim);
                    for (int i = 0; i < qd; i++) q[i] *= s;
                }
                kv_store(c->tok_seq[b], l, c->tok_pos[b], k, c->v + (size_t)b * kvd);
            }
            /* 6. attention over each token's cache (GQA: query head h reads KV head
               h / group), its window in a LAYER_SWA layer */
            attention(c, l, n);
        }
        /* In the last layer only the rows whose logits are wanted go on
           (every layer's K and V are in the cache by now): they move to
           the front, in order, and the others' FFN is never computed.
           Each row's bits do not depend on the rows beside it. */
        const int aw = L->kind == LAYER_CONV ? dim : qd; /* width of the mixing block's output rows */
        int nr = n;
        if (l == hp->n_layer - 1 && n_out < n) {
            for (int r = 0; r < n_out; r++) {
                const int b = c->out_rows[r]; /* ascending, so b >= r */
                if (b == r) continue;
                memcpy(c->att + (size_t)r * aw, c->att + (size_t)b * aw, (size_t)aw * sizeof(float));
                memcpy(c->x + (size_t)r * dim, c->x + (size_t)b * dim, (size_t)dim * sizeof(float));
            }
            nr = n_out;
            if (!nr) break;
        }
        /* 7. output projection, its post-norm (gemma3), residual */
        matmul(c, L->kind == LAYER_CONV ? &L->conv_out : &L->wo, c->xb, c->att, nr);
        norm_rows(ops, c->xb, L->attn_post_norm, nr, dim, hp->rms_eps);
        for (size_t i = 0; i < (size_t)nr * dim; i++) c->x[i] += c->xb[i];
        /* 8. FFN rmsnorm, gated FFN: down(act(gate x) * up x), its post-norm (gemma3), residual */
        for (int b = 0; b < nr; b++) ops->rmsnorm(c->xb + (size_t)b * dim, c->x + (size_t)b * dim, L->ffn_norm, dim, hp->rms_eps);
        const qmat *gu[2] = {&L->w_gate, &L->w_up};
        float *gu_out[2] = {c->hb, c->hb2};
        matmul_n(c, 2, gu, gu_out, c->xb, nr);
        ffn_gate(m, c->hb, c->hb2, nr, ff);
        matmul(c, &L->w_down, c->xb, c->hb, nr);
        norm_rows(ops, c->xb, L->ffn_post_norm, nr, dim, hp->rms_eps);
        for (size_t i = 0; i < (size_t)nr * dim; i++) c->x[i] += c->xb[i];
    }
    for (int b = 0; b < n; b++) c->tok_seq[b]->n_past++;

    /* 9. final rmsnorm and the output matrix, for the rows asked for (the
       first n_out rows of x since the last layer), soft-capped where the
       model says */
    for (int r = 0; r < n_out; r++)
        ops->rmsnorm(c->xb + (size_t)r * dim, c->x + (size_t)r * dim, m->output_norm, dim, hp->rms_eps);
    if (n_out) matmul(c, &m->output, logits, c->xb, n_out);
    if (hp->softcap > 0) {
        const float inv = 1.0f / hp->softcap; /* ggml scales by the reciprocal */
        for (size_t i = 0; i < (size_t)n_out * hp->n_vocab; i++) logits[i] = tanhf(logits[i] * inv) * hp->softcap;
    }
    c->logit_rows += (uint64_t)n_out;
    return 0;
}

/* Reserve every sequence's blocks for all its tokens of the batch set up
   in c (tok_seq, tok_pos, out_rows), before anything is computed; then run. */
static int reserve_and_run(llama_batch *c, const int32_t *tokens, int n, int n_out, float *logits, char *err, size_t errlen) {
    for (int b = 0; b < n; b++) {
        kv_seq *sq = c->tok_seq[b];
        if (c->tok_pos[b] != sq->n_past) continue; /* not its first token here */
        int k = 0;
        for (int e = b; e < n; e++) k += c->tok_seq[e] == sq;
        if (kv_seq_reserve(sq, k)) {
            pl_fail(err, errlen, "the KV pool has no free block for %d more tokens", k);
            return LLAMA_ERR_KV_FULL;
        }
    }
    return forward(c, tokens, n, n_out, logits, err, errlen);
}

int llama_decode(llama_batch *c, struct kv_seq *const *seq, const int32_t *tokens, int n, const uint8_t *want, float *logits,
                 char *err, size_t errlen) {
    if (n <= 0 || n > c->n_batch) return pl_fail(err, errlen, "batch of %d tokens (allowed 1..%d)", n, c->n_batch);
    int n_out = 0;
    for (int b = 0; b < n; b++) {
        kv_seq *sq = seq[b];
        if (sq->pool->m != c->m) return pl_fail(err, errlen, "a sequence of another model");
        /* the sequence's next position: after its cache and its earlier tokens here */
        int pos = sq->n_past;
        for (int e = 0; e < b; e++) pos += seq[e] == sq;
        if (pos >= sq->n_ctx) return pl_fail(err, errlen, "context full: a sequence's context of %d is used up", sq->n_ctx);
        c->tok_seq[b] = sq;
        c->tok_pos[b] = pos;
        if (want && want[b]) c->out_rows[n_out++] = b;
    }
    if (n_out && !logits) return pl_fail(err, errlen, "logits wanted but nowhere to put them");
    return reserve_and_run(c, tokens, n, n_out, logits, err, errlen);
}

int llama_prefill(llama_batch *c, struct kv_seq *s, const int32_t *tokens, int n, float *logits, char *err, size_t errlen) {
    if (n < 0) return pl_fail(err, errlen, "a negative token count (%d)", n);
    if (n > s->n_ctx - s->n_past) return pl_fail(err, errlen, "%d tokens do not fit after %d of a context of %d", n, s->n_past, s->n_ctx);
    for (int i = 0; i < n; i += c->n_batch) {
        const int nb = n - i < c->n_batch ? n - i : c->n_batch;
        for (int b = 0; b < nb; b++) c->tok_seq[b] = s, c->tok_pos[b] = s->n_past + b;
        const int n_out = i + nb == n && logits;
        c->out_rows[0] = nb - 1;
        const int r = reserve_and_run(c, tokens + i, nb, n_out, logits, err, errlen);
        if (r) return r;
    }
    return 0;
}
