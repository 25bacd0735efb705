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
enum { ARCH_T_OUTPUT, ARCH_T_QKV_BIAS, ARCH_T_QK_NORM, ARCH_T_ROPE_FREQS, ARCH_T_POST_NORM, ARCH_N_T };

/* What a layer computes in place of attention's mixing of positions. */
enum { LAYER_FULL = 0,   /* causal attention over every earlier position */
       LAYER_SWA = 1,    /* causal attention over the last n_swa positions */
       LAYER_CONV = 2,   /* a gated short convolution over the last conv_len inputs (recurrent) */
       N_LAYER_KINDS };

/* How an architecture says which layers are of which kind. */
enum { KINDS_FULL,       /* every layer LAYER_FULL */
       KINDS_SWA_PERIOD, /* with a sliding window: every period-th layer LAYER_FULL, the others LAYER_SWA */
       KINDS_KV_HEADS }; /* head_count_kv per layer: 0 marks a LAYER_CONV layer; with a sliding window
                            the others are LAYER_SWA */

enum { FFN_SILU, FFN_GELU }; /* the gate's activation: SwiGLU, GeGLU (tanh approximation) */

/* An architecture, as a row of named knobs (a recipe): build_model binds
   what it says and each knob is one step of the forward pass (llama_decode),
   so no code asks which architecture it runs. */
typedef struct llama_arch {
    const char *name;        /* general.architecture, also the metadata key prefix */
    uint8_t has[ARCH_N_T];   /* ARCH_NONE / _REQUIRED / _OPTIONAL for each ARCH_T_* group */
    int rope_neox;           /* RoPE pairs (x[i], x[i + rope_dim/2]) (NeoX), else (x[2i], x[2i+1]) */
    int ffn_act;             /* FFN_* */
    int embd_scale;          /* 1: embeddings times sqrt(n_embd) */
    int q_scale;             /* 1: q times 1/sqrt(head_dim) before attention, which then scales by 1 */
    int kinds;               /* KINDS_*: the layers' kinds */
    int period;              /* KINDS_SWA_PERIOD: its period, unless attention.sliding_window_pattern says */
    int swa_rope;            /* 1: LAYER_SWA layers have their own RoPE (base rope.freq_base_swa, unscaled) */
    int nope_period;         /* every nope_period-th layer has no RoPE (0: all have it) */
    const char *output_norm; /* the final norm's tensor */
} llama_arch;

/* The architectures build_model knows, ending with name NULL. */
extern const llama_arch llama_archs[];

typedef struct llama_hparams {
    int n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_vocab, n_ctx_train;
    int rope_dim;          /* rotated dimensions per head (even, <= head_dim) */
    int n_swa;             /* LAYER_SWA: positions seen, the token's own included */
    int conv_len;          /* LAYER_CONV: taps of the convolution (its state keeps conv_len - 1 inputs) */
    float rms_eps, rope_base, rope_scale;
    float softcap;         /* final logits: softcap * tanh(x / softcap) (0: none) */
} llama_hparams;

/* A weight matrix: rows of `cols` elements of `type`, in the mapping. */
typedef struct qmat {
    const uint8_t *data;
    uint32_t type;
    int64_t rows, cols;
    size_t row_bytes;
    const char *name;      /* for messages */
} qmat;

/* RoPE of one kind of layer: angle theta_i = (pos / scale) * pw[i] / ff[i]. */
typedef struct llama_rope {
    double scale;          /* linear scaling: positions are divided by it */
    double *pw;            /* base^(-2i/rope_dim), rope_dim/2 entries */
    const float *ff;       /* rope_freqs.weight (Llama 3.1+), else NULL */
} llama_rope;

