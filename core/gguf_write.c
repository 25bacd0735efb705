/* GGUF v3 writer (picolm.h's picolm_gguf_writer_*): see gguf_write.h.
   GGUF is little-endian; like the reader, this assumes a little-endian
   host. */
#include "gguf_write.h"
#include "util.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef struct wbuf {
    uint8_t *p;
    size_t n, cap;
} wbuf;

typedef struct wkv {
    char *key;
    size_t key_len;
    wbuf val;          /* type id + encoded value */
} wkv;

typedef struct wtensor {
    char *name;
    size_t name_len;
    uint32_t n_dims, type;
    int64_t ne[GGUF_MAX_DIMS];
    uint64_t nbytes, offset;
} wtensor;

struct picolm_gguf_writer {
    wkv *kv;
    int n_kv, cap_kv;
    wtensor *t;
    int n_t, cap_t;
    int next;          /* next tensor to write */
};

static int put(wbuf *b, const void *src, size_t n) {
    if (b->n + n > b->cap) {
        size_t c = b->cap ? b->cap : 64;
        while (c < b->n + n) c *= 2;
        uint8_t *q = realloc(b->p, c);
        if (!q) return -1;
        b->p = q;
        b->cap = c;
    }
    if (n) memcpy(b->p + b->n, src, n);
    b->n += n;
    return 0;
}
static int put_u32(wbuf *b, uint32_t v) { return put(b, &v, 4); }
static int put_u64(wbuf *b, uint64_t v) { return put(b, &v, 8); }
static int put_str(wbuf *b, const char *s, uint64_t len) { return put_u64(b, len) || put(b, s, (size_t)len); }

