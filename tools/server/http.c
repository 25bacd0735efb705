/* HTTP side of picolm-server: see http.h. */
#include "http.h"

#include <arpa/inet.h>
#include <linux/tcp.h> /* tcp_info's tcpi_bytes_acked (glibc's netinet/tcp.h lacks it) */
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <linux/sockios.h>

#include "access.h"
#include "page.h"

/* A TCP connection: the reaper closes the ones that take longer than
   --header-timeout to send a request's header (slow or idle clients that
   would otherwise hold connections for ever). */
typedef struct conn {
    struct conn *prev, *next;
    int fd;
    int busy;          /* a request is being answered */
    int reaped;
    double since;      /* waiting for a header since (monotonic seconds) */
    int streaming;     /* a job's reply is being sent ... */
    double progress;   /* ... and the client last took bytes then */
    unsigned long long acked; /* bytes the client had acknowledged at 'progress' */
} conn;

struct http_server {
    struct MHD_Daemon *d;
    http_opts o;
    job_queue *q;
    pthread_mutex_t mu;
    int in_flight;
    http_metrics m;
    conn *conns;             /* every open connection */
    pthread_t reaper;
    int reaper_on, stopping;
};

/* Per-request state across libmicrohttpd's calls of the handler. */
typedef struct req_ctx {
    api_buf body;
    int too_large;
    int counted;       /* holds an in-flight slot */
    int refused;       /* answered at the header (Host, Origin, limits) */
} req_ctx;

static const double TTFT_BOUNDS[8] = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};

static int status_class(int status) {
    return status == 429 ? 2 : status == 503 ? 4 : status >= 500 ? 3 : status >= 400 ? 1 : status >= 200 && status < 300 ? 0 : 5;
}

static void count_status(http_server *s, int status) {
    pthread_mutex_lock(&s->mu);
    s->m.requests[status_class(status)]++;
    pthread_mutex_unlock(&s->mu);
}

static const char *header(struct MHD_Connection *c, const char *name) {
    return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

/* A cross-site request that --cors allows: the reply says so. */
static void add_cors(const http_server *s, struct MHD_Connection *c, struct MHD_Response *r) {
    const char *origin = header(c, "Origin");
    if (access_origin(origin, header(c, "Host"), s->o.cors, s->o.n_cors) != 1) return;
    MHD_add_response_header(r, "Access-Control-Allow-Origin", origin);
    MHD_add_response_header(r, "Vary", "Origin");
}

static enum MHD_Result send_buf(http_server *s, struct MHD_Connection *c, int status, const char *type, const char *body,
                                size_t len, const char *retry_after) {
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    add_cors(s, c, r);
    MHD_add_response_header(r, "Content-Type", type);
    if (retry_after) MHD_add_response_header(r, "Retry-After", retry_after);
    if (status == 401) MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    enum MHD_Result rc = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    count_status(s, status);
    return rc;
}

static enum MHD_Result send_error(http_server *s, struct MHD_Connection *c, const api_error *e, const char *retry_after) {
    api_buf b = {0};
    api_error_body(e, &b);
    enum MHD_Result rc = send_buf(s, c, e->status, "application/json", b.s ? b.s : "{}", b.s ? b.n : 2, retry_after);
    api_buf_free(&b);
    return rc;
}

static enum MHD_Result fail(http_server *s, struct MHD_Connection *c, int status, const char *type, const char *code,
                            const char *retry_after, const char *fmt, ...) {
    api_error e = {0};
    e.status = status;
    snprintf(e.type, sizeof e.type, "%s", type);
    snprintf(e.code, sizeof e.code, "%s", code ? code : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e.message, sizeof e.message, fmt, ap);
    va_end(ap);
    return send_error(s, c, &e, retry_after);
}

/* Bearer token compared in constant time (length leaks, content does not). */
static int key_ok(const http_server *s, struct MHD_Connection *c) {
    const char *want = s->o.api_key;
    if (!want || !want[0]) return 1;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7)) return 0;
    h += 7;
    size_t n = strlen(want), m = strlen(h);
    unsigned char diff = (unsigned char)(n != m);
    for (size_t i = 0; i < n; i++) diff |= (unsigned char)(want[i] ^ (i < m ? h[i] : 0));
    return diff == 0;
}

