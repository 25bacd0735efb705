#include "engine.h"
#include "util.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Say once per type when the model's matrices will not run on the
   backend's own kernels: a repacked layout the backend has no kernels for
   runs on its base type's (after unpacking, slower than the base file would
   be), and a type with only reference code is far slower still. */
static void note_slow_types(const pl_dispatch *d, const llama_model *m, const char *path) {
    uint8_t seen[PL_TYPE_MAX] = {0};
    const char *be = d->backend ? d->backend->name : "reference";
    for (uint64_t i = 0; i < m->gguf.n_tensors; i++) {
        const uint32_t t = m->gguf.tensors[i].type;
        const pl_type *ty = t < PL_TYPE_MAX ? &d->types[t] : NULL;
        if (!ty || !ty->fmt || seen[t] || t == PICOLM_TYPE_F32 || m->gguf.tensors[i].ne[1] <= 1) continue;
        seen[t] = 1;
        if (ty->to_base)
            pl_log(PICOLM_LOG_INFO, "note: %s: backend %s has no %s kernels: running its %s kernels on unpacked row groups "
                                    "(slower than a %s file would run here)", path, be, ty->fmt->name, d->types[ty->base_type].fmt->name,
                    d->types[ty->base_type].fmt->name);
        else if (d->backend && ((const picolm_backend_vtable *)d->backend->desc->vtable)->n_kernels &&
                 !strcmp(ty->kernel_from, "reference")) /* (the scalar backend is the reference code by design) */
            pl_log(PICOLM_LOG_INFO, "note: %s: backend %s has no %s kernels: using the format's reference code (slow)", path, be,
                    ty->fmt->name);
    }
}

int engine_load_model(const pl_dispatch *d, const char *path, const gguf_limits *lim, llama_model *m, tokenizer **tok,
                      char *err, size_t errlen) {
    if (build_model(m, path, d, lim, err, errlen)) return -1;
    note_slow_types(d, m, path);
    if (!tok) return 0;
    char e2[512];
    if (build_tokenizer(tok, &m->gguf, e2, sizeof e2)) {
        pl_fail(err, errlen, "%s: tokenizer: %s", path, e2);
        free_model(m);
        return -1;
    }
    if (tokenizer_n_vocab(*tok) != m->hp.n_vocab) {
        pl_fail(err, errlen, "%s: tokenizer has %d tokens but token_embd has %d rows", path, tokenizer_n_vocab(*tok), m->hp.n_vocab);
        free_tokenizer(*tok);
        *tok = NULL;
        free_model(m);
        return -1;
    }
    return 0;
}

engine *build_engine(const engine_opts *o, char *err, size_t errlen) {
    engine *e = calloc(1, sizeof *e); /* the dispatch table is large: heap, not stack */
    if (!e) { snprintf(err, errlen, "out of memory"); return NULL; }
    const int loaded = registry_load(&e->reg, o->plugin_dir, err, errlen);
    if (o->verbose) registry_log_unloaded(&e->reg);
    if (loaded) goto bad;
    if (registry_dispatch(&e->reg, o->backend, &e->d, err, errlen)) goto bad;
    e->pool = build_threadpool(o->threads);
    if (!e->pool) { snprintf(err, errlen, "cannot start the thread pool"); goto bad; }
    registry_set_pool(&e->reg, e->pool);
    if (o->model_path) {
        if (engine_load_model(&e->d, o->model_path, o->limits, &e->model, o->tokenizer ? &e->tok : NULL, err, errlen)) goto bad;
        e->have_model = 1;
    }
    return e;
bad:
    free_engine(e);
    return NULL;
}

void free_engine(engine *e) {
    if (!e) return;
    if (e->tok) free_tokenizer(e->tok);
    if (e->have_model) free_model(&e->model);
    registry_set_pool(&e->reg, NULL);
    free_threadpool(e->pool);
    free_registry(&e->reg);
    free(e);
}
