/*
 * Attention of a batch's queries over the cached positions (one
 * task per token and KV head, online softmax; GQA: query head h reads KV
 * head h / (n_head / n_head_kv)), as llama.cpp's CPU flash attention does.
 */
#ifndef PICOLM_ATTENTION_H
#define PICOLM_ATTENTION_H
#include <stddef.h>

#include "model.h"

/* Per-thread attention scratch, in floats (build_batch reserves it, c->att_tmp). */
size_t att_tmp_floats(const llama_hparams *hp);

/* c->att[b] = attention of c->q[b] over positions 0..c->tok_pos[b] of the
   cache of c->tok_seq[b] (its last n_swa positions in a LAYER_SWA layer),
   for the n tokens of c's batch, layer `layer`, on the thread pool. */
void attention(llama_batch *c, int layer, int n);

#endif
