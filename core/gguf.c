/* GGUF reader: see gguf.h.  The file is hostile until proven otherwise, so
   every read goes through a bounds-checked cursor. */
#include "gguf.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

const gguf_limits gguf_default_limits = {
    .max_kv = 1u << 20,
    .max_tensors = 1u << 16,
    .max_string = 1u << 24,
    .max_array = 1u << 25,
    .max_dim = (int64_t)1 << 32,
};

typedef struct cursor {
    const uint8_t *p;
    size_t size, pos;
} cursor;

static int need(cursor *c, uint64_t n) { return n <= c->size - c->pos; }

static int rd(cursor *c, void *dst, size_t n) {
    if (!need(c, n)) return -1;
    memcpy(dst, c->p + c->pos, n);
    c->pos += n;
    return 0;
}

/* -1: the string (or its length) runs past the end of the file;
   -2: its length exceeds the limit max. */
static int rd_str(cursor *c, gguf_str *s, uint64_t max) {
    uint64_t len;
    if (rd(c, &len, 8)) return -1;
    if (len > max) return -2;
    if (!need(c, len)) return -1;
    s->len = len;
    s->ptr = (const char *)c->p + c->pos;
    c->pos += len;
    return 0;
}

static const char *str_problem(int r) { return r == -1 ? "truncated (runs past the end of the file)" : "longer than the limit max_string"; }

size_t gguf_vtype_size(uint32_t t) {
    switch (t) {
    case GGUF_UINT8: case GGUF_INT8: case GGUF_BOOL: return 1;
    case GGUF_UINT16: case GGUF_INT16: return 2;
    case GGUF_UINT32: case GGUF_INT32: case GGUF_FLOAT32: return 4;
    case GGUF_UINT64: case GGUF_INT64: case GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

const char *gguf_vtype_name(uint32_t t) {
    static const char *names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool",
                                  "string", "array", "u64", "i64", "f64"};
    return t < GGUF_VTYPE_COUNT ? names[t] : "invalid";
}

const char *gguf_type_name(uint32_t type) {
    static const char *names[] = {"F32", "F16", "Q4_0", "Q4_1", "Q4_2", "Q4_3", "Q5_0", "Q5_1", "Q8_0", "Q8_1",
                                  "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS", "IQ3_XXS",
                                  "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS", "I8", "I16", "I32", "I64", "F64",
                                  "IQ1_M", "BF16", "Q4_0_4_4", "Q4_0_4_8", "Q4_0_8_8", "TQ1_0", "TQ2_0"};
    static _Thread_local char buf[24];
    if (type < sizeof names / sizeof *names) return names[type];
    snprintf(buf, sizeof buf, "type%u", type);
    return buf;
}

/* Decode one scalar of type t at p into kv->v. */
static void scalar_value(gguf_kv *kv, uint32_t t, const uint8_t *p) {
    union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
            float f32; uint64_t u64; int64_t i64; double f64; } x;
    memcpy(&x, p, gguf_vtype_size(t));
    switch (t) {
    case GGUF_UINT8: kv->v.u = x.u8; break;
    case GGUF_BOOL: kv->v.u = x.u8 != 0; break;
    case GGUF_INT8: kv->v.i = x.i8; break;
    case GGUF_UINT16: kv->v.u = x.u16; break;
    case GGUF_INT16: kv->v.i = x.i16; break;
    case GGUF_UINT32: kv->v.u = x.u32; break;
    case GGUF_INT32: kv->v.i = x.i32; break;
    case GGUF_FLOAT32: kv->v.f = x.f32; break;
    case GGUF_UINT64: kv->v.u = x.u64; break;
    case GGUF_INT64: kv->v.i = x.i64; break;
    case GGUF_FLOAT64: kv->v.f = x.f64; break;
    }
}

