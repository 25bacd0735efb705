/*
 * picolm: the engine as a library (build/libpicolm.a; link with -ldl
 * -lpthread -lm).  The picolm CLI, the picolm-* tools and the tests are its
 * users.
 *
 * A model is loaded once (mapped, read-only).  Its forward pass runs over
 * sequences (each one stream of tokens, its KV cache held in blocks of a
 * KV pool) in batches: a server keeps one pool and one batch and evaluates
 * every request's sequence in the same steps.  picolm_context wraps one
 * sequence, its pool, a batch and a sampler chain for the simple case.
 * Everything made on one model shares its thread pool: calls must not
 * overlap in time (serialise them, or load the model once per worker
 * thread).  Tokenization, the token lookups, chat rendering and building
 * or running a sampler chain touch nothing a forward pass changes: they
 * may run on other threads meanwhile (picolm-server prepares requests on
 * its connections' threads while its scheduler decodes).
 *
 * The library never prints and never exits: a call that can fail returns
 * non-zero (or NULL) and writes a one-line message into err (errlen bytes,
 * always NUL-terminated when errlen > 0).
 */
#ifndef PICOLM_PICOLM_H
#define PICOLM_PICOLM_H
#include <stddef.h>
#include <stdint.h>

#include "picolm/plugin.h" /* picolm_param */

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the log ----
   Notes from the engine and its plugins (a plugin's warning, an ignored
   PICOLM_CPU_MASK) go to one process-wide sink, set before loading a model;
   none is set by default, so the library prints nothing.  level: enum
   picolm_log_level (plugin.h). */
typedef void (*picolm_log_fn)(int level, const char *msg, void *ud);
void picolm_log_set(picolm_log_fn fn, void *ud);
/* A ready sink: "picolm: MSG" on stderr; debug messages only with $PICOLM_DEBUG. */
void picolm_log_stderr(int level, const char *msg, void *ud);

/* ---- the machine ---- */

/* CPUs this process may run on (online, within its affinity mask), >= 1. */
int picolm_cpu_count(void);
/* The CPU's name (x86 brand string, the ARM part), "unknown" when none is found. */
void picolm_cpu_name(char *buf, size_t n);
/* The CPU features the runtime sees, space-separated ("sse2 ... avx2 fma"):
   the probed set less $PICOLM_CPU_MASK. */
void picolm_cpu_features(char *buf, size_t n);
/* $PICOLM_CPU_MASK (features to hide from the runtime, to exercise
   fallbacks: "avx512f,avx2", "0x40", "all"): 0 when unset or valid, -1 with
   the token it cannot read named (the runtime would otherwise ignore it). */
int picolm_cpu_mask_check(char *err, size_t errlen);

typedef struct picolm_runtime picolm_runtime;
typedef struct picolm_model picolm_model;
typedef struct picolm_gguf picolm_gguf;
typedef struct picolm_context picolm_context;

/* Codes beside -1 that some calls return (with a message). */
#define PICOLM_ERR_KV_FULL (-2) /* picolm_decode / picolm_seq_reserve: the pool has no free block */
#define PICOLM_ERR_USAGE (-3)   /* picolm_runtime_new: a backend name that is not there (a usage error) */
#define PICOLM_ERR_FOREIGN (-4) /* picolm_seq_load: the file is not a KV cache of this model: leave it alone */

/* ---- the runtime: plugins, the kernel table, the thread pool ----
   Made once (plugins found and checked, the CPU probed, the best backend
   chosen, one dispatch table built) and shared by the models loaded on it. */

typedef struct picolm_runtime_params {
    const char *plugin_dir; /* NULL or "": $PICOLM_PLUGIN_DIR, then next to the executable */
    const char *backend;    /* NULL or "auto": the best backend this CPU runs; else its name */
    int threads;            /* <= 0: every online CPU */
    int verbose;            /* log every plugin file not loaded and why */
} picolm_runtime_params;

/* NULL with a message on failure (*code, when code is non-NULL:
   PICOLM_ERR_USAGE for a backend name that is not there, else -1). */
picolm_runtime *picolm_runtime_new(const picolm_runtime_params *p, int *code, char *err, size_t errlen);
void picolm_runtime_free(picolm_runtime *rt);
/* The backend whose kernels run ("reference": the formats' portable code). */
const char *picolm_runtime_backend(const picolm_runtime *rt);
int picolm_runtime_threads(const picolm_runtime *rt);
/* Every plugin file found, its score and why it was or was not chosen,
   the CPU and its features (picolm --list-plugins); stream is a FILE *. */
void picolm_runtime_report(const picolm_runtime *rt, void *stream);
/* The parameters the loaded sampler plugins declare, i = 0, 1, ... (NULL
   past the last); *sampler gets the plugin's name. */
const picolm_param_desc *picolm_runtime_sampler_param(const picolm_runtime *rt, int i, const char **sampler);
/* The loaded sampler plugins, i = 0, 1, ... (NULL past the last). */
const char *picolm_runtime_sampler(const picolm_runtime *rt, int i);
/* A plugin the runtime accepted. */
typedef struct picolm_plugin_info {
    int kind;                /* PICOLM_KIND_FORMAT, _BACKEND or _SAMPLER (plugin.h) */
    const char *name, *version, *description;
    int score;               /* a backend's priority and score: "auto" takes the highest */
} picolm_plugin_info;
/* The accepted plugins, i = 0, 1, ...: 0, or -1 past the last. */
int picolm_runtime_plugin(const picolm_runtime *rt, int i, picolm_plugin_info *out);
/* The same report without a runtime, for when picolm_runtime_new fails:
   the plugin files found from plugin_dir (as in picolm_runtime_params) and
   why each was or was not loaded. */
