/*
 * The model: hyper-parameters and weights bound from a mapped GGUF file
 * (zero-copy) as its architecture's description says (llama, qwen2, qwen3),
 * a run state (fp16 KV cache, scratch buffers), and the forward pass.
 */
#ifndef PICOLM_MODEL_H
#define PICOLM_MODEL_H
#include <stddef.h>
#include <stdint.h>

#include "gguf.h"
#include "plugins.h"

struct threadpool;

/* How a tensor of an architecture is present in its files. */
enum { ARCH_NONE = 0, ARCH_REQUIRED = 1, ARCH_OPTIONAL = 2 };

/* The tensors that some architectures have and others do not. */
enum { ARCH_T_OUTPUT, ARCH_T_QKV_BIAS, ARCH_T_QK_NORM, ARCH_T_ROPE_FREQS, ARCH_N_T };

/* An architecture, as data: build_model binds what this row says and the
   forward pass applies what was bound (no per-architecture branches). */
typedef struct llama_arch {
    const char *name;        /* general.architecture, also the metadata key prefix */
    int rope_neox;           /* RoPE pairs (x[i], x[i + rope_dim/2]) (NeoX), else (x[2i], x[2i+1]) */
    uint8_t has[ARCH_N_T];   /* ARCH_NONE / _REQUIRED / _OPTIONAL for each ARCH_T_* */
} llama_arch;

/* The architectures build_model knows, ending with name NULL. */
extern const llama_arch llama_archs[];

typedef struct llama_hparams {
    int n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_vocab, n_ctx_train;
    int rope_dim;          /* rotated dimensions per head (even, <= head_dim) */
    float rms_eps, rope_base, rope_scale;
} llama_hparams;

/* A weight matrix: rows of `cols` elements of `type`, in the mapping. */
typedef struct qmat {
    const uint8_t *data;
    uint32_t type;
    int64_t rows, cols;
    size_t row_bytes;
    const char *name;      /* for messages */
} qmat;

typedef struct llama_layer {
    const float *attn_norm, *ffn_norm;
    qmat wq, wk, wv, wo, w_gate, w_up, w_down;
    const float *bq, *bk, *bv;          /* q/k/v biases (qwen2), else NULL */
    const float *q_norm, *k_norm;       /* per-head RMS norm weights before RoPE (qwen3), else NULL */
} llama_layer;

/* Rotates the rope_dim/2 pairs of each of n_heads heads (hd floats apart)
   by the angles whose cos/sin are cs/sn: one function per pair layout. */
typedef void (*rope_fn)(float *v, int n_heads, int hd, int half, const float *cs, const float *sn);

typedef struct llama_model {
    gguf_file gguf;
    llama_hparams hp;
    qmat tok_embd, output;      /* output falls back to tok_embd */
    const float *output_norm;
    const float *rope_freqs;    /* rope_dim/2 frequency divisors (Llama 3.1+), else NULL */
    llama_layer *layers;
    float *owned;               /* norm vectors stored in a non-F32 type, dequantized */
    const pl_dispatch *d;
    const llama_arch *arch;
    rope_fn rope;               /* the architecture's pair layout */
    uint64_t weight_bytes;      /* bytes of all matrices read per token */
} llama_model;

enum kv_type { KV_F16 = 0, KV_Q8_0 = 1 };
/* "f16", "q8_0" ("unknown" for another value) */
const char *llama_kv_type_name(int kv_type);

/* Wall time (seconds) of two phases of llama_forward, summed while `on`
   is set: where a backend's decode time goes (picolm-bench, which times
   the whole).  Off by default; on, two clock reads per parallel region. */
typedef struct llama_prof {
    int on;
    double matmul;    /* weight matmuls, activation quantization included */
    double attention; /* the attention step over the KV cache */
} llama_prof;

typedef struct llama_ctx {
    const llama_model *m;
    struct threadpool *pool;
    int n_ctx, n_batch;
    int kv_type;
    int n_past;                 /* tokens in the KV cache */
    size_t kv_row_bytes;        /* bytes of one K (or V) row of kv_dim values */
    uint8_t *k_cache, *v_cache; /* [layer][pos][kv_dim]; NULL when paged: */
    struct kv_pool *kv_pool;    /* the pool of a paged cache (kvpool.h) */
    int32_t *blocks;            /* its block table: n_ctx / block_size entries, -1 = none */
    float *rope_cos, *rope_sin; /* [n_ctx][rope_dim/2] */
    /* activations for a batch of up to n_batch tokens */
    float *x, *xb, *q, *k, *v, *att, *hb, *hb2, *logits;
    uint8_t *act_q;             /* quantized activations */
    size_t act_q_bytes;
    uint8_t *unpack;            /* per-thread buffers of one unpacked row group (pl_type.to_base) */
    size_t unpack_stride;
    struct mm_part *mm_parts;   /* per-thread row ranges of the running matmul */
    /* per token of the running batch: whose KV cache, which position, and
       the rows whose logits are wanted */
    struct llama_ctx **tok_seq;
    int *tok_pos, *out_rows;
    size_t anon_bytes;          /* bytes this context allocated */
    uint64_t logit_rows;        /* rows of logits computed so far (the output matrix's columns) */
    llama_prof prof;            /* phase timings, while prof.on */
} llama_ctx;

int build_model(llama_model *m, const char *path, const pl_dispatch *d, const gguf_limits *lim, char *err, size_t errlen);
void free_model(llama_model *m);

int build_ctx(llama_ctx *c, const llama_model *m, int n_ctx, int n_batch, int kv_type, struct threadpool *pool,
              char *err, size_t errlen);
/* build_ctx, with (own_kv) or without a KV cache of its own (paged
   sequences and a batch's activations: kvpool.h). */
int build_ctx_kv(llama_ctx *c, const llama_model *m, int n_ctx, int n_batch, int kv_type, struct threadpool *pool, int own_kv,
                 char *err, size_t errlen);
void free_ctx(llama_ctx *c);

/* Evaluate n tokens at positions n_past.. (n <= n_batch; the caller chunks).
   Logits of the last token land in c->logits; when all_logits is non-NULL
   the logits of every token are written there (n x n_vocab). */
int llama_forward(llama_ctx *c, const int32_t *tokens, int n, float *all_logits, char *err, size_t errlen);

/* Evaluate a prompt of any length that fits the context (0: nothing to do),
   n_batch tokens per forward pass; the output matrix runs once, for the
   last token (its logits in c->logits): the chunks before it need none. */
int llama_prefill(llama_ctx *c, const int32_t *tokens, int n, char *err, size_t errlen);

/* One step over several sequences (continuous batching): token b goes into
   the KV cache of seq[b] (its RoPE tables and cache; n_past advances), at
   that sequence's next position, in order; the activations are c's
   (n <= c->n_batch).  The weights are read once for all of them, and each
   token's result is the same bits as in a batch of its own sequence alone.
   The logits of the tokens b with want[b] land in logits, one n_vocab row
   each, in batch order. */
int llama_forward_seqs(llama_ctx *c, llama_ctx *const *seq, const int32_t *tokens, int n, const uint8_t *want,
                       float *logits, char *err, size_t errlen);

/* Bytes of the scratch buffers build_ctx allocates beside the KV cache and
   RoPE tables, for a batch of n_batch tokens and n_threads threads. */
size_t llama_scratch_bytes(const llama_model *m, int n_batch, int n_threads);

/* Bytes of KV cache needed per token of context. */
size_t llama_kv_bytes_per_token(const llama_hparams *hp, int kv_type);

#endif