static conn *conn_of(struct MHD_Connection *c);

/* ---- streaming a job ---- */

/* The seconds between keep-alive bytes while the server has nothing to
   send (a preempted reply waits for KV blocks, a non-streamed reply is
   being generated): real writes, so that --idle-timeout stays the deadline
   for a client that does not read. */
static double keepalive_interval(const http_server *s) {
    const double t = s->o.idle_timeout / 3.0;
    return t < 0.2 ? 0.2 : t > 10 ? 10 : t;
}

typedef struct stream_ctx {
    http_server *s;
    job *j;
    conn *k;
} stream_ctx;

static ssize_t job_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    stream_ctx *x = cls;
    (void)pos;
    const long n = job_read(x->j, buf, max, keepalive_interval(x->s));
    if (n > 0) return n;
    if (n == 0) return MHD_CONTENT_READER_END_OF_STREAM;
    /* an SSE comment, or whitespace before a JSON body: both ignored */
    const char *ka = x->j->req.stream ? ": keep-alive\n\n" : "\n";
    const size_t len = strlen(ka) < max ? strlen(ka) : max;
    memcpy(buf, ka, len);
    return (ssize_t)len;
}

/* Called when the response ends, finished or not: a client that went away
   cancels its job, and the scheduler drops it at its next step. */
static void job_reader_free(void *cls) {
    stream_ctx *x = cls;
    job_cancel(x->j);
    job_unref(x->j);
    free(x);
}

/* The client closed its end (asked while its request waits in the queue). */
static int client_gone(void *cls) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(cls, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return 0;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLIN | POLLRDHUP};
    return poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

static enum MHD_Result completion(http_server *s, struct MHD_Connection *c, req_ctx *rc, int chat) {
    api_request req;
    api_error e;
    if (api_parse_request(rc->body.s ? rc->body.s : "", rc->body.n, chat, &req, &e)) return send_error(s, c, &e, NULL);
    job *j = job_new(&req, s->o.model_id, mono_now());
    if (!j) {
        api_free_request(&req);
        return fail(s, c, 500, "server_error", NULL, NULL, "out of memory");
    }
    /* the prompt is tokenized here, on this connection's thread: the step
       loop never waits for it */
    if (s->o.prepare && s->o.prepare(s->o.prepare_arg, j, &e)) {
        job_unref(j);
        return send_error(s, c, &e, NULL);
    }
    if (jq_push(s->q, j)) {
        job_unref(j);
        return fail(s, c, 503, "server_error", "queue_full", "1", "the server is busy: the request queue is full, retry later");
    }
    if (job_wait_start(j, client_gone, c) == JOB_FAILED) {
        e = j->err;
        job_unref(j);
        if (e.status == 499) return MHD_NO; /* nobody to answer */
        if (!e.status) api_fail(&e, 500, "server_error", NULL, NULL, "the request failed");
        return send_error(s, c, &e, e.status == 503 ? "1" : NULL);
    }
    stream_ctx *x = malloc(sizeof *x);
    struct MHD_Response *r = x ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, job_reader, x, job_reader_free) : NULL;
    if (!r) {
        free(x);
        job_cancel(j);
        job_unref(j);
        return MHD_NO;
    }
    *x = (stream_ctx){s, j, conn_of(c)};
    if (x->k) {
        pthread_mutex_lock(&s->mu);
        x->k->streaming = 1;
        x->k->progress = mono_now();
        pthread_mutex_unlock(&s->mu);
    }
    add_cors(s, c, r);
    if (j->req.stream) {
        MHD_add_response_header(r, "Content-Type", "text/event-stream");
        MHD_add_response_header(r, "Cache-Control", "no-cache");
    } else {
        MHD_add_response_header(r, "Content-Type", "application/json");
    }
    enum MHD_Result ret = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    count_status(s, 200);
    return ret;
}

