/*
 * The sampling chain: sampler plugins (logit processors, then one selector)
 * run in order over a candidates array that is allocated once.
 *
 * cfg->sampler_chain is a comma-separated list of sampler plugin names, or
 * "auto" (also ""):
 *   temperature <= 0:  [json] [penalties] greedy
 *   otherwise:         [json] [penalties] [top_k] temperature [top_p] [min_p] dist
 * where json is included when cfg->json_mode, penalties when any penalty is
 * active (repeat != 1, freq != 0 or presence != 0, and penalty_last_n != 0),
 * top_k when > 0, top_p when < 1, min_p when > 0.  With an explicit chain and
 * --json, "json" is put first unless the chain already names it.  Every stage
 * but the last must be a PROCESS sampler, the last a SELECT one.
 *
 * Parameters: every sampler plugin gets the typed values of cfg (temperature,
 * top_p, top_k, min_p, repeat_penalty, freq_penalty, presence_penalty,
 * penalty_last_n; the effective values, so defaults and CLI flags count) plus
 * every other [sampler] key of cfg->params, and cfg->seed.  A [sampler] key
 * that no loaded sampler plugin lists in its param_keys (and that is not one
 * of the core's own keys, SAMPLING_CORE_KEYS) is an error naming FILE:LINE.
 */
#ifndef PICOLM_SAMPLING_H
#define PICOLM_SAMPLING_H
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "picolm/plugin.h"
#include "plugins.h"

/* [sampler] keys the core itself understands (NULL-terminated). */
extern const char *const SAMPLING_CORE_KEYS[];

typedef struct sampling sampling;

/* Build the chain.  0 on success; else non-zero and a message in err. */
int sampling_build(sampling **out, const pl_registry *reg, const picolm_config *cfg,
                   const picolm_vocab *vocab, char *err, size_t errlen);

/* Check that every [sampler] key of cfg->params is understood by the core or
   by some accepted sampler plugin of reg ("FILE:LINE: unknown sampler key
   'x'", or "command line: ..." for line 0).  sampling_build calls it. */
int sampling_check_params(const pl_registry *reg, const picolm_config *cfg, char *err, size_t errlen);

/* Pick the next token from n_vocab logits.  n_remaining = tokens left in the
   generation budget, this one included (-1: unlimited); the json processor
   uses it to close the document in time.  0 on success. */
int sampling_sample(sampling *s, const float *logits, int32_t n_remaining, int32_t *token,
                    char *err, size_t errlen);

/* Timing for picolm-bench --sampling: on = 1 zeroes the counters and makes
   every sampling_sample add the thread's CPU seconds of each step (a few
   clock reads per token; off by default). */
void sampling_timing(sampling *s, int on);
/* Seconds counted so far: i = -1 filling the candidate list, 0..n-1 stage i. */
double sampling_stage_seconds(const sampling *s, int i);

/* Tell the chain about a token entering the context: every prompt token and
   every generated token (after sampling_sample picked it). */
void sampling_accept(sampling *s, int32_t token);

/* Forget the history (new conversation); dist restarts from its seed. */
void sampling_reset(sampling *s);

void sampling_free(sampling *s);

/* One line for stderr, e.g.
   "penalties(repeat 1.1, last 64) -> top_k(40) -> temperature(0.8) -> top_p(0.9) -> dist(seed 42)" */
void sampling_describe(const sampling *s, char *buf, size_t n);

/* Number of stages and the name of stage i (for tests / --verbose). */
int sampling_n_stages(const sampling *s);
const char *sampling_stage_name(const sampling *s, int i);

#endif
