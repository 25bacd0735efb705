/* KV-cache persistence: see kvcache.h for the file layout. */
#include "kvcache.h"
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

uint64_t kvcache_fnv1a(const void *data, size_t n, uint64_t h) {
    const uint8_t *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }
static void wr32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static void wr64(uint8_t *p, uint64_t v) { wr32(p, (uint32_t)v); wr32(p + 4, (uint32_t)(v >> 32)); }

void kvcache_id_of(const llama_ctx *c, kvcache_id *id) {
    const llama_model *m = c->m;
    memset(id, 0, sizeof *id);
    id->model_size = m->gguf.size;
    size_t hb = m->gguf.data_offset < m->gguf.size ? (size_t)m->gguf.data_offset : m->gguf.size;
    id->model_hash = kvcache_fnv1a(m->gguf.base, hb, KVCACHE_FNV_OFFSET);
    id->kv_type = (uint32_t)c->kv_type;
    id->n_layer = (uint32_t)m->hp.n_layer;
    id->kv_dim = (uint32_t)(m->hp.n_head_kv * m->hp.head_dim);
    id->row_bytes = (uint32_t)c->kv_row_bytes;
    id->n_vocab = (uint32_t)m->hp.n_vocab;
}


int kvcache_load_buffer(const void *buf, size_t size, const kvcache_id *expect, kvcache_view *v, char *err, size_t errlen) {
    const uint8_t *p = buf;
    memset(v, 0, sizeof *v);
    if (!p || size < KVCACHE_HEADER_BYTES + 8) return pl_fail(err, errlen, "file too short (%zu bytes) to be a picolm KV cache", size);
    if (memcmp(p, KVCACHE_MAGIC, 8)) return pl_fail(err, errlen, "not a picolm KV cache file (bad magic)");
    uint32_t ver = rd32(p + 8);
    if (ver != KVCACHE_VERSION) return pl_fail(err, errlen, "format version %u, this picolm reads version %u", ver, KVCACHE_VERSION);
    kvcache_id id;
    id.kv_type = rd32(p + 12);
    id.model_size = rd64(p + 16);
    id.model_hash = rd64(p + 24);
    id.n_layer = rd32(p + 32);
    id.kv_dim = rd32(p + 36);
    id.row_bytes = rd32(p + 40);
    id.n_vocab = rd32(p + 44);
    uint32_t n_ctx = rd32(p + 48), n_tok = rd32(p + 52);
    if (id.kv_type != KV_F16 && id.kv_type != KV_Q8_0) return pl_fail(err, errlen, "unknown KV type %u", id.kv_type);
    /* the row size follows from kv_dim and the type: never take it on trust */
    uint64_t want_row = id.kv_type == KV_F16 ? (uint64_t)id.kv_dim * 2 : (uint64_t)id.kv_dim / 32 * 34;
    if (!id.n_layer || !id.kv_dim || (id.kv_type == KV_Q8_0 && id.kv_dim % 32) || want_row != id.row_bytes)
        return pl_fail(err, errlen, "inconsistent shape (%u layers, kv_dim %u, %u-byte rows of %s)", id.n_layer, id.kv_dim, id.row_bytes,
                    llama_kv_type_name((int)id.kv_type));
    if (n_tok == 0 || n_tok > n_ctx) return pl_fail(err, errlen, "%u tokens for a context of %u", n_tok, n_ctx);
    if (expect) {
        if (id.model_size != expect->model_size || id.model_hash != expect->model_hash)
            return pl_fail(err, errlen, "made for a different model (file size %llu bytes, header hash %016llx; this model: %llu bytes, %016llx)",
                        (unsigned long long)id.model_size, (unsigned long long)id.model_hash, (unsigned long long)expect->model_size,
                        (unsigned long long)expect->model_hash);
        if (id.kv_type != expect->kv_type)
            return pl_fail(err, errlen, "KV type %s, but this run uses %s (--kv-type)", llama_kv_type_name((int)id.kv_type), llama_kv_type_name((int)expect->kv_type));
        if (id.n_layer != expect->n_layer || id.kv_dim != expect->kv_dim || id.row_bytes != expect->row_bytes || id.n_vocab != expect->n_vocab)
            return pl_fail(err, errlen, "shape mismatch (%u layers, kv_dim %u, vocab %u; the model has %u, %u, %u)", id.n_layer, id.kv_dim,
                        id.n_vocab, expect->n_layer, expect->kv_dim, expect->n_vocab);
    }
    /* total = header + tokens + 2 * layers * tokens * row + checksum, in 64
       bits without overflow */
    if (id.n_layer > (1u << 20) || n_tok > (1u << 28)) return pl_fail(err, errlen, "implausible size (%u layers, %u tokens)", id.n_layer, n_tok);
    uint64_t rows = (uint64_t)id.n_layer * 2 * n_tok; /* < 2^49 */
    if (rows && id.row_bytes > (UINT64_MAX / 2) / rows) return pl_fail(err, errlen, "K/V size overflows");
    uint64_t need = (uint64_t)KVCACHE_HEADER_BYTES + (uint64_t)n_tok * 4 + rows * id.row_bytes + 8;
    if (need != size)
        return pl_fail(err, errlen, "size is %zu bytes, but its header describes %llu (truncated or corrupt)", size, (unsigned long long)need);
    uint64_t sum = kvcache_fnv1a(p, size - 8, KVCACHE_FNV_OFFSET);
    if (sum != rd64(p + size - 8)) return pl_fail(err, errlen, "checksum mismatch (corrupt file)");
    int32_t *toks = malloc((size_t)n_tok * sizeof *toks);
    if (!toks) return pl_fail(err, errlen, "out of memory");
    for (uint32_t i = 0; i < n_tok; i++) {
        const int32_t t = (int32_t)rd32(p + KVCACHE_HEADER_BYTES + 4 * (size_t)i);
        if (t < 0 || (uint32_t)t >= id.n_vocab) {
            free(toks);
            return pl_fail(err, errlen, "token %u is %d, outside the vocabulary of %u", i, t, id.n_vocab);
        }
        toks[i] = t;
    }
    v->id = id;
    v->n_ctx_saved = n_ctx;
    v->n_tokens = n_tok;
    v->tokens = toks;
    v->kv = p + KVCACHE_HEADER_BYTES + (size_t)n_tok * 4;
    return 0;
}

