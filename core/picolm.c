/* The library API (include/picolm/picolm.h) over the engine's modules. */
#include "picolm/picolm.h"

#include <stdlib.h>
#include <string.h>

#include "chat_template.h"
#include "cpu.h"
#include "ctx.h"
#include "kvcache.h"
#include "threadpool.h"
#include "engine.h"
#include "sampling.h"
#include "util.h"

_Static_assert((int)PICOLM_KV_F16 == (int)KV_F16 && (int)PICOLM_KV_Q8_0 == (int)KV_Q8_0, "one numbering of the KV types");

/* ---- the machine ---- */

int picolm_cpu_count(void) { return cpu_count_online(); }
void picolm_cpu_name(char *buf, size_t n) { cpu_model_name(buf, n); }
void picolm_cpu_features(char *buf, size_t n) { cpu_features_str(cpu_probe(), buf, n); }

int picolm_cpu_mask_check(char *err, size_t errlen) {
    const char *mask = getenv("PICOLM_CPU_MASK");
    uint64_t m;
    return mask && *mask && cpu_parse_mask(mask, &m, err, errlen) ? -1 : 0;
}

/* ---- the runtime ---- */

picolm_runtime *picolm_runtime_new(const picolm_runtime_params *p, int *code, char *err, size_t errlen) {
    static const picolm_runtime_params defaults = {0};
    if (!p) p = &defaults;
    if (code) *code = -1;
    picolm_runtime *rt = calloc(1, sizeof *rt);
    if (!rt) return pl_fail(err, errlen, "out of memory"), NULL;
    const engine_opts o = {.plugin_dir = p->plugin_dir, .backend = p->backend, .threads = p->threads, .verbose = p->verbose};
    rt->e = build_engine(&o, err, errlen);
    if (!rt->e) {
        /* the registry's two messages about a backend by name (plugins.c) */
        if (code && p->backend && strcmp(p->backend, "auto") && (!strncmp(err, "no backend named", 16) || !strncmp(err, "backend '", 9)))
            *code = PICOLM_ERR_USAGE;
        free(rt);
        return NULL;
    }
    if (code) *code = 0;
    return rt;
}

void picolm_runtime_free(picolm_runtime *rt) {
    if (!rt) return;
    free_engine(rt->e);
    free(rt);
}

const char *picolm_runtime_backend(const picolm_runtime *rt) { return rt->e->d.backend ? rt->e->d.backend->name : "reference"; }
int picolm_runtime_threads(const picolm_runtime *rt) { return threadpool_size(rt->e->pool); }

void picolm_runtime_report(const picolm_runtime *rt, void *stream) {
    registry_print(&rt->e->reg, rt->e->d.backend ? rt->e->d.backend->name : NULL, stream);
}

/* The i-th accepted sampler plugin of the registry, or NULL. */
static const pl_plugin *nth_sampler(const pl_registry *r, int i) {
    for (int k = 0; k < r->n; k++)
        if (r->items[k].ok && r->items[k].kind == PICOLM_KIND_SAMPLER && i-- == 0) return &r->items[k];
    return NULL;
}

const char *picolm_runtime_sampler(const picolm_runtime *rt, int i) {
    const pl_plugin *p = nth_sampler(&rt->e->reg, i);
    return p ? p->name : NULL;
}

int picolm_runtime_plugin(const picolm_runtime *rt, int i, picolm_plugin_info *out) {
    const pl_registry *r = &rt->e->reg;
    for (int k = 0; k < r->n; k++) {
        const pl_plugin *p = &r->items[k];
        if (!p->ok || i-- > 0) continue;
        *out = (picolm_plugin_info){(int)p->kind, p->name, p->version, p->description, p->score};
        return 0;
    }
    return -1;
}

void picolm_runtime_report_dir(const char *plugin_dir, void *stream) {
    pl_registry r;
    char err[512];
    registry_load(&r, plugin_dir, err, sizeof err);
    registry_print(&r, NULL, stream);
    free_registry(&r);
}

const picolm_param_desc *picolm_runtime_sampler_param(const picolm_runtime *rt, int i, const char **sampler) {
    for (int k = 0;; k++) {
        const pl_plugin *p = nth_sampler(&rt->e->reg, k);
        if (!p) return NULL;
        const picolm_sampler_vtable *v = p->desc->vtable;
        int n = 0;
        while (v->params && v->params[n].key) n++;
        if (i < n) {
            if (sampler) *sampler = p->name;
            return &v->params[i];
        }
        i -= n;
    }
}