static int parse_kv(cursor *c, gguf_kv *kv, const gguf_limits *lim, uint64_t idx, char *err, size_t errlen) {
    int r = rd_str(c, &kv->key, lim->max_string);
    if (r) return pl_fail(err, errlen, "metadata #%llu: key at offset %zu is %s", (unsigned long long)idx, c->pos, str_problem(r));
    const int kl = kv->key.len > 200 ? 200 : (int)kv->key.len;
    if (rd(c, &kv->type, 4)) return pl_fail(err, errlen, "metadata '%.*s': truncated value type", kl, kv->key.ptr);
    if (kv->type == GGUF_STRING) {
        r = rd_str(c, &kv->v.s, lim->max_string);
        if (r) return pl_fail(err, errlen, "metadata '%.*s': string %s", kl, kv->key.ptr,
                           str_problem(r));
        return 0;
    }
    if (kv->type == GGUF_ARRAY) {
        uint32_t et;
        uint64_t n;
        if (rd(c, &et, 4) || rd(c, &n, 8)) return pl_fail(err, errlen, "metadata '%.*s': truncated array header", kl, kv->key.ptr);
        if (et == GGUF_ARRAY) return pl_fail(err, errlen, "metadata '%.*s': nested arrays are not supported", kl, kv->key.ptr);
        if (et >= GGUF_VTYPE_COUNT) return pl_fail(err, errlen, "metadata '%.*s': invalid array element type %u", kl, kv->key.ptr, et);
        if (n > lim->max_array) return pl_fail(err, errlen, "metadata '%.*s': array of %llu elements exceeds the limit %llu",
                                           kl, kv->key.ptr, (unsigned long long)n, (unsigned long long)lim->max_array);
        kv->v.arr.type = et;
        kv->v.arr.n = n;
        kv->v.arr.data = c->p + c->pos;
        kv->v.arr.strs = NULL;
        if (et == GGUF_STRING) {
            /* every string has at least its 8-byte length: cheap sanity check before allocating */
            if (!need(c, n * 8)) return pl_fail(err, errlen, "metadata '%.*s': string array of %llu entries overruns the file",
                                             kl, kv->key.ptr, (unsigned long long)n);
            kv->v.arr.strs = malloc((n ? n : 1) * sizeof(gguf_str));
            if (!kv->v.arr.strs) return pl_fail(err, errlen, "out of memory");
            for (uint64_t i = 0; i < n; i++) {
                r = rd_str(c, &kv->v.arr.strs[i], lim->max_string);
                if (r) return pl_fail(err, errlen, "metadata '%.*s': string #%llu %s", kl, kv->key.ptr,
                                   (unsigned long long)i, str_problem(r));
            }
        } else {
            const uint64_t es = gguf_vtype_size(et);
            if (n > (c->size - c->pos) / es) return pl_fail(err, errlen, "metadata '%.*s': array of %llu %s overruns the file",
                                                         kl, kv->key.ptr, (unsigned long long)n, gguf_vtype_name(et));
            c->pos += n * es;
        }
        return 0;
    }
    const size_t sz = gguf_vtype_size(kv->type);
    if (!sz) return pl_fail(err, errlen, "metadata '%.*s': invalid value type %u", kl, kv->key.ptr, kv->type);
    if (!need(c, sz)) return pl_fail(err, errlen, "metadata '%.*s': truncated value", kl, kv->key.ptr);
    scalar_value(kv, kv->type, c->p + c->pos);
    c->pos += sz;
    return 0;
}

/* Format the message first (it may read f), then release f. */
#define BAD(...) do { pl_fail(__VA_ARGS__); free_gguf(f); return -1; } while (0)