void picolm_runtime_report_dir(const char *plugin_dir, void *stream);

/* A tensor type as this runtime runs it. */
typedef struct picolm_type_info {
    const picolm_format *format;   /* its layout and reference code (NULL: no format plugin has it) */
    const char *name;              /* the format's name, else ggml's ("Q4_K"), else "typeN" */
    const char *plugin;            /* the format plugin's name */
    uint32_t row_group;            /* rows stored interleaved (1: plain rows) */
    const char *kernels_from;      /* the backend whose kernels run it, or "reference" */
    picolm_vec_dot_fn vec_dot;     /* the kernels the forward pass calls (of base_type when to_base) */
    picolm_gemm_fn gemm;           /* NULL: vec_dot per column */
    picolm_from_float_fn act_quant;
    uint32_t act_type;             /* the activations' type */
    void (*to_base)(const void *src, void *dst, size_t dst_stride, int64_t n); /* NULL unless its kernels are base_type's */
    uint32_t base_type;
    /* a layout of another type's values (Q4_K_R16 of Q4_K): that type and the
       lossless conversion from its rows (picolm_format.base_type, from_base);
       0 and NULL otherwise */
    uint32_t layout_of;
    void (*from_base)(const void *src, size_t src_stride, void *dst, int64_t n);
} picolm_type_info;
/* 0, or -1 for an id no loaded plugin describes (out gets its name still). */
int picolm_runtime_type(const picolm_runtime *rt, uint32_t type, picolm_type_info *out);
/* The type ids loaded format plugins describe, in order: the next one
   above `after` (-1: the first), or -1 past the last. */
int64_t picolm_runtime_next_type(const picolm_runtime *rt, int64_t after);
/* Bytes of a row of n elements (n a multiple of the block size). */
size_t picolm_type_row_bytes(const picolm_runtime *rt, uint32_t type, int64_t n);
/* Run fn(ctx, i0, i1, thread) over [0, n) in chunks on the runtime's threads. */
void picolm_runtime_parallel(picolm_runtime *rt, int64_t n, void (*fn)(void *ctx, int64_t i0, int64_t i1, int thread), void *ctx);

/* ---- models ---- */

/* What a model file may hold (bounds checked while reading it). */
typedef struct picolm_limits {
    uint64_t max_metadata, max_tensors, max_string, max_array, max_dim;
} picolm_limits;

typedef struct picolm_model_params {
    const char *path;       /* GGUF file (required) */
    const char *plugin_dir; /* without a runtime: NULL or "": $PICOLM_PLUGIN_DIR, then next to the executable */
    const char *backend;    /* without a runtime: NULL or "auto": the best backend this CPU runs; else its name */
    int threads;            /* without a runtime: <= 0: every online CPU */
    picolm_runtime *runtime;       /* NULL: the model makes its own from the three above (vocab_only: none) */
    const picolm_limits *limits;   /* NULL: the defaults */
    int vocab_only;                /* 1: the tokenizer and metadata only (a vocabulary file) */
    int weights_only;              /* 1: no tokenizer (the text calls give -1 and empty pieces; picolm_n_vocab stays right) */
} picolm_model_params;

picolm_model *picolm_model_load(const picolm_model_params *p, char *err, size_t errlen);
void picolm_model_free(picolm_model *m);

/* What a model is and how it runs here. */
typedef struct picolm_model_info {
    const char *arch;        /* general.architecture: "llama", "qwen3", "gemma3", "lfm2", ... */
    int n_vocab, n_ctx_train, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff;
    int n_kv_layers;         /* layers with K/V in the cache (the rest: recurrent) */
    uint64_t file_bytes;     /* the GGUF file, mapped */
    uint64_t weight_bytes;   /* matrix bytes read per token */
    const char *backend;     /* the kernels' backend ("reference": the portable code) */
    int n_threads;
    uint64_t embd_row_bytes; /* one row of the token embeddings: read per token beside weight_bytes */
} picolm_model_info;
void picolm_model_describe(const picolm_model *m, picolm_model_info *out);
/* The runtime the model runs on. */
picolm_runtime *picolm_model_runtime(const picolm_model *m);
/* Metadata of the file: a string (into the mapping, *len bytes, not
   NUL-terminated) or an integer.  0, or -1 when absent or of another type. */
int picolm_meta_str(const picolm_model *m, const char *key, const char **s, size_t *len);
int picolm_meta_int(const picolm_model *m, const char *key, int64_t *out);
/* Bytes of KV cache per position and of a batch's workspace, for memory plans. */
size_t picolm_kv_bytes_per_token(const picolm_model *m, int kv_type);
size_t picolm_batch_bytes(const picolm_model *m, int n_tokens);
/* The whole plan of a setting (picolm --fit, picolm-bench --tune,
   picolm-server --ram), in bytes, for any thread count. */