int picolm_runtime_type(const picolm_runtime *rt, uint32_t type, picolm_type_info *out) {
    const pl_registry *r = &rt->e->reg;
    memset(out, 0, sizeof *out);
    out->name = registry_type_name(r, type);
    if (type >= PL_TYPE_MAX || !rt->e->d.types[type].fmt) return -1;
    const pl_type *t = &rt->e->d.types[type];
    *out = (picolm_type_info){.format = t->fmt, .name = out->name, .plugin = t->fmt_plugin, .row_group = t->row_group,
                              .kernels_from = t->kernel_from, .vec_dot = t->vec_dot, .gemm = t->gemm, .act_quant = t->act_quant,
                              .act_type = t->vec_dot_type, .to_base = t->to_base, .base_type = t->base_type,
                              .layout_of = t->fmt->base_type, .from_base = t->fmt->from_base};
    return 0;
}

int64_t picolm_runtime_next_type(const picolm_runtime *rt, int64_t after) {
    for (int64_t t = after < 0 ? 0 : after + 1; t < PL_TYPE_MAX; t++)
        if (rt->e->d.types[t].fmt) return t;
    return -1;
}

size_t picolm_type_row_bytes(const picolm_runtime *rt, uint32_t type, int64_t n) {
    return type < PL_TYPE_MAX && rt->e->d.types[type].fmt ? dispatch_row_size(&rt->e->d, type, n) : 0;
}

void picolm_runtime_parallel(picolm_runtime *rt, int64_t n, void (*fn)(void *, int64_t, int64_t, int), void *ctx) {
    threadpool_run(rt->e->pool, n, fn, ctx);
}

/* ---- models ---- */

struct picolm_model {
    picolm_runtime *rt;
    int own_rt;
    llama_model lm;          /* the weights (unless vocab_only) */
    gguf_file vocab;         /* vocab_only: the file, for its metadata */
    const gguf_file *gguf;   /* the model's file, whichever */
    picolm_gguf view;        /* gguf as picolm_model_gguf gives it */
    tokenizer *tok;          /* NULL with weights_only */
    int have_model;
};

picolm_model *picolm_model_load(const picolm_model_params *p, char *err, size_t errlen) {
    if (!p || !p->path) { pl_fail(err, errlen, "no model path"); return NULL; }
    picolm_model *m = calloc(1, sizeof *m);
    if (!m) { pl_fail(err, errlen, "out of memory"); return NULL; }
    m->rt = p->runtime;
    if (!m->rt && !p->vocab_only) {
        const picolm_runtime_params rp = {.plugin_dir = p->plugin_dir, .backend = p->backend, .threads = p->threads};
        if (!(m->rt = picolm_runtime_new(&rp, NULL, err, errlen))) { free(m); return NULL; }
        m->own_rt = 1;
    }
    gguf_limits lim = gguf_default_limits;
    if (p->limits) {
        const picolm_limits *l = p->limits;
        lim = (gguf_limits){l->max_metadata, l->max_tensors, l->max_string, l->max_array, l->max_dim > INT64_MAX ? INT64_MAX : (int64_t)l->max_dim};
    }
    if (p->vocab_only) {
        char e2[512];
        if (build_gguf(&m->vocab, p->path, &lim, err, errlen)) goto bad;
        m->gguf = &m->vocab;
        m->view.f = m->gguf;
        if (build_tokenizer(&m->tok, &m->vocab, e2, sizeof e2)) {
            pl_fail(err, errlen, "%s: tokenizer: %s", p->path, e2);
            goto bad;
        }
        return m;
    }
    if (engine_load_model(&m->rt->e->d, p->path, &lim, &m->lm, p->weights_only ? NULL : &m->tok, err, errlen)) goto bad;
    m->have_model = 1;
    m->gguf = &m->lm.gguf;
    m->view.f = m->gguf;
    return m;
bad:
    picolm_model_free(m);
    return NULL;
}

void picolm_model_free(picolm_model *m) {
    if (!m) return;
    if (m->tok) free_tokenizer(m->tok);
    if (m->have_model) free_model(&m->lm);
    if (m->gguf == &m->vocab) free_gguf(&m->vocab);
    if (m->own_rt) picolm_runtime_free(m->rt);
    free(m);
}