int gguf_parse(gguf_file *f, const void *data, size_t size, const gguf_limits *lim, char *err, size_t errlen) {
    memset(f, 0, sizeof *f);
    if (!lim) lim = &gguf_default_limits;
    f->base = data;
    f->size = size;
    cursor c = {data, size, 0};
    char magic[4];
    if (rd(&c, magic, 4) || memcmp(magic, "GGUF", 4))
        return pl_fail(err, errlen, "not a GGUF file (bad magic)");
    if (rd(&c, &f->version, 4)) return pl_fail(err, errlen, "truncated header (version)");
    if (f->version != 2 && f->version != 3)
        return pl_fail(err, errlen, "unsupported GGUF version %u (supported: 2, 3)", f->version);
    uint64_t nt, nkv;
    if (rd(&c, &nt, 8) || rd(&c, &nkv, 8)) return pl_fail(err, errlen, "truncated header (counts)");
    if (nt > lim->max_tensors) return pl_fail(err, errlen, "tensor count %llu exceeds the limit %llu",
                                           (unsigned long long)nt, (unsigned long long)lim->max_tensors);
    if (nkv > lim->max_kv) return pl_fail(err, errlen, "metadata count %llu exceeds the limit %llu",
                                       (unsigned long long)nkv, (unsigned long long)lim->max_kv);
    /* each kv needs >= 12 bytes and each tensor >= 24: reject absurd counts before allocating */
    if (nkv > (size - c.pos) / 12 || nt > (size - c.pos) / 24)
        return pl_fail(err, errlen, "counts (%llu tensors, %llu metadata) cannot fit in a %zu-byte file",
                    (unsigned long long)nt, (unsigned long long)nkv, size);
    f->kv = calloc(nkv ? nkv : 1, sizeof *f->kv);
    f->tensors = calloc(nt ? nt : 1, sizeof *f->tensors);
    if (!f->kv || !f->tensors) BAD(err, errlen, "out of memory");
    for (uint64_t i = 0; i < nkv; i++) {
        f->n_kv = i + 1; /* so free_gguf frees what parse_kv allocated */
        if (parse_kv(&c, &f->kv[i], lim, i, err, errlen)) { free_gguf(f); return -1; }
        for (uint64_t j = 0; j < i; j++)
            if (f->kv[j].key.len == f->kv[i].key.len && !memcmp(f->kv[j].key.ptr, f->kv[i].key.ptr, f->kv[i].key.len))
                BAD(err, errlen, "duplicate metadata key '%.*s'", (int)(f->kv[i].key.len > 200 ? 200 : f->kv[i].key.len), f->kv[i].key.ptr);
    }
    f->n_kv = nkv;
    f->alignment = 32;
    const gguf_kv *al = gguf_find_kv(f, "general.alignment");
    if (al) {
        if (al->type != GGUF_UINT32 || al->v.u == 0 || (al->v.u & (al->v.u - 1)) || al->v.u > (1u << 20)) {
            BAD(err, errlen, "general.alignment must be a power-of-two u32 (<= 1 MiB)");
        }
        f->alignment = al->v.u;
    }
    for (uint64_t i = 0; i < nt; i++) {
        gguf_tensor *t = &f->tensors[i];
        int r = rd_str(&c, &t->name, 1024);
        if (r) BAD(err, errlen, "tensor #%llu: name %s", (unsigned long long)i, r == -1 ? "truncated (runs past the end of the file)" : "longer than 1024 bytes");
        const int nl = (int)t->name.len;
        if (rd(&c, &t->n_dims, 4)) BAD(err, errlen, "tensor '%.*s': truncated", nl, t->name.ptr);
        if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS) {
            BAD(err, errlen, "tensor '%.*s': %u dimensions (supported: 1..%d)", nl, t->name.ptr, t->n_dims, GGUF_MAX_DIMS);
        }
        int64_t nel = 1;
        for (int d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) {
            uint64_t ne;
            if (rd(&c, &ne, 8)) BAD(err, errlen, "tensor '%.*s': truncated shape", nl, t->name.ptr);
            if (ne == 0 || ne > (uint64_t)lim->max_dim) {
                BAD(err, errlen, "tensor '%.*s': dimension %u is %llu (allowed 1..%lld)", nl, t->name.ptr, d,
                            (unsigned long long)ne, (long long)lim->max_dim);
            }
            if ((int64_t)ne > INT64_MAX / nel) BAD(err, errlen, "tensor '%.*s': element count overflows", nl, t->name.ptr);
            t->ne[d] = (int64_t)ne;
            nel *= (int64_t)ne;
        }
        t->nelements = nel;
        if (rd(&c, &t->type, 4) || rd(&c, &t->offset, 8)) BAD(err, errlen, "tensor '%.*s': truncated", nl, t->name.ptr);
        if (t->offset % f->alignment) {
            BAD(err, errlen, "tensor '%.*s': data offset %llu is not a multiple of the alignment %llu", nl, t->name.ptr,
                        (unsigned long long)t->offset, (unsigned long long)f->alignment);
        }
    }
    f->n_tensors = nt;
    uint64_t off = c.pos;
    off = (off + f->alignment - 1) / f->alignment * f->alignment;
    if (nt > 0 && off > size) BAD(err, errlen, "file truncated before the tensor data section");
    f->data_offset = off;
    return 0;
}

