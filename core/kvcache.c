/* KV-cache persistence: see kvcache.h for the file layout. */
#include "kvcache.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
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

void kvcache_id_of(const kv_seq *s, kvcache_id *id) {
    const llama_model *m = s->pool->m;
    memset(id, 0, sizeof *id);
    id->model_size = m->gguf.size;
    size_t hb = m->gguf.data_offset < m->gguf.size ? (size_t)m->gguf.data_offset : m->gguf.size;
    id->model_hash = kvcache_fnv1a(m->gguf.base, hb, KVCACHE_FNV_OFFSET);
    id->kv_type = (uint32_t)s->pool->kv_type;
    id->n_layer = (uint32_t)m->n_kv_layer;
    id->kv_dim = (uint32_t)(m->hp.n_head_kv * m->hp.head_dim);
    id->row_bytes = (uint32_t)s->pool->row_bytes;
    id->n_vocab = (uint32_t)m->hp.n_vocab;
    id->state_floats = (uint32_t)s->pool->tail_floats;
    id->interval = s->pool->tail_floats ? (uint32_t)s->pool->block_size : 0;
}


/* a refusal that leaves the file alone (kvcache.h: KVCACHE_FOREIGN) */
#define foreign(...) (pl_fail(__VA_ARGS__), KVCACHE_FOREIGN)

int kvcache_load_buffer(const void *buf, size_t size, const kvcache_id *expect, kvcache_view *v, char *err, size_t errlen) {
    const uint8_t *p = buf;
    memset(v, 0, sizeof *v);
    if (!p || size < KVCACHE_HEADER_BYTES + 8) return foreign(err, errlen, "not a picolm KV cache file: too short (%zu bytes)", size);
    if (memcmp(p, KVCACHE_MAGIC, 8)) return foreign(err, errlen, "not a picolm KV cache file (bad magic)");
    uint32_t ver = rd32(p + 8);
    if (ver != 1 && ver != KVCACHE_VERSION) return pl_fail(err, errlen, "format version %u, this picolm reads versions 1 and %u", ver, KVCACHE_VERSION);
    const size_t hdr = ver == 1 ? KVCACHE_HEADER_BYTES : KVCACHE_HEADER_BYTES + 8;
    if (size < hdr + 8) return foreign(err, errlen, "file too short (%zu bytes) for its version %u header", size, ver);
    kvcache_id id;
    id.state_floats = ver == 1 ? 0 : rd32(p + KVCACHE_HEADER_BYTES);
    id.interval = ver == 1 ? 0 : rd32(p + KVCACHE_HEADER_BYTES + 4);
    id.kv_type = rd32(p + 12);
    id.model_size = rd64(p + 16);
    id.model_hash = rd64(p + 24);
    id.n_layer = rd32(p + 32);
    id.kv_dim = rd32(p + 36);
    id.row_bytes = rd32(p + 40);
    id.n_vocab = rd32(p + 44);
    uint32_t n_ctx = rd32(p + 48), n_tok = rd32(p + 52);
    if (id.kv_type != KV_F16 && id.kv_type != KV_Q8_0) return foreign(err, errlen, "unknown KV type %u", id.kv_type);
    /* the row size follows from kv_dim and the type: never take it on trust */
    uint64_t want_row = id.kv_type == KV_F16 ? (uint64_t)id.kv_dim * 2 : (uint64_t)id.kv_dim / 32 * 34;
    if (!id.n_layer || !id.kv_dim || (id.kv_type == KV_Q8_0 && id.kv_dim % 32) || want_row != id.row_bytes)
        return foreign(err, errlen, "inconsistent shape (%u layers, kv_dim %u, %u-byte rows of %s)", id.n_layer, id.kv_dim, id.row_bytes,
                    kv_type_name((int)id.kv_type));
    if (n_tok == 0 || n_tok > n_ctx) return foreign(err, errlen, "%u tokens for a context of %u", n_tok, n_ctx);
    if (expect) {
        if (id.model_size != expect->model_size || id.model_hash != expect->model_hash)
            return foreign(err, errlen, "made for a different model (file size %llu bytes, header hash %016llx; this model: %llu bytes, %016llx)",
                        (unsigned long long)id.model_size, (unsigned long long)id.model_hash, (unsigned long long)expect->model_size,
                        (unsigned long long)expect->model_hash);
        if (id.kv_type != expect->kv_type)
            return pl_fail(err, errlen, "KV type %s, but this run uses %s (--kv-type)", kv_type_name((int)id.kv_type), kv_type_name((int)expect->kv_type));
        if (id.n_layer != expect->n_layer || id.kv_dim != expect->kv_dim || id.row_bytes != expect->row_bytes || id.n_vocab != expect->n_vocab ||
            id.state_floats != expect->state_floats)
            return foreign(err, errlen, "shape mismatch (%u layers, kv_dim %u, vocab %u, state %u; the model has %u, %u, %u, %u)", id.n_layer,
                           id.kv_dim, id.n_vocab, id.state_floats, expect->n_layer, expect->kv_dim, expect->n_vocab, expect->state_floats);
        if (id.interval != expect->interval)
            return pl_fail(err, errlen, "recurrent-state checkpoints every %u positions, this run keeps them every %u", id.interval, expect->interval);
    }
    if (id.state_floats && (!id.interval || id.state_floats > (1u << 26)))
        return foreign(err, errlen, "inconsistent recurrent state (%u floats every %u positions)", id.state_floats, id.interval);
    /* total = header + tokens + 2 * layers * tokens * row + checksum, in 64
       bits without overflow */
    if (id.n_layer > (1u << 20) || n_tok > (1u << 28)) return foreign(err, errlen, "implausible size (%u layers, %u tokens)", id.n_layer, n_tok);
    uint64_t rows = (uint64_t)id.n_layer * 2 * n_tok; /* < 2^49 */
    if (rows && id.row_bytes > (UINT64_MAX / 2) / rows) return foreign(err, errlen, "K/V size overflows");
    /* then the recurrent checkpoints and the final state */
    const uint64_t states = id.state_floats ? (uint64_t)(n_tok / id.interval + 1) * id.state_floats * 4 : 0;
    uint64_t need = (uint64_t)hdr + (uint64_t)n_tok * 4 + rows * id.row_bytes + states + 8;
    if (need != size)
        return foreign(err, errlen, "size is %zu bytes, but its header describes %llu (truncated or corrupt)", size, (unsigned long long)need);
    uint64_t sum = kvcache_fnv1a(p, size - 8, KVCACHE_FNV_OFFSET);
    if (sum != rd64(p + size - 8)) return foreign(err, errlen, "checksum mismatch (corrupt file)");
    int32_t *toks = malloc((size_t)n_tok * sizeof *toks);
    if (!toks) return foreign(err, errlen, "out of memory");
    for (uint32_t i = 0; i < n_tok; i++) {
        const int32_t t = (int32_t)rd32(p + hdr + 4 * (size_t)i);
        if (t < 0 || (uint32_t)t >= id.n_vocab) {
            free(toks);
            return foreign(err, errlen, "token %u is %d, outside the vocabulary of %u", i, t, id.n_vocab);
        }
        toks[i] = t;
    }
    v->id = id;
    v->n_ctx_saved = n_ctx;
    v->n_tokens = n_tok;
    v->tokens = toks;
    v->kv = p + hdr + (size_t)n_tok * 4;
    v->states = id.state_floats ? v->kv + rows * id.row_bytes : NULL;
    return 0;
}

