/* The library API (include/picolm/picolm.h) over the engine's modules. */
#include "picolm/picolm.h"

#include <stdlib.h>
#include <string.h>

#include "chat_template.h"
#include "engine.h"
#include "sampling.h"
#include "util.h"

_Static_assert((int)PICOLM_KV_F16 == (int)KV_F16 && (int)PICOLM_KV_Q8_0 == (int)KV_Q8_0, "one numbering of the KV types");

struct picolm_model {
    engine *e;
};

struct picolm_context {
    picolm_model *m;
    llama_ctx c;
    sampling *smp;
    int have_logits;
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

picolm_context *picolm_context_new(picolm_model *m, const picolm_context_params *p, char *err, size_t errlen) {
    static const picolm_context_params defaults = {0};
    if (!p) p = &defaults;
    picolm_context *c = calloc(1, sizeof *c);
    if (!c) { pl_fail(err, errlen, "out of memory"); return NULL; }
    c->m = m;
    const int train = m->e->model.hp.n_ctx_train;
    const int n_ctx = p->n_ctx <= 0 || p->n_ctx > train ? train : p->n_ctx;
    if (build_ctx(&c->c, &m->e->model, n_ctx, p->n_batch > 0 ? p->n_batch : 64, p->kv_type, m->e->pool, err, errlen)) {
        free(c);
        return NULL;
    }
    enum { MAX_SETTINGS = 64 };
    if (p->n_sampler_params > MAX_SETTINGS) {
        pl_fail(err, errlen, "too many sampler parameters (max %d)", MAX_SETTINGS);
        picolm_context_free(c);
        return NULL;
    }
    sampling_param sp[MAX_SETTINGS];
    for (int i = 0; i < p->n_sampler_params; i++)
        sp[i] = (sampling_param){p->sampler_params[i].key, p->sampler_params[i].value, "sampler parameters"};
    const sampling_settings set = {.chain = p->sampler_chain ? p->sampler_chain : "greedy", .params = sp,
                                   .n_params = p->n_sampler_params, .seed = p->seed};
    if (sampling_build(&c->smp, &m->e->reg, &set, tokenizer_vocab(m->e->tok), err, errlen)) {
        picolm_context_free(c);
        return NULL;
    }
    return c;
}

void picolm_context_free(picolm_context *c) {
    if (!c) return;
    sampling_free(c->smp);
    free_ctx(&c->c);
    free(c);
}

int picolm_eval(picolm_context *c, const int32_t *toks, int n, char *err, size_t errlen) {
    const int32_t nv = c->m->e->model.hp.n_vocab;
    if (n < 0 || (n && !toks)) return pl_fail(err, errlen, "no tokens");
    if (n > c->c.n_ctx - c->c.n_past)
        return pl_fail(err, errlen, "%d tokens do not fit after %d in a context of %d", n, c->c.n_past, c->c.n_ctx);
    for (int i = 0; i < n; i++)
        if (toks[i] < 0 || toks[i] >= nv) return pl_fail(err, errlen, "token %d: id %d is not in the vocabulary of %d", i, toks[i], nv);
    if (llama_prefill(&c->c, toks, n, err, errlen)) return -1;
    if (n) c->have_logits = 1;
    for (int i = 0; i < n; i++) sampling_accept(c->smp, toks[i]);
    return 0;
}

const float *picolm_logits(const picolm_context *c) { return c->have_logits ? c->c.logits : NULL; }
int picolm_n_past(const picolm_context *c) { return c->c.n_past; }
int picolm_n_ctx(const picolm_context *c) { return c->c.n_ctx; }

int picolm_sample(picolm_context *c, int32_t *tok, char *err, size_t errlen) {
    if (!c->have_logits) return pl_fail(err, errlen, "nothing evaluated yet: no logits to sample from");
    return sampling_sample(c->smp, c->c.logits, -1, tok, err, errlen);
}

void picolm_reset(picolm_context *c) {
    c->c.n_past = 0;
    c->have_logits = 0;
    sampling_reset(c->smp);
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
