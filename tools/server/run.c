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

/* One sequence being served: its KV cache outlives its request, so the
   next request that shares the beginning of its prompt reuses it. */
typedef struct slot {
    job *j;                  /* NULL: free */
    llama_ctx c;
    int32_t *cached;         /* tokens whose K/V the cache holds, in order */
    int n_cached;
    int32_t *prompt;         /* the request's prompt ... */
    int n_prompt, n_fed;     /* ... and how much of it is evaluated */
    sampling *smp;
    picolm_config *cfg;      /* the request's settings */
    int n_gen, budget;
    int32_t last;            /* the last generated token, fed at the next step */
    int has_last;
} slot;

struct runner {
    engine *e;
    runner_opts o;
    int chat_kind;
    slot *slots;
    int n_slots;
    llama_ctx step;          /* the activations of one step over every slot */
    llama_ctx **who;         /* per token of the step: its slot's cache */
    int32_t *toks;
    uint8_t *want;
    float *logits;           /* one row per slot that wants logits */
    float *lp;               /* log-softmax of the logits (logprobs) */
};

runner *runner_new(engine *e, const runner_opts *o, char *err, size_t errlen) {
    runner *r = calloc(1, sizeof *r);
    if (!r) return pl_fail(err, errlen, "out of memory"), NULL;
    r->e = e;
    r->o = *o;
    r->n_slots = o->n_slots > 0 ? o->n_slots : 1;
    if (r->o.prefill_chunk < 1) r->o.prefill_chunk = 1;
    const int cap = r->n_slots * r->o.prefill_chunk, nv = e->model.hp.n_vocab;
    r->slots = calloc((size_t)r->n_slots, sizeof *r->slots);
    r->lp = malloc((size_t)nv * sizeof *r->lp);
    r->who = malloc((size_t)cap * sizeof *r->who);
    r->toks = malloc((size_t)cap * sizeof *r->toks);
    r->want = malloc((size_t)cap);
    r->logits = malloc((size_t)r->n_slots * nv * sizeof *r->logits);
    if (!r->slots || !r->lp || !r->who || !r->toks || !r->want || !r->logits) {
        runner_free(r);
        return pl_fail(err, errlen, "out of memory"), NULL;
    }
    char note[256] = "";
    if (chat_kind_resolve(o->cfg->chat_template, &e->model.gguf, &r->chat_kind, note, sizeof note, err, errlen)) {
        runner_free(r);
        return NULL;
    }
    for (int i = 0; i < r->n_slots; i++) {
        slot *s = &r->slots[i];
        s->cached = malloc((size_t)o->n_ctx * sizeof *s->cached);
        s->cfg = malloc(sizeof *s->cfg);
        if (!s->cached || !s->cfg) {
            runner_free(r);
            return pl_fail(err, errlen, "out of memory"), NULL;
        }
        /* a slot holds a KV cache; the step's context does the work */
        if (build_ctx(&s->c, &e->model, o->n_ctx, 1, generate_kv_type(o->cfg->kv_type), e->pool, err, errlen)) {
            runner_free(r);
            return NULL;
        }
    }
    if (build_ctx(&r->step, &e->model, cap, cap, generate_kv_type(o->cfg->kv_type), e->pool, err, errlen)) {
        runner_free(r);
        return NULL;
    }
    if (note[0]) fprintf(stderr, "picolm-server: %s\n", note);
    return r;
}

void runner_free(runner *r) {
    if (!r) return;
    for (int i = 0; r->slots && i < r->n_slots; i++) {
        slot *s = &r->slots[i];
        free_ctx(&s->c);
        free(s->cached);
        free(s->cfg);
        free(s->prompt);
        sampling_free(s->smp);
    }
    free_ctx(&r->step);
    free(r->slots);
    free(r->who);
    free(r->toks);
    free(r->want);
    free(r->logits);
    free(r->lp);
    free(r);
}

/* The request's settings: the server's, with what the request sets. */
static int settings(runner *r, picolm_config *cfg, const api_request *q, api_error *ae) {
    char v[64], err[512];
    *cfg = *r->o.cfg;
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
        if (config_set_param(cfg, keys[i].key, v, "request", 0, err, sizeof err))
            return api_fail(ae, 400, "invalid_request_error", keys[i].key, NULL, "%s", err);
    }
    if (q->set & API_SET_SEED) cfg->seed = q->seed;
    if (q->set & API_SET_MAX_TOKENS) cfg->max_tokens = q->max_tokens;
    cfg->json_mode = q->json_object;
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
    int limit = r->o.max_prompt_tokens > 0 && r->o.max_prompt_tokens < r->o.n_ctx ? r->o.max_prompt_tokens : r->o.n_ctx - 1;
    if (*n == 0) return api_fail(ae, 400, "invalid_request_error", "prompt", NULL, "the prompt is empty");
    if (*n > limit)
        return api_fail(ae, 400, "invalid_request_error", q->chat ? "messages" : "prompt", "context_length_exceeded",
                        "the prompt is %d tokens; this server takes at most %d (%s)", *n, limit,
                        limit == r->o.n_ctx - 1 ? "its context, leaving room for one generated token" : "max_prompt_tokens");
    return 0;
}

