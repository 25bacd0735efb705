/*
 * Plugin loader and the dispatch tables built from it.
 *
 * Loading: the ELF note of every *.so in the search path (PICOLM_PLUGIN_NOTE
 * in picolm/plugin.h) is read from the file with plain reads, and its ABI
 * version, kind, descriptor size, name, CPU requirements and shadowing are
 * checked BEFORE the file is dlopen'd: a refused file runs no code at all,
 * ELF constructors included.  A file that passes is loaded, its entry symbol
 * returns the const descriptor, which must agree with the note and be well
 * formed before any other plugin code runs (init, vtable functions).  Built-in
 * descriptors (static builds) go through the same checks.  Every file is kept
 * with its reason so that `picolm --list-plugins` and -v explain every
 * decision.
 *
 * Dispatch (FFmpeg DSP-init style): a table indexed by tensor type id is
 * filled once from the format plugins (reference code) and then overlaid
 * with the chosen backend's kernels.  Nothing on the hot path switches on a
 * type.
 */
#ifndef PICOLM_PLUGINS_H
#define PICOLM_PLUGINS_H
#include <stddef.h>
#include <stdint.h>

#include "picolm/plugin.h"

/* Size of the dispatch table: every type id (GGUF's and picolm's own,
   include/picolm/plugin.h) is below it.  The core's, not the ABI's: a
   plugin's id at or above it is refused. */
#define PL_TYPE_MAX 2048

typedef struct pl_plugin {
    char path[1024];
    void *handle;                 /* NULL once rejected and closed, or built in */
    const picolm_plugin *desc;    /* NULL once rejected */
    uint32_t kind;
    char name[64];
    char version[32];
    char description[160];
    uint64_t cpu_required;
    int ok;                       /* passed every check and init */
    int shadowed;                 /* an earlier plugin has its kind+name: why = "by PATH" */
    int skipped;                  /* no valid picolm note: not a picolm plugin file */
    int score;                    /* backends: priority + score() */
    char why[320];                /* rejection reason, or a note */
} pl_plugin;

typedef struct pl_registry {
    pl_plugin *items;
    int n, cap;
    uint64_t cpu;                 /* probed (and masked) CPU features */
    picolm_host host;
    char searched[4096];          /* the directories searched, for messages */
} pl_registry;

/* Reference primitives the core uses when a backend leaves them NULL. */
typedef struct pl_ops {
    void (*rmsnorm)(float *o, const float *x, const float *w, int n, float eps);
    float (*dot_f32)(const float *a, const float *b, int n);
    float (*dot_f32_f16)(const float *a, const uint16_t *b, int n);
    void (*scale_axpy_f16)(float *y, float scale, float a, const uint16_t *v, int n);
    void (*swiglu)(float *g, const float *u, int n);
    void (*f32_to_f16)(uint16_t *dst, const float *src, int n);
    /* NULL unless the backend has it: attention.c then loops over the two
       primitives above (the same arithmetic) */
    void (*attn_f16)(const float *q, size_t q_stride, int nq, const uint16_t *k, const uint16_t *v, size_t kv_stride, int n,
                     int hd, float scale, float *y, size_t y_stride, float *mx, float *sum);
} pl_ops;

/* One entry per tensor type id. */
typedef struct pl_type {
    const picolm_format *fmt;     /* NULL: no format plugin for this type */
    uint32_t row_group;           /* rows per interleaved group (1: plain rows) */
    const char *fmt_plugin;       /* name of the plugin providing it */
    uint32_t vec_dot_type;        /* activation type of vec_dot/gemm */
    picolm_vec_dot_fn vec_dot;    /* backend kernel, else the reference */
    picolm_gemm_fn gemm;          /* NULL: loop over vec_dot */
    picolm_from_float_fn act_quant; /* float -> vec_dot_type */
    const char *kernel_from;      /* backend name or "reference" */
    /* A layout whose backend kernels are its base type's (the backend has
       none for the layout itself): vec_dot and gemm above are base_type's
       and take rows of it, which to_base makes from one group at a time
       (matmul.c: mm_rows).  NULL when the kernels take this type directly. */
    void (*to_base)(const void *src, void *dst, size_t dst_stride, int64_t n);
    uint32_t base_type;
} pl_type;