#undef BAD

typedef struct span { uint64_t start, end; uint64_t idx; } span;
static int span_cmp(const void *a, const void *b) {
    const span *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}
static int name_cmp(const void *a, const void *b) {
    const gguf_tensor *x = *(gguf_tensor *const *)a, *y = *(gguf_tensor *const *)b;
    uint64_t n = x->name.len < y->name.len ? x->name.len : y->name.len;
    int r = memcmp(x->name.ptr, y->name.ptr, n);
    return r ? r : (x->name.len < y->name.len ? -1 : x->name.len > y->name.len);
}

int gguf_bind_types(gguf_file *f, gguf_type_size_fn size_fn, void *ctx, char *err, size_t errlen) {
    const uint64_t avail = f->size >= f->data_offset ? f->size - f->data_offset : 0;
    span *sp = malloc((f->n_tensors ? f->n_tensors : 1) * sizeof *sp);
    gguf_tensor **byname = malloc((f->n_tensors ? f->n_tensors : 1) * sizeof *byname);
    if (!sp || !byname) { free(sp); free(byname); return pl_fail(err, errlen, "out of memory"); }
    int rc = 0;
    for (uint64_t i = 0; i < f->n_tensors && !rc; i++) {
        gguf_tensor *t = &f->tensors[i];
        const int nl = (int)t->name.len;
        uint32_t bs = 0, ts = 0;
        if (!size_fn(ctx, t->type, &bs, &ts) || !bs || !ts) {
            rc = pl_fail(err, errlen, "tensor '%.*s' has type %u, for which no format plugin is loaded", nl, t->name.ptr, t->type);
            break;
        }
        if (t->ne[0] % bs) {
            rc = pl_fail(err, errlen, "tensor '%.*s': row length %lld is not a multiple of the block size %u of its type",
                      nl, t->name.ptr, (long long)t->ne[0], bs);
            break;
        }
        const uint64_t blocks = (uint64_t)t->nelements / bs;
        if (blocks > UINT64_MAX / ts) { rc = pl_fail(err, errlen, "tensor '%.*s': size overflows", nl, t->name.ptr); break; }
        t->nbytes = blocks * ts;
        if (t->offset > avail || t->nbytes > avail - t->offset) {
            rc = pl_fail(err, errlen, "tensor '%.*s': data [%llu, +%llu) lies outside the file's data section (%llu bytes)", nl,
                      t->name.ptr, (unsigned long long)t->offset, (unsigned long long)t->nbytes, (unsigned long long)avail);
            break;
        }
        t->data = f->base + f->data_offset + t->offset;
        sp[i] = (span){t->offset, t->offset + t->nbytes, i};
        byname[i] = t;
    }
    if (!rc && f->n_tensors > 1) {
        qsort(sp, f->n_tensors, sizeof *sp, span_cmp);
        for (uint64_t i = 1; i < f->n_tensors; i++)
            if (sp[i].start < sp[i - 1].end) {
                const gguf_tensor *a = &f->tensors[sp[i - 1].idx], *b = &f->tensors[sp[i].idx];
                rc = pl_fail(err, errlen, "tensors '%.*s' and '%.*s' overlap in the file", (int)a->name.len, a->name.ptr,
                          (int)b->name.len, b->name.ptr);
                break;
            }
        if (!rc) {
            qsort(byname, f->n_tensors, sizeof *byname, name_cmp);
            for (uint64_t i = 1; i < f->n_tensors; i++)
                if (!name_cmp(&byname[i - 1], &byname[i])) {
                    rc = pl_fail(err, errlen, "duplicate tensor name '%.*s'", (int)byname[i]->name.len, byname[i]->name.ptr);
                    break;
                }
        }
    }
    free(sp);
    free(byname);
    return rc;
}

