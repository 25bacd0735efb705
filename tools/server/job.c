/* Jobs and the queue: see job.h. */
#include "job.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double mono_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* KMP failure table of a stop string: f[i] = length of the longest proper
   prefix of s[0..i] that is also its suffix. */
static int *stop_table(const char *s) {
    const int n = (int)strlen(s);
    int *f = malloc((size_t)(n ? n : 1) * sizeof *f);
    if (!f) return NULL;
    f[0] = 0;
    for (int i = 1, k = 0; i < n; i++) {
        while (k && s[i] != s[k]) k = f[k - 1];
        f[i] = k += s[i] == s[k];
    }
    return f;
}

/* A clock for pthread_cond_timedwait: 'seconds' from now. */
static struct timespec deadline(double seconds) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    const long long ns = ts.tv_nsec + (long long)(seconds * 1e9);
    ts.tv_sec += (time_t)(ns / 1000000000);
    ts.tv_nsec = (long)(ns % 1000000000);
    return ts;
}

job *job_new(api_request *req, const char *model, double now) {
    static unsigned long long counter;
    job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    for (int s = 0; s < req->n_stop; s++)
        if (!(j->stop_fail[s] = stop_table(req->stop[s]))) {
            for (int k = 0; k < s; k++) free(j->stop_fail[k]);
            free(j);
            return NULL;
        }
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    j->refs = 1;
    j->req = *req;
    memset(req, 0, sizeof *req);
    j->model = model;
    j->t_queued = now;
    j->created = (long long)time(NULL);
    snprintf(j->id, sizeof j->id, "%s-%llx%04llx", j->req.chat ? "chatcmpl" : "cmpl", (unsigned long long)j->created,
             __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED) & 0xffff);
    return j;
}

void job_ref(job *j) {
    pthread_mutex_lock(&j->mu);
    j->refs++;
    pthread_mutex_unlock(&j->mu);
}

void job_unref(job *j) {
    pthread_mutex_lock(&j->mu);
    int last = --j->refs == 0;
    pthread_mutex_unlock(&j->mu);
    if (!last) return;
    if (j->prep_free) j->prep_free(j->prep);
    job_tools_free(j->tools);
    for (int s = 0; s < API_MAX_STOP; s++) free(j->stop_fail[s]);
    api_free_request(&j->req);
    api_buf_free(&j->out);
    api_buf_free(&j->text);
    free(j->toks);
    free(j->alts);
    api_buf_free(&j->tok_text);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j);
}

static api_meta meta(const job *j) { return (api_meta){j->id, j->created, j->model, j->seed}; }