typedef struct picolm_memory {
    uint64_t weights;        /* the model file, mapped (its pages come and go with the page cache) */
    size_t kv_per_token;     /* K and V of one position (picolm_kv_bytes_per_token) */
    size_t seq_state;        /* one sequence's recurrent state (0: the model has none) */
    size_t batch;            /* a batch workspace of n_batch tokens on n_threads threads */
    size_t context;          /* what picolm_context_new takes for n_ctx and n_batch (its sampler aside) */
} picolm_memory;
/* n_ctx <= 0: the training context; n_threads <= 0: the model's runtime's. */
void picolm_model_memory(const picolm_model *m, int n_ctx, int n_batch, int kv_type, int n_threads, picolm_memory *out);
/* The file the model was loaded from (its metadata and tensor table; the
   model owns it). */
const picolm_gguf *picolm_model_gguf(const picolm_model *m);
/* The model file's read-only mapping (a SIGBUS handler can tell a fault in
   it, a file truncated underneath, from others): 0, or -1 when not mapped. */
int picolm_model_mapping(const picolm_model *m, const void **base, size_t *size);
/* The vocabulary as sampler plugins see it (NULL with weights_only). */
const picolm_vocab *picolm_model_vocab(const picolm_model *m);

int32_t picolm_n_vocab(const picolm_model *m);
int picolm_n_ctx_train(const picolm_model *m);
/* 1 when prompts start with BOS (tokenizer.ggml.add_bos_token) */
int picolm_add_bos(const picolm_model *m);
/* 1 when tok ends a generation (EOS, <|eot_id|>, <|im_end|>, ...) */
int picolm_is_eog(const picolm_model *m, int32_t tok);

/* ---- text <-> tokens ---- */

/* Tokens of text[0..len) into out[0..cap): the count, or -needed when cap
   is too small (4 * len + 4 always fits), as llama.cpp's llama_tokenize.
   special: parse special tokens (<|im_start|>...) in the text. */
int picolm_tokenize(const picolm_model *m, const char *text, size_t len, int add_bos, int special, int32_t *out, int cap);
/* The text of toks[0..n) (llama.cpp's llama_detokenize): its length (no
   NUL written), -needed when cap is too small, or -1 on bad arguments. */
int picolm_detokenize(const picolm_model *m, const int32_t *toks, int n, char *out, int cap);
/* The bytes one token adds to streamed output (not NUL-terminated). */
const char *picolm_token_piece(const picolm_model *m, int32_t tok, size_t *len);
/* The token's raw vocabulary text ("▁the", "<0x0A>"; not NUL-terminated). */
const char *picolm_token_text(const picolm_model *m, int32_t tok, size_t *len);
/* GGUF token types */
enum picolm_token_type {
    PICOLM_TOKEN_NORMAL = 1, PICOLM_TOKEN_UNKNOWN = 2, PICOLM_TOKEN_CONTROL = 3,
    PICOLM_TOKEN_USER_DEFINED = 4, PICOLM_TOKEN_UNUSED = 5, PICOLM_TOKEN_BYTE = 6
};
/* A token's enum picolm_token_type, -1 out of range. */
int picolm_token_type(const picolm_model *m, int32_t tok);
/* A token by its exact text, or -1. */
int32_t picolm_token_find(const picolm_model *m, const char *text, size_t len);
int32_t picolm_token_bos(const picolm_model *m);  /* -1 when the vocabulary has none */
int32_t picolm_token_eos(const picolm_model *m);
/* Streaming: the length of the longest prefix of buf[0..len) that does not
   end inside a UTF-8 character. */
size_t picolm_utf8_complete(const char *buf, size_t len);

/* ---- the KV pool, sequences and batches ----
   A KV pool is memory for the per-sequence state of the forward pass:
   fixed-size blocks of positions (K and V of every attention layer, and a
   checkpoint of the recurrent state where the architecture has one).  A
   sequence is one stream of tokens (a conversation, a request) over a
   pool: it takes blocks as it grows, and sequences that begin alike can
   share blocks (copy on write).  A batch is the workspace of one forward
   pass over tokens of any sequences of the model: the weights are read
   once for all of them, and each token's logits are the same bits as if
   its sequence were evaluated alone.  One pool and one batch serve any
   number of sequences; calls on the objects of one model must not overlap
   in time. */

enum picolm_kv_type { PICOLM_KV_F16 = 0, PICOLM_KV_Q8_0 = 1 };

typedef struct picolm_kv picolm_kv;
typedef struct picolm_seq picolm_seq;
typedef struct picolm_batch picolm_batch;

typedef struct picolm_kv_params {
    int kv_type;          /* enum picolm_kv_type */
    int block_size;       /* positions per block; <= 0: 16 */
    int n_blocks;         /* > 0: the pool's size in blocks ... */
    size_t bytes;         /* ... else in bytes (whole blocks); both 0: one training context */
} picolm_kv_params;

picolm_kv *picolm_kv_new(picolm_model *m, const picolm_kv_params *p, char *err, size_t errlen);
/* Free a pool after its sequences. */
void picolm_kv_free(picolm_kv *kv);
int picolm_kv_n_blocks(const picolm_kv *kv);
int picolm_kv_n_free(const picolm_kv *kv);      /* blocks no sequence holds */
int picolm_kv_block_size(const picolm_kv *kv);
/* Bytes of one block of a pool for m (K, V and the recurrent checkpoint). */
size_t picolm_kv_block_bytes(const picolm_model *m, int kv_type, int block_size);

