/*
 * Generation: prompt -> tokens -> batched prefill -> sample/stream loop,
 * and the memory plan of --fit.  Shared by the CLI (and the bench).
 */
#ifndef PICOLM_GENERATE_H
#define PICOLM_GENERATE_H
#include <stdio.h>

#include "config.h"
#include "engine.h"

typedef struct gen_stats {
    double load_s, prefill_s, decode_s;
    int n_prompt, n_reused, n_gen;
    size_t rss_anon_kb, rss_file_kb;
} gen_stats;

/* Run one generation; writes the continuation to stdout as it is produced
   and timings to stderr.  Returns 0, or non-zero with a message in err. */
int generate_run(engine *e, const picolm_config *cfg, const char *prompt, size_t len, gen_stats *st, char *err, size_t errlen);

/* --fit: print the memory plan for cfg->context (and the largest context
   that fits in cfg->ram_bytes). */
int generate_fit(engine *e, const picolm_config *cfg, FILE *out, char *err, size_t errlen);

/* KV-cache element type from the config string ("f16" / "q8_0"), -1 if bad. */
int generate_kv_type(const char *name);

/* Resident memory of this process from /proc/self/status (kB; 0 if unknown). */
void generate_rss(size_t *anon_kb, size_t *file_kb, size_t *peak_anon_kb);

/* Streaming output with stop strings: holds back bytes that could still
   become a stop string or complete a UTF-8 character. */
typedef struct out_stream {
    char buf[1024];
    size_t n;
    int stopped;
    const picolm_config *cfg;
    FILE *f;
} out_stream;
void out_init(out_stream *o, const picolm_config *cfg, FILE *f);
/* Append bytes; returns 1 once a stop string was seen (output cut before it). */
int out_push(out_stream *o, const char *s, size_t n);
void out_flush(out_stream *o);

#endif
