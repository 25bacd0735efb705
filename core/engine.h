/*
 * Engine: the glue every binary shares — plugins, dispatch table, thread
 * pool, model and (optionally) tokenizer, opened in that order and closed in
 * reverse.  build_engine / free_engine.
 */
#ifndef PICOLM_ENGINE_H
#define PICOLM_ENGINE_H
#include <stdio.h>

#include "model.h"
#include "plugins.h"
#include "threadpool.h"
#include "tokenizer.h"

typedef struct engine {
    pl_registry reg;
    pl_dispatch d;
    threadpool *pool;
    llama_model model;
    tokenizer *tok;       /* NULL unless asked for */
    int have_model;
} engine;

typedef struct engine_opts {
    const char *model_path;   /* NULL: plugins only */
    const char *plugin_dir;   /* "" / NULL: default search path */
    const char *backend;      /* "auto" / NULL or a name */
    int threads;              /* <= 0: all online CPUs */
    int tokenizer;            /* build the tokenizer too */
    const gguf_limits *limits; /* NULL: gguf_default_limits */
    int verbose;              /* also log the plugin files not loaded and why (notes go to
                                 the log sink, picolm_log_set) */
} engine_opts;

/* The library's picolm_runtime (picolm.h): plugins, dispatch table, thread
   pool, no model. */
struct picolm_runtime {
    engine *e;
};

/* The model at path on the dispatch table d, and (tok non-NULL) its
   tokenizer, checked against it.  0, or -1 with a message. */
int engine_load_model(const pl_dispatch *d, const char *path, const gguf_limits *lim, llama_model *m, tokenizer **tok,
                      char *err, size_t errlen);

/* Returns a new engine or NULL with a message in err. */
engine *build_engine(const engine_opts *o, char *err, size_t errlen);
void free_engine(engine *e);
#endif