static enum MHD_Result metrics(http_server *s, struct MHD_Connection *c) {
    api_buf b = {0};
    char line[256];
    pthread_mutex_lock(&s->mu);
    http_metrics m = s->m;
    int in_flight = s->in_flight;
    pthread_mutex_unlock(&s->mu);
    static const char *classes[6] = {"2xx", "4xx", "429", "5xx", "503", "other"};
#define OUT(...) api_buf_add(&b, line, (size_t)snprintf(line, sizeof line, __VA_ARGS__))
    OUT("# HELP picolm_requests_total HTTP requests answered, by status class.\n# TYPE picolm_requests_total counter\n");
    for (int i = 0; i < 6; i++) OUT("picolm_requests_total{status=\"%s\"} %llu\n", classes[i], m.requests[i]);
    OUT("# HELP picolm_prompt_tokens_total Prompt tokens of finished requests.\n# TYPE picolm_prompt_tokens_total counter\n");
    OUT("picolm_prompt_tokens_total %llu\n", m.prompt_tokens);
    OUT("# HELP picolm_prompt_tokens_cached_total Prompt tokens whose K/V were reused (shared or cached prefixes).\n"
        "# TYPE picolm_prompt_tokens_cached_total counter\n");
    OUT("picolm_prompt_tokens_cached_total %llu\n", m.cached_tokens);
    OUT("# HELP picolm_preemptions_total Sequences preempted when the KV pool ran out (evaluated again later).\n"
        "# TYPE picolm_preemptions_total counter\n");
    OUT("picolm_preemptions_total %llu\n", m.preempted);
    OUT("# HELP picolm_completion_tokens_total Generated tokens of finished requests.\n"
        "# TYPE picolm_completion_tokens_total counter\n");
    OUT("picolm_completion_tokens_total %llu\n", m.completion_tokens);
    OUT("# HELP picolm_queue_depth Requests waiting for the scheduler.\n# TYPE picolm_queue_depth gauge\n");
    OUT("picolm_queue_depth %d\n", jq_depth(s->q));
    OUT("# HELP picolm_requests_in_flight Requests being answered.\n# TYPE picolm_requests_in_flight gauge\n");
    OUT("picolm_requests_in_flight %d\n", in_flight);
    OUT("# HELP picolm_sequences_running Sequences being generated.\n# TYPE picolm_sequences_running gauge\n");
    OUT("picolm_sequences_running %d\n", m.running);
    OUT("# HELP picolm_kv_blocks_used KV-cache blocks in use (sequences and the prefix cache).\n"
        "# TYPE picolm_kv_blocks_used gauge\n");
    OUT("picolm_kv_blocks_used %d\n", m.kv_used);
    OUT("# HELP picolm_kv_blocks_total KV-cache blocks in the pool.\n# TYPE picolm_kv_blocks_total gauge\n");
    OUT("picolm_kv_blocks_total %d\n", m.kv_total);
    OUT("# HELP picolm_time_to_first_token_seconds From arrival to the first generated token.\n"
        "# TYPE picolm_time_to_first_token_seconds histogram\n");
    for (int i = 0; i < 8; i++)
        OUT("picolm_time_to_first_token_seconds_bucket{le=\"%g\"} %.0f\n", TTFT_BOUNDS[i], m.ttft_buckets[i]);
    OUT("picolm_time_to_first_token_seconds_bucket{le=\"+Inf\"} %llu\n", m.ttft_count);
    OUT("picolm_time_to_first_token_seconds_sum %.6f\n", m.ttft_sum);
    OUT("picolm_time_to_first_token_seconds_count %llu\n", m.ttft_count);
#undef OUT
    enum MHD_Result r = send_buf(s, c, 200, "text/plain; version=0.0.4", b.s ? b.s : "", b.n, NULL);
    api_buf_free(&b);
    return r;
}

static enum MHD_Result models_body(http_server *s, struct MHD_Connection *c, const char *id) {
    api_buf b = {0};
    api_models_body(s->o.model_id, 0, id != NULL, &b);
    enum MHD_Result r = send_buf(s, c, 200, "application/json", b.s ? b.s : "", b.n, NULL);
    api_buf_free(&b);
    return r;
}