static uint64_t pad(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

gguf_writer *picolm_gguf_writer_new(void) { return calloc(1, sizeof(gguf_writer)); }

void picolm_gguf_writer_free(gguf_writer *w) {
    if (!w) return;
    for (int i = 0; i < w->n_kv; i++) { free(w->kv[i].key); free(w->kv[i].val.p); }
    for (int i = 0; i < w->n_t; i++) free(w->t[i].name);
    free(w->kv);
    free(w->t);
    free(w);
}

int picolm_gguf_writer_n_kv(const gguf_writer *w) { return w->n_kv; }

static int find_kv(const gguf_writer *w, const char *key, size_t len) {
    for (int i = 0; i < w->n_kv; i++)
        if (w->kv[i].key_len == len && !memcmp(w->kv[i].key, key, len)) return i;
    return -1;
}

static int remove_at(gguf_writer *w, int i) {
    free(w->kv[i].key);
    free(w->kv[i].val.p);
    memmove(w->kv + i, w->kv + i + 1, (size_t)(w->n_kv - i - 1) * sizeof *w->kv);
    w->n_kv--;
    return 1;
}

int picolm_gguf_writer_remove(gguf_writer *w, const char *key) {
    const int i = find_kv(w, key, strlen(key));
    return i < 0 ? 0 : remove_at(w, i);
}

/* Append a new pair (replacing any pair with that key); *out gets its value buffer. */
static int new_kv(gguf_writer *w, const char *key, size_t len, wbuf **out) {
    const int old = find_kv(w, key, len);
    if (old >= 0) remove_at(w, old);
    if (w->n_kv == w->cap_kv) {
        const int c = w->cap_kv ? w->cap_kv * 2 : 32;
        wkv *q = realloc(w->kv, (size_t)c * sizeof *q);
        if (!q) return -1;
        w->kv = q;
        w->cap_kv = c;
    }
    wkv *e = &w->kv[w->n_kv];
    memset(e, 0, sizeof *e);
    e->key = malloc(len + 1);
    if (!e->key) return -1;
    memcpy(e->key, key, len);
    e->key[len] = 0;
    e->key_len = len;
    w->n_kv++;
    *out = &e->val;
    return 0;
}

/* Encode one scalar from the reader's decoded form. */
static int put_scalar(wbuf *b, uint32_t t, const gguf_kv *kv) {
    union { uint8_t u8; uint16_t u16; uint32_t u32; uint64_t u64; float f32; double f64; } x;
    const size_t n = gguf_vtype_size(t);
    if (!n) return -1;
    if (t == GGUF_FLOAT32) x.f32 = (float)kv->v.f;        /* exact: it was read from a float */
    else if (t == GGUF_FLOAT64) x.f64 = kv->v.f;
    else if (t == GGUF_INT8 || t == GGUF_INT16 || t == GGUF_INT32 || t == GGUF_INT64) x.u64 = (uint64_t)kv->v.i;
    else x.u64 = kv->v.u;
    if (t != GGUF_FLOAT32 && t != GGUF_FLOAT64) {
        /* keep the low n bytes (little-endian) */
        const uint64_t v = x.u64;
        switch (n) {
        case 1: x.u8 = (uint8_t)v; break;
        case 2: x.u16 = (uint16_t)v; break;
        case 4: x.u32 = (uint32_t)v; break;
        default: break;
        }
    }
    return put(b, &x, n);
}

int gguf_writer_copy_kv(gguf_writer *w, const gguf_kv *kv) {
    wbuf *b;
    if (new_kv(w, kv->key.ptr, (size_t)kv->key.len, &b)) return -1;
    if (put_u32(b, kv->type)) return -1;
    switch (kv->type) {
    case GGUF_STRING: return put_str(b, kv->v.s.ptr, kv->v.s.len);
    case GGUF_ARRAY: {
        const uint32_t et = kv->v.arr.type;
        if (put_u32(b, et) || put_u64(b, kv->v.arr.n)) return -1;
        if (et == GGUF_STRING) {
            for (uint64_t i = 0; i < kv->v.arr.n; i++)
                if (put_str(b, kv->v.arr.strs[i].ptr, kv->v.arr.strs[i].len)) return -1;
            return 0;
        }
        const size_t es = gguf_vtype_size(et);
        if (!es) return -1;
        return put(b, kv->v.arr.data, (size_t)kv->v.arr.n * es); /* raw little-endian elements */
    }
    default: return put_scalar(b, kv->type, kv);
    }
}

int picolm_gguf_writer_copy(gguf_writer *w, const picolm_gguf *g, int64_t i) {
    return i < 0 || (uint64_t)i >= g->f->n_kv ? -1 : gguf_writer_copy_kv(w, &g->f->kv[i]);
}

int picolm_gguf_writer_set(gguf_writer *w, const picolm_gguf_kv *p) {
    gguf_kv kv = {.key = {p->key_len, p->key}, .type = p->type};
    gguf_str *strs = NULL;
    switch (p->type) {
    case GGUF_STRING: kv.v.s = (gguf_str){p->str_len, p->str}; break;
    case GGUF_ARRAY:
        kv.v.arr.type = p->arr_type, kv.v.arr.n = p->arr_n, kv.v.arr.data = p->arr_data;
        if (p->arr_type == GGUF_STRING) { /* copy_kv takes the reader's decoded strings */
            if (p->arr_n > SIZE_MAX / sizeof *strs || !(strs = malloc((size_t)(p->arr_n ? p->arr_n : 1) * sizeof *strs))) return -1;
            const char *const *str = p->arr_data;
            for (uint64_t j = 0; j < p->arr_n; j++) strs[j] = (gguf_str){strlen(str[j]), str[j]};
            kv.v.arr.strs = strs;
        }
        break;
    case GGUF_FLOAT32: case GGUF_FLOAT64: kv.v.f = p->f; break;
    case GGUF_INT8: case GGUF_INT16: case GGUF_INT32: case GGUF_INT64: kv.v.i = p->i; break;
    default: kv.v.u = p->u;
    }
    const int rc = gguf_writer_copy_kv(w, &kv);
    free(strs);
    return rc;
}

int picolm_gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v) {
    wbuf *b;
    return new_kv(w, key, strlen(key), &b) || put_u32(b, GGUF_UINT32) || put_u32(b, v) ? -1 : 0;
}

int picolm_gguf_writer_set_str(gguf_writer *w, const char *key, const char *v) {
    wbuf *b;
    return new_kv(w, key, strlen(key), &b) || put_u32(b, GGUF_STRING) || put_str(b, v, strlen(v)) ? -1 : 0;
}

int picolm_gguf_writer_add_tensor(gguf_writer *w, const char *name, size_t name_len, uint32_t n_dims, const int64_t *ne,
                           uint32_t type, uint64_t nbytes) {
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS) return -1;
    if (w->n_t == w->cap_t) {
        const int c = w->cap_t ? w->cap_t * 2 : 64;
        wtensor *q = realloc(w->t, (size_t)c * sizeof *q);
        if (!q) return -1;
        w->t = q;
        w->cap_t = c;
    }
    wtensor *t = &w->t[w->n_t];
    memset(t, 0, sizeof *t);
    t->name = malloc(name_len + 1);
    if (!t->name) return -1;
    memcpy(t->name, name, name_len);
    t->name[name_len] = 0;
    t->name_len = name_len;
    t->n_dims = n_dims;
    for (uint32_t i = 0; i < GGUF_MAX_DIMS; i++) t->ne[i] = i < n_dims ? ne[i] : 1;
    t->type = type;
    t->nbytes = nbytes;
    w->n_t++;
    return 0;
}

