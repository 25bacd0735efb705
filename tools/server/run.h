/*
 * The scheduler's side of picolm-server: it owns the engine and turns
 * queued jobs into tokens.  Up to n_slots sequences are served at once:
 * every step advances each of them (a chunk of its prompt, or one token),
 * new requests join at the next step and finished ones leave.  A slot's KV
 * cache outlives its request, so a request that shares its prompt's
 * beginning (a system prompt, an agent's preamble) with the slot's last one
 * reuses that prefix instead of evaluating it again.
 */
#ifndef PICOLM_SERVER_RUN_H
#define PICOLM_SERVER_RUN_H
#include "config.h"
#include "engine.h"
#include "http.h"
#include "job.h"

typedef struct runner runner;

typedef struct runner_opts {
    const picolm_config *cfg;   /* defaults for what a request leaves out */
    int n_ctx;                  /* context of the sequence */
    int max_prompt_tokens;      /* longer prompts get a 400 (0: the context) */
    int n_slots;                /* sequences served at once */
    int prefill_chunk;          /* prompt tokens per sequence per step */
} runner_opts;

/* NULL + err on failure (template, memory, ...). */
runner *runner_new(engine *e, const runner_opts *o, char *err, size_t errlen);
void runner_free(runner *r);

/* Take jobs from q until it is closed; reports to h for /metrics. */
void runner_loop(runner *r, job_queue *q, http_server *h);
#endif
