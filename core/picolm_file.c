/* The library's file API (include/picolm/picolm.h): GGUF reading (the
   writer is gguf_write.c), output files written whole. */
#include "picolm/picolm.h"

#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "gguf.h"
#include "util.h"

_Static_assert((int)PICOLM_GGUF_UINT8 == (int)GGUF_UINT8 && (int)PICOLM_GGUF_ARRAY == (int)GGUF_ARRAY && (int)PICOLM_GGUF_FLOAT64 == (int)GGUF_FLOAT64,
               "one numbering of the GGUF value types");
_Static_assert(GGUF_MAX_DIMS == 4, "picolm_tensor.ne holds every dimension");

/* ---- reading ---- */

picolm_gguf *picolm_gguf_load(const char *path, const picolm_limits *limits, char *err, size_t errlen) {
    picolm_gguf *g = calloc(1, sizeof *g);
    if (!g) return pl_fail(err, errlen, "out of memory"), NULL;
    gguf_limits lim = gguf_default_limits;
    if (limits)
        lim = (gguf_limits){limits->max_metadata, limits->max_tensors, limits->max_string, limits->max_array,
                            limits->max_dim > INT64_MAX ? INT64_MAX : (int64_t)limits->max_dim};
    if (build_gguf(&g->own, path, &lim, err, errlen)) {
        free(g);
        return NULL;
    }
    g->f = &g->own;
    return g;
}

void picolm_gguf_free(picolm_gguf *g) {
    if (!g) return;
    free_gguf(&g->own);
    free(g);
}

int picolm_gguf_bind(picolm_gguf *g, const picolm_runtime *rt, char *err, size_t errlen) {
    if (g->f != &g->own) return 0; /* a model's file: bound when the model was loaded */
    return gguf_bind_types(&g->own, dispatch_type_size, (void *)&rt->e->d, err, errlen);
}

void picolm_gguf_describe(const picolm_gguf *g, picolm_gguf_info *out) {
    const gguf_file *f = g->f;
    *out = (picolm_gguf_info){f->version, f->n_kv, f->n_tensors, f->alignment, f->data_offset, f->size};
}

const char *picolm_gguf_type_name(uint32_t type) { return gguf_vtype_name(type); }

int picolm_gguf_kv_at(const picolm_gguf *g, int64_t i, picolm_gguf_kv *out) {
    if (i < 0 || (uint64_t)i >= g->f->n_kv) return -1;
    const gguf_kv *kv = &g->f->kv[i];
    memset(out, 0, sizeof *out);
    out->key = kv->key.ptr, out->key_len = (size_t)kv->key.len, out->type = kv->type;
    switch (kv->type) {
    case GGUF_STRING: out->str = kv->v.s.ptr, out->str_len = (size_t)kv->v.s.len; break;
    case GGUF_ARRAY: out->arr_type = kv->v.arr.type, out->arr_n = kv->v.arr.n, out->arr_data = kv->v.arr.data; break;
    case GGUF_FLOAT32: case GGUF_FLOAT64: out->f = kv->v.f; break;
    case GGUF_INT8: case GGUF_INT16: case GGUF_INT32: case GGUF_INT64: out->i = kv->v.i; break;
    default: out->u = kv->v.u;
    }
    return 0;
}

int64_t picolm_gguf_find(const picolm_gguf *g, const char *key) {
    const gguf_kv *kv = gguf_find_kv(g->f, key);
    return kv ? kv - g->f->kv : -1;
}

const char *picolm_gguf_arr_str(const picolm_gguf *g, int64_t i, uint64_t j, size_t *len) {
    if (i < 0 || (uint64_t)i >= g->f->n_kv) return NULL;
    const gguf_kv *kv = &g->f->kv[i];
    if (kv->type != GGUF_ARRAY || kv->v.arr.type != GGUF_STRING || j >= kv->v.arr.n) return NULL;
    *len = (size_t)kv->v.arr.strs[j].len;
    return kv->v.arr.strs[j].ptr;
}

int picolm_gguf_int(const picolm_gguf *g, const char *key, int64_t *out) { return gguf_get_i64(g->f, key, out) ? -1 : 0; }

int picolm_gguf_str(const picolm_gguf *g, const char *key, const char **s, size_t *len) {
    gguf_str v;
    if (gguf_get_str(g->f, key, &v)) return -1;
    *s = v.ptr;
    *len = (size_t)v.len;
    return 0;
}

int picolm_gguf_tensor_at(const picolm_gguf *g, int64_t i, picolm_tensor *out) {
    if (i < 0 || (uint64_t)i >= g->f->n_tensors) return -1;
    const gguf_tensor *t = &g->f->tensors[i];
    *out = (picolm_tensor){.name = t->name.ptr, .name_len = (size_t)t->name.len, .type = t->type, .n_dims = t->n_dims,
                           .n_elements = t->nelements, .offset = t->offset, .data = t->data, .nbytes = t->nbytes};
    memcpy(out->ne, t->ne, sizeof out->ne);
    return 0;
}

int64_t picolm_gguf_find_tensor(const picolm_gguf *g, const char *name) {
    const gguf_tensor *t = gguf_find_tensor(g->f, name);
    return t ? t - g->f->tensors : -1;
}

/* ---- output files ---- */

struct picolm_outfile {
    pl_atomic_file a;
};

picolm_outfile *picolm_outfile_new(const char *path, char *err, size_t errlen) {
    picolm_outfile *o = calloc(1, sizeof *o);
    if (!o) return pl_fail(err, errlen, "out of memory"), NULL;
    if (pl_atomic_open(&o->a, path, err, errlen)) {
        free(o);
        return NULL;
    }
    return o;
}

void *picolm_outfile_stream(picolm_outfile *o) { return o->a.f; }
const char *picolm_outfile_tmp_name(const picolm_outfile *o) { return o->a.tmp; }
int picolm_outfile_commit(picolm_outfile *o, char *err, size_t errlen) { return pl_atomic_commit(&o->a, err, errlen); }

void picolm_outfile_free(picolm_outfile *o) {
    if (!o) return;
    pl_atomic_abort(&o->a);
    free(o);
}