picolm_runtime *picolm_model_runtime(const picolm_model *m) { return m->rt; }

int picolm_meta_str(const picolm_model *m, const char *key, const char **s, size_t *len) {
    gguf_str v;
    if (gguf_get_str(m->gguf, key, &v)) return -1;
    *s = v.ptr;
    *len = (size_t)v.len;
    return 0;
}

int picolm_meta_int(const picolm_model *m, const char *key, int64_t *out) { return gguf_get_i64(m->gguf, key, out) ? -1 : 0; }

size_t picolm_kv_bytes_per_token(const picolm_model *m, int kv_type) { return m->have_model ? kv_bytes_per_token(&m->lm, kv_type) : 0; }

size_t picolm_batch_bytes(const picolm_model *m, int n_tokens) {
    return m->have_model ? llama_batch_bytes(&m->lm, n_tokens, threadpool_size(m->rt->e->pool)) : 0;
}

void picolm_model_memory(const picolm_model *m, int n_ctx, int n_batch, int kv_type, int n_threads, picolm_memory *out) {
    memset(out, 0, sizeof *out);
    out->weights = m->gguf->size;
    if (!m->have_model) return;
    const llama_model *lm = &m->lm;
    if (n_threads <= 0) n_threads = threadpool_size(m->rt->e->pool);
    out->kv_per_token = kv_bytes_per_token(lm, kv_type);
    out->seq_state = kv_state_floats(lm) * sizeof(float);
    out->batch = llama_batch_bytes(lm, n_batch, n_threads);
    out->context = ctx_bytes(lm, n_ctx, n_batch, kv_type, n_threads);
}

const picolm_gguf *picolm_model_gguf(const picolm_model *m) { return &m->view; }

int picolm_model_mapping(const picolm_model *m, const void **base, size_t *size) {
    if (!m->gguf->mapped) return -1;
    *base = m->gguf->base;
    *size = m->gguf->size;
    return 0;
}

const picolm_vocab *picolm_model_vocab(const picolm_model *m) { return m->tok ? tokenizer_vocab(m->tok) : NULL; }

int32_t picolm_n_vocab(const picolm_model *m) { return m->have_model ? m->lm.hp.n_vocab : tokenizer_n_vocab(m->tok); }
int picolm_n_ctx_train(const picolm_model *m) { return m->have_model ? m->lm.hp.n_ctx_train : 0; }
/* The text calls of a model loaded weights_only: no tokens, no text. */
int picolm_add_bos(const picolm_model *m) { return m->tok && tokenizer_add_bos(m->tok); }
int picolm_is_eog(const picolm_model *m, int32_t tok) { return m->tok && tokenizer_is_eog(m->tok, tok); }

int picolm_tokenize(const picolm_model *m, const char *text, size_t len, int add_bos, int special, int32_t *out, int cap) {
    return m->tok ? tokenizer_encode(m->tok, text, len, add_bos, special, out, cap) : -1;
}

int picolm_detokenize(const picolm_model *m, const int32_t *toks, int n, char *out, int cap) {
    return m->tok ? tokenizer_detokenize(m->tok, toks, n, out, cap) : -1;
}

static const char *no_text(size_t *len) { return *len = 0, ""; }
const char *picolm_token_piece(const picolm_model *m, int32_t tok, size_t *len) { return m->tok ? tokenizer_piece(m->tok, tok, len) : no_text(len); }
const char *picolm_token_text(const picolm_model *m, int32_t tok, size_t *len) { return m->tok ? tokenizer_text(m->tok, tok, len) : no_text(len); }
int picolm_token_type(const picolm_model *m, int32_t tok) { return m->tok ? tokenizer_token_type(m->tok, tok) : -1; }
int32_t picolm_token_find(const picolm_model *m, const char *text, size_t len) { return m->tok ? tokenizer_find(m->tok, text, len) : -1; }
int32_t picolm_token_bos(const picolm_model *m) { return m->tok ? tokenizer_bos(m->tok) : -1; }
int32_t picolm_token_eos(const picolm_model *m) { return m->tok ? tokenizer_eos(m->tok) : -1; }
size_t picolm_utf8_complete(const char *buf, size_t len) { return tokenizer_utf8_prefix(buf, len); }