static enum MHD_Result route(http_server *s, struct MHD_Connection *c, const char *url, const char *method, req_ctx *rc) {
    int get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), post = !strcmp(method, "POST");
    if (!strcmp(url, "/")) {
        if (!get) return fail(s, c, 405, "invalid_request_error", NULL, NULL, "use GET for %s", url);
        return send_buf(s, c, 200, "text/html; charset=utf-8", picolm_chat_page, strlen(picolm_chat_page), NULL);
    }
    const char *problem = s->o.model_problem ? s->o.model_problem(s->o.model_problem_arg) : NULL;
    if (!strcmp(url, "/health")) {
        if (!get) return fail(s, c, 405, "invalid_request_error", NULL, NULL, "use GET for %s", url);
        if (problem) return fail(s, c, 503, "server_error", "model_unavailable", NULL, "%s", problem);
        return send_buf(s, c, 200, "application/json", "{\"status\":\"ok\"}", 15, NULL);
    }
    const size_t mlen = strlen("/v1/models/");
    int chat = !strcmp(url, "/v1/chat/completions"), cmpl = !strcmp(url, "/v1/completions");
    int models = !strcmp(url, "/v1/models"), mtr = !strcmp(url, "/metrics"), model = !strncmp(url, "/v1/models/", mlen);
    if (!chat && !cmpl && !models && !mtr && !model)
        return fail(s, c, 404, "invalid_request_error", "unknown_url", NULL, "no such endpoint: %s %.200s", method, url);
    if (!key_ok(s, c)) return fail(s, c, 401, "invalid_request_error", "invalid_api_key", NULL, "missing or wrong API key");
    if (models || mtr || model) {
        if (!get) return fail(s, c, 405, "invalid_request_error", NULL, NULL, "use GET for %s", url);
        if (mtr) return metrics(s, c);
        if (model && strcmp(url + mlen, s->o.model_id))
            return fail(s, c, 404, "invalid_request_error", "model_not_found", NULL, "the model '%.200s' does not exist (this server has '%s')",
                        url + mlen, s->o.model_id);
        return models_body(s, c, model ? url + mlen : NULL);
    }
    if (!post) return fail(s, c, 405, "invalid_request_error", NULL, NULL, "use POST for %s", url);
    if (rc->too_large)
        return fail(s, c, 413, "invalid_request_error", "request_too_large", NULL,
                    "the request body is larger than the server's limit of %zu bytes", s->o.max_body);
    if (!access_json_type(header(c, "Content-Type")))
        return fail(s, c, 415, "invalid_request_error", "unsupported_media_type", NULL,
                    "the request body must be sent as Content-Type: application/json");
    if (problem) return fail(s, c, 503, "server_error", "model_unavailable", NULL, "%s", problem);
    return completion(s, c, rc, chat);
}

/* A CORS preflight: allowed for --cors origins, refused otherwise. */
static enum MHD_Result preflight(http_server *s, struct MHD_Connection *c) {
    const char *origin = header(c, "Origin");
    struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    int status = 204;
    if (origin && access_origin(origin, header(c, "Host"), s->o.cors, s->o.n_cors) == 1) {
        const char *want = header(c, "Access-Control-Request-Headers");
        add_cors(s, c, r);
        MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        MHD_add_response_header(r, "Access-Control-Allow-Headers", want ? want : "Authorization, Content-Type");
        MHD_add_response_header(r, "Access-Control-Max-Age", "600");
    } else if (origin && access_origin(origin, header(c, "Host"), s->o.cors, s->o.n_cors) < 0) {
        status = 403;
    }
    MHD_add_response_header(r, "Allow", "GET, POST, OPTIONS");
    enum MHD_Result rc = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    count_status(s, status);
    return rc;
}

/* The checks made as soon as the header is in (before any body is read):
   MHD_YES to go on, else the answer is queued in *ret. */
static int at_header(http_server *s, struct MHD_Connection *c, const char *url, const char *method, enum MHD_Result *ret) {
    const char *host = header(c, "Host");
    if (!access_host_ok(host, s->o.host, s->o.allow_hosts, s->o.n_allow_hosts)) {
        *ret = fail(s, c, 403, "invalid_request_error", "host_not_allowed", NULL,
                    "the Host '%.100s' is not this server's name (start it with --allow-host NAME to accept it)", host);
        return 0;
    }
    if (!strcmp(method, "OPTIONS")) {
        *ret = preflight(s, c);
        return 0;
    }
    if (access_origin(header(c, "Origin"), host, s->o.cors, s->o.n_cors) < 0) {
        *ret = fail(s, c, 403, "invalid_request_error", "origin_not_allowed", NULL,
                    "requests from the page at '%.100s' are not allowed (start the server with --cors ORIGIN to allow it)",
                    header(c, "Origin"));
        return 0;
    }
    (void)url;
    return 1;
}

