/* A single-sequence context: see ctx.h. */
#include "ctx.h"

#include <stdlib.h>
#include <string.h>

#include "threadpool.h"
#include "util.h"

static int ctx_block(const llama_model *m, int n_ctx) { return m->n_rec_layer ? CTX_CHECKPOINT : n_ctx; }

size_t ctx_bytes(const llama_model *m, int n_ctx, int n_batch, int kv_type, int n_threads) {
    if (n_ctx <= 0) n_ctx = m->hp.n_ctx_train;
    const int bs = ctx_block(m, n_ctx), nb = (n_ctx + bs - 1) / bs;
    return kv_block_bytes(m, kv_type, bs) * (size_t)nb + kv_state_floats(m) * sizeof(float) +
           llama_batch_bytes(m, n_batch < n_ctx ? n_batch : n_ctx, n_threads) + (size_t)m->hp.n_vocab * sizeof(float);
}

int build_ctx(llama_ctx *c, const llama_model *m, int n_ctx, int n_batch, int kv_type, struct threadpool *pool,
              char *err, size_t errlen) {
    memset(c, 0, sizeof *c);
    if (n_ctx <= 0) n_ctx = m->hp.n_ctx_train;
    if (n_batch <= 0) n_batch = 1;
    if (n_batch > n_ctx) n_batch = n_ctx;
    const int bs = ctx_block(m, n_ctx);
    c->m = m;
    if (build_kv_pool(&c->pool, m, kv_type, (n_ctx + bs - 1) / bs, bs, err, errlen)) return -1;
    if (build_kv_seq(&c->seq, &c->pool, n_ctx, err, errlen) || build_batch(&c->batch, m, n_batch, pool, err, errlen)) {
        free_ctx(c);
        return -1;
    }
    c->logits = calloc((size_t)m->hp.n_vocab, sizeof(float));
    if (!c->logits) {
        free_ctx(c);
        return pl_fail(err, errlen, "out of memory");
    }
    return 0;
}

void free_ctx(llama_ctx *c) {
    if (c->seq.pool) free_kv_seq(&c->seq);
    free_batch(&c->batch);
    free_kv_pool(&c->pool);
    free(c->logits);
    memset(c, 0, sizeof *c);
}

int ctx_forward(llama_ctx *c, const int32_t *tokens, int n, float *all_logits, char *err, size_t errlen) {
    if (n <= 0 || n > c->batch.n_batch) return pl_fail(err, errlen, "batch of %d tokens (allowed 1..%d)", n, c->batch.n_batch);
    if (c->seq.n_past + n > c->seq.n_ctx)
        return pl_fail(err, errlen, "context full: %d + %d tokens exceed the context of %d", c->seq.n_past, n, c->seq.n_ctx);
    kv_seq **seqs = malloc((size_t)n * sizeof *seqs);
    uint8_t *want = malloc((size_t)n);
    if (!seqs || !want) {
        free(seqs);
        free(want);
        return pl_fail(err, errlen, "out of memory");
    }
    for (int i = 0; i < n; i++) seqs[i] = &c->seq, want[i] = all_logits || i == n - 1;
    const int nv = c->m->hp.n_vocab;
    int r = llama_decode(&c->batch, seqs, tokens, n, want, all_logits ? all_logits : c->logits, err, errlen);
    if (!r && all_logits) memcpy(c->logits, all_logits + (size_t)(n - 1) * nv, (size_t)nv * sizeof(float));
    free(seqs);
    free(want);
    return r ? -1 : 0;
}

int ctx_prefill(llama_ctx *c, const int32_t *tokens, int n, char *err, size_t errlen) {
    return llama_prefill(&c->batch, &c->seq, tokens, n, c->logits, err, errlen) ? -1 : 0;
}
