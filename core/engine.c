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
static void note_slow_types(const engine *e, const char *path) {
    uint8_t seen[PL_TYPE_MAX] = {0};
    const char *be = e->d.backend ? e->d.backend->name : "reference";
    for (uint64_t i = 0; i < e->model.gguf.n_tensors; i++) {
        const uint32_t t = e->model.gguf.tensors[i].type;
        const pl_type *ty = t < PL_TYPE_MAX ? &e->d.types[t] : NULL;
        if (!ty || !ty->fmt || seen[t] || t == PICOLM_TYPE_F32 || e->model.gguf.tensors[i].ne[1] <= 1) continue;
        seen[t] = 1;
        if (ty->to_base)
            pl_log(PICOLM_LOG_INFO, "note: %s: backend %s has no %s kernels: running its %s kernels on unpacked row groups "
                                    "(slower than a %s file would run here)", path, be, ty->fmt->name, e->d.types[ty->base_type].fmt->name,
                    e->d.types[ty->base_type].fmt->name);
        else if (e->d.backend && ((const picolm_backend_vtable *)e->d.backend->desc->vtable)->n_kernels &&
                 !strcmp(ty->kernel_from, "reference")) /* (the scalar backend is the reference code by design) */
            pl_log(PICOLM_LOG_INFO, "note: %s: backend %s has no %s kernels: using the format's reference code (slow)", path, be,
                    ty->fmt->name);
    }
}

engine *build_engine(const engine_opts *o, char *err, size_t errlen) {
    engine *e = calloc(1, sizeof *e); /* the dispatch table is large: heap, not stack */
    if (!e) { snprintf(err, errlen, "out of memory"); return NULL; }
    const int loaded = registry_load(&e->reg, o->plugin_dir, err, errlen);
    if (o->verbose) registry_log_unloaded(&e->reg);
    if (loaded) goto bad;
    if (registry_dispatch(&e->reg, o->backend, &e->d, err, errlen)) goto bad;
    e->pool = threadpool_create(o->threads);
    if (!e->pool) { snprintf(err, errlen, "cannot start the thread pool"); goto bad; }
    registry_set_pool(&e->reg, e->pool);
    if (o->model_path) {
        if (build_model(&e->model, o->model_path, &e->d, o->limits, err, errlen)) goto bad;
        e->have_model = 1;
        note_slow_types(e, o->model_path);
        if (o->tokenizer) {
            char e2[512];
            if (tokenizer_build(&e->tok, &e->model.gguf, e2, sizeof e2)) {
                snprintf(err, errlen, "%s: tokenizer: %s", o->model_path, e2);
                goto bad;
            }
            if (tokenizer_n_vocab(e->tok) != e->model.hp.n_vocab) {
                snprintf(err, errlen, "%s: tokenizer has %d tokens but token_embd has %d rows", o->model_path,
                         tokenizer_n_vocab(e->tok), e->model.hp.n_vocab);
                goto bad;
            }
        }
    }
    return e;
bad:
    free_engine(e);
    return NULL;
}

void free_engine(engine *e) {
    if (!e) return;
    if (e->tok) tokenizer_free(e->tok);
    if (e->have_model) free_model(&e->model);
    registry_set_pool(&e->reg, NULL);
    threadpool_destroy(e->pool);
    registry_free(&e->reg);
    free(e);
}
