/*
 * A single-sequence context: one sequence with a KV pool of its own, a
 * batch workspace and the logits of its last token.  What the CLI, the
 * tools and picolm_context use; a server builds the parts itself (one
 * pool, many sequences, one workspace).
 */
#ifndef PICOLM_CTX_H
#define PICOLM_CTX_H
#include <stddef.h>
#include <stdint.h>

#include "kv.h"
#include "model.h"

/* Positions between the recurrent-state checkpoints of a single
   sequence's cache (its block size when the model has recurrent layers;
   without them the cache is one block). */
#define CTX_CHECKPOINT 32

typedef struct llama_ctx {
    const llama_model *m;
    kv_pool pool;
    kv_seq seq;
    llama_batch batch;
    float *logits;            /* n_vocab floats: after the last evaluated token */
} llama_ctx;

/* n_ctx <= 0: the model's training context; n_batch: tokens per forward step. */
int build_ctx(llama_ctx *c, const llama_model *m, int n_ctx, int n_batch, int kv_type, struct threadpool *pool,
              char *err, size_t errlen);
void free_ctx(llama_ctx *c);

/* Evaluate n tokens (n <= c->batch.n_batch) after the cached ones: the
   logits of the last land in c->logits; with all_logits, every token's
   (n x n_vocab) too. */
int ctx_forward(llama_ctx *c, const int32_t *tokens, int n, float *all_logits, char *err, size_t errlen);

/* Evaluate any number of tokens that fit, in steps of n_batch; the
   output matrix runs once, for the last (c->logits). */
int ctx_prefill(llama_ctx *c, const int32_t *tokens, int n, char *err, size_t errlen);

/* Bytes build_ctx allocates: the cache, the workspace, the logits. */
size_t ctx_bytes(const llama_model *m, int n_ctx, int n_batch, int kv_type, int n_threads);

#endif
