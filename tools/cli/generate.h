/*
 * Generation: prompt -> tokens -> batched prefill -> sample/stream loop,
 * and the memory plan of --fit.  Shared by the CLI (and the bench).
 */
#ifndef PICOLM_GENERATE_H
#define PICOLM_GENERATE_H
#include <stdio.h>

#include "config.h"
#include "picolm/picolm.h"

typedef struct gen_stats {
    double load_s, prefill_s, decode_s;
    int n_prompt, n_reused, n_gen;
    size_t rss_anon_kb, rss_file_kb;
    size_t rss_peak_kb;       /* VmHWM: the most the process held at once */
    int cache_unsaved;          /* a cache save failed (and was reported) */
} gen_stats;

/* Run one generation; writes the continuation to stdout as it is produced
   and timings to stderr.  Returns 0, or non-zero with a message in err. */
int generate_run(picolm_model *m, const picolm_config *cfg, const char *prompt, size_t len, gen_stats *st, char *err, size_t errlen);

/* Streaming output with stop strings: holds back bytes that could still
   become a stop string or complete a UTF-8 character. */
typedef struct out_stream {
    char buf[1024];
    size_t n;
    int stopped;
    int werr;           /* errno of a failed write (the stream stops) */
    char last;          /* last byte written, '\n' before any */
    const picolm_config *cfg;
    FILE *f;
} out_stream;
void out_init(out_stream *o, const picolm_config *cfg, FILE *f);
/* Append bytes; returns 1 once a stop string was seen (output cut before
   it) or a write failed (o->werr set). */
int out_push(out_stream *o, const char *s, size_t n);
/* Write what is held back; 0, or -1 with o->werr set. */
int out_flush(out_stream *o);
/* The message for a failed write (0 when o->werr is 0 or EPIPE: a reader
   that closed the pipe ends the output quietly). */
int out_error(const out_stream *o, char *err, size_t errlen);

/* ---- the pieces generate_run is made of (the chat mode reuses them) ---- */

/* Tokenize text into a malloc'd array (*out, *n).  0 or -1 with a message. */
int generate_tokenize(const picolm_model *m, const char *text, size_t len, int add_bos, int special, int32_t **out, int *n,
                      char *err, size_t errlen);

/* A context for cfg (its KV type and batch) of n_ctx positions, without a
   sampler chain: the front ends sample with their own (cli_sampler_new).
   NULL with a message. */
picolm_context *generate_context(picolm_model *m, const picolm_config *cfg, int n_ctx, char *err, size_t errlen);

/* Evaluate toks[0..n) into an empty context c (picolm_n_past(c) == 0).  With
   cfg->cache_path set: reuse the longest prefix the cache file shares with
   toks (at least the last token is always evaluated, so logits exist),
   report it on stderr, prefill the rest, then save toks to the file.  A
   cache file that cannot be used is ignored with a warning.
   st->n_reused receives the number of reused tokens. */
int generate_prefill(const picolm_config *cfg, picolm_context *c, const int32_t *toks, int n, gen_stats *st, char *err,
                     size_t errlen);

enum gen_end { GEN_END_BUDGET = 0, GEN_END_EOS, GEN_END_STOP, GEN_END_CTX };

typedef struct gen_decode_args {
    const int32_t *end_ids;  /* tokens that end the reply like EOS (not printed, not evaluated) */
    int n_end_ids;
    int feed_last;           /* also evaluate the last printed token (chat: the next turn follows it) */
    int32_t *hist;           /* optional: every evaluated token is appended here ... */
    int *n_hist;             /* ... at *n_hist, up to hist_cap */
    int hist_cap;
} gen_decode_args;

/* Sample, stream to out and feed back until the budget (cfg->max_tokens),
   EOS / an end id, a stop string or a full context.  *end = GEN_END_*.
   st->n_gen counts the printed tokens.  0 or -1 with a message. */
int generate_decode(const picolm_model *m, const picolm_config *cfg, picolm_context *c, picolm_sampler *smp, out_stream *out,
                    const gen_decode_args *a, gen_stats *st, int *end, char *err, size_t errlen);

/* Context size for cfg (clamped to the model's training context; silent:
   the CLI reports the clamp once, cli_context). */
int generate_n_ctx(const picolm_model *m, const picolm_config *cfg);

/* The closing statistics lines on stderr. */
void generate_print_stats(const picolm_model *m, const picolm_config *cfg, const gen_stats *st, int n_ctx);

/* --fit: print the memory plan for cfg->context (and the largest context
   that fits in cfg->ram_bytes). */
/* Refuse a context whose KV cache and buffers exceed physical RAM; warn
   when they (with the mapped weights) exceed cfg->ram_bytes. */
int generate_check_memory(picolm_model *m, const picolm_config *cfg, char *err, size_t errlen);

/* Returns 0, or 1 when the verdict is DOES NOT FIT. */
int generate_fit(picolm_model *m, const picolm_config *cfg, FILE *out);

/* The resident bytes of --fit's plan (KV cache and RoPE tables for n_ctx,
   buffers for a batch on n_threads, runtime estimate; the mapped weights
   excluded): what must fit in the RAM budget.  kv_type: enum picolm_kv_type. */
double generate_resident_bytes(const picolm_model *m, int n_ctx, int kv_type, int batch, int n_threads);

/* Resident memory of this process from /proc/self/status (kB; 0 if unknown). */
/* VmHWM in kB (0 where unknown). */
void generate_peak_rss(size_t *kb);
void generate_rss(size_t *anon_kb, size_t *file_kb, size_t *peak_anon_kb);


#endif
