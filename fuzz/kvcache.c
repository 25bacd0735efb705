/* libFuzzer harness: the KV-cache file loader (kvcache_load_buffer), then
   kvcache_common_prefix and kvcache_restore into a context of the file's
   own shape.  First byte: bit 0 = patch the trailing FNV-1a checksum so
   mutations get past it; bit 1 = expect the identity the header claims
   (else structural checks only).  Checked: an accepted view's K/V rows lie
   inside the buffer and restore copies only what the context holds. */
#include "common.h"
#include "ctx.h"
#include "kvcache.h"

static volatile uint8_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const uint8_t flags = data[0];
    size_t n = size - 1;
    uint8_t *buf = malloc(n ? n : 1); /* exact size: ASan sees any over-read */
    memcpy(buf, data + 1, n);
    if ((flags & 1) && n >= 8) {
        uint64_t h = kvcache_fnv1a(buf, n - 8, KVCACHE_FNV_OFFSET);
        memcpy(buf + n - 8, &h, 8);
    }
    kvcache_id want;
    memset(&want, 0, sizeof want);
    if (n >= KVCACHE_HEADER_BYTES) {
        memcpy(&want.kv_type, buf + 12, 4);
        memcpy(&want.model_size, buf + 16, 8);
        memcpy(&want.model_hash, buf + 24, 8);
        memcpy(&want.n_layer, buf + 32, 4);
        memcpy(&want.kv_dim, buf + 36, 4);
        memcpy(&want.row_bytes, buf + 40, 4);
        memcpy(&want.n_vocab, buf + 44, 4);
    }
    kvcache_view v;
    char err[512] = "";
    const int r = kvcache_load_buffer(buf, n, (flags & 2) ? &want : NULL, &v, err, sizeof err);
    if (r) {
        FUZZ_ASSERT(err[0], "refused without a message");
        /* only a well-formed cache of this model is ever replaceable */
        FUZZ_ASSERT(r == KVCACHE_FOREIGN || (r == KVCACHE_STALE && n >= KVCACHE_HEADER_BYTES + 8 && !memcmp(buf, KVCACHE_MAGIC, 8)),
                    "refusal %d: %s", r, err);
        free(buf);
        return 0;
    }
    const uint64_t rows = (uint64_t)v.id.n_layer * 2 * v.n_tokens;
    FUZZ_ASSERT(v.kv >= buf && (uint64_t)(v.kv - buf) + rows * v.id.row_bytes <= n, "K/V rows outside the buffer");
    for (uint32_t i = 0; i < v.n_tokens; i++) sink ^= (uint8_t)v.tokens[i];
    int32_t toks[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int p = kvcache_common_prefix(&v, toks, 8);
    FUZZ_ASSERT(p >= 0 && p <= 8 && (uint32_t)p <= v.n_tokens, "common prefix %d", p);
    /* restore into a sequence of the file's shape when it is small: a
       model with only what the cache's layout reads (layers with K/V,
       a recurrent state of the file's width) */
    const int n_ctx = (int)v.n_tokens + 1;
    const int bs = v.id.state_floats ? (int)v.id.interval : n_ctx;
    const uint64_t bytes = (uint64_t)v.id.n_layer * (uint64_t)(n_ctx + bs) * v.id.row_bytes;
    if (v.id.n_layer > 0 && v.id.n_layer <= 4096 && bytes <= (1u << 24) && v.id.state_floats <= (1u << 16) && bs <= n_ctx) {
        static llama_model m;
        static llama_layer layers[4096];
        memset(&m, 0, sizeof m);
        m.hp.n_layer = (int)v.id.n_layer;
        m.layers = layers;
        m.n_kv_layer = (int)v.id.n_layer;
        for (int l = 0; l < m.hp.n_layer; l++) layers[l] = (llama_layer){.kv_idx = l, .rec_idx = -1};
        kv_pool pool = {.m = &m, .block_size = bs, .n_blocks = (n_ctx + bs - 1) / bs, .kv_type = (int)v.id.kv_type,
                        .row_bytes = v.id.row_bytes, .tail_floats = v.id.state_floats};
        pool.block_bytes = pool.row_bytes * (size_t)m.n_kv_layer * (size_t)bs;
        pool.k = malloc(pool.block_bytes * (size_t)pool.n_blocks + 1);
        pool.v = malloc(pool.block_bytes * (size_t)pool.n_blocks + 1);
        pool.tail = calloc(pool.tail_floats * (size_t)pool.n_blocks + 1, sizeof(float));
        pool.ref = calloc((size_t)pool.n_blocks, sizeof *pool.ref);
        pool.free_ids = malloc((size_t)pool.n_blocks * sizeof *pool.free_ids);
        for (int i = 0; i < pool.n_blocks; i++) pool.free_ids[i] = pool.n_blocks - 1 - i;
        pool.n_free = pool.n_blocks;
        kv_seq sq;
        if (!build_kv_seq(&sq, &pool, n_ctx, err, sizeof err)) {
            const int use = kvcache_usable(&v, (int)v.n_tokens);
            FUZZ_ASSERT(use == (int)v.n_tokens, "the whole file is usable (%d of %u)", use, v.n_tokens);
            if (!kvcache_restore(&sq, &v, use, err, sizeof err)) FUZZ_ASSERT(sq.n_past == use, "n_past %d", sq.n_past);
            kv_seq_truncate(&sq, 0);
            FUZZ_ASSERT(kvcache_restore(&sq, &v, (int)v.n_tokens + 1, err, sizeof err) != 0, "restored more than the file holds");
            free_kv_seq(&sq);
        }
        free_kv_pool(&pool);
    }
    free_kvcache_view(&v);
    free(buf);
    return 0;
}