typedef struct pl_dispatch {
    const pl_plugin *backend;     /* chosen backend (may be NULL: reference only) */
    pl_ops ops;
    pl_type types[PL_TYPE_MAX];
} pl_dispatch;

/* An empty registry whose host is the core's (no pool yet: parallel_for
   runs inline).  registry_load starts with it; tests load files into it. */
void build_registry(pl_registry *r);
/* Build the search path (config dir(s) ':'-separated, $PICOLM_PLUGIN_DIR,
   then next to the executable: ../plugins, ../lib/picolm) and load every
   plugin found.  A plugin whose kind+name is already loaded is skipped
   (earlier directories win).  Returns 0; loading problems of individual
   files are recorded, not fatal. */
int registry_load(pl_registry *r, const char *plugin_dir, char *err, size_t errlen);
/* Load one file (also used by tests). Returns the entry index or -1. */
int registry_load_file(pl_registry *r, const char *path);
/* Register a descriptor linked into the binary (static builds), through the
   same checks as a file (its note is the descriptor's own facts); label
   names it in --list-plugins.  Returns the entry index or -1. */
int registry_add_builtin(pl_registry *r, const picolm_plugin *desc, const char *label);
/* Read and check the picolm note of a plugin file without loading it (plain
   reads; ELF32/ELF64 little-endian, bounds-checked).  0, or -1 with the
   reason in why (a valid note of a file built for another machine is still
   decoded into *note). */
int registry_read_note(const char *path, picolm_note *note, char *why, size_t whylen);
void free_registry(pl_registry *r);

/* Find a loaded, accepted plugin. */
const pl_plugin *registry_find(const pl_registry *r, uint32_t kind, const char *name);

/* Pick a backend ("auto" = best score among accepted; otherwise by name,
   failing clearly when it is missing or the CPU cannot run it) and build
   the dispatch table. */
int registry_dispatch(const pl_registry *r, const char *backend, pl_dispatch *d, char *err, size_t errlen);

/* Format lookups through a dispatch table. */
static inline const picolm_format *dispatch_format(const pl_dispatch *d, uint32_t type) {
    return type < PL_TYPE_MAX ? d->types[type].fmt : NULL;
}
/* Bytes of a row of n elements of type (n must be a multiple of the block). */
static inline size_t dispatch_row_size(const pl_dispatch *d, uint32_t type, int64_t n) {
    const picolm_format *f = d->types[type].fmt;
    return (size_t)(n / f->block_size) * f->type_size;
}
/* Rows a type converts and multiplies at once: its row_group, 1 for plain
   rows and for a type no format plugin describes. */
static inline int dispatch_row_group(const pl_dispatch *d, uint32_t type) {
    return type < PL_TYPE_MAX && d->types[type].row_group > 1 ? (int)d->types[type].row_group : 1;
}
/* gguf_bind_types callback (ctx = const pl_dispatch *). */
int dispatch_type_size(void *ctx, uint32_t type, uint32_t *block_size, uint32_t *type_size);

/* A type's name as its format plugin spells it (plugin-only ids too), else
   ggml's name, else "typeN". */
const char *registry_type_name(const pl_registry *r, uint32_t type);

/* Human-readable report for --list-plugins. */
void registry_print(const pl_registry *r, const char *chosen_backend, void *FILE_stream);
/* One line per file not loaded (skipped, shadowed, rejected) with the
   reason: what -v shows. */
void registry_log_unloaded(const pl_registry *r);

/* The pool the registry's host runs parallel_for on (NULL: inline), reached
   through host.core_data, so each engine's plugins use its own pool. */
struct threadpool;
void registry_set_pool(pl_registry *r, struct threadpool *pool);

#endif