static conn *conn_of(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    http_server *s = cls;
    (void)version;
    req_ctx *rc = *con_cls;
    if (!rc) {
        if (!(rc = calloc(1, sizeof *rc))) return MHD_NO;
        *con_cls = rc;
        conn *k = conn_of(c);
        pthread_mutex_lock(&s->mu);
        if (k) k->busy = 1;
        /* the page and /health are answered whatever the load */
        const int limited = strcmp(url, "/") && strcmp(url, "/health") && strcmp(method, "OPTIONS");
        rc->counted = limited ? s->in_flight < s->o.max_connections : 2;
        s->in_flight += rc->counted == 1;
        pthread_mutex_unlock(&s->mu);
        enum MHD_Result ret;
        if (!at_header(s, c, url, method, &ret)) {
            rc->refused = 1;
            return ret;
        }
        return MHD_YES;
    }
    if (*upload_size) {
        if (rc->body.n + *upload_size > s->o.max_body) rc->too_large = 1;
        else if (!rc->refused) api_buf_add(&rc->body, upload, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (rc->refused) return MHD_YES;
    if (!rc->counted)
        return fail(s, c, 429, "rate_limit_error", "too_many_connections", "1",
                    "too many concurrent requests (the limit is %d)", s->o.max_connections);
    if (rc->body.oom) return fail(s, c, 500, "server_error", NULL, NULL, "out of memory");
    return route(s, c, url, method, rc);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    http_server *s = cls;
    req_ctx *rc = *con_cls;
    (void)toe;
    if (!rc) return;
    conn *k = conn_of(c);
    pthread_mutex_lock(&s->mu);
    s->in_flight -= rc->counted == 1;
    if (k) k->busy = k->streaming = 0, k->since = mono_now(); /* the next request's header is due */
    pthread_mutex_unlock(&s->mu);
    api_buf_free(&rc->body);
    free(rc);
    *con_cls = NULL;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context, enum MHD_ConnectionNotificationCode toe) {
    http_server *s = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        conn *k = ci ? calloc(1, sizeof *k) : NULL;
        if (!k) return;
        k->fd = ci->connect_fd;
        k->since = mono_now();
        pthread_mutex_lock(&s->mu);
        k->next = s->conns;
        if (s->conns) s->conns->prev = k;
        s->conns = k;
        pthread_mutex_unlock(&s->mu);
        *socket_context = k;
        return;
    }
    /* closed: libmicrohttpd closes the socket after this returns, so the
       reaper (under the same lock) never touches a reused descriptor */
    conn *k = *socket_context;
    if (!k) return;
    pthread_mutex_lock(&s->mu);
    if (k->prev) k->prev->next = k->next;
    else s->conns = k->next;
    if (k->next) k->next->prev = k->prev;
    pthread_mutex_unlock(&s->mu);
    free(k);
    *socket_context = NULL;
}

/* A reply's client makes progress when it has all the bytes sent, or has
   acknowledged 16 KB more since it last did (the kernel's buffers would hide
   a client that stopped reading from libmicrohttpd for megabytes, and a
   full receive buffer still takes a few bytes now and then). */
static void client_progress(conn *k, double now) {
    struct tcp_info ti;
    socklen_t len = sizeof ti;
    int unsent = 0;
    memset(&ti, 0, sizeof ti);
    if (getsockopt(k->fd, IPPROTO_TCP, TCP_INFO, &ti, &len) || ioctl(k->fd, SIOCOUTQ, &unsent)) {
        k->progress = now; /* not a TCP socket: no deadline */
        return;
    }
    if (!unsent || ti.tcpi_bytes_acked >= k->acked + 16384) k->progress = now, k->acked = ti.tcpi_bytes_acked;
}

/* Every 0.25 s: connections that have waited longer than --header-timeout
   for a request's header, or whose client has taken none of its reply for
   --idle-timeout (the write deadline), are shut down: their threads then
   end, and a reply's job is cancelled. */
static void *reaper_main(void *p) {
    http_server *s = p;
    pthread_mutex_lock(&s->mu);
    while (!s->stopping) {
        const double now = mono_now();
        for (conn *k = s->conns; k; k = k->next) {
            if (k->streaming) client_progress(k, now);
            if (!k->reaped && ((!k->busy && now - k->since > s->o.header_timeout) ||
                               (k->streaming && now - k->progress > s->o.idle_timeout))) {
                shutdown(k->fd, SHUT_RDWR);
                k->reaped = 1;
            }
        }
        pthread_mutex_unlock(&s->mu);
        usleep(250000);
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* URLs are decoded as usual, except that one with an encoded NUL (%00) is
   left as it came: no route matches it (it would cut the path short). */
static size_t unescape(void *cls, struct MHD_Connection *c, char *url) {
    (void)cls, (void)c;
    const size_t n = strlen(url);
    char *copy = malloc(n + 1);
    if (!copy) return n;
    memcpy(copy, url, n + 1);
    const size_t m = MHD_http_unescape(copy);
    if (memchr(copy, 0, m)) {
        free(copy);
        return n;
    }
    memcpy(url, copy, m + 1);
    free(copy);
    return m;
}

http_server *http_start(const http_opts *o, job_queue *q, char *err, size_t errlen) {
    struct addrinfo hints = {0}, *ai = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", o->port);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    int gai = getaddrinfo(o->host, port, &hints, &ai);
    if (gai) {
        snprintf(err, errlen, "cannot use host '%s': %s", o->host, gai_strerror(gai));
        return NULL;
    }
    http_server *s = calloc(1, sizeof *s);
    if (!s) {
        freeaddrinfo(ai);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->o = *o;
    s->q = q;
    pthread_mutex_init(&s->mu, NULL);
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    /* libmicrohttpd's own limit is well above ours, so that the request
       after the last allowed one still gets a 429 instead of a closed
       socket, and /health is answered while every request slot is taken;
       one address cannot take more than --max-connections-per-ip of it */
    s->d = MHD_start_daemon(flags, (uint16_t)o->port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)(o->max_connections + 64), MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                            (unsigned)o->max_per_ip, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)o->idle_timeout,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
                            MHD_OPTION_UNESCAPE_CALLBACK, unescape, s, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!s->d || pthread_create(&s->reaper, NULL, reaper_main, s)) {
        snprintf(err, errlen, "cannot listen on %s:%d (address in use, or not permitted?)", o->host, o->port);
        if (s->d) MHD_stop_daemon(s->d);
        pthread_mutex_destroy(&s->mu);
        free(s);
        return NULL;
    }
    s->reaper_on = 1;
    return s;
}

void http_drain(http_server *s, double seconds) {
    const double end = mono_now() + seconds;
    pthread_mutex_lock(&s->mu);
    while (s->in_flight > 0 && mono_now() < end) {
        pthread_mutex_unlock(&s->mu);
        usleep(20000);
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
}

void http_stop(http_server *s) {
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    pthread_mutex_unlock(&s->mu);
    if (s->reaper_on) pthread_join(s->reaper, NULL);
    MHD_stop_daemon(s->d);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

void http_note_done(http_server *s, const job *j) {
    pthread_mutex_lock(&s->mu);
    s->m.prompt_tokens += (unsigned long long)j->usage.prompt_tokens;
    s->m.completion_tokens += (unsigned long long)j->usage.completion_tokens;
    s->m.cached_tokens += (unsigned long long)j->usage.cached_tokens;
    if (j->usage.completion_tokens) {
        double t = j->t_first - j->t_queued;
        s->m.ttft_count++;
        s->m.ttft_sum += t;
        for (int i = 0; i < 8; i++) s->m.ttft_buckets[i] += t <= TTFT_BOUNDS[i];
    }
    pthread_mutex_unlock(&s->mu);
}

void http_note_kv(http_server *s, int used, int total, int running, unsigned long long preempted) {
    pthread_mutex_lock(&s->mu);
    s->m.preempted = preempted;
    s->m.kv_used = used;
    s->m.kv_total = total;
    s->m.running = running;
    pthread_mutex_unlock(&s->mu);
}
