/*
 * The sampling chain: sampler plugins (logit processors, then one selector)
 * run in order over a candidates array that is allocated once.  The core
 * knows no sampler by name: the chain and its parameters come from the
 * front end (sampling_settings), and each sampler declares the parameters
 * it takes (picolm_sampler_vtable.params), which are checked here.
 *
 * Every stage but the last must be a PROCESS sampler, the last a SELECT one.
 * A stage gets every parameter of the settings (the last of a key wins)
 * followed by the declared defaults of its own keys that were not set.
 */
#ifndef PICOLM_SAMPLING_H
#define PICOLM_SAMPLING_H
#include <stddef.h>
#include <stdint.h>

#include "picolm/plugin.h"
#include "plugins.h"

/* One [sampler] setting and where it was set ("FILE:LINE", "command line",
   "built-in default"), for messages. */
typedef struct sampling_param {
    const char *key, *value, *where;
} sampling_param;

typedef struct sampling_settings {
    const char *chain;              /* sampler plugin names, comma-separated, in order */
    const sampling_param *params;   /* n_params settings for the samplers */
    int n_params;
    uint64_t seed;                  /* for PICOLM_SAMPLER_SEEDED samplers */
} sampling_settings;

typedef struct sampling sampling;

/* Build the chain.  0 on success; else non-zero and a message in err. */
int build_sampling(sampling **out, const pl_registry *reg, const sampling_settings *set, const picolm_vocab *vocab,
                   char *err, size_t errlen);

/* Check params against the parameters the accepted sampler plugins of reg
   declare: "WHERE: unknown sampler key 'x' (known: ...)", or a value of the
   wrong type or out of range.  build_sampling calls it. */
int sampling_check_params(const pl_registry *reg, const sampling_param *params, int n, char *err, size_t errlen);

/* The declaration of key by an accepted sampler plugin of reg (its name in
   *sampler when non-NULL), or NULL. */
const picolm_param_desc *sampling_find_param(const pl_registry *reg, const char *key, const char **sampler);

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

/* on = 1 (the default): a first stage's logit_scale is folded into the list
   and the first stage that runs may read the logits through apply_logits
   (picolm_sampler_vtable); 0: every stage's apply() over the full list.
   The same tokens either way (tests and picolm-bench compare them). */
void sampling_direct(sampling *s, int on);

/* on = 1 (the default, with the direct path): a chain whose first stage
   that runs is the next to last and offers apply_select, ending in a stage
   that offers draw, runs those two as one step; 0: each on its own.  The
   same tokens either way. */
void sampling_fused(sampling *s, int on);

/* The fewest tokens a generation needs under this chain (the largest
   picolm_sampler_vtable.min_budget of its stages), or 0 when any budget
   will do.  The stage's name is copied to stage[n] (when n > 0), so it
   outlives the chain. */
int32_t sampling_min_budget(const sampling *s, char *stage, size_t n);

/* Tell the chain about a token entering the context: every prompt token and
   every generated token (after sampling_sample picked it). */
void sampling_accept(sampling *s, int32_t token);

/* Forget the history (new conversation); seeded samplers restart from the seed. */
void sampling_reset(sampling *s);

void free_sampling(sampling *s);

/* One line for stderr: each stage with its parameters, e.g.
   "penalties(repeat 1.1, last 64) -> top_k(40) -> temperature(0.8) -> dist(seed 42)" */
void sampling_describe(const sampling *s, char *buf, size_t n);

/* Number of stages and the name of stage i (for tests / --verbose). */
int sampling_n_stages(const sampling *s);
const char *sampling_stage_name(const sampling *s, int i);

#endif