/* An empty sequence of up to n_ctx positions (<= 0: the model's training context). */
picolm_seq *picolm_seq_new(picolm_kv *kv, int n_ctx, char *err, size_t errlen);
/* Its blocks go back to the pool (those it shares stay with the others). */
void picolm_seq_free(picolm_seq *s);
int picolm_seq_n_past(const picolm_seq *s);     /* positions in its cache */
int picolm_seq_n_ctx(const picolm_seq *s);
/* A new sequence holding src's first n_tokens positions, sharing their
   blocks.  Where the architecture has a recurrent state, a cut inside
   src's history lands on a block boundary (the last checkpoint at or
   below n_tokens): picolm_seq_n_past says how much was taken, and the
   caller evaluates the rest again.  NULL with a message on failure. */
picolm_seq *picolm_seq_fork(const picolm_seq *src, int n_tokens, char *err, size_t errlen);
/* The same into an existing sequence of the same pool (its own positions
   are dropped first).  Returns the positions taken. */
int picolm_seq_share(picolm_seq *dst, const picolm_seq *src, int n_tokens);
/* Keep the first n_tokens positions (with a recurrent state: the last
   checkpoint at or below them); whole blocks past them go back to the
   pool.  Returns the new length. */
int picolm_seq_truncate(picolm_seq *s, int n_tokens);
/* Make room for n more positions now (picolm_decode does it too): 0, or
   PICOLM_ERR_KV_FULL when the pool has no free block. */
int picolm_seq_reserve(picolm_seq *s, int n);
/* Count n more positions as evaluated without evaluating them (their K and
   V are whatever their blocks held): attention's cost depends on the
   positions, not on the values, so picolm-bench times decoding at a depth
   this way.  0, -1 past n_ctx, or PICOLM_ERR_KV_FULL. */
int picolm_seq_skip(picolm_seq *s, int n);

/* KV-cache files: positions [0, n) of s with their tokens, written
   atomically (a temporary file, then rename); the model's identity and
   shape are checked when read back.  With a recurrent state, n must be
   picolm_seq_n_past(s). */
int picolm_seq_save(const picolm_seq *s, const char *path, const int32_t *toks, int n, char *err, size_t errlen);
/* Restore into the empty sequence s the longest prefix of toks[0..n) that
   the file at path holds and s can take back (at most n - 1 positions, so
   that the last token is evaluated for its logits): *n_restored receives
   it.  0; 1 when the file does not exist or is empty; -1 with a message
   when it is this model's cache but this run cannot take it (another KV
   type, format version or checkpoint interval: replacing it is fine);
   PICOLM_ERR_FOREIGN with a message when it is anything else (another
   model's cache, not a picolm KV cache, damaged, unreadable), which a
   caller must not overwrite. */
int picolm_seq_load(picolm_seq *s, const char *path, const int32_t *toks, int n, int *n_restored, char *err, size_t errlen);

/* A workspace for forward passes over up to n_tokens tokens at once. */
picolm_batch *picolm_batch_new(picolm_model *m, int n_tokens, char *err, size_t errlen);
void picolm_batch_free(picolm_batch *b);
int picolm_batch_size(const picolm_batch *b);

/* One forward pass over n tokens (n <= picolm_batch_size): token i goes
   into seqs[i] at that sequence's next position (several tokens of one
   sequence follow each other in order).  The logits of the tokens i with
   want[i] (want NULL: none) land in logits, n_vocab floats each, in batch
   order.  0; -1 with a message; PICOLM_ERR_KV_FULL (nothing evaluated)
   when the pool cannot hold them. */
int picolm_decode(picolm_batch *b, picolm_seq *const *seqs, const int32_t *toks, int n, const uint8_t *want, float *logits,
                  char *err, size_t errlen);
/* toks[0..n) into s, in steps of the batch size; the logits of the last
   token into logits (NULL: none; the output matrix runs once). */
int picolm_prefill(picolm_batch *b, picolm_seq *s, const int32_t *toks, int n, float *logits, char *err, size_t errlen);

/* Where a batch's time goes, summed while profiling is on (picolm-bench). */
typedef struct picolm_profile {
    double matmul_s;      /* weight matmuls, activation quantization included */
    double attention_s;   /* attention over the KV cache */
    uint64_t logit_rows;  /* rows of logits computed (the output matrix's columns) */
} picolm_profile;
/* on: 1 zeroes the sums and starts them, 0 stops; *out (may be NULL) gets the sums so far. */
void picolm_batch_profile(picolm_batch *b, int on, picolm_profile *out);

/* ---- samplers ----
   A chain of sampler plugins (logit processors, then a selector) with its
   own history (penalties, the JSON grammar's state) and random state. */

typedef struct picolm_sampler picolm_sampler;

typedef struct picolm_sampler_params {
    const char *chain;             /* sampler plugin names, comma-separated; NULL: "greedy" */
    const picolm_param *params;    /* key = value for the samplers (their declared keys) */
    int n_params;
    uint64_t seed;                 /* for seeded samplers (dist) */
    const char *const *where;      /* NULL, or where each param was set ("FILE:LINE", "command
                                      line"): a message about a key or value starts with it */
} picolm_sampler_params;