/* Calls that run the model: refused on a vocabulary-only load. */
static int need_weights(const picolm_model *m, char *err, size_t errlen) {
    return m->have_model ? 0 : pl_fail(err, errlen, "the model was loaded for its vocabulary only");
}

void picolm_model_describe(const picolm_model *pm, picolm_model_info *out) {
    const llama_model *m = &pm->lm;
    const llama_hparams *hp = &m->hp;
    gguf_str arch = {0};
    gguf_get_str(pm->gguf, "general.architecture", &arch);
    *out = (picolm_model_info){.arch = pm->have_model ? m->arch->name : "(vocabulary)", .n_vocab = picolm_n_vocab(pm),
                               .n_ctx_train = hp->n_ctx_train, .n_embd = hp->n_embd, .n_layer = hp->n_layer, .n_head = hp->n_head,
                               .n_head_kv = hp->n_head_kv, .head_dim = hp->head_dim, .n_ff = hp->n_ff, .n_kv_layers = m->n_kv_layer,
                               .file_bytes = pm->gguf->size, .weight_bytes = m->weight_bytes,
                               .backend = pm->rt ? picolm_runtime_backend(pm->rt) : "none",
                               .n_threads = pm->rt ? picolm_runtime_threads(pm->rt) : 0, .embd_row_bytes = m->tok_embd.row_bytes};
}

/* ---- the KV pool, sequences, batches ---- */

struct picolm_kv {
    picolm_model *m;
    kv_pool pool;
};

struct picolm_seq {
    picolm_kv *kv;
    kv_seq s;
};

struct picolm_batch {
    picolm_model *m;
    llama_batch b;
    kv_seq **who;        /* per token of a call: its sequence's state */
};

size_t picolm_kv_block_bytes(const picolm_model *m, int kv_type, int block_size) {
    return m->have_model ? kv_block_bytes(&m->lm, kv_type, block_size > 0 ? block_size : 16) : 0;
}

picolm_kv *picolm_kv_new(picolm_model *m, const picolm_kv_params *p, char *err, size_t errlen) {
    static const picolm_kv_params defaults = {0};
    if (!p) p = &defaults;
    if (need_weights(m, err, errlen)) return NULL;
    const llama_model *lm = &m->lm;
    const int bs = p->block_size > 0 ? p->block_size : 16;
    const size_t block = kv_block_bytes(lm, p->kv_type, bs);
    size_t nb = p->n_blocks > 0 ? (size_t)p->n_blocks : p->bytes ? p->bytes / block : ((size_t)lm->hp.n_ctx_train + bs - 1) / bs;
    if (nb < 1) return pl_fail(err, errlen, "a KV pool of %zu bytes holds no block (%zu bytes of %d positions)", p->bytes, block, bs), NULL;
    if (nb > INT32_MAX) nb = INT32_MAX;
    picolm_kv *kv = calloc(1, sizeof *kv);
    if (!kv) return pl_fail(err, errlen, "out of memory"), NULL;
    kv->m = m;
    if (build_kv_pool(&kv->pool, lm, p->kv_type, (int)nb, bs, err, errlen)) {
        free(kv);
        return NULL;
    }
    return kv;
}

void picolm_kv_free(picolm_kv *kv) {
    if (!kv) return;
    free_kv_pool(&kv->pool);
    free(kv);
}

int picolm_kv_n_blocks(const picolm_kv *kv) { return kv->pool.n_blocks; }
int picolm_kv_n_free(const picolm_kv *kv) { return kv->pool.n_free; }
int picolm_kv_block_size(const picolm_kv *kv) { return kv->pool.block_size; }

picolm_seq *picolm_seq_new(picolm_kv *kv, int n_ctx, char *err, size_t errlen) {
    picolm_seq *s = calloc(1, sizeof *s);
    if (!s) return pl_fail(err, errlen, "out of memory"), NULL;
    s->kv = kv;
    if (build_kv_seq(&s->s, &kv->pool, n_ctx, err, errlen)) {
        free(s);
        return NULL;
    }
    return s;
}

void picolm_seq_free(picolm_seq *s) {
    if (!s) return;
    free_kv_seq(&s->s);
    free(s);
}

int picolm_seq_n_past(const picolm_seq *s) { return s->s.n_past; }
int picolm_seq_n_ctx(const picolm_seq *s) { return s->s.n_ctx; }

