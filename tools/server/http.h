/*
 * picolm-server's HTTP side (libmicrohttpd, a thread per connection):
 * routes, limits, the API key, and streaming a job's bytes to its client.
 */
#ifndef PICOLM_SERVER_HTTP_H
#define PICOLM_SERVER_HTTP_H
#include <stddef.h>

#include "job.h"

typedef struct http_opts {
    const char *host;         /* bind address (default 127.0.0.1) */
    int port;
    const char *api_key;      /* NULL/"": no key */
    size_t max_body;          /* bytes */
    int max_connections;      /* requests in flight; more get 429 */
    int idle_timeout;         /* seconds a connection may stay silent (also the
                                 write deadline of a client that stops reading) */
    int header_timeout;       /* seconds for a complete request header (and an idle
                                 keep-alive connection's next one) */
    int max_per_ip;           /* connections from one address */
    const char *const *allow_hosts; /* Host names accepted beside IP literals, localhost
                                       and the bound name ("*": any) */
    int n_allow_hosts;
    const char *const *cors;  /* origins allowed cross-site ("*": any) */
    int n_cors;
    const char *model_id;     /* for /v1/models and responses */
    int (*prepare)(void *, job *, api_error *); /* a request made ready (prep.h) */
    void *prepare_arg;
    const char *(*model_problem)(void *); /* non-NULL: why the model cannot serve (503) */
    void *model_problem_arg;
} http_opts;

/* Live counters for /metrics (updated under the server's lock). */
typedef struct http_metrics {
    unsigned long long requests[6];   /* by class: 2xx 4xx 429 5xx 503 other */
    unsigned long long prompt_tokens, completion_tokens;
    unsigned long long ttft_count;
    double ttft_sum;
    double ttft_buckets[8];           /* cumulative counts per bucket bound */
    int kv_used, kv_total;            /* KV blocks in use / in the pool */
    int running;                      /* sequences being generated */
    unsigned long long preempted;     /* sequences preempted for KV blocks */
    unsigned long long cached_tokens; /* prompt tokens whose K/V were reused */
} http_metrics;

typedef struct http_server http_server;

/* Start listening; the queue is where requests go.  NULL + err on failure. */
http_server *http_start(const http_opts *o, job_queue *q, char *err, size_t errlen);
void http_stop(http_server *s);
/* Wait (at most 'seconds') until no request is being answered: the last
   bytes of every stream reach their clients before the server stops. */
void http_drain(http_server *s, double seconds);

/* The scheduler reports what /metrics shows. */
void http_note_done(http_server *s, const job *j);
void http_note_kv(http_server *s, int used, int total, int running, unsigned long long preempted);
#endif