typedef struct llama_layer {
    int kind;                           /* LAYER_* */
    int rope;                           /* index into llama_model.ropes, -1: no RoPE */
    int kv_idx, rec_idx;                /* its K/V rows in a KV block, its recurrent state (-1: none) */
    const float *attn_norm, *ffn_norm;
    const float *attn_post_norm, *ffn_post_norm; /* norms of the block outputs before the residual (gemma3), else NULL */
    qmat wq, wk, wv, wo, w_gate, w_up, w_down;
    const float *bq, *bk, *bv;          /* q/k/v biases (qwen2), else NULL */
    const float *q_norm, *k_norm;       /* per-head RMS norm weights before RoPE (qwen3), else NULL */
    qmat conv_in, conv_out;             /* LAYER_CONV: in projection (to B, C, x), out projection */
    const float *conv_w;                /* LAYER_CONV: conv_len taps per channel */
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
    int n_kv_layer, n_rec_layer; /* layers with K/V in the cache, with a recurrent state */
    llama_rope ropes[2];        /* [0] full-attention layers, [1] sliding-window layers */
    int n_ropes;
    float embd_scale;           /* 1, or sqrt(n_embd) */
    float *owned;               /* norm vectors stored in a non-F32 type, dequantized */
    const pl_dispatch *d;
    const llama_arch *arch;
    rope_fn rope;               /* the architecture's pair layout */
    uint64_t weight_bytes;      /* bytes of all matrices read per token */
} llama_model;

enum kv_type { KV_F16 = 0, KV_Q8_0 = 1 };

/* Wall time (seconds) of two phases of llama_decode, summed while `on`
   is set: where a backend's decode time goes (picolm-bench, which times
   the whole).  Off by default; on, two clock reads per parallel region. */
typedef struct llama_prof {
    int on;
    double matmul;    /* weight matmuls, activation quantization included */
    double attention; /* the attention step over the KV cache */
} llama_prof;

struct kv_seq;

/* The forward pass's workspace: activations for a batch of up to n_batch
   tokens, of any sequences of one model. */
typedef struct llama_batch {
    const llama_model *m;
    struct threadpool *pool;
    int n_batch;
    float *x, *xb, *q, *k, *v, *att, *hb, *hb2;
    float *att_tmp;             /* per-thread attention scratch, after att's rows */
    float *rope_cs;             /* per token and RoPE kind: cos, then sin, of its position (rope_dim floats) */
    uint8_t *act_q;             /* quantized activations */
    size_t act_q_bytes;
    uint8_t *unpack;            /* per-thread buffers of one unpacked row group (pl_type.to_base) */
    size_t unpack_stride;
    struct mm_part *mm_parts;   /* per-thread row ranges of the running matmul */
    /* per token of the running batch: its sequence, position, and the rows whose logits are wanted */
    struct kv_seq **tok_seq;
    int *tok_pos, *out_rows;
    size_t anon_bytes;          /* bytes this workspace allocated */
    uint64_t logit_rows;        /* rows of logits computed so far (the output matrix's columns) */
    llama_prof prof;            /* phase timings, while prof.on */
} llama_batch;

int build_model(llama_model *m, const char *path, const pl_dispatch *d, const gguf_limits *lim, char *err, size_t errlen);
void free_model(llama_model *m);

/* A workspace for batches of up to n_batch tokens on pool. */
int build_batch(llama_batch *b, const llama_model *m, int n_batch, struct threadpool *pool, char *err, size_t errlen);
void free_batch(llama_batch *b);

/* Bytes build_batch allocates for n_batch tokens and n_threads threads. */
size_t llama_batch_bytes(const llama_model *m, int n_batch, int n_threads);

/* One forward pass over n tokens (n <= b->n_batch) of any sequences of the
   model (continuous batching): token i goes into seq[i] at that
   sequence's next position (its n_past advances), in order.  The weights
   are read once for all of them, and each token's result is the same bits
   as in a batch of its own sequence alone.  The logits of the tokens i
   with want[i] (want NULL: none) land in logits, one n_vocab row each, in
   batch order.  0; -1 with a message; LLAMA_ERR_KV_FULL (nothing done)
   when the pool has no free block for them. */
#define LLAMA_ERR_KV_FULL (-2)
int llama_decode(llama_batch *b, struct kv_seq *const *seq, const int32_t *tokens, int n, const uint8_t *want, float *logits,
                 char *err, size_t errlen);

/* Evaluate n tokens of one sequence in steps of b->n_batch; the output
   matrix runs for the last token only, into logits (NULL: none). */
int llama_prefill(llama_batch *b, struct kv_seq *s, const int32_t *tokens, int n, float *logits, char *err, size_t errlen);

#endif