void free_kvcache_view(kvcache_view *v) {
    free(v->tokens);
    memset(v, 0, sizeof *v);
}

int kvcache_common_prefix(const kvcache_view *v, const int32_t *toks, int n) {
    int i = 0;
    while (i < n && (uint32_t)i < v->n_tokens && v->tokens[i] == toks[i]) i++;
    return i;
}

int kvcache_usable(const kvcache_view *v, int n) {
    if (n > (int)v->n_tokens) n = (int)v->n_tokens;
    if (n < 0) n = 0;
    if (!v->id.state_floats || n == (int)v->n_tokens) return n;
    return n - n % (int)v->id.interval; /* the last checkpoint */
}

/* The recurrent state after position n - 1 of the file (n = 0: zeros) */
static void file_state(const kvcache_view *v, int n, float *out) {
    const size_t sf = v->id.state_floats;
    if (!n) {
        memset(out, 0, sf * sizeof(float));
        return;
    }
    const size_t k = (uint32_t)n == v->n_tokens ? v->n_tokens / v->id.interval : (size_t)n / v->id.interval - 1;
    memcpy(out, v->states + k * sf * 4, sf * sizeof(float)); /* little-endian f32 */
}

int kvcache_restore(kv_seq *s, const kvcache_view *v, int n_use, char *err, size_t errlen) {
    const kv_pool *p = s->pool;
    if (n_use < 0 || (uint32_t)n_use > v->n_tokens || n_use > s->n_ctx || s->n_past) return pl_fail(err, errlen, "cannot restore %d positions", n_use);
    if (v->id.row_bytes != p->row_bytes || (int)v->id.n_layer != p->m->n_kv_layer || v->id.state_floats != p->tail_floats ||
        (p->tail_floats && v->id.interval != (uint32_t)p->block_size))
        return pl_fail(err, errlen, "cache shape mismatch");
    if (kvcache_usable(v, n_use) != n_use) return pl_fail(err, errlen, "no recurrent state saved at position %d", n_use);
    if (kv_seq_reserve(s, n_use)) return pl_fail(err, errlen, "the KV pool has no room for %d positions", n_use);
    const size_t rb = p->row_bytes, n = v->n_tokens;
    const llama_model *m = p->m;
    for (int l = 0; l < m->hp.n_layer; l++) {
        const int kl = m->layers[l].kv_idx;
        if (kl < 0) continue;
        const uint8_t *k = v->kv + (size_t)kl * 2 * n * rb, *vv = k + n * rb;
        for (int t0 = 0, nr; t0 < n_use; t0 += nr) {
            const uint8_t *kd, *vd;
            nr = kv_run(s, l, t0, n_use, &kd, &vd);
            memcpy((uint8_t *)kd, k + (size_t)t0 * rb, (size_t)nr * rb);
            memcpy((uint8_t *)vd, vv + (size_t)t0 * rb, (size_t)nr * rb);
        }
    }
    if (p->tail_floats) {
        /* every restored whole block's checkpoint, and the live state */
        for (int b = 0; (b + 1) * p->block_size <= n_use; b++) file_state(v, (b + 1) * p->block_size, p->tail + (size_t)s->blocks[b] * p->tail_floats);
        file_state(v, n_use, s->state);
    }
    s->n_past = n_use;
    return 0;
}

