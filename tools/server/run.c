/* The scheduler: see run.h. */
#include "run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "generate.h"
#include "sampling.h"
#include "tokenizer.h"
#include "util.h"

struct runner {
    engine *e;
    runner_opts o;
    picolm_config *base;     /* the defaults, copied per request */
    picolm_config *cfg;      /* this request's settings */
    int chat_kind;
    llama_ctx c;             /* one sequence; its cache outlives the request */
    int32_t *cached;         /* tokens whose K/V the cache holds, in order */
    int n_cached;
    float *lp;               /* log-softmax of the logits (logprobs) */
};

runner *runner_new(engine *e, const runner_opts *o, char *err, size_t errlen) {
    runner *r = calloc(1, sizeof *r);
    if (!r) return pl_fail(err, errlen, "out of memory"), NULL;
    r->e = e;
    r->o = *o;
    r->base = malloc(sizeof *r->base);
    r->cfg = malloc(sizeof *r->cfg);
    r->cached = malloc((size_t)o->n_ctx * sizeof *r->cached);
    r->lp = malloc((size_t)e->model.hp.n_vocab * sizeof *r->lp);
    if (!r->base || !r->cfg || !r->cached || !r->lp) {
        runner_free(r);
        return pl_fail(err, errlen, "out of memory"), NULL;
    }
    *r->base = *o->cfg;
    char note[256] = "";
    if (chat_kind_resolve(o->cfg->chat_template, &e->model.gguf, &r->chat_kind, note, sizeof note, err, errlen) ||
        build_ctx(&r->c, &e->model, o->n_ctx, o->cfg->batch, generate_kv_type(o->cfg->kv_type), e->pool, err, errlen)) {
        runner_free(r);
        return NULL;
    }
    if (note[0]) fprintf(stderr, "picolm-server: %s\n", note);
    return r;
}

void runner_free(runner *r) {
    if (!r) return;
    free_ctx(&r->c);
    free(r->base);
    free(r->cfg);
    free(r->cached);
    free(r->lp);
    free(r);
}

/* The request's settings: the server's, with what the request sets. */
static int settings(runner *r, const api_request *q, api_error *ae) {
    char v[64], err[512];
    *r->cfg = *r->base;
    struct { unsigned bit; const char *key; double val; int is_int; } keys[] = {
        {API_SET_TEMPERATURE, "temperature", q->temperature, 0}, {API_SET_TOP_P, "top_p", q->top_p, 0},
        {API_SET_TOP_K, "top_k", q->top_k, 1},                   {API_SET_MIN_P, "min_p", q->min_p, 0},
        {API_SET_PRESENCE, "presence_penalty", q->presence_penalty, 0},
        {API_SET_FREQUENCY, "freq_penalty", q->frequency_penalty, 0},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        if (!(q->set & keys[i].bit)) continue;
        if (keys[i].is_int) snprintf(v, sizeof v, "%d", (int)keys[i].val);
        else snprintf(v, sizeof v, "%.9g", keys[i].val);
        if (config_set_param(r->cfg, keys[i].key, v, "request", 0, err, sizeof err))
            return api_fail(ae, 400, "invalid_request_error", keys[i].key, NULL, "%s", err);
    }
    if (q->set & API_SET_SEED) r->cfg->seed = q->seed;
    if (q->set & API_SET_MAX_TOKENS) r->cfg->max_tokens = q->max_tokens;
    r->cfg->json_mode = q->json_object;
    return 0;
}

/* The prompt's tokens: the chat rendered with the model's template, or
   the completion prompt; special tokens are parsed as llama.cpp's server
   does. */
static int prompt_tokens(runner *r, const api_request *q, int32_t **toks, int *n, api_error *ae) {
    char err[512];
    char *text = NULL;
    size_t len;
    if (q->chat) {
        chat_msg *m = calloc((size_t)q->n_msgs, sizeof *m);
        if (!m) return api_fail(ae, 500, "server_error", NULL, NULL, "out of memory");
        for (int i = 0; i < q->n_msgs; i++) m[i] = (chat_msg){q->msgs[i].role, q->msgs[i].content, strlen(q->msgs[i].content)};
        text = chat_render(r->chat_kind, m, q->n_msgs, 1, &len);
        free(m);
        if (!text) return api_fail(ae, 400, "invalid_request_error", "messages", NULL,
                                    "the %s chat template cannot render these messages", chat_kind_name(r->chat_kind));
    } else {
        text = q->prompt;
        len = strlen(text);
    }
    int rc = generate_tokenize(r->e, text, len, tokenizer_add_bos(r->e->tok), 1, toks, n, err, sizeof err);
    if (q->chat) free(text);
    if (rc) return api_fail(ae, 400, "invalid_request_error", q->chat ? "messages" : "prompt", NULL, "%s", err);
    int limit = r->o.max_prompt_tokens > 0 && r->o.max_prompt_tokens < r->c.n_ctx ? r->o.max_prompt_tokens : r->c.n_ctx - 1;
    if (*n == 0) return api_fail(ae, 400, "invalid_request_error", "prompt", NULL, "the prompt is empty");
    if (*n > limit)
        return api_fail(ae, 400, "invalid_request_error", q->chat ? "messages" : "prompt", "context_length_exceeded",
                        "the prompt is %d tokens; this server takes at most %d (%s)", *n, limit,
                        limit == r->c.n_ctx - 1 ? "its context, leaving room for one generated token" : "max_prompt_tokens");
    return 0;
}