uint64_t picolm_gguf_writer_alignment(const gguf_writer *w) {
    const int i = find_kv(w, "general.alignment", 17);
    if (i >= 0 && w->kv[i].val.n == 8) {
        uint32_t t, a;
        memcpy(&t, w->kv[i].val.p, 4);
        memcpy(&a, w->kv[i].val.p + 4, 4);
        if (t == GGUF_UINT32 && a && !(a & (a - 1))) return a;
    }
    return GGUF_DEFAULT_ALIGNMENT;
}

static uint64_t meta_bytes(const gguf_writer *w) {
    uint64_t n = 4 + 4 + 8 + 8; /* magic, version, n_tensors, n_kv */
    for (int i = 0; i < w->n_kv; i++) n += 8 + w->kv[i].key_len + w->kv[i].val.n;
    for (int i = 0; i < w->n_t; i++) n += 8 + w->t[i].name_len + 4 + 8ull * w->t[i].n_dims + 4 + 8;
    return n;
}

uint64_t picolm_gguf_writer_header_size(const gguf_writer *w) { return pad(meta_bytes(w), picolm_gguf_writer_alignment(w)); }

uint64_t picolm_gguf_writer_file_size(const gguf_writer *w) {
    const uint64_t a = picolm_gguf_writer_alignment(w);
    uint64_t n = picolm_gguf_writer_header_size(w);
    for (int i = 0; i < w->n_t; i++) n += pad(w->t[i].nbytes, a);
    return n;
}

static int write_zeros(FILE *f, uint64_t n) {
    static const uint8_t z[256];
    while (n) {
        const size_t k = n > sizeof z ? sizeof z : (size_t)n;
        if (fwrite(z, 1, k, f) != k) return -1;
        n -= k;
    }
    return 0;
}

int picolm_gguf_writer_write_header(gguf_writer *w, void *stream, char *err, size_t errlen) {
    FILE *f = stream;
    const uint64_t a = picolm_gguf_writer_alignment(w);
    uint64_t off = 0;
    for (int i = 0; i < w->n_t; i++) {
        w->t[i].offset = off;
        off += pad(w->t[i].nbytes, a);
    }
    wbuf b = {0};
    int bad = put(&b, "GGUF", 4) || put_u32(&b, 3) || put_u64(&b, (uint64_t)w->n_t) || put_u64(&b, (uint64_t)w->n_kv);
    for (int i = 0; !bad && i < w->n_kv; i++)
        bad = put_str(&b, w->kv[i].key, w->kv[i].key_len) || put(&b, w->kv[i].val.p, w->kv[i].val.n);
    for (int i = 0; !bad && i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        bad = put_str(&b, t->name, t->name_len) || put_u32(&b, t->n_dims);
        for (uint32_t d = 0; !bad && d < t->n_dims; d++) bad = put_u64(&b, (uint64_t)t->ne[d]);
        bad = bad || put_u32(&b, t->type) || put_u64(&b, t->offset);
    }
    if (bad) { free(b.p); return pl_fail(err, errlen, "out of memory building the GGUF header"); }
    const int ok = fwrite(b.p, 1, b.n, f) == b.n && !write_zeros(f, pad(b.n, a) - b.n);
    free(b.p);
    w->next = 0;
    return ok ? 0 : pl_fail(err, errlen, "write error (header)");
}

int picolm_gguf_writer_write_tensor(gguf_writer *w, void *stream, const void *data, uint64_t nbytes, char *err, size_t errlen) {
    FILE *f = stream;
    if (w->next >= w->n_t) return pl_fail(err, errlen, "more tensor data than tensors");
    const wtensor *t = &w->t[w->next];
    if (nbytes != t->nbytes)
        return pl_fail(err, errlen, "tensor '%s': %llu bytes of data, expected %llu", t->name, (unsigned long long)nbytes,
                    (unsigned long long)t->nbytes);
    if (fwrite(data, 1, (size_t)nbytes, f) != nbytes || write_zeros(f, pad(nbytes, picolm_gguf_writer_alignment(w)) - nbytes))
        return pl_fail(err, errlen, "write error (tensor '%s')", t->name);
    w->next++;
    return 0;
}