void kvcache_view_free(kvcache_view *v) {
    free(v->tokens);
    memset(v, 0, sizeof *v);
}

int kvcache_common_prefix(const kvcache_view *v, const int32_t *toks, int n) {
    int i = 0;
    while (i < n && (uint32_t)i < v->n_tokens && v->tokens[i] == toks[i]) i++;
    return i;
}

int kvcache_restore(llama_ctx *c, const kvcache_view *v, int n_use, char *err, size_t errlen) {
    if (n_use < 0 || (uint32_t)n_use > v->n_tokens || n_use > c->n_ctx) return pl_fail(err, errlen, "cannot restore %d positions", n_use);
    if (v->id.row_bytes != c->kv_row_bytes || (int)v->id.n_layer != c->m->hp.n_layer) return pl_fail(err, errlen, "cache shape mismatch");
    const size_t rb = c->kv_row_bytes, n = v->n_tokens;
    for (int l = 0; l < c->m->hp.n_layer; l++) {
        const uint8_t *k = v->kv + (size_t)l * 2 * n * rb, *vv = k + n * rb;
        memcpy(c->k_cache + (size_t)l * c->n_ctx * rb, k, (size_t)n_use * rb);
        memcpy(c->v_cache + (size_t)l * c->n_ctx * rb, vv, (size_t)n_use * rb);
    }
    c->n_past = n_use;
    return 0;
}

/* fwrite that also folds the bytes into the running checksum */
static int put(FILE *f, const void *d, size_t n, uint64_t *h) {
    *h = kvcache_fnv1a(d, n, *h);
    return fwrite(d, 1, n, f) == n ? 0 : -1;
}

int kvcache_save(const char *path, const llama_ctx *c, const int32_t *toks, int n, char *err, size_t errlen) {
    if (n <= 0 || n > c->n_ctx) return pl_fail(err, errlen, "nothing to save");
    kvcache_id id;
    kvcache_id_of(c, &id);
    pl_atomic_file af;
    if (pl_atomic_open(&af, path, err, errlen)) return -1;
    FILE *f = af.f;
    uint8_t hdr[KVCACHE_HEADER_BYTES];
    memcpy(hdr, KVCACHE_MAGIC, 8);
    wr32(hdr + 8, KVCACHE_VERSION);
    wr32(hdr + 12, id.kv_type);
    wr64(hdr + 16, id.model_size);
    wr64(hdr + 24, id.model_hash);
    wr32(hdr + 32, id.n_layer);
    wr32(hdr + 36, id.kv_dim);
    wr32(hdr + 40, id.row_bytes);
    wr32(hdr + 44, id.n_vocab);
    wr32(hdr + 48, (uint32_t)c->n_ctx);
    wr32(hdr + 52, (uint32_t)n);
    uint64_t h = KVCACHE_FNV_OFFSET;
    int bad = put(f, hdr, sizeof hdr, &h);
    for (int i = 0; i < n && !bad; i++) {
        uint8_t t[4];
        wr32(t, (uint32_t)toks[i]);
        bad = put(f, t, 4, &h);
    }
    const size_t rb = c->kv_row_bytes;
    for (int l = 0; l < c->m->hp.n_layer && !bad; l++) {
        bad = put(f, c->k_cache + (size_t)l * c->n_ctx * rb, (size_t)n * rb, &h);
        if (!bad) bad = put(f, c->v_cache + (size_t)l * c->n_ctx * rb, (size_t)n * rb, &h);
    }
    uint8_t t[8];
    wr64(t, h);
    if (!bad) bad = fwrite(t, 1, 8, f) != 8;
    if (bad) {
        pl_fail(err, errlen, "cannot write %s: %s", path, strerror(errno ? errno : EIO));
        pl_atomic_abort(&af);
        return -1;
    }
    return pl_atomic_commit(&af, err, errlen);
}

int kvcache_load_file(const char *path, const kvcache_id *expect, kvcache_view *v, void **map, size_t *map_size, char *err,
                      size_t errlen) {
    *map = NULL;
    *map_size = 0;
    memset(v, 0, sizeof *v);
    int fd = open(path, O_RDONLY | O_NONBLOCK); /* a FIFO must not block: it is refused below */
    if (fd < 0) {
        if (errno == ENOENT) return 1;
        return pl_fail(err, errlen, "cannot open: %s", strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        close(fd);
        return pl_fail(err, errlen, "not a regular file");
    }
    size_t size = (size_t)st.st_size;
    if (size < KVCACHE_HEADER_BYTES + 8) {
        close(fd);
        return pl_fail(err, errlen, "file too short (%zu bytes) to be a picolm KV cache", size);
    }
    void *m = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return pl_fail(err, errlen, "cannot map: %s", strerror(errno));
    if (kvcache_load_buffer(m, size, expect, v, err, errlen)) {
        munmap(m, size);
        return -1;
    }
    *map = m;
    *map_size = size;
    return 0;
}

void kvcache_unmap(void *map, size_t map_size) {
    if (map) munmap(map, map_size);
}