/* A chain over m's vocabulary.  A name, key or value the samplers do not
   take fails with a message ("WHERE: unknown sampler key 'x' (known: ...)"). */
picolm_sampler *picolm_sampler_new(picolm_model *m, const picolm_sampler_params *p, char *err, size_t errlen);
/* The same over a vocabulary of one's own, without a model (picolm-bench
   --sampling times chains over synthetic logits). */
picolm_sampler *picolm_sampler_new_vocab(picolm_runtime *rt, const picolm_vocab *vocab, const picolm_sampler_params *p,
                                         char *err, size_t errlen);
void picolm_sampler_free(picolm_sampler *s);
/* The next token from n_vocab logits (not accepted: call
   picolm_sampler_accept with the token kept).  n_remaining = tokens left
   in the budget, this one included (-1: unlimited): the JSON grammar
   closes its document within it.  0, or -1 with a message. */
int picolm_sampler_sample(picolm_sampler *s, const float *logits, int n_remaining, int32_t *tok, char *err, size_t errlen);
/* A token entering the sequence: every prompt token and every kept one. */
void picolm_sampler_accept(picolm_sampler *s, int32_t tok);
/* Forget the history; seeded samplers restart from the seed. */
void picolm_sampler_reset(picolm_sampler *s);
/* One line: each stage with its parameters. */
void picolm_sampler_describe(const picolm_sampler *s, char *buf, size_t n);
/* The stages that run (a stage its parameters switch off is left out) and
   the name of stage i. */
int picolm_sampler_n_stages(const picolm_sampler *s);
const char *picolm_sampler_stage(const picolm_sampler *s, int i);
/* on: 1 zeroes the timers and makes every picolm_sampler_sample add the
   calling thread's CPU seconds of each step (a few clock reads per token);
   0 stops them.  Off by default. */
void picolm_sampler_timing(picolm_sampler *s, int on);
/* Seconds timed so far: i = -1 filling the candidate list, 0.. stage i. */
double picolm_sampler_seconds(const picolm_sampler *s, int i);
/* The chain's shortcuts, on by default; off, the same tokens come out the
   slow way (tests and picolm-bench compare them).  direct: a first stage
   reads the logits itself instead of a full candidate list; fused: a
   next-to-last stage and the selector run as one step. */
void picolm_sampler_direct(picolm_sampler *s, int on);
void picolm_sampler_fused(picolm_sampler *s, int on);
/* The fewest tokens a generation needs under this chain (a grammar that
   closes its document within the budget: picolm_sampler_vtable.min_budget;
   the stage's name copied into stage[0..n) when stage is non-NULL, so it
   outlives the chain), or 0 when any budget will do.  Front ends refuse a
   smaller budget before generating. */
int32_t picolm_sampler_min_budget(const picolm_sampler *s, char *stage, size_t n);

/* ---- contexts: one sequence, the simple way ----
   A context is a sequence with a pool of its own, a batch and (unless
   no_sampler) a sampler chain: enough for one conversation at a time. */

typedef struct picolm_context_params {
    int n_ctx;                   /* <= 0: the model's training context (larger: clamped to it) */
    int n_batch;                 /* tokens per forward step of picolm_eval; <= 0: 64 */
    int kv_type;                 /* enum picolm_kv_type */
    const char *sampler_chain;   /* sampler plugin names, comma-separated; NULL: "greedy" */
    const picolm_param *sampler_params; /* key = value for the samplers (their declared keys) */
    int n_sampler_params;
    uint64_t seed;               /* for seeded samplers (dist) */
    int no_sampler;              /* 1: no chain (picolm_sample refuses): the caller samples with one of its own */
} picolm_context_params;

picolm_context *picolm_context_new(picolm_model *m, const picolm_context_params *p, char *err, size_t errlen);
void picolm_context_free(picolm_context *c);

/* Evaluate toks[0..n) after the tokens already in the context (in steps
   of n_batch) and tell the sampler chain about each of them.  Afterwards
   picolm_logits holds the logits of the last one.  0, or -1 with a message
   (a full context, a bad token id). */
int picolm_eval(picolm_context *c, const int32_t *toks, int n, char *err, size_t errlen);
/* The same with every token's logits into logits (n x n_vocab floats). */
int picolm_eval_logits(picolm_context *c, const int32_t *toks, int n, float *logits, char *err, size_t errlen);
/* n_vocab logits after the last evaluated token (NULL before any). */
const float *picolm_logits(const picolm_context *c);
/* Tokens in the context (its KV cache) and its size. */
int picolm_n_past(const picolm_context *c);
int picolm_n_ctx(const picolm_context *c);
/* Run the sampler chain over picolm_logits: the next token in *tok (not
   evaluated: pass it to picolm_eval to continue).  0, or -1 with a message. */
int picolm_sample(picolm_context *c, int32_t *tok, char *err, size_t errlen);
/* Empty the context and the samplers' history (a new conversation). */
void picolm_reset(picolm_context *c);
/* The context's sequence and batch, for the calls above on them: keep the
   prefix of a conversation (picolm_seq_truncate), KV-cache files
   (picolm_seq_save/load), profiling.  A token evaluated through them is
   not told to the context's sampler. */
picolm_seq *picolm_context_seq(picolm_context *c);
picolm_batch *picolm_context_batch(picolm_context *c);

/* ---- chat ---- */

