/* Paged KV cache: see kvpool.h. */
#include "kvpool.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

size_t kv_pool_block_bytes(const llama_model *m, int kv_type, int block_size) {
    const size_t kvd = (size_t)m->hp.n_head_kv * m->hp.head_dim;
    const size_t rb = kv_type == KV_Q8_0 ? kvd / 32 * 34 : kvd * 2;
    return 2 * (size_t)m->hp.n_layer * (size_t)block_size * rb; /* K and V */
}

int build_kv_pool(kv_pool *p, const llama_model *m, int kv_type, int n_blocks, int block_size, char *err, size_t errlen) {
    memset(p, 0, sizeof *p);
    const size_t kvd = (size_t)m->hp.n_head_kv * m->hp.head_dim;
    if (n_blocks < 1 || block_size < 1) return pl_fail(err, errlen, "a KV pool needs at least one block of one position");
    if (kv_type == KV_Q8_0 && kvd % 32) return pl_fail(err, errlen, "kv_type q8_0 needs kv_dim %% 32 == 0");
    p->block_size = block_size;
    p->n_blocks = n_blocks;
    p->n_layer = m->hp.n_layer;
    p->kv_type = kv_type;
    p->row_bytes = kv_type == KV_Q8_0 ? kvd / 32 * 34 : kvd * 2;
    p->block_bytes = kv_pool_block_bytes(m, kv_type, block_size) / 2; /* each of K and V */
    const size_t total = p->block_bytes * (size_t)n_blocks;
    if (total / (size_t)n_blocks != p->block_bytes) return pl_fail(err, errlen, "KV pool too large");
    p->k = malloc(total);
    p->v = malloc(total);
    p->ref = calloc((size_t)n_blocks, sizeof *p->ref);
    p->free_ids = malloc((size_t)n_blocks * sizeof *p->free_ids);
    if (!p->k || !p->v || !p->ref || !p->free_ids) {
        free_kv_pool(p);
        return pl_fail(err, errlen, "out of memory allocating a KV pool of %d blocks (%.1f MB)", n_blocks, 2.0 * (double)total / 1e6);
    }
    /* lowest ids on top: the first blocks handed out are the first pages */
    for (int i = 0; i < n_blocks; i++) p->free_ids[i] = n_blocks - 1 - i;
    p->n_free = n_blocks;
    return 0;
}

void free_kv_pool(kv_pool *p) {
    free(p->k);
    free(p->v);
    free(p->ref);
    free(p->free_ids);
    memset(p, 0, sizeof *p);
}

int kv_pool_alloc(kv_pool *p) {
    if (!p->n_free) return -1;
    const int b = p->free_ids[--p->n_free];
    p->ref[b] = 1;
    return b;
}

void kv_pool_ref(kv_pool *p, int b) { p->ref[b]++; }

void kv_pool_unref(kv_pool *p, int b) {
    if (--p->ref[b] == 0) p->free_ids[p->n_free++] = b;
}

int build_ctx_paged(llama_ctx *c, const llama_model *m, int n_ctx, int n_batch, kv_pool *pool, struct threadpool *tp,
                    char *err, size_t errlen) {
    if (n_ctx <= 0) n_ctx = m->hp.n_ctx_train;
    /* a context of 0 positions of its own: build_ctx allocates no K/V */
    if (build_ctx_kv(c, m, n_ctx, n_batch, pool->kv_type, tp, 0, err, errlen)) return -1;
    const int nb = (n_ctx + pool->block_size - 1) / pool->block_size;
    c->blocks = malloc((size_t)nb * sizeof *c->blocks);
    if (!c->blocks) {
        free_ctx(c);
        return pl_fail(err, errlen, "out of memory");
    }
    for (int i = 0; i < nb; i++) c->blocks[i] = -1;
    c->kv_pool = pool;
    return 0;
}

int llama_seq_reserve(llama_ctx *c, int n) {
    kv_pool *p = c->kv_pool;
    if (!p) return 0;
    const int bs = p->block_size;
    for (int b = c->n_past / bs; b * bs < c->n_past + n; b++) {
        int id = c->blocks[b];
        if (id >= 0 && p->ref[id] == 1) continue;
        const int fresh = kv_pool_alloc(p);
        if (fresh < 0) return -1;
        if (id >= 0) { /* shared: copy on write */
            memcpy(p->k + (size_t)fresh * p->block_bytes, p->k + (size_t)id * p->block_bytes, p->block_bytes);
            memcpy(p->v + (size_t)fresh * p->block_bytes, p->v + (size_t)id * p->block_bytes, p->block_bytes);
            kv_pool_unref(p, id);
        }
        c->blocks[b] = fresh;
    }
    return 0;
}

void llama_seq_share(llama_ctx *dst, const llama_ctx *src, int n_blocks, int n_tokens) {
    llama_seq_truncate(dst, 0);
    for (int b = 0; b < n_blocks; b++) {
        dst->blocks[b] = src->blocks[b];
        kv_pool_ref(dst->kv_pool, dst->blocks[b]);
    }
    dst->n_past = n_tokens;
}

void llama_seq_truncate(llama_ctx *c, int n_tokens) {
    kv_pool *p = c->kv_pool;
    if (p) {
        const int bs = p->block_size, nb = (c->n_ctx + bs - 1) / bs;
        for (int b = (n_tokens + bs - 1) / bs; b < nb; b++)
            if (c->blocks[b] >= 0) kv_pool_unref(p, c->blocks[b]), c->blocks[b] = -1;
    }
    c->n_past = n_tokens;
}