/* How many leading tokens of toks[0..n) slot s's cache can keep (at least
   the last prompt token is evaluated again, so its logits exist). */
static int reusable(const slot *s, const int32_t *toks, int n) {
    int keep = 0;
    while (keep < s->n_cached && keep < n - 1 && s->cached[keep] == toks[keep]) keep++;
    return keep;
}

/* The free slot for a prompt: the one whose cache shares the longest
   beginning with it (a prefix cache), else the least filled one. */
static slot *pick_slot(runner *r, const int32_t *toks, int n) {
    slot *best = NULL;
    int best_keep = -1;
    for (int i = 0; i < r->n_slots; i++) {
        slot *s = &r->slots[i];
        if (s->j) continue;
        const int keep = reusable(s, toks, n);
        if (keep > best_keep || (keep == best_keep && s->n_cached < best->n_cached)) best = s, best_keep = keep;
    }
    return best;
}

/* Give job j a free slot: 0, or -1 after failing the job. */
static int admit(runner *r, job *j) {
    api_error ae = {0};
    char err[1024];
    int32_t *toks = NULL;
    int n = 0;
    sampling *smp = NULL;
    picolm_config *cfg = malloc(sizeof *cfg);
    const api_request *q = &j->req;
    if (!cfg) {
        api_fail(&ae, 500, "server_error", NULL, NULL, "out of memory");
        goto failed;
    }
    if (settings(r, cfg, q, &ae) || prompt_tokens(r, q, &toks, &n, &ae)) goto failed;
    if (sampling_build(&smp, &r->e->reg, cfg, tokenizer_vocab(r->e->tok), err, sizeof err)) {
        api_fail(&ae, 400, "invalid_request_error", NULL, NULL, "%s", err);
        goto failed;
    }
    for (int i = 0; i < n; i++) sampling_accept(smp, toks[i]);
    slot *s = pick_slot(r, toks, n);
    free(s->cfg);
    s->cfg = cfg;
    s->smp = smp;
    s->j = j;
    s->prompt = toks;
    s->n_prompt = n;
    s->n_fed = s->n_cached = reusable(s, toks, n);
    s->c.n_past = s->n_fed;
    s->n_gen = 0;
    s->has_last = 0;
    /* the request's max_tokens, else the server's -n (< 0: until the
       context is full, as OpenAI's default) */
    s->budget = cfg->max_tokens >= 0 ? cfg->max_tokens : 1 << 30;
    job_start(j, n);
    return 0;
failed:
    job_fail(j, &ae);
    sampling_free(smp);
    free(cfg);
    free(toks);
    return -1;
}

static void release(slot *s) {
    sampling_free(s->smp);
    s->smp = NULL;
    free(s->prompt);
    s->prompt = NULL;
    job_unref(s->j);
    s->j = NULL;
}

