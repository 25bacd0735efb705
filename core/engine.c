#include "engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

engine *build_engine(const engine_opts *o, char *err, size_t errlen) {
    engine *e = calloc(1, sizeof *e); /* the dispatch table is large: heap, not stack */
    if (!e) { snprintf(err, errlen, "out of memory"); return NULL; }
    if (registry_load(&e->reg, o->plugin_dir, err, errlen)) goto bad;
    if (registry_dispatch(&e->reg, o->backend, &e->d, err, errlen)) goto bad;
    e->pool = threadpool_create(o->threads);
    if (!e->pool) { snprintf(err, errlen, "cannot start the thread pool"); goto bad; }
    registry_set_pool(&e->reg, e->pool);
    if (o->model_path) {
        if (build_model(&e->model, o->model_path, &e->d, o->limits, err, errlen)) goto bad;
        e->have_model = 1;
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
