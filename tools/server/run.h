/*
 * The scheduler's side of picolm-server: it owns the engine and turns
 * queued jobs into tokens.  Up to n_slots sequences are served at once:
 * every step advances each of them in one forward pass (a chunk of its
 * prompt, or one token), new requests join at the next step and finished
 * ones leave.  Their KV caches are block tables over one pool (core/kv.h):
 * a request whose prompt begins like another sequence's shares those
 * blocks (copy on write), and a finished sequence's blocks stay as a
 * prefix cache until the pool needs them.  When the pool runs out, idle
 * caches go first (least recently used), then the newest sequence is
 * preempted: its blocks are freed and it is evaluated again later, with
 * the same bits, so its reply does not change.
 */
#ifndef PICOLM_SERVER_RUN_H
#define PICOLM_SERVER_RUN_H
#include "config.h"
#include "http.h"
#include "job.h"
#include "picolm/picolm.h"

typedef struct runner runner;

typedef struct runner_opts {
    const picolm_config *cfg;   /* defaults for what a request leaves out */
    int n_ctx;                  /* context of the sequence */
    int max_prompt_tokens;      /* longer prompts get a 400 (0: the context) */
    int n_slots;                /* sequences served at once */
    int prefill_chunk;          /* prompt tokens per step, oldest prompt first */
    size_t kv_ram;              /* bytes of the KV pool (0: every slot's full context) */
    int block_size;             /* positions per KV block (0: 16) */
    int kv_blocks;              /* the pool in blocks (overrides kv_ram) */
    size_t ram;                 /* the whole server's budget (0: none): without kv_ram or
                                   kv_blocks, the pool gets what the weights, the buffers
                                   and the code leave of it */
    int max_connections;        /* (for the ram plan) HTTP connections at once */
} runner_opts;

/* NULL + err on failure (template, memory, ...). */
runner *runner_new(picolm_model *m, const runner_opts *o, char *err, size_t errlen);
void runner_free(runner *r);

/* Prepare a request for the scheduler (on the HTTP thread that received
   it: prep.h); r is the runner.  0, or -1 with ae filled. */
int runner_prepare(void *r, job *j, api_error *ae);

/* Take jobs from q until it is closed; reports to h for /metrics. */
void runner_loop(runner *r, job_queue *q, http_server *h);
#endif
