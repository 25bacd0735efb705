/* The library API (include/picolm/picolm.h) over the engine's modules. */
#include "picolm/picolm.h"

#include <stdlib.h>
#include <string.h>

#include "chat_template.h"
#include "ctx.h"
#include "kvcache.h"
#include "threadpool.h"
#include "engine.h"
#include "sampling.h"
#include "util.h"

_Static_assert((int)PICOLM_KV_F16 == (int)KV_F16 && (int)PICOLM_KV_Q8_0 == (int)KV_Q8_0, "one numbering of the KV types");

struct picolm_model {
    engine *e;
};


picolm_model *picolm_model_load(const picolm_model_params *p, char *err, size_t errlen) {
    if (!p || !p->path) { pl_fail(err, errlen, "no model path"); return NULL; }
    picolm_model *m = calloc(1, sizeof *m);
    if (!m) { pl_fail(err, errlen, "out of memory"); return NULL; }
    const engine_opts o = {.model_path = p->path, .plugin_dir = p->plugin_dir, .backend = p->backend,
                           .threads = p->threads, .tokenizer = 1};
    m->e = build_engine(&o, err, errlen);
    if (!m->e) { free(m); return NULL; }
    return m;
}

void picolm_model_free(picolm_model *m) {
    if (!m) return;
    free_engine(m->e);
    free(m);
}

int32_t picolm_n_vocab(const picolm_model *m) { return m->e->model.hp.n_vocab; }
int picolm_n_ctx_train(const picolm_model *m) { return m->e->model.hp.n_ctx_train; }
int picolm_add_bos(const picolm_model *m) { return tokenizer_add_bos(m->e->tok); }
int picolm_is_eog(const picolm_model *m, int32_t tok) { return tokenizer_is_eog(m->e->tok, tok); }

int picolm_tokenize(const picolm_model *m, const char *text, size_t len, int add_bos, int special, int32_t *out, int cap) {
    return tokenizer_encode(m->e->tok, text, len, add_bos, special, out, cap);
}

int picolm_detokenize(const picolm_model *m, const int32_t *toks, int n, char *out, int cap) {
    return tokenizer_detokenize(m->e->tok, toks, n, out, cap);
}

const char *picolm_token_piece(const picolm_model *m, int32_t tok, size_t *len) { return tokenizer_piece(m->e->tok, tok, len); }

void picolm_model_describe(const picolm_model *pm, picolm_model_info *out) {
    const engine *e = pm->e;
    const llama_model *m = &e->model;
    const llama_hparams *hp = &m->hp;
    *out = (picolm_model_info){.arch = m->arch->name, .n_vocab = hp->n_vocab, .n_ctx_train = hp->n_ctx_train, .n_embd = hp->n_embd,
                               .n_layer = hp->n_layer, .n_head = hp->n_head, .n_head_kv = hp->n_head_kv, .head_dim = hp->head_dim,
                               .n_ff = hp->n_ff, .n_kv_layers = m->n_kv_layer, .file_bytes = m->gguf.size,
                               .weight_bytes = m->weight_bytes, .backend = e->d.backend ? e->d.backend->name : "reference",
                               .n_threads = threadpool_size(e->pool)};
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
    return kv_block_bytes(&m->e->model, kv_type, block_size > 0 ? block_size : 16);
}

picolm_kv *picolm_kv_new(picolm_model *m, const picolm_kv_params *p, char *err, size_t errlen) {
    static const picolm_kv_params defaults = {0};
    if (!p) p = &defaults;
    const llama_model *lm = &m->e->model;
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
    if (r) return r;
    int use = kvcache_common_prefix(&v, toks, n);
    if (use >= n) use = n - 1; /* the last token is evaluated again: its logits start the reply */
    if (use > s->s.n_ctx) use = s->s.n_ctx;
    use = kvcache_usable(&v, use);
    int rc = use > 0 ? kvcache_restore(&s->s, &v, use, err, errlen) : 0;
    if (!rc) *n_restored = use;
    kvcache_view_free(&v);
    kvcache_unmap(map, msz);
    return rc;
}