int build_gguf(gguf_file *f, const char *path, const gguf_limits *lim, char *err, size_t errlen) {
    memset(f, 0, sizeof *f);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return pl_fail(err, errlen, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) { close(fd); return pl_fail(err, errlen, "%s: not a regular file", path); }
    if (st.st_size < 24) { close(fd); return pl_fail(err, errlen, "%s: too small to be a GGUF file (%lld bytes)", path, (long long)st.st_size); }
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return pl_fail(err, errlen, "%s: mmap failed: %s", path, strerror(errno));
#ifdef MADV_HUGEPAGE
    /* Let the kernel map the weights with 2 MB pages where the page cache
       holds them in 2 MB folios (ext4 readahead makes them on Linux 6.x):
       still the file's pages, nothing copied, but one TLB entry per 2 MB.
       Decode streams 600+ MB per token, and in a VM every 4 KB page walk is
       two-level.  Only a hint: an old kernel or another file system ignores it. */
    (void)madvise(m, (size_t)st.st_size, MADV_HUGEPAGE);
#endif
    char e2[512];
    if (gguf_parse(f, m, (size_t)st.st_size, lim, e2, sizeof e2)) {
        munmap(m, (size_t)st.st_size);
        return pl_fail(err, errlen, "%s: %s", path, e2);
    }
    f->mapped = 1;
    return 0;
}

void free_gguf(gguf_file *f) {
    if (f->kv)
        for (uint64_t i = 0; i < f->n_kv; i++)
            if (f->kv[i].type == GGUF_ARRAY) free(f->kv[i].v.arr.strs);
    free(f->kv);
    free(f->tensors);
    if (f->mapped && f->base) munmap((void *)f->base, f->size);
    memset(f, 0, sizeof *f);
}

int gguf_str_eq(gguf_str s, const char *c) {
    size_t n = strlen(c);
    return s.len == n && !memcmp(s.ptr, c, n);
}

const gguf_kv *gguf_find_kv(const gguf_file *f, const char *key) {
    for (uint64_t i = 0; i < f->n_kv; i++)
        if (gguf_str_eq(f->kv[i].key, key)) return &f->kv[i];
    return NULL;
}

const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name) {
    for (uint64_t i = 0; i < f->n_tensors; i++)
        if (gguf_str_eq(f->tensors[i].name, name)) return &f->tensors[i];
    return NULL;
}

static int is_unsigned(uint32_t t) { return t == GGUF_UINT8 || t == GGUF_UINT16 || t == GGUF_UINT32 || t == GGUF_UINT64 || t == GGUF_BOOL; }
static int is_signed(uint32_t t) { return t == GGUF_INT8 || t == GGUF_INT16 || t == GGUF_INT32 || t == GGUF_INT64; }

int gguf_get_i64(const gguf_file *f, const char *key, int64_t *out) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) return -1;
    if (is_unsigned(kv->type)) {
        if (kv->v.u > (uint64_t)INT64_MAX) return -2;
        *out = (int64_t)kv->v.u;
        return 0;
    }
    if (is_signed(kv->type)) { *out = kv->v.i; return 0; }
    return -2;
}

int gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out) {
    int64_t v;
    int r = gguf_get_i64(f, key, &v);
    if (r) return r;
    if (v < 0 || v > (int64_t)UINT32_MAX) return -2;
    *out = (uint32_t)v;
    return 0;
}

int gguf_get_f32(const gguf_file *f, const char *key, float *out) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) return -1;
    if (kv->type != GGUF_FLOAT32 && kv->type != GGUF_FLOAT64) return -2;
    *out = (float)kv->v.f;
    return 0;
}

int gguf_get_bool(const gguf_file *f, const char *key, int *out) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) return -1;
    if (kv->type != GGUF_BOOL) return -2;
    *out = (int)kv->v.u;
    return 0;
}

int gguf_get_str(const gguf_file *f, const char *key, gguf_str *out) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) return -1;
    if (kv->type != GGUF_STRING) return -2;
    *out = kv->v.s;
    return 0;
}

const gguf_kv *gguf_get_arr(const gguf_file *f, const char *key, uint32_t elem_type, uint64_t *n) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv || kv->type != GGUF_ARRAY || kv->v.arr.type != elem_type) return NULL;
    if (n) *n = kv->v.arr.n;
    return kv;
}
