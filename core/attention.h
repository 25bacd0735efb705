/*
 * Attention over the KV cache: writing a token's K and V rows into the
 * cache, and attention of a batch's queries over the cached positions (one
 * task per token and KV head, online softmax; GQA: query head h reads KV
 * head h / (n_head / n_head_kv)), as llama.cpp's CPU flash attention does.
 */
#ifndef PICOLM_ATTENTION_H
#define PICOLM_ATTENTION_H
#include <stddef.h>

#include "model.h"

/* Per-thread attention scratch, in floats (build_ctx reserves it after the
   batch's attention output rows in c->att). */
size_t att_tmp_floats(const llama_hparams *hp);

/* The K and V rows of positions t0.. of layer `layer` in c's cache (its
   own, or its blocks of a pool): *k and *v, and how many positions from t0
   (at most end - t0) follow there contiguously, kv_row_bytes apart. */
int kv_run(const llama_ctx *c, int layer, int t0, int end, const uint8_t **k, const uint8_t **v);

/* K and V rows (kv_dim floats each) of position pos of layer `layer` into the cache. */
void store_kv(llama_ctx *c, int layer, int pos, const float *k, const float *v);

/* c->att[b] = attention of c->q[b] over positions 0..c->tok_pos[b] of the
   cache of c->tok_seq[b], for the n tokens of c's batch, layer `layer`, on
   the thread pool. */
void attention(llama_ctx *c, int layer, int n);

#endif