picolm_seq *picolm_seq_fork(const picolm_seq *src, int n_tokens, char *err, size_t errlen) {
    picolm_seq *s = picolm_seq_new(src->kv, src->s.n_ctx, err, errlen);
    if (s) kv_seq_share(&s->s, &src->s, n_tokens);
    return s;
}

int picolm_seq_share(picolm_seq *dst, const picolm_seq *src, int n_tokens) {
    if (dst->kv != src->kv) return -1;
    return kv_seq_share(&dst->s, &src->s, n_tokens);
}

int picolm_seq_truncate(picolm_seq *s, int n_tokens) { return kv_seq_truncate(&s->s, n_tokens); }

int picolm_seq_reserve(picolm_seq *s, int n) {
    if (n < 0 || n > s->s.n_ctx - s->s.n_past) return -1;
    return kv_seq_reserve(&s->s, n) ? PICOLM_ERR_KV_FULL : 0;
}

int picolm_seq_skip(picolm_seq *s, int n) {
    if (n < 0 || n > s->s.n_ctx - s->s.n_past) return -1;
    return kv_seq_skip(&s->s, n) ? PICOLM_ERR_KV_FULL : 0;
}

int picolm_seq_save(const picolm_seq *s, const char *path, const int32_t *toks, int n, char *err, size_t errlen) {
    return kvcache_save(path, &s->s, toks, n, err, errlen);
}

int picolm_seq_load(picolm_seq *s, const char *path, const int32_t *toks, int n, int *n_restored, char *err, size_t errlen) {
    *n_restored = 0;
    if (s->s.n_past) return pl_fail(err, errlen, "a KV-cache file is restored into an empty sequence");
    kvcache_id id;
    kvcache_view v;
    void *map;
    size_t msz;
    kvcache_id_of(&s->s, &id);
    const int r = kvcache_load_file(path, &id, &v, &map, &msz, err, errlen);
    if (r) return r == KVCACHE_FOREIGN ? PICOLM_ERR_FOREIGN : r;
    int use = kvcache_common_prefix(&v, toks, n);
    if (use >= n) use = n - 1; /* the last token is evaluated again: its logits start the reply */
    if (use > s->s.n_ctx) use = s->s.n_ctx;
    use = kvcache_usable(&v, use);
    int rc = use > 0 ? kvcache_restore(&s->s, &v, use, err, errlen) : 0;
    if (!rc) *n_restored = use;
    else kv_seq_truncate(&s->s, 0); /* nothing half restored */
    free_kvcache_view(&v);
    kvcache_unmap(map, msz);
    return rc;
}

picolm_batch *picolm_batch_new(picolm_model *m, int n_tokens, char *err, size_t errlen) {
    if (n_tokens < 1) return pl_fail(err, errlen, "a batch of %d tokens", n_tokens), NULL;
    picolm_batch *b = calloc(1, sizeof *b);
    if (!b) return pl_fail(err, errlen, "out of memory"), NULL;
    b->m = m;
    b->who = malloc((size_t)n_tokens * sizeof *b->who);
    if (!b->who || need_weights(m, err, errlen) || build_batch(&b->b, &m->lm, n_tokens, m->rt->e->pool, err, errlen)) {
        if (!b->who) pl_fail(err, errlen, "out of memory");
        free(b->who);
        free(b);
        return NULL;
    }
    return b;
}

void picolm_batch_free(picolm_batch *b) {
    if (!b) return;
    free_batch(&b->b);
    free(b->who);
    free(b);
}

int picolm_batch_size(const picolm_batch *b) { return b->b.n_batch; }

int picolm_decode(picolm_batch *b, picolm_seq *const *seqs, const int32_t *toks, int n, const uint8_t *want, float *logits,
                  char *err, size_t errlen) {
    if (n <= 0 || n > b->b.n_batch) return pl_fail(err, errlen, "batch of %d tokens (allowed 1..%d)", n, b->b.n_batch);
    for (int i = 0; i < n; i++) {
        if (!seqs[i] || seqs[i]->kv->m != b->m) return pl_fail(err, errlen, "token %d: no sequence, or one of another model", i);
        b->who[i] = &seqs[i]->s;
    }
    const int r = llama_decode(&b->b, b->who, toks, n, want, logits, err, errlen);
    return r == LLAMA_ERR_KV_FULL ? PICOLM_ERR_KV_FULL : r ? -1 : 0;
}