void job_start(job *j, int prompt_tokens, int cached_tokens) {
    pthread_mutex_lock(&j->mu);
    j->state = JOB_RUNNING;
    j->started = 1;
    j->usage.prompt_tokens = prompt_tokens;
    j->usage.cached_tokens = cached_tokens;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

void job_fail(job *j, const api_error *e) {
    pthread_mutex_lock(&j->mu);
    if (!j->started) j->err = *e;
    j->state = JOB_FAILED;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

/* Token records keep offsets into tok_text (it grows). */
static int grow(void **p, int *cap, int need, size_t size) {
    if (need <= *cap) return 0;
    int c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = realloc(*p, (size_t)c * size);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

static void add_token(job *j, const char *piece, size_t len, float lp, const api_alt *alts, int n_alts) {
    if (grow((void **)&j->toks, &j->cap_toks, j->n_toks + 1, sizeof *j->toks) ||
        grow((void **)&j->alts, &j->cap_alts, j->n_alts + n_alts, sizeof *j->alts))
        return;
    struct job_tok *t = &j->toks[j->n_toks++];
    *t = (struct job_tok){j->tok_text.n, len, lp, j->n_alts, n_alts};
    api_buf_add(&j->tok_text, piece, len);
    for (int i = 0; i < n_alts; i++) {
        j->alts[j->n_alts++] = (struct job_alt){j->tok_text.n, alts[i].len, alts[i].logprob};
        api_buf_add(&j->tok_text, alts[i].text, alts[i].len);
    }
}

/* api_token views of tokens [from, to) (pointers valid until the next add). */
static api_token *token_views(job *j, int from, int to, api_alt **alt_out) {
    int n = to - from, na = 0;
    for (int i = from; i < to; i++) na += j->toks[i].n_alt;
    api_token *v = calloc((size_t)(n ? n : 1), sizeof *v);
    api_alt *a = calloc((size_t)(na ? na : 1), sizeof *a);
    if (!v || !a) {
        free(v), free(a);
        *alt_out = NULL;
        return NULL;
    }
    for (int i = from, k = 0; i < to; i++) {
        const struct job_tok *t = &j->toks[i];
        v[i - from] = (api_token){j->tok_text.s + t->off, t->len, t->logprob, a + k, t->n_alt};
        for (int m = 0; m < t->n_alt; m++, k++)
            a[k] = (api_alt){j->tok_text.s + j->alts[t->alt0 + m].off, j->alts[t->alt0 + m].len, j->alts[t->alt0 + m].logprob};
    }
    *alt_out = a;
    return v;
}

/* Bytes at the end of the text that could still grow into a stop string:
   the longest stop-string prefix the text ends with. */
static size_t stop_holdback(const job *j) {
    int hold = 0;
    for (int s = 0; s < j->req.n_stop; s++) hold = j->stop_at[s] > hold ? j->stop_at[s] : hold;
    return (size_t)hold;
}

/* Run the stop strings' automata over text[from..n): each byte is looked at
   once (a long stop string costs no more per token than a short one).
   Returns where the earliest match ending in these bytes starts, or n. */
static size_t stop_scan(job *j, size_t from) {
    size_t cut = j->text.n;
    for (int s = 0; s < j->req.n_stop; s++) {
        const char *p = j->req.stop[s];
        const int *f = j->stop_fail[s], len = (int)strlen(p);
        int k = j->stop_at[s];
        for (size_t i = from; i < j->text.n; i++) {
            const char c = j->text.s[i];
            while (k && c != p[k]) k = f[k - 1];
            if (c == p[k] && ++k == len) {
                if (i + 1 - (size_t)len < cut) cut = i + 1 - (size_t)len;
                break;
            }
        }
        j->stop_at[s] = k;
    }
    return cut;
}

/* Send the sendable part of the unsent text (and the logprobs of the tokens
   so far) as one event. */
static void stream_text(job *j, int final) {
    /* with tools, the text before a call (which goes out as its deltas) */
    const size_t end = j->tools ? job_tools_scan(j->tools, j->text.s, j->text.n, final) : j->text.n;
    size_t avail = end > j->streamed ? end - j->streamed : 0;
    if (!final) avail -= stop_holdback(j) < avail ? stop_holdback(j) : avail;
    size_t n = final ? avail : api_utf8_complete(j->text.s + j->streamed, avail);
    int nt = j->req.logprobs ? j->n_toks - j->toks_sent : 0;
    api_meta m = meta(j);
    int first = !j->stream_begun;
    if (n || nt) {
        api_alt *alts = NULL;
        api_token *views = nt ? token_views(j, j->toks_sent, j->n_toks, &alts) : NULL;
        api_chunk_event(&j->req, &m, first, j->text.s + j->streamed, n, views, views ? nt : 0, NULL, NULL, &j->out);
        free(views), free(alts);
        j->streamed += n;
        j->toks_sent = j->n_toks;
        first = 0;
    }
    if (j->tools) job_tools_stream(j->tools, &m, j->text.s, &first, &j->out);
    j->stream_begun = !first;
}

int job_token(job *j, const char *piece, size_t len, float logprob, const api_alt *alts, int n_alts, double now) {
    pthread_mutex_lock(&j->mu);
    if (!j->usage.completion_tokens) j->t_first = now;
    j->usage.completion_tokens++;
    size_t before = j->text.n;
    api_buf_add(&j->text, piece, len);
    if (j->req.logprobs) add_token(j, piece, len, logprob, alts, n_alts);
    int stopped = 0;
    const size_t cut = j->text.s ? stop_scan(j, before) : j->text.n;
    if (cut < j->text.n) {
        j->text.n = cut;
        j->text.s[cut] = 0;
        stopped = 1;
    }
    if (j->req.stream && !stopped) stream_text(j, 0);
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    return stopped;
}

void job_finish(job *j, const char *finish) {
    pthread_mutex_lock(&j->mu);
    api_meta m = meta(j);
    size_t content = j->text.n;
    const api_call_out *call = j->tools ? job_tools_result(j->tools, j->text.s ? j->text.s : "", j->text.n, &content, &finish) : NULL;
    j->finish = finish;
    if (j->req.stream) {
        stream_text(j, 1);
        api_chunk_event(&j->req, &m, !j->stream_begun, "", 0, NULL, 0, finish, NULL, &j->out);
        if (j->req.include_usage) api_chunk_event(&j->req, &m, 0, "", 0, NULL, 0, finish, &j->usage, &j->out);
        api_buf_add(&j->out, "data: [DONE]\n\n", 14);
    } else {
        api_alt *alts = NULL;
        api_token *views = j->req.logprobs ? token_views(j, 0, j->n_toks, &alts) : NULL;
        api_response_body(&j->req, &m, j->text.s ? j->text.s : "", content, views, views ? j->n_toks : 0, finish,
                          &j->usage, call, &j->out);
        free(views), free(alts);
    }
    j->state = JOB_DONE;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

enum job_state job_wait_start(job *j, int (*gone)(void *), void *arg) {
    pthread_mutex_lock(&j->mu);
    while (!j->started && j->state != JOB_FAILED) {
        const struct timespec ts = deadline(0.1);
        if (pthread_cond_timedwait(&j->cv, &j->mu, &ts) == ETIMEDOUT && gone && !j->started && j->state != JOB_FAILED) {
            pthread_mutex_unlock(&j->mu);
            const int left = gone(arg);
            pthread_mutex_lock(&j->mu);
            if (left) {
                /* the scheduler drops a cancelled job it has not started */
                j->cancelled = 1;
                if (!j->started) {
                    j->state = JOB_FAILED;
                    api_fail(&j->err, 499, "invalid_request_error", NULL, NULL, "the client went away");
                }
            }
        }
    }
    enum job_state s = j->state;
    pthread_mutex_unlock(&j->mu);
    return s;
}

long job_read(job *j, char *buf, size_t max, double timeout) {
    pthread_mutex_lock(&j->mu);
    const struct timespec ts = deadline(timeout);
    int timed_out = 0;
    while (j->sent == j->out.n && j->state == JOB_RUNNING && !j->cancelled && !timed_out)
        timed_out = pthread_cond_timedwait(&j->cv, &j->mu, &ts) == ETIMEDOUT;
    size_t n = j->out.n - j->sent;
    if (n > max) n = max;
    if (n) memcpy(buf, j->out.s + j->sent, n); /* out.s is NULL until a non-streamed reply's body is made */
    j->sent += n;
    if (j->sent == j->out.n) j->sent = j->out.n = 0; /* all sent: the buffer starts over */
    const long ret = n ? (long)n : j->state == JOB_RUNNING && !j->cancelled ? -1 : 0;
    pthread_mutex_unlock(&j->mu);
    return ret;
}

int job_cancelled(job *j) {
    pthread_mutex_lock(&j->mu);
    const int c = j->cancelled;
    pthread_mutex_unlock(&j->mu);
    return c;
}

int job_backlogged(job *j) {
    pthread_mutex_lock(&j->mu);
    const int b = j->out.n - j->sent > JOB_BACKLOG;
    pthread_mutex_unlock(&j->mu);
    return b;
}

void job_cancel(job *j) {
    pthread_mutex_lock(&j->mu);
    j->cancelled = 1;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

void jq_init(job_queue *q, int cap) {
    memset(q, 0, sizeof *q);
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    q->cap = cap;
}

void jq_destroy(job_queue *q) {
    for (job *j; (j = jq_pop(q, 0));) job_unref(j);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
}

int jq_push(job_queue *q, job *j) {
    pthread_mutex_lock(&q->mu);
    if (q->n >= q->cap || q->closing) {
        pthread_mutex_unlock(&q->mu);
        return -1;
    }
    job_ref(j);
    j->next = NULL;
    if (q->tail) q->tail->next = j;
    else q->head = j;
    q->tail = j;
    q->n++;
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
    return 0;
}

job *jq_pop(job_queue *q, int wait) {
    pthread_mutex_lock(&q->mu);
    while (wait && !q->head && !q->closing) pthread_cond_wait(&q->cv, &q->mu);
    job *j = q->head;
    if (j) {
        q->head = j->next;
        if (!q->head) q->tail = NULL;
        q->n--;
    }
    pthread_mutex_unlock(&q->mu);
    return j;
}

int jq_depth(job_queue *q) {
    pthread_mutex_lock(&q->mu);
    int n = q->n;
    pthread_mutex_unlock(&q->mu);
    return n;
}

int jq_closing(job_queue *q) {
    pthread_mutex_lock(&q->mu);
    int c = q->closing;
    pthread_mutex_unlock(&q->mu);
    return c;
}

void jq_wait(job_queue *q, double seconds) {
    pthread_mutex_lock(&q->mu);
    const struct timespec ts = deadline(seconds);
    if (!q->head && !q->closing) pthread_cond_timedwait(&q->cv, &q->mu, &ts);
    pthread_mutex_unlock(&q->mu);
}

void jq_close(job_queue *q) {
    pthread_mutex_lock(&q->mu);
    q->closing = 1;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
}