picolm_batch *picolm_batch_new(picolm_model *m, int n_tokens, char *err, size_t errlen) {
    if (n_tokens < 1) return pl_fail(err, errlen, "a batch of %d tokens", n_tokens), NULL;
    picolm_batch *b = calloc(1, sizeof *b);
    if (!b) return pl_fail(err, errlen, "out of memory"), NULL;
    b->m = m;
    b->who = malloc((size_t)n_tokens * sizeof *b->who);
    if (!b->who || build_batch(&b->b, &m->e->model, n_tokens, m->e->pool, err, errlen)) {
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
    static const picolm_sampler_params defaults = {0};
    if (!p) p = &defaults;
    enum { MAX_SETTINGS = 64 };
    if (p->n_params < 0 || p->n_params > MAX_SETTINGS) return pl_fail(err, errlen, "%d sampler parameters (max %d)", p->n_params, MAX_SETTINGS), NULL;
    sampling_param sp[MAX_SETTINGS];
    for (int i = 0; i < p->n_params; i++) sp[i] = (sampling_param){p->params[i].key, p->params[i].value, "sampler parameters"};
    const sampling_settings set = {.chain = p->chain ? p->chain : "greedy", .params = sp, .n_params = p->n_params, .seed = p->seed};
    picolm_sampler *s = calloc(1, sizeof *s);
    if (!s) return pl_fail(err, errlen, "out of memory"), NULL;
    if (sampling_build(&s->smp, &m->e->reg, &set, tokenizer_vocab(m->e->tok), err, errlen)) {
        free(s);
        return NULL;
    }
    return s;
}

void picolm_sampler_free(picolm_sampler *s) {
    if (!s) return;
    sampling_free(s->smp);
    free(s);
}

int picolm_sampler_sample(picolm_sampler *s, const float *logits, int n_remaining, int32_t *tok, char *err, size_t errlen) {
    if (!logits) return pl_fail(err, errlen, "no logits to sample from");
    return sampling_sample(s->smp, logits, n_remaining, tok, err, errlen);
}

void picolm_sampler_accept(picolm_sampler *s, int32_t tok) { sampling_accept(s->smp, tok); }
void picolm_sampler_reset(picolm_sampler *s) { sampling_reset(s->smp); }
void picolm_sampler_describe(const picolm_sampler *s, char *buf, size_t n) { sampling_describe(s->smp, buf, n); }

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
    const llama_model *lm = &m->e->model;
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
        !(c->batch = picolm_batch_new(m, n_batch, err, errlen)) || !(c->smp = picolm_sampler_new(m, &sp, err, errlen)) ||
        !(c->logits = malloc((size_t)lm->hp.n_vocab * sizeof *c->logits))) {
        if (c->smp && !c->logits) pl_fail(err, errlen, "out of memory");
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

int picolm_eval(picolm_context *c, const int32_t *toks, int n, char *err, size_t errlen) {
    const int32_t nv = c->m->e->model.hp.n_vocab;
    if (n < 0 || (n && !toks)) return pl_fail(err, errlen, "no tokens");
    const int past = picolm_seq_n_past(c->seq), n_ctx = picolm_seq_n_ctx(c->seq);
    if (n > n_ctx - past) return pl_fail(err, errlen, "%d tokens do not fit after %d in a context of %d", n, past, n_ctx);
    for (int i = 0; i < n; i++)
        if (toks[i] < 0 || toks[i] >= nv) return pl_fail(err, errlen, "token %d: id %d is not in the vocabulary of %d", i, toks[i], nv);
    if (picolm_prefill(c->batch, c->seq, toks, n, c->logits, err, errlen)) return -1;
    if (n) c->have_logits = 1;
    for (int i = 0; i < n; i++) picolm_sampler_accept(c->smp, toks[i]);
    return 0;
}

const float *picolm_logits(const picolm_context *c) { return c->have_logits ? c->logits : NULL; }
int picolm_n_past(const picolm_context *c) { return picolm_seq_n_past(c->seq); }
int picolm_n_ctx(const picolm_context *c) { return picolm_seq_n_ctx(c->seq); }

int picolm_sample(picolm_context *c, int32_t *tok, char *err, size_t errlen) {
    if (!c->have_logits) return pl_fail(err, errlen, "nothing evaluated yet: no logits to sample from");
    return picolm_sampler_sample(c->smp, c->logits, -1, tok, err, errlen);
}

void picolm_reset(picolm_context *c) {
    picolm_seq_truncate(c->seq, 0);
    c->have_logits = 0;
    picolm_sampler_reset(c->smp);
}

char *picolm_chat_render(const picolm_model *m, const char *tmpl, const picolm_chat_msg *msgs, int n, int add_assistant,
                         size_t *len, char *err, size_t errlen) {
    int kind;
    char note[256];
    if (chat_kind_resolve(tmpl ? tmpl : "auto", &m->e->model.gguf, &kind, note, sizeof note, err, errlen)) return NULL;
    chat_msg *cm = malloc((size_t)(n > 0 ? n : 1) * sizeof *cm);
    if (!cm) { pl_fail(err, errlen, "out of memory"); return NULL; }
    for (int i = 0; i < n; i++) cm[i] = (chat_msg){msgs[i].role, msgs[i].content, msgs[i].len};
    char *out = chat_render(kind, cm, n, add_assistant, len);
    free(cm);
    if (!out) pl_fail(err, errlen, "out of memory");
    return out;
}