int picolm_prefill(picolm_batch *b, picolm_seq *s, const int32_t *toks, int n, float *logits, char *err, size_t errlen) {
    if (s->kv->m != b->m) return pl_fail(err, errlen, "a sequence of another model");
    const int r = llama_prefill(&b->b, &s->s, toks, n, logits, err, errlen);
    return r == LLAMA_ERR_KV_FULL ? PICOLM_ERR_KV_FULL : r ? -1 : 0;
}

void picolm_batch_profile(picolm_batch *b, int on, picolm_profile *out) {
    llama_prof *p = &b->b.prof;
    if (out) *out = (picolm_profile){.matmul_s = p->matmul, .attention_s = p->attention, .logit_rows = b->b.logit_rows};
    if (on) *p = (llama_prof){.on = 1}, b->b.logit_rows = 0;
    else p->on = 0;
}

/* ---- samplers ---- */

struct picolm_sampler {
    sampling *smp;
};

picolm_sampler *picolm_sampler_new(picolm_model *m, const picolm_sampler_params *p, char *err, size_t errlen) {
    if (!m->rt || !m->tok) return pl_fail(err, errlen, "the model was loaded without %s", m->rt ? "its tokenizer" : "a runtime"), NULL;
    return picolm_sampler_new_vocab(m->rt, tokenizer_vocab(m->tok), p, err, errlen);
}

picolm_sampler *picolm_sampler_new_vocab(picolm_runtime *rt, const picolm_vocab *vocab, const picolm_sampler_params *p,
                                         char *err, size_t errlen) {
    static const picolm_sampler_params defaults = {0};
    if (!p) p = &defaults;
    enum { MAX_SETTINGS = 128 };
    if (p->n_params < 0 || p->n_params > MAX_SETTINGS) return pl_fail(err, errlen, "%d sampler parameters (max %d)", p->n_params, MAX_SETTINGS), NULL;
    sampling_param sp[MAX_SETTINGS];
    for (int i = 0; i < p->n_params; i++)
        sp[i] = (sampling_param){p->params[i].key, p->params[i].value, p->where && p->where[i] ? p->where[i] : "sampler parameters"};
    const sampling_settings set = {.chain = p->chain ? p->chain : "greedy", .params = sp, .n_params = p->n_params, .seed = p->seed};
    picolm_sampler *s = calloc(1, sizeof *s);
    if (!s) return pl_fail(err, errlen, "out of memory"), NULL;
    if (build_sampling(&s->smp, &rt->e->reg, &set, vocab, err, errlen)) {
        free(s);
        return NULL;
    }
    return s;
}

void picolm_sampler_free(picolm_sampler *s) {
    if (!s) return;
    free_sampling(s->smp);
    free(s);
}

int picolm_sampler_sample(picolm_sampler *s, const float *logits, int n_remaining, int32_t *tok, char *err, size_t errlen) {
    if (!logits) return pl_fail(err, errlen, "no logits to sample from");
    return sampling_sample(s->smp, logits, n_remaining, tok, err, errlen);
}

void picolm_sampler_accept(picolm_sampler *s, int32_t tok) { sampling_accept(s->smp, tok); }
void picolm_sampler_reset(picolm_sampler *s) { sampling_reset(s->smp); }
void picolm_sampler_describe(const picolm_sampler *s, char *buf, size_t n) { sampling_describe(s->smp, buf, n); }
int picolm_sampler_n_stages(const picolm_sampler *s) { return sampling_n_stages(s->smp); }
const char *picolm_sampler_stage(const picolm_sampler *s, int i) { return sampling_stage_name(s->smp, i); }
void picolm_sampler_timing(picolm_sampler *s, int on) { sampling_timing(s->smp, on); }
double picolm_sampler_seconds(const picolm_sampler *s, int i) { return sampling_stage_seconds(s->smp, i); }
void picolm_sampler_direct(picolm_sampler *s, int on) { sampling_direct(s->smp, on); }
void picolm_sampler_fused(picolm_sampler *s, int on) { sampling_fused(s->smp, on); }
int32_t picolm_sampler_min_budget(const picolm_sampler *s, char *stage, size_t n) { return sampling_min_budget(s->smp, stage, n); }

/* ---- contexts: a sequence, its own pool, a batch and a sampler ---- */