/* A call an assistant message made (OpenAI's tool_calls[i]). */
typedef struct picolm_tool_call {
    const char *id;          /* NULL: none (the supported templates do not print it) */
    const char *name;        /* the function */
    const char *arguments;   /* its arguments: JSON text (an object) */
} picolm_tool_call;

typedef struct picolm_chat_msg {
    const char *role;    /* "system", "user", "assistant", "tool" (a call's result) */
    const char *content;
    size_t len;
    /* appended for tool calls (zero them otherwise) */
    const picolm_tool_call *tool_calls; /* assistant: the calls it made */
    int n_tool_calls;
    const char *tool_call_id;           /* tool: the call this result answers (NULL: none) */
} picolm_chat_msg;

/* msgs[0..n) rendered with a chat template as llama.cpp's
   llama_chat_apply_template does: tmpl NULL or "auto" = the model's own
   (chatml when it has none), or a name (chatml, llama2, llama3, ...);
   add_assistant opens the assistant's turn.  A malloc'd NUL-terminated
   string (*len its length; free() it), or NULL with a message. */
char *picolm_chat_render(const picolm_model *m, const char *tmpl, const picolm_chat_msg *msgs, int n, int add_assistant,
                         size_t *len, char *err, size_t errlen);
/* The template tmpl resolves to for m (m may be NULL: a name only): its
   name ("chatml", "gemma", ...), or NULL with a message; *note (may be
   NULL) gets a remark such as "the model has no chat template; using
   chatml". */
const char *picolm_chat_template(const picolm_model *m, const char *tmpl, char *note, size_t notelen, char *err, size_t errlen);
/* The template names picolm renders, comma-separated. */
const char *picolm_chat_templates(void);
/* The i-th architecture picolm runs (general.architecture: "llama",
   "gemma3", ...; docs/architectures.md), NULL past the last. */
const char *picolm_arch_name(int i);
/* A conversation file (shared/reference/chat/conversation.txt): messages
   separated by a line "---", the first line of each its role, every byte
   after that line its content.  m[0..cap) point into text (which must
   outlive them): the count, or -1 with a message (a message without a
   role line, more than cap). */
int picolm_chat_parse(char *text, size_t len, picolm_chat_msg *m, int cap, char *err, size_t errlen);

/* ---- GGUF files ----
   The reader maps a file and checks every length, count, offset, shape and
   type against its size before use (limits as picolm_model_load's); the
   strings, arrays and tensor data it returns point into the mapping.  The
   writer collects metadata and tensor infos, then writes the header and
   each tensor's data in the order added (GGUF v3, offsets aligned to
   general.alignment, else 32): what picolm-quantize and the synthetic
   models are made with. */

picolm_gguf *picolm_gguf_load(const char *path, const picolm_limits *limits, char *err, size_t errlen);
void picolm_gguf_free(picolm_gguf *g);
/* Resolve each tensor's byte size with rt's format plugins and check that
   its data lies in the file, aligned, overlapping no other: 0, or -1 with
   a message naming the tensor (a type no plugin describes, too). */
int picolm_gguf_bind(picolm_gguf *g, const picolm_runtime *rt, char *err, size_t errlen);

typedef struct picolm_gguf_info {
    uint32_t version;
    uint64_t n_kv, n_tensors, alignment, data_offset, file_bytes;
} picolm_gguf_info;
void picolm_gguf_describe(const picolm_gguf *g, picolm_gguf_info *out);

/* Metadata value types (GGUF's numbering). */
enum picolm_gguf_type {
    PICOLM_GGUF_UINT8 = 0, PICOLM_GGUF_INT8 = 1, PICOLM_GGUF_UINT16 = 2, PICOLM_GGUF_INT16 = 3,
    PICOLM_GGUF_UINT32 = 4, PICOLM_GGUF_INT32 = 5, PICOLM_GGUF_FLOAT32 = 6, PICOLM_GGUF_BOOL = 7,
    PICOLM_GGUF_STRING = 8, PICOLM_GGUF_ARRAY = 9, PICOLM_GGUF_UINT64 = 10, PICOLM_GGUF_INT64 = 11,
    PICOLM_GGUF_FLOAT64 = 12
};
/* "u32", "string", "array", ... ("invalid" for another value) */
const char *picolm_gguf_type_name(uint32_t type);

/* One metadata pair (strings not NUL-terminated). */
typedef struct picolm_gguf_kv {
    const char *key;
    size_t key_len;
    uint32_t type;           /* enum picolm_gguf_type */
    uint64_t u;              /* unsigned integers and BOOL */
    int64_t i;               /* signed integers */
    double f;                /* FLOAT32, FLOAT64 */
    const char *str;         /* STRING */
    size_t str_len;
    uint32_t arr_type;       /* ARRAY: the elements' type (never ARRAY) and count; */
    uint64_t arr_n;
    const void *arr_data;    /* numbers: the elements, little-endian; STRING: see picolm_gguf_arr_str
                                (picolm_gguf_writer_set: arr_n NUL-terminated const char *) */
} picolm_gguf_kv;
/* Pair i (0 .. n_kv - 1): 0, or -1 out of range. */
int picolm_gguf_kv_at(const picolm_gguf *g, int64_t i, picolm_gguf_kv *out);
/* The index of key, or -1. */
int64_t picolm_gguf_find(const picolm_gguf *g, const char *key);
/* String j of pair i, a string array (NULL when it is not one, or j is out of range). */
const char *picolm_gguf_arr_str(const picolm_gguf *g, int64_t i, uint64_t j, size_t *len);
/* Typed lookups: 0, or -1 when absent or of another type (an integer of
   any integer type whose value fits; a string into the mapping). */
