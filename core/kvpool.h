/*
 * Paged KV cache: fixed-size blocks of positions from one pool, and a
 * block table per sequence (a context built with build_ctx_paged).  A
 * block holds block_size positions of every layer, K and V; blocks are
 * reference-counted so that sequences sharing a prompt's beginning share
 * its blocks, and a shared block is copied before it is written
 * (llama_seq_reserve).  Attention reads a paged cache block by block, in
 * position order, with the same arithmetic as a contiguous one: the same
 * bits.
 */
#ifndef PICOLM_KVPOOL_H
#define PICOLM_KVPOOL_H
#include <stddef.h>
#include <stdint.h>

#include "model.h"

typedef struct kv_pool {
    int block_size;          /* positions per block */
    int n_blocks;
    int n_layer;
    int kv_type;
    size_t row_bytes;        /* one K (or V) row of kv_dim values */
    size_t block_bytes;      /* n_layer * block_size * row_bytes (K, and as much V) */
    uint8_t *k, *v;          /* [block][layer][block_size][row_bytes] */
    int *ref;                /* references per block; 0 = free */
    int *free_ids;           /* stack of free blocks */
    int n_free;
} kv_pool;

/* A pool of n_blocks blocks of block_size positions for model m. */
int build_kv_pool(kv_pool *p, const llama_model *m, int kv_type, int n_blocks, int block_size, char *err, size_t errlen);
void free_kv_pool(kv_pool *p);
/* Bytes of one block (K and V, every layer). */
size_t kv_pool_block_bytes(const llama_model *m, int kv_type, int block_size);

int kv_pool_alloc(kv_pool *p);          /* a free block (ref 1), or -1 */
void kv_pool_ref(kv_pool *p, int b);
void kv_pool_unref(kv_pool *p, int b);  /* the last reference frees it */

/* A sequence over the pool: no K/V of its own, a block table of
   n_ctx / block_size entries (-1: none).  n_batch as build_ctx. */
int build_ctx_paged(llama_ctx *c, const llama_model *m, int n_ctx, int n_batch, kv_pool *pool, struct threadpool *tp,
                    char *err, size_t errlen);

/* Make positions [c->n_past, c->n_past + n) writable: missing blocks are
   taken from the pool, a shared block there is copied first.  0, or -1
   when the pool has no free block (nothing changed that matters: blocks
   taken so far stay in the table). */
int llama_seq_reserve(llama_ctx *c, int n);

/* Share the first n_blocks blocks of src's table into dst (an empty
   sequence of the same pool): dst->n_past = n_tokens. */
void llama_seq_share(llama_ctx *dst, const llama_ctx *src, int n_blocks, int n_tokens);

/* Drop c's blocks from position n_tokens on (whole blocks past it), and
   set c->n_past = n_tokens.  0 drops everything. */
void llama_seq_truncate(llama_ctx *c, int n_tokens);
#endif