struct picolm_context {
    picolm_model *m;
    picolm_kv *kv;
    picolm_seq *seq;
    picolm_batch *batch;
    picolm_sampler *smp;
    float *logits;
    int have_logits;
};

picolm_context *picolm_context_new(picolm_model *m, const picolm_context_params *p, char *err, size_t errlen) {
    static const picolm_context_params defaults = {0};
    if (!p) p = &defaults;
    picolm_context *c = calloc(1, sizeof *c);
    if (!c) { pl_fail(err, errlen, "out of memory"); return NULL; }
    c->m = m;
    if (need_weights(m, err, errlen)) { free(c); return NULL; }
    const llama_model *lm = &m->lm;
    const int train = lm->hp.n_ctx_train;
    const int n_ctx = p->n_ctx <= 0 || p->n_ctx > train ? train : p->n_ctx;
    const int n_batch = p->n_batch > 0 ? (p->n_batch < n_ctx ? p->n_batch : n_ctx) : (64 < n_ctx ? 64 : n_ctx);
    /* one sequence: its cache in one block (the layout attention reads
       fastest), or blocks between checkpoints with a recurrent state */
    const int bs = lm->n_rec_layer ? CTX_CHECKPOINT : n_ctx;
    const picolm_kv_params kp = {.kv_type = p->kv_type, .block_size = bs, .n_blocks = (n_ctx + bs - 1) / bs};
    const picolm_sampler_params sp = {.chain = p->sampler_chain, .params = p->sampler_params, .n_params = p->n_sampler_params,
                                      .seed = p->seed};
    if (!(c->kv = picolm_kv_new(m, &kp, err, errlen)) || !(c->seq = picolm_seq_new(c->kv, n_ctx, err, errlen)) ||
        !(c->batch = picolm_batch_new(m, n_batch, err, errlen)) ||
        (!p->no_sampler && !(c->smp = picolm_sampler_new(m, &sp, err, errlen))) ||
        !(c->logits = malloc((size_t)lm->hp.n_vocab * sizeof *c->logits))) {
        if ((c->smp || p->no_sampler) && c->batch && !c->logits) pl_fail(err, errlen, "out of memory");
        picolm_context_free(c);
        return NULL;
    }
    return c;
}

void picolm_context_free(picolm_context *c) {
    if (!c) return;
    picolm_sampler_free(c->smp);
    picolm_batch_free(c->batch);
    picolm_seq_free(c->seq);
    picolm_kv_free(c->kv);
    free(c->logits);
    free(c);
}

/* What picolm_eval and picolm_eval_logits refuse before evaluating. */
static int check_eval(const picolm_context *c, const int32_t *toks, int n, char *err, size_t errlen) {
    const int32_t nv = c->m->lm.hp.n_vocab;
    if (n < 0 || (n && !toks)) return pl_fail(err, errlen, "no tokens");
    const int past = picolm_seq_n_past(c->seq), n_ctx = picolm_seq_n_ctx(c->seq);
    if (n > n_ctx - past) return pl_fail(err, errlen, "%d tokens do not fit after %d in a context of %d", n, past, n_ctx);
    for (int i = 0; i < n; i++)
        if (toks[i] < 0 || toks[i] >= nv) return pl_fail(err, errlen, "token %d: id %d is not in the vocabulary of %d", i, toks[i], nv);
    return 0;
}

static void evaluated(picolm_context *c, const int32_t *toks, int n) {
    if (n) c->have_logits = 1;
    for (int i = 0; c->smp && i < n; i++) picolm_sampler_accept(c->smp, toks[i]);
}

int picolm_eval(picolm_context *c, const int32_t *toks, int n, char *err, size_t errlen) {
    if (check_eval(c, toks, n, err, errlen) || picolm_prefill(c->batch, c->seq, toks, n, c->logits, err, errlen)) return -1;
    evaluated(c, toks, n);
    return 0;
}