int picolm_gguf_int(const picolm_gguf *g, const char *key, int64_t *out);
int picolm_gguf_str(const picolm_gguf *g, const char *key, const char **s, size_t *len);

typedef struct picolm_tensor {
    const char *name;        /* not NUL-terminated */
    size_t name_len;
    uint32_t type;           /* tensor type id (picolm_runtime_type) */
    uint32_t n_dims;
    int64_t ne[4];           /* ne[0] the row length; unused dimensions 1 */
    int64_t n_elements;
    uint64_t offset;         /* in the data section */
    const void *data;        /* once bound (picolm_gguf_bind; a model's file is), else NULL */
    uint64_t nbytes;         /* once bound, else 0 */
} picolm_tensor;
/* Tensor i (0 .. n_tensors - 1): 0, or -1 out of range. */
int picolm_gguf_tensor_at(const picolm_gguf *g, int64_t i, picolm_tensor *out);
/* The index of the tensor named name, or -1. */
int64_t picolm_gguf_find_tensor(const picolm_gguf *g, const char *name);

typedef struct picolm_gguf_writer picolm_gguf_writer;
picolm_gguf_writer *picolm_gguf_writer_new(void);
void picolm_gguf_writer_free(picolm_gguf_writer *w);
/* Metadata: 0, or -1 (out of memory, an invalid value).  Setting a key that
   is there drops the old pair and appends the new one (ggml's
   gguf_set_val), so copy-then-set gives llama.cpp's tools' key order. */
int picolm_gguf_writer_copy(picolm_gguf_writer *w, const picolm_gguf *g, int64_t i); /* pair i of g, verbatim */
int picolm_gguf_writer_set(picolm_gguf_writer *w, const picolm_gguf_kv *kv);
int picolm_gguf_writer_set_u32(picolm_gguf_writer *w, const char *key, uint32_t v);
int picolm_gguf_writer_set_str(picolm_gguf_writer *w, const char *key, const char *v);
int picolm_gguf_writer_remove(picolm_gguf_writer *w, const char *key); /* 1 when it was there */
int picolm_gguf_writer_n_kv(const picolm_gguf_writer *w);
/* A tensor's info; nbytes is its data's size (without the padding). */
int picolm_gguf_writer_add_tensor(picolm_gguf_writer *w, const char *name, size_t name_len, uint32_t n_dims, const int64_t *ne,
                                  uint32_t type, uint64_t nbytes);
uint64_t picolm_gguf_writer_alignment(const picolm_gguf_writer *w);
/* Bytes of the header (metadata, tensor infos, padding) and of the whole file. */
uint64_t picolm_gguf_writer_header_size(const picolm_gguf_writer *w);
uint64_t picolm_gguf_writer_file_size(const picolm_gguf_writer *w);
/* Write the header to stream (a FILE *), then each tensor's data once, in
   the order added: 0, or -1 with a message. */
int picolm_gguf_writer_write_header(picolm_gguf_writer *w, void *stream, char *err, size_t errlen);
int picolm_gguf_writer_write_tensor(picolm_gguf_writer *w, void *stream, const void *data, uint64_t nbytes, char *err,
                                    size_t errlen);

/* ---- output files written whole ----
   An outfile is written under a temporary name beside path (or none, where
   the system has O_TMPFILE) and renamed over path when committed: a reader
   never sees a partial file, a process killed midway leaves no partial
   path.  An existing path that is not a regular file is refused; a symbolic
   link is followed (its target is replaced).  picolm_seq_save writes this
   way too. */

typedef struct picolm_outfile picolm_outfile;
picolm_outfile *picolm_outfile_new(const char *path, char *err, size_t errlen);
/* Write here (a FILE *) until the commit. */
void *picolm_outfile_stream(picolm_outfile *o);
/* The temporary file's name, for a signal handler to remove ("" when it
   has none, or once committed). */
const char *picolm_outfile_tmp_name(const picolm_outfile *o);
/* Flush, sync and rename over path: 0, or -1 with a message (the temporary
   file is removed). */
int picolm_outfile_commit(picolm_outfile *o, char *err, size_t errlen);
/* Free; an outfile not committed is removed. */
void picolm_outfile_free(picolm_outfile *o);

/* ---- tool calls (function calling) ----
   A request with tools is rendered the way the model family's own Jinja
   template renders it through llama-server, and the model's reply is
   constrained by the json_schema sampler to one call whose arguments are
   valid against the function's parameters schema:

     fmt = picolm_tool_format_of(m, tmpl, ...);
     prompt = picolm_chat_render_tools(m, tmpl, msgs, n, &(picolm_chat_tools){tools, n_tools, forced}, 1, ...);
     schema = picolm_tool_schema(fmt, tools, n_tools, only, ...);
     sampler keys: json_schema = schema, plus picolm_tool_sampler_key(fmt, forced, ...),
     with json_schema first in the chain; a budget below the chain's
     minimum (picolm_sampler_min_budget) cannot hold a call;
     generate, feeding the reply's text to picolm_tool_reply_scan.

   A reply holds at most one call.  forced (tool_choice "required" or a
   named function): the reply is the call.  Otherwise the model writes text
   or a call (Hermes-style: text, then <tool_call>; Llama 3: a reply that
   starts with '{'), and a call is only begun where it still fits in the
   budget, so it is always complete. */

