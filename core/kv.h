/*
 * The per-sequence state of the forward pass, in one module: a pool of
 * fixed-size blocks of positions, and sequences that each hold a block
 * table over it (and, for architectures with recurrent layers, a small
 * live state).  A block holds block_size positions of K and V for every
 * attention layer, plus a checkpoint of the recurrent state at its end.
 * Blocks are reference-counted: sequences that share a prompt's beginning
 * share its blocks, and a shared block is copied before it is written
 * (kv_seq_reserve).  A single-sequence context is the same thing with one
 * block as large as its context (the contiguous layout attention reads
 * fastest).
 *
 * Recurrent layers (LFM2's short convolutions) need the last conv_len - 1
 * inputs of each layer: the sequence keeps them (state), and each block
 * keeps a copy as of its last position (its tail), so a sequence can be
 * cut back or shared at any block boundary with the exact state there.
 */
#ifndef PICOLM_KV_H
#define PICOLM_KV_H
#include <stddef.h>
#include <stdint.h>

#include "model.h"

typedef struct kv_pool {
    const llama_model *m;
    int block_size;          /* positions per block */
    int n_blocks;
    int kv_type;
    size_t row_bytes;        /* one K (or V) row of kv_dim values */
    size_t block_bytes;      /* n_kv_layer * block_size * row_bytes (K, and as much V) */
    size_t tail_floats;      /* recurrent checkpoint per block (0: none) */
    uint8_t *k, *v;          /* [block][kv layer][block_size][row_bytes] */
    float *tail;             /* [block][tail_floats] */
    int *ref;                /* references per block; 0 = free */
    int *free_ids;           /* stack of free blocks */
    int n_free;
} kv_pool;

typedef struct kv_seq {
    kv_pool *pool;
    int n_ctx, n_past;
    int32_t *blocks;         /* n_ctx / block_size entries (rounded up), -1 = none */
    float *state;            /* live recurrent state (pool->tail_floats), NULL without */
} kv_seq;

/* Bytes of one block (K and V of every attention layer, and its
   recurrent checkpoint). */
size_t kv_block_bytes(const llama_model *m, int kv_type, int block_size);
/* Bytes of KV cache per position (K and V of every attention layer). */
size_t kv_bytes_per_token(const llama_model *m, int kv_type);
/* Floats of recurrent state per sequence (0: the model has none). */
size_t kv_state_floats(const llama_model *m);
/* "f16", "q8_0" ("unknown" for another value) */
const char *kv_type_name(int kv_type);

/* A pool of n_blocks blocks of block_size positions for model m. */
int build_kv_pool(kv_pool *p, const llama_model *m, int kv_type, int n_blocks, int block_size, char *err, size_t errlen);
void free_kv_pool(kv_pool *p);

/* An empty sequence of up to n_ctx positions over pool p (n_ctx <= 0: the
   model's training context). */
int build_kv_seq(kv_seq *s, kv_pool *p, int n_ctx, char *err, size_t errlen);
void free_kv_seq(kv_seq *s);

/* Make positions [s->n_past, s->n_past + n) writable: missing blocks are
   taken from the pool, a shared block there is copied first.  0, or -1
   when the pool has no free block (blocks taken so far stay in the table,
   which is harmless: they are the sequence's next ones). */
int kv_seq_reserve(kv_seq *s, int n);

/* Count positions [n_past, n_past + n) as cached without writing them
   (they hold whatever their blocks held): picolm-bench decodes at a depth
   this way.  0, or -1 when the pool has no free block. */
int kv_seq_skip(kv_seq *s, int n);

/* Where the cache can be cut back to, at most n: n itself for a cache of
   attention layers only; with recurrent layers, n when it is the current
   length, else the block boundary at or below n (the last checkpoint). */
int kv_seq_cut_point(const kv_seq *s, int n);

/* Drop positions from kv_seq_cut_point(s, n) on (whole blocks past it are
   given back) and restore the recurrent state there.  Returns the new
   length. */
int kv_seq_truncate(kv_seq *s, int n);

/* Make dst (of the same pool) hold src's first kv_seq_cut_point(src, n)
   positions, sharing their blocks.  Returns that length. */
int kv_seq_share(kv_seq *dst, const kv_seq *src, int n);

/* The K and V rows of positions t0.. of model layer `layer` (an attention
   layer) in s: *k and *v, and how many positions from t0 (at most
   end - t0) follow there contiguously, row_bytes apart. */
int kv_run(const kv_seq *s, int layer, int t0, int end, const uint8_t **k, const uint8_t **v);

/* K and V rows (kv_dim floats each) of position pos of layer `layer`. */
void kv_store(kv_seq *s, int layer, int pos, const float *k, const float *v);

/* The recurrent layer's live state of s (conv_len - 1 rows of the layer's
   width, oldest first), and its checkpoint in the block holding pos. */
float *kv_state(const kv_seq *s, int layer);
/* Push one input row x of recurrent layer `layer` at position pos into the
   live state (dropping the oldest row), and into the block's checkpoint
   when pos is among the block's last conv_len - 1 positions. */
void kv_state_push(kv_seq *s, int layer, int pos, const float *x);

#endif
