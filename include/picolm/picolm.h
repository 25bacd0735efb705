/*
 * picolm: the engine as a library (build/libpicolm.a; link with -ldl
 * -lpthread -lm).  The picolm CLI, the picolm-* tools and the tests are its
 * users.
 *
 * A model is loaded once (mapped, read-only) and any number of contexts are
 * made on it: each context has its own KV cache, activations and sampler
 * chain, so a server gives every request its own context.  The contexts of
 * one model share its thread pool: calls on them must not overlap in time
 * (serialise them, or load the model once per worker thread).
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

typedef struct picolm_model picolm_model;
typedef struct picolm_context picolm_context;

/* ---- models ---- */

typedef struct picolm_model_params {
    const char *path;       /* GGUF file (required) */
    const char *plugin_dir; /* NULL or "": $PICOLM_PLUGIN_DIR, then next to the executable */
    const char *backend;    /* NULL or "auto": the best backend this CPU runs; else its name */
    int threads;            /* <= 0: every online CPU */
} picolm_model_params;

picolm_model *picolm_model_load(const picolm_model_params *p, char *err, size_t errlen);
void picolm_model_free(picolm_model *m);

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

/* ---- contexts ---- */

enum picolm_kv_type { PICOLM_KV_F16 = 0, PICOLM_KV_Q8_0 = 1 };

typedef struct picolm_context_params {
    int n_ctx;                   /* <= 0: the model's training context (larger: clamped to it) */
    int n_batch;                 /* tokens per forward step of picolm_eval; <= 0: 64 */
    int kv_type;                 /* enum picolm_kv_type */
    const char *sampler_chain;   /* sampler plugin names, comma-separated; NULL: "greedy" */
    const picolm_param *sampler_params; /* key = value for the samplers (their declared keys) */
    int n_sampler_params;
    uint64_t seed;               /* for seeded samplers (dist) */
} picolm_context_params;

picolm_context *picolm_context_new(picolm_model *m, const picolm_context_params *p, char *err, size_t errlen);
void picolm_context_free(picolm_context *c);

/* Evaluate toks[0..n) after the tokens already in the context (in steps
   of n_batch) and tell the sampler chain about each of them.  Afterwards
   picolm_logits holds the logits of the last one.  0, or -1 with a message
   (a full context, a bad token id). */
int picolm_eval(picolm_context *c, const int32_t *toks, int n, char *err, size_t errlen);
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

/* ---- chat ---- */

typedef struct picolm_chat_msg {
    const char *role;    /* "system", "user", "assistant" */
    const char *content;
    size_t len;
} picolm_chat_msg;

/* msgs[0..n) rendered with a chat template as llama.cpp's
   llama_chat_apply_template does: tmpl NULL or "auto" = the model's own
   (chatml when it has none), or a name (chatml, llama2, llama3, ...);
   add_assistant opens the assistant's turn.  A malloc'd NUL-terminated
   string (*len its length; free() it), or NULL with a message. */
char *picolm_chat_render(const picolm_model *m, const char *tmpl, const picolm_chat_msg *msgs, int n, int add_assistant,
                         size_t *len, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