int picolm_eval_logits(picolm_context *c, const int32_t *toks, int n, float *logits, char *err, size_t errlen) {
    if (check_eval(c, toks, n, err, errlen)) return -1;
    const int nb = picolm_batch_size(c->batch);
    const size_t nv = (size_t)c->m->lm.hp.n_vocab;
    picolm_seq **seqs = malloc((size_t)nb * sizeof *seqs);
    uint8_t *want = malloc((size_t)nb);
    int rc = seqs && want ? 0 : pl_fail(err, errlen, "out of memory");
    for (int i = 0; i < nb && !rc; i++) seqs[i] = c->seq, want[i] = 1;
    for (int i = 0; i < n && !rc; i += nb) {
        const int k = n - i < nb ? n - i : nb;
        rc = picolm_decode(c->batch, seqs, toks + i, k, want, logits + i * nv, err, errlen) ? -1 : 0;
    }
    free(seqs);
    free(want);
    if (rc) return -1;
    if (n) memcpy(c->logits, logits + (size_t)(n - 1) * nv, nv * sizeof *c->logits);
    evaluated(c, toks, n);
    return 0;
}

const float *picolm_logits(const picolm_context *c) { return c->have_logits ? c->logits : NULL; }
int picolm_n_past(const picolm_context *c) { return picolm_seq_n_past(c->seq); }
int picolm_n_ctx(const picolm_context *c) { return picolm_seq_n_ctx(c->seq); }

int picolm_sample(picolm_context *c, int32_t *tok, char *err, size_t errlen) {
    if (!c->smp) return pl_fail(err, errlen, "the context was made without a sampler chain");
    if (!c->have_logits) return pl_fail(err, errlen, "nothing evaluated yet: no logits to sample from");
    return picolm_sampler_sample(c->smp, c->logits, -1, tok, err, errlen);
}

void picolm_reset(picolm_context *c) {
    picolm_seq_truncate(c->seq, 0);
    c->have_logits = 0;
    if (c->smp) picolm_sampler_reset(c->smp);
}

picolm_seq *picolm_context_seq(picolm_context *c) { return c->seq; }
picolm_batch *picolm_context_batch(picolm_context *c) { return c->batch; }

char *picolm_chat_render(const picolm_model *m, const char *tmpl, const picolm_chat_msg *msgs, int n, int add_assistant,
                         size_t *len, char *err, size_t errlen) {
    int kind;
    char note[256];
    if (chat_kind_resolve(tmpl ? tmpl : "auto", m ? m->gguf : NULL, &kind, note, sizeof note, err, errlen)) return NULL;
    char *out = chat_render(kind, msgs, n, add_assistant, len);
    if (!out) pl_fail(err, errlen, "out of memory");
    return out;
}

const char *picolm_chat_template(const picolm_model *m, const char *tmpl, char *note, size_t notelen, char *err, size_t errlen) {
    int kind;
    if (chat_kind_resolve(tmpl ? tmpl : "auto", m ? m->gguf : NULL, &kind, note, notelen, err, errlen)) return NULL;
    return chat_kind_name(kind);
}

const char *picolm_chat_templates(void) { return CHAT_KIND_NAMES; }

const char *picolm_arch_name(int i) {
    for (const llama_arch *a = llama_archs; a->name; a++)
        if (i-- == 0) return a->name;
    return NULL;
}

int picolm_chat_parse(char *text, size_t len, picolm_chat_msg *m, int cap, char *err, size_t errlen) {
    return chat_parse_conversation(text, len, m, cap, err, errlen);
}

/* The template kind and tool family tmpl resolves to for m. */
static int tool_family(const picolm_model *m, const char *tmpl, int *kind, char *err, size_t errlen) {
    char note[256];
    if (chat_kind_resolve(tmpl ? tmpl : "auto", m ? m->gguf : NULL, kind, note, sizeof note, err, errlen)) return -1;
    return chat_tools_resolve(*kind, m ? m->gguf : NULL);
}

const picolm_tool_format *picolm_tool_format_of(const picolm_model *m, const char *tmpl, char *err, size_t errlen) {
    int kind;
    const int family = tool_family(m, tmpl, &kind, err, errlen);
    return family < 0 ? NULL : chat_tools_format(family);
}

char *picolm_chat_render_tools(const picolm_model *m, const char *tmpl, const picolm_chat_msg *msgs, int n,
                               const picolm_chat_tools *t, int add_assistant, size_t *len, char *err, size_t errlen) {
    int kind;
    const int family = tool_family(m, tmpl, &kind, err, errlen);
    if (family < 0) return NULL;
    const chat_tools_opts o = {t ? t->tools : NULL, t ? t->n_tools : 0, add_assistant, t && t->forced, t ? t->date : NULL};
    return chat_render_tools(kind, family, msgs, n, &o, len, err, errlen);
}