/* Evaluate the prompt, reusing the longest prefix the cache already holds
   (at least the last token is evaluated, so its logits exist). */
static int prefill(runner *r, const int32_t *toks, int n, char *err, size_t errlen) {
    int keep = 0;
    while (keep < r->n_cached && keep < n - 1 && r->cached[keep] == toks[keep]) keep++;
    r->c.n_past = keep;
    r->n_cached = keep;
    if (generate_prefill_plain(&r->c, toks + keep, n - keep, err, errlen)) {
        r->n_cached = 0;
        return -1;
    }
    memcpy(r->cached + keep, toks + keep, (size_t)(n - keep) * sizeof *toks);
    r->n_cached = n;
    return 0;
}

/* log-softmax of the logits, and the k most likely tokens (for logprobs). */
static void logprobs(runner *r, int k, api_alt *top, int *n_top) {
    const float *x = r->c.logits;
    const int nv = r->e->model.hp.n_vocab;
    float mx = -INFINITY;
    for (int i = 0; i < nv; i++) mx = x[i] > mx ? x[i] : mx;
    double sum = 0;
    for (int i = 0; i < nv; i++) sum += exp((double)x[i] - mx);
    const float lse = (float)(mx + log(sum));
    for (int i = 0; i < nv; i++) r->lp[i] = x[i] - lse;
    int32_t ids[32];
    *n_top = 0;
    for (int i = 0; i < nv && k > 0; i++) {
        int pos = *n_top;
        if (pos == k && r->lp[i] <= r->lp[ids[k - 1]]) continue;
        if (pos == k) pos--;
        while (pos > 0 && r->lp[ids[pos - 1]] < r->lp[i]) ids[pos] = ids[pos - 1], pos--;
        ids[pos] = i;
        if (*n_top < k) (*n_top)++;
    }
    for (int i = 0; i < *n_top; i++) {
        top[i].text = tokenizer_piece(r->e->tok, ids[i], &top[i].len);
        top[i].logprob = r->lp[ids[i]];
    }
}

/* Generate j's reply; the job is started or failed on return. */
static void run_job(runner *r, job *j, http_server *h) {
    api_error ae = {0};
    char err[1024];
    int32_t *toks = NULL;
    int n = 0;
    sampling *smp = NULL;
    const api_request *q = &j->req;
    if (settings(r, q, &ae) || prompt_tokens(r, q, &toks, &n, &ae)) goto failed;
    if (sampling_build(&smp, &r->e->reg, r->cfg, tokenizer_vocab(r->e->tok), err, sizeof err)) {
        api_fail(&ae, 400, "invalid_request_error", NULL, NULL, "%s", err);
        goto failed;
    }
    if (prefill(r, toks, n, err, sizeof err)) {
        api_fail(&ae, 500, "server_error", NULL, NULL, "%s", err);
        goto failed;
    }
    for (int i = 0; i < n; i++) sampling_accept(smp, toks[i]);
    job_start(j, n);
    http_note_kv(h, r->n_cached, r->c.n_ctx, 1);

    /* the request's max_tokens, else the server's -n (< 0: until the
       context is full, as OpenAI's default) */
    const int budget = r->cfg->max_tokens >= 0 ? r->cfg->max_tokens : 1 << 30;
    const char *finish = "length";
    api_alt top[API_MAX_TOP_LOGPROBS];
    for (int i = 0; i < budget && !j->cancelled; i++) {
        int32_t tok;
        const int32_t room = r->c.n_ctx - r->c.n_past + 1;
        const int32_t left = budget - i < room ? budget - i : room;
        int n_top = 0;
        if (q->logprobs) logprobs(r, q->top_logprobs, top, &n_top);
        if (sampling_sample(smp, r->c.logits, left, &tok, err, sizeof err)) {
            fprintf(stderr, "picolm-server: %s: %s\n", j->id, err);
            break;
        }
        if (tokenizer_is_eog(r->e->tok, tok)) {
            finish = "stop";
            break;
        }
        sampling_accept(smp, tok);
        size_t pl;
        const char *piece = tokenizer_piece(r->e->tok, tok, &pl);
        if (job_token(j, piece, pl, q->logprobs ? r->lp[tok] : 0, top, n_top, mono_now())) {
            finish = "stop";
            break;
        }
        if (r->c.n_past >= r->c.n_ctx) break;
        if (i + 1 < budget) {
            if (llama_forward(&r->c, &tok, 1, NULL, err, sizeof err)) {
                fprintf(stderr, "picolm-server: %s: %s\n", j->id, err);
                r->n_cached = 0;
                break;
            }
            r->cached[r->n_cached++] = tok;
        }
    }
    job_finish(j, finish);
    http_note_done(h, j);
    http_note_kv(h, r->n_cached, r->c.n_ctx, 0);
    sampling_free(smp);
    free(toks);
    return;
failed:
    job_fail(j, &ae);
    sampling_free(smp);
    free(toks);
}

void runner_loop(runner *r, job_queue *q, http_server *h) {
    http_note_kv(h, 0, r->c.n_ctx, 0);
    for (job *j; (j = jq_pop(q, 1));) {
        if (!j->cancelled) run_job(r, j, h);
        else job_fail(j, &(api_error){.status = 499, .message = "cancelled"});
        job_unref(j);
    }
}