/* fwrite that also folds the bytes into the running checksum */
static int put(FILE *f, const void *d, size_t n, uint64_t *h) {
    *h = kvcache_fnv1a(d, n, *h);
    return fwrite(d, 1, n, f) == n ? 0 : -1;
}

int kvcache_save(const char *path, const kv_seq *s, const int32_t *toks, int n, char *err, size_t errlen) {
    if (n <= 0 || n > s->n_past) return pl_fail(err, errlen, "nothing to save");
    const kv_pool *p = s->pool;
    if (p->tail_floats && n != s->n_past) return pl_fail(err, errlen, "a recurrent state is saved only at the sequence's end");
    kvcache_id id;
    kvcache_id_of(s, &id);
    pl_atomic_file af;
    if (pl_atomic_open(&af, path, err, errlen)) return -1;
    FILE *f = af.f;
    /* version 1 unless there is a recurrent state to keep */
    uint8_t hdr[KVCACHE_HEADER_BYTES + 8];
    const size_t hn = id.state_floats ? sizeof hdr : KVCACHE_HEADER_BYTES;
    memcpy(hdr, KVCACHE_MAGIC, 8);
    wr32(hdr + 8, id.state_floats ? KVCACHE_VERSION : 1);
    wr32(hdr + 12, id.kv_type);
    wr64(hdr + 16, id.model_size);
    wr64(hdr + 24, id.model_hash);
    wr32(hdr + 32, id.n_layer);
    wr32(hdr + 36, id.kv_dim);
    wr32(hdr + 40, id.row_bytes);
    wr32(hdr + 44, id.n_vocab);
    wr32(hdr + 48, (uint32_t)s->n_ctx);
    wr32(hdr + 52, (uint32_t)n);
    wr32(hdr + KVCACHE_HEADER_BYTES, id.state_floats);
    wr32(hdr + KVCACHE_HEADER_BYTES + 4, id.interval);
    uint64_t h = KVCACHE_FNV_OFFSET;
    int bad = put(f, hdr, hn, &h);
    for (int i = 0; i < n && !bad; i++) {
        uint8_t t[4];
        wr32(t, (uint32_t)toks[i]);
        bad = put(f, t, 4, &h);
    }
    const size_t rb = p->row_bytes;
    for (int l = 0; l < p->m->hp.n_layer && !bad; l++)
        for (int kv = 0; kv < 2 && p->m->layers[l].kv_idx >= 0; kv++)
            for (int t0 = 0, nr; t0 < n && !bad; t0 += nr) {
                const uint8_t *k, *v;
                nr = kv_run(s, l, t0, n, &k, &v);
                bad = put(f, kv ? v : k, (size_t)nr * rb, &h);
            }
    /* the checkpoints of the whole blocks, then the live state (f32, little-endian hosts) */
    for (int b = 0; p->tail_floats && b <= n / p->block_size && !bad; b++) {
        const float *st = b < n / p->block_size ? p->tail + (size_t)s->blocks[b] * p->tail_floats : s->state;
        bad = put(f, st, p->tail_floats * sizeof(float), &h);
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
        return foreign(err, errlen, "cannot open: %s", strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        close(fd);
        return foreign(err, errlen, "not a regular file");
    }
    size_t size = (size_t)st.st_size;
    if (size == 0) { /* mktemp's: nothing to lose */
        close(fd);
        return 1;
    }
    if (size < KVCACHE_HEADER_BYTES + 8) {
        close(fd);
        return foreign(err, errlen, "not a picolm KV cache file: too short (%zu bytes)", size);
    }
    void *m = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return foreign(err, errlen, "cannot map: %s", strerror(errno));
    const int r = kvcache_load_buffer(m, size, expect, v, err, errlen);
    if (r) {
        munmap(m, size);
        return r;
    }
    *map = m;
    *map_size = size;
    return 0;
}

void kvcache_unmap(void *map, size_t map_size) {
    if (map) munmap(map, map_size);
}
