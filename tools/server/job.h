/*
 * A request's life between the HTTP threads and the scheduler: the HTTP
 * side parses it, queues a job and then reads the bytes the scheduler
 * appends (server-sent events, or the whole body at the end); the
 * scheduler admits it (prompt checked), steps it, finishes or fails it.
 * Either side may let go first: a job is freed by the last reference.
 */
#ifndef PICOLM_SERVER_JOB_H
#define PICOLM_SERVER_JOB_H
#include <pthread.h>
#include <stdint.h>

#include "api.h"
#include "toolcall.h"

struct job_tok {
    size_t off, len;
    float logprob;
    int alt0, n_alt;
};
struct job_alt {
    size_t off, len;
    float logprob;
};

enum job_state { JOB_QUEUED, JOB_RUNNING, JOB_DONE, JOB_FAILED };

typedef struct job {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;
    struct job *next;         /* queue link */

    api_request req;
    /* prepared on the HTTP thread (the prompt's tokens, the sampler), taken
       by the scheduler; prep_free frees what it did not take */
    void *prep;
    void (*prep_free)(void *);
    uint64_t seed;            /* the sampler's seed, reported in the reply */
    job_tools *tools;         /* the reply may be a tool call (NULL: text) */
    int *stop_fail[API_MAX_STOP]; /* stop strings' KMP failure tables ... */
    int stop_at[API_MAX_STOP];    /* ... and how much of each the text ends with */
    char id[48];
    long long created;
    const char *model;        /* the server's model id (outlives the job) */
    double t_queued, t_first; /* monotonic seconds; t_first = first token */

    enum job_state state;
    int started;              /* the scheduler admitted it (status 200 decided) */
    api_error err;            /* when FAILED before it started */
    int cancelled;            /* the client went away: the scheduler drops it */

    api_buf out;              /* bytes for the client, from 'sent' on */
    size_t sent;

    /* the reply so far (non-streamed bodies, logprobs, usage) */
    api_buf text;             /* all generated text */
    size_t streamed;          /* bytes of text already sent as events */
    int stream_begun;         /* an event went out (the first one carries the role) */
    struct job_tok *toks;     /* per generated token, for logprobs */
    int n_toks, cap_toks, toks_sent;
    struct job_alt *alts;     /* their alternatives */
    int n_alts, cap_alts;
    api_buf tok_text;         /* the bytes of both */
    api_usage usage;
    const char *finish;
} job;

job *job_new(api_request *req, const char *model, double now);  /* takes req over; refs = 1 */
void job_ref(job *j);
void job_unref(job *j);

/* scheduler side (each takes the job's lock) */
void job_start(job *j, int prompt_tokens, int cached_tokens); /* admitted: headers can go */
void job_fail(job *j, const api_error *e);                /* before start: an error status */
/* One generated token: its bytes, logprob and alternatives (alts may be
   NULL when the request did not ask for logprobs).  Streams what is
   complete UTF-8 and cannot be the start of a stop string as an event.
   Returns 1 when the text now contains a stop string: the reply is cut
   before it, and the caller finishes the job with "stop". */
int job_token(job *j, const char *piece, size_t len, float logprob, const api_alt *alts, int n_alts, double now);
/* Finished ("stop", "length", or "shutdown" when the server stops): last
   events, or the whole body. */
void job_finish(job *j, const char *finish);
/* The client went away (read under the job's lock). */
int job_cancelled(job *j);
/* More than JOB_BACKLOG bytes wait for a client that reads slowly (or not
   at all): the scheduler pauses the sequence until it catches up. */
#define JOB_BACKLOG (64 * 1024)
int job_backlogged(job *j);

/* HTTP side: wait until started or failed (returns the state); gone(arg)
   is asked every 100 ms whether the client left (the job is then cancelled
   and dropped from the queue). */
enum job_state job_wait_start(job *j, int (*gone)(void *), void *arg);
/* Copy up to max pending bytes to buf; blocks until there are some, the
   job is over or 'timeout' seconds passed.  Returns the count, 0 at the
   end, -1 when the time ran out. */
long job_read(job *j, char *buf, size_t max, double timeout);
void job_cancel(job *j);

/* A bounded FIFO of queued jobs. */
typedef struct job_queue {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    job *head, *tail;
    int n, cap;
    int closing;
} job_queue;
void jq_init(job_queue *q, int cap);
void jq_destroy(job_queue *q);
/* 0, or -1 when full (the caller answers 503). Takes a reference. */
int jq_push(job_queue *q, job *j);
/* Next job (its reference passes to the caller); blocks when 'wait' and
   the queue is empty; NULL when empty (or closing). */
job *jq_pop(job_queue *q, int wait);
int jq_depth(job_queue *q);
int jq_closing(job_queue *q);
void jq_close(job_queue *q);
/* Sleep until a job is pushed (or the queue closes), at most 'seconds'. */
void jq_wait(job_queue *q, double seconds);

double mono_now(void);
#endif