/* log-softmax of the logits, and the k most likely tokens (for logprobs). */
static void logprobs(runner *r, const float *x, int k, api_alt *top, int *n_top) {
    const int nv = r->e->model.hp.n_vocab;
    float mx = -INFINITY;
    for (int i = 0; i < nv; i++) mx = x[i] > mx ? x[i] : mx;
    double sum = 0;
    for (int i = 0; i < nv; i++) sum += exp((double)x[i] - mx);
    const float lse = (float)(mx + log(sum));
    for (int i = 0; i < nv; i++) r->lp[i] = x[i] - lse;
    int32_t ids[API_MAX_TOP_LOGPROBS];
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

/* Sample the next token from s's logits and hand it to the client.
   Returns 1 when the reply is complete (the job is finished). */
static int emit(runner *r, slot *s) {
    job *j = s->j;
    const api_request *q = &j->req;
    char err[512];
    const int32_t room = s->c.n_ctx - s->c.n_past + 1, want = s->budget - s->n_gen;
    const int32_t left = want < room ? want : room;
    api_alt top[API_MAX_TOP_LOGPROBS];
    int n_top = 0;
    int32_t tok;
    if (q->logprobs) logprobs(r, s->c.logits, q->top_logprobs, top, &n_top);
    if (sampling_sample(s->smp, s->c.logits, left, &tok, err, sizeof err)) {
        fprintf(stderr, "picolm-server: %s: %s\n", j->id, err);
        job_finish(j, "length");
        return 1;
    }
    if (tokenizer_is_eog(r->e->tok, tok)) {
        job_finish(j, "stop");
        return 1;
    }
    sampling_accept(s->smp, tok);
    s->n_gen++;
    size_t pl;
    const char *piece = tokenizer_piece(r->e->tok, tok, &pl);
    if (job_token(j, piece, pl, q->logprobs ? r->lp[tok] : 0, top, n_top, mono_now())) {
        job_finish(j, "stop");
        return 1;
    }
    if (s->n_gen >= s->budget || s->c.n_past >= s->c.n_ctx) {
        job_finish(j, "length");
        return 1;
    }
    s->last = tok;
    s->has_last = 1;
    return 0;
}

/* One step for every active slot, in one forward pass: a chunk of the
   prompt of each slot still in its prompt (chunked prefill: a long prompt
   does not stall the others), the last token of each one decoding; then a
   token for each slot whose logits are ready.  A slot that is done is
   released (and reported). */
static void step_all(runner *r, http_server *h) {
    char err[512];
    int n = 0, first[r->n_slots], count[r->n_slots];
    for (int i = 0; i < r->n_slots; i++) {
        slot *s = &r->slots[i];
        first[i] = n, count[i] = 0;
        if (!s->j) continue;
        const int32_t *src = &s->last;
        int k = 1;
        if (s->n_fed < s->n_prompt) {
            k = s->n_prompt - s->n_fed < r->o.prefill_chunk ? s->n_prompt - s->n_fed : r->o.prefill_chunk;
            src = s->prompt + s->n_fed;
            s->n_fed += k;
        }
        for (int t = 0; t < k; t++) r->who[n] = &s->c, r->toks[n] = src[t], r->want[n++] = 0;
        if (s->n_fed == s->n_prompt) r->want[n - 1] = 1;
        count[i] = k;
    }
    if (!n) return;
    const int failed = llama_forward_seqs(&r->step, r->who, r->toks, n, r->want, r->logits, err, sizeof err);
    if (failed) fprintf(stderr, "picolm-server: a step failed: %s\n", err);
    for (int i = 0, row = 0; i < r->n_slots; i++) {
        slot *s = &r->slots[i];
        if (!count[i]) continue;
        memcpy(s->cached + s->n_cached, r->toks + first[i], (size_t)count[i] * sizeof *r->toks);
        s->n_cached += count[i];
        int done = 0;
        if (failed) {
            s->n_cached = s->c.n_past = 0; /* what the cache holds is unknown */
            job_finish(s->j, "length");
            done = 1;
        } else if (r->want[first[i] + count[i] - 1]) {
            memcpy(s->c.logits, r->logits + (size_t)row++ * r->e->model.hp.n_vocab,
                   (size_t)r->e->model.hp.n_vocab * sizeof(float));
            done = emit(r, s);
        }
        if (done) {
            http_note_done(h, s->j);
            release(s);
        }
    }
}

static void report(runner *r, http_server *h) {
    int used = 0, running = 0;
    for (int i = 0; i < r->n_slots; i++) {
        used += r->slots[i].n_cached;
        running += r->slots[i].j != NULL;
    }
    http_note_kv(h, used, r->n_slots * r->o.n_ctx, running);
}

void runner_loop(runner *r, job_queue *q, http_server *h) {
    report(r, h);
    for (;;) {
        int active = 0, closed = 0;
        for (int i = 0; i < r->n_slots; i++) active += r->slots[i].j != NULL;
        /* new requests join at the next step while a slot is free */
        while (active < r->n_slots) {
            job *j = jq_pop(q, active == 0);
            if (!j) {
                closed = active == 0;
                break;
            }
            if (j->cancelled) job_fail(j, &(api_error){.status = 499, .message = "cancelled"});
            else if (!admit(r, j)) {
                active++;
                report(r, h);
                continue;
            }
            job_unref(j);
        }
        if (closed) break;
        /* a client gone, or the server stopping, ends a reply where it is */
        const int stopping = jq_closing(q);
        for (int i = 0; i < r->n_slots; i++) {
            slot *s = &r->slots[i];
            if (!s->j || !(stopping || s->j->cancelled)) continue;
            job_finish(s->j, "length");
            http_note_done(h, s->j);
            release(s);
        }
        step_all(r, h);
        report(r, h);
    }
}