/* A function the model may call (OpenAI's tools[i].function). */
typedef struct picolm_tool {
    const char *name;         /* [A-Za-z0-9_-], 1 to 64 of them */
    const char *description;  /* NULL: none */
    const char *parameters;   /* the JSON Schema of its arguments (an object), as JSON text;
                                 NULL: it takes none (rendered as {}; its arguments are {}) */
} picolm_tool;

/* How a template family writes a call. */
typedef struct picolm_tool_format {
    const char *name;         /* "hermes", "qwen2.5", "qwen3", "llama3" */
    const char *trigger;      /* what opens a call after free text ("<tool_call>"); "": a call
                                 is a whole reply that starts with '{' */
    const char *call_open;    /* what a forced reply starts with (ends the prompt): "<tool_call>\n" or "" */
    const char *args_key;     /* the call object's key of the arguments: "arguments" or "parameters" */
} picolm_tool_format;

/* The format of the template tmpl resolves to for m (NULL with a message,
   as picolm_chat_template). */
const picolm_tool_format *picolm_tool_format_of(const picolm_model *m, const char *tmpl, char *err, size_t errlen);

typedef struct picolm_chat_tools {
    const picolm_tool *tools;
    int n_tools;
    int forced;               /* the reply must be a call: the prompt ends with call_open */
    const char *date;         /* the date Llama 3.x templates print (strftime's "%d %b %Y"); NULL: today's */
} picolm_chat_tools;

/* msgs[0..n) (assistant tool_calls and "tool" results among them) with the
   tools, as the family's template renders them (picolm_chat_render for
   the rest).  NULL with a message: a call's arguments that are not JSON, a
   bad tool, a shape the template refuses (Llama 3: two calls in one
   message, tools without a user message). */
char *picolm_chat_render_tools(const picolm_model *m, const char *tmpl, const picolm_chat_msg *msgs, int n,
                               const picolm_chat_tools *t, int add_assistant, size_t *len, char *err, size_t errlen);

/* The JSON Schema of one call in format f: an object with "name" (a const)
   and f->args_key (the tool's parameters), for each tool (anyOf), or for
   the one named only (NULL: any).  A malloc'd string, or NULL with a
   message (a bad name or parameters, only not among the tools). */
char *picolm_tool_schema(const picolm_tool_format *f, const picolm_tool *tools, int n, const char *only, char *err,
                         size_t errlen);

/* A message of the json_schema sampler about the schema of picolm_tool_schema
   (tools[0..n), only) rewritten to name the tool: "tools[1] (add):
   parameters: #/properties/x: unsupported keyword 'format'" (else msg). */
void picolm_tool_error(const picolm_tool *tools, int n, const char *only, const char *msg, char *out, size_t outlen);

/* The sampler key beside json_schema that makes a call optional in format
   f: {"json_schema_trigger", f->trigger}, or {"json_schema_optional", "1"};
   none when forced.  Returns the count (0 or 1). */
int picolm_tool_sampler_key(const picolm_tool_format *f, int forced, picolm_param *out);

/* A reply read as it grows (pass the whole text so far each time): its
   free text, then the call.  Offsets into that text. */
typedef struct picolm_tool_reply {
    size_t content_len;       /* text[0, content_len) is free text for sure */
    int call;                 /* a call has begun */
    size_t name_off, name_len; /* the function's name (name_len 0 until complete) */
    size_t args_off, args_len; /* its arguments (JSON text) so far */
    int done;                 /* the arguments are complete */
    int error;                /* the call is not in the format's shape (never, under the sampler) */
    /* private */
    const picolm_tool_format *f;
    size_t pos;
    int forced, state, k, depth, in_str, esc;
} picolm_tool_reply;
void picolm_tool_reply_init(picolm_tool_reply *r, const picolm_tool_format *f, int forced);
/* final: the reply is complete (free text held back as a possible start of
   the trigger is then text). */
void picolm_tool_reply_scan(picolm_tool_reply *r, const char *text, size_t len, int final);
/* The reply as one line of JSON: {"name": ..., "arguments": {...}} for a
   call (with "content" first when text came before it), else
   {"content": "..."} (invalid UTF-8 as U+FFFD).  The arguments compact,
   numbers as written.  malloc'd; NULL when out of memory. */
char *picolm_tool_reply_json(const picolm_tool_reply *r, const char *text, size_t len);

/* OpenAI JSON for front ends that take it from files: a "tools" array
   ([{"type": "function", "function": {"name", "description",
   "parameters"}}, ...]) and a "messages" array (roles system, developer,
   user, assistant, tool; text content; assistant tool_calls with their
   arguments; tool_call_id).  *out gets the entries and their strings in
   one allocation (free(*out)); returns the count, or -1 with a message. */
int picolm_tools_from_json(const char *json, size_t len, picolm_tool **out, char *err, size_t errlen);
int picolm_chat_from_json(const char *json, size_t len, picolm_chat_msg **out, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
