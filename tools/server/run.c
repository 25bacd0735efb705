/* The scheduler: see run.h. */
#include "run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "generate.h"
#include "prep.h"
#include "tool.h"

/* One sequence: a block table over the pool.  Its blocks outlive its
   request (a prefix cache) until the pool needs them. */
typedef struct slot {
    job *j;                  /* NULL: free */
    picolm_seq *seq;         /* blocks of r->pool */
    float *logits;           /* after its last evaluated token */
    int32_t *cached;         /* tokens whose K/V the blocks hold, in order */
    int n_cached;
    int32_t *prompt;         /* what to evaluate before generating ... */
    int n_prompt, n_fed;     /* ... and how much of it is evaluated */
    picolm_sampler *smp;
    picolm_config *cfg;      /* the request's settings */
    int n_gen, budget;
    int32_t last;            /* the last generated token, fed at the next step */
    int has_last;
    int parked;              /* preempted: blocks given back, resumes later */
    unsigned long long since; /* admission order (newest is preempted first) */
    unsigned long long used; /* last step it ran (idle caches go least recent first) */
} slot;

struct runner {
    picolm_model *m;
    int n_vocab;
    runner_opts o;
    prep_env env;            /* what the HTTP threads prepare requests with */
    slot *slots;
    int n_slots;
    picolm_kv *pool;         /* the KV blocks of every sequence */
    unsigned long long preempted;
    unsigned long long clock;
    picolm_batch *step;      /* the activations of one step over every slot */
    picolm_seq **who;        /* per token of the step: its slot's sequence */
    int32_t *toks;
    uint8_t *want;
    float *logits;           /* one row per slot that wants logits */
    float *lp;               /* log-softmax of the logits (logprobs) */
};

/* What the server holds beside the KV pool, for --ram: the code and data
   resident now (libraries, plugins, the tokenizer), every byte of the mapped
   weights (each step reads them all), the step's activations, each slot's
   context, logits and sampler, and each connection's thread and buffers. */
static double ram_without_kv(const runner *r, int cap, int nv) {
    picolm_memory mem;
    picolm_model_memory(r->m, 0, cap, r->o.cfg->kv_type, 0, &mem);
    size_t anon_kb = 0, file_kb = 0;
    generate_rss(&anon_kb, &file_kb, NULL);
    const double MB = 1048576.0, slots = r->n_slots;
    double b = (double)(anon_kb + file_kb) * 1024 + (double)mem.weights;
    b += (double)mem.batch + slots * (double)mem.seq_state;
    b += (2 * slots + 1) * nv * sizeof(float);                               /* logits (the step's, each slot's), log-softmax */
    b += slots * ((double)r->o.n_ctx * sizeof(int32_t) + (double)nv * 24);  /* cached tokens, sampler lists and counts */
    b += (r->o.max_connections > 0 ? r->o.max_connections : 32) * 0.25 * MB; /* thread stack pages, HTTP buffers */
    b += slots * 2.0 * JOB_BACKLOG;                                          /* replies a slow client has not read */
    return b + 4 * MB;                                                       /* allocator slack, jobs, replies */
}

static int cap_tokens(const runner *r) { return r->o.prefill_chunk + r->n_slots; }

/* The memory the system can give now (MemAvailable), else all of it. */
static double memory_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    char line[128];
    unsigned long long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    if (f) fclose(f);
    if (kb) return (double)kb * 1024;
    const long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    return pages > 0 && psz > 0 ? (double)pages * psz : 0;
}

runner *runner_new(picolm_model *m, const runner_opts *o, char *err, size_t errlen) {
    runner *r = calloc(1, sizeof *r);
    if (!r) return tool_fail(err, errlen, "out of memory"), NULL;
    r->m = m;
    r->o = *o;
    r->n_slots = o->n_slots > 0 ? o->n_slots : 1;
    if (r->o.prefill_chunk < 1) r->o.prefill_chunk = 1;
    const int cap = cap_tokens(r), nv = r->n_vocab = picolm_n_vocab(m); /* tokens in one step */
    r->slots = calloc((size_t)r->n_slots, sizeof *r->slots);
    r->lp = malloc((size_t)nv * sizeof *r->lp);
    r->who = malloc((size_t)cap * sizeof *r->who);
    r->toks = malloc((size_t)cap * sizeof *r->toks);
    r->want = malloc((size_t)cap);
    r->logits = malloc((size_t)r->n_slots * nv * sizeof *r->logits);
    if (!r->slots || !r->lp || !r->who || !r->toks || !r->want || !r->logits) {
        runner_free(r);
        return tool_fail(err, errlen, "out of memory"), NULL;
    }
    char note[256] = "";
    const char *tmpl = picolm_chat_template(m, o->cfg->chat_template, note, sizeof note, err, errlen);
    const picolm_tool_format *fmt = tmpl ? picolm_tool_format_of(m, tmpl, err, errlen) : NULL;
    if (!fmt) {
        runner_free(r);
        return NULL;
    }
    const int kv = o->cfg->kv_type, bs = o->block_size > 0 ? o->block_size : 16;
    const size_t block = picolm_kv_block_bytes(m, kv, bs);
    /* the pool: --kv-ram, else what --ram leaves, else what every slot's full context takes */
    size_t want = o->kv_ram ? o->kv_ram : (size_t)r->n_slots * (size_t)((o->n_ctx + bs - 1) / bs) * block;
    if (o->ram && !o->kv_ram && !o->kv_blocks) {
        const double rest = ram_without_kv(r, cap, nv);
        if ((double)o->ram < rest + (double)block * r->n_slots) {
            tool_fail(err, errlen, "--ram %.1f MB is too small: the weights, buffers and code take %.1f MB, and %d slots "
                    "need at least %.1f MB of KV blocks beside them (or fewer --slots, a smaller -c)",
                    o->ram / 1048576.0, rest / 1048576.0, r->n_slots, (double)block * r->n_slots / 1048576.0);
            runner_free(r);
            return NULL;
        }
        want = (size_t)((double)o->ram - rest);
    } else if (!o->kv_ram && !o->kv_blocks) {
        /* no budget given: every slot's full context, unless that is more
           than half of what the machine has free (a long-context model's
           full contexts can take many times its RAM) */
        const double MB = 1048576.0, avail = memory_available(), cap = avail / 2 - ram_without_kv(r, cap_tokens(r), nv);
        if (avail > 0 && (double)want > cap) {
            const size_t full = want;
            want = cap > (double)block * r->n_slots ? (size_t)cap : block * (size_t)r->n_slots;
            fprintf(stderr, "picolm-server: note: %d slots of the full context (%d tokens) would take %.0f MB of KV cache; "
                    "the pool gets %.0f MB, half of the %.0f MB this machine has available (--kv-ram, --ram or -c choose otherwise)\n",
                    r->n_slots, o->n_ctx, (double)full / MB, (double)want / MB, avail / MB);
        }
    }
    const int n_blocks = o->kv_blocks > 0 ? o->kv_blocks : (int)(want / block < 1u << 30 ? want / block : 1u << 30);
    if (n_blocks < 1) {
        runner_free(r);
        return tool_fail(err, errlen, "the KV budget of %zu bytes holds no block (%zu bytes for %d positions)", want, block, bs), NULL;
    }
    const picolm_kv_params kp = {.kv_type = kv, .block_size = bs, .n_blocks = n_blocks};
    if (!(r->pool = picolm_kv_new(m, &kp, err, errlen))) {
        runner_free(r);
        return NULL;
    }
    for (int i = 0; i < r->n_slots; i++) {
        slot *s = &r->slots[i];
        s->cached = malloc((size_t)o->n_ctx * sizeof *s->cached);
        s->cfg = malloc(sizeof *s->cfg);
        s->logits = malloc((size_t)nv * sizeof *s->logits);
        if (!s->cached || !s->cfg || !s->logits) {
            runner_free(r);
            return tool_fail(err, errlen, "out of memory"), NULL;
        }
        /* a slot holds a block table; the step's workspace does the work */
        if (!(s->seq = picolm_seq_new(r->pool, o->n_ctx, err, errlen))) {
            runner_free(r);
            return NULL;
        }
    }
    if (!(r->step = picolm_batch_new(m, cap, err, errlen))) {
        runner_free(r);
        return NULL;
    }
    r->env = (prep_env){m, o->cfg, tmpl, o->n_ctx, o->max_prompt_tokens, n_blocks * bs, fmt};
    if (note[0]) fprintf(stderr, "picolm-server: %s\n", note);
    fprintf(stderr, "picolm-server: KV pool: %d blocks of %d positions, %.1f MB (%.1f full contexts of %d)\n", n_blocks, bs,
            (double)block * n_blocks / (1 << 20), (double)n_blocks * bs / o->n_ctx, o->n_ctx);
    return r;
}

void runner_free(runner *r) {
    if (!r) return;
    for (int i = 0; r->slots && i < r->n_slots; i++) {
        slot *s = &r->slots[i];
        picolm_seq_free(s->seq);
        free(s->logits);
        free(s->cached);
        free(s->cfg);
        free(s->prompt);
        picolm_sampler_free(s->smp);
    }
    picolm_batch_free(r->step);
    picolm_kv_free(r->pool);
    free(r->slots);
    free(r->who);
    free(r->toks);
    free(r->want);
    free(r->logits);
    free(r->lp);
    free(r);
}

/* How many leading tokens of toks[0..n) slot s's cache can keep (at least
   the last prompt token is evaluated again, so its logits exist). */
static int reusable(const slot *s, const int32_t *toks, int n) {
    int keep = 0;
    while (keep < s->n_cached && keep < n - 1 && s->cached[keep] == toks[keep]) keep++;
    return keep;
}

/* The free slot for a prompt: the one whose cache shares the longest
   beginning with it, else the least recently used (its cache, the oldest
   of the prefix cache, is the one to lose). */
static slot *pick_slot(runner *r, const int32_t *toks, int n) {
    slot *best = NULL;
    int best_keep = -1;
    for (int i = 0; i < r->n_slots; i++) {
        slot *s = &r->slots[i];
        if (s->j) continue;
        const int keep = reusable(s, toks, n);
        if (keep > best_keep || (keep == best_keep && s->used < best->used)) best = s, best_keep = keep;
    }
    return best;
}

/* Start s on toks[0..n): keep what its own blocks already hold, or share
   the whole blocks of another sequence that holds more of it (copy on
   write keeps both intact). */
static void seat(runner *r, slot *s, const int32_t *toks, int n) {
    const int bs = picolm_kv_block_size(r->pool);
    int keep = reusable(s, toks, n);
    slot *from = NULL;
    for (int i = 0; i < r->n_slots; i++) {
        slot *o = &r->slots[i];
        if (o == s || o->parked) continue;
        const int k = reusable(o, toks, n) / bs * bs;
        if (k > keep) keep = k, from = o;
    }
    if (from) {
        keep = picolm_seq_share(s->seq, from->seq, keep);
        memcpy(s->cached, toks, (size_t)keep * sizeof *toks);
    } else {
        keep = picolm_seq_truncate(s->seq, keep); /* a recurrent state: its last checkpoint */
    }
    s->n_fed = s->n_cached = keep;
    s->used = ++r->clock;
}

int runner_prepare(void *r, job *j, api_error *ae) { return prep_request(&((runner *)r)->env, j, ae); }

/* Give job j (prepared) a free slot. */
static void admit(runner *r, job *j) {
    prepared *p = prep_take(j);
    slot *s = pick_slot(r, p->toks, p->n);
    free(s->cfg);
    s->cfg = p->cfg;
    s->smp = p->smp;
    s->j = j;
    s->prompt = p->toks;
    s->n_prompt = p->n;
    free(p);
    seat(r, s, s->prompt, s->n_prompt);
    s->n_gen = 0;
    s->has_last = 0;
    s->parked = 0;
    s->since = r->clock;
    /* the request's max_tokens, else the server's -n (< 0: until the
       context is full, as OpenAI's default) */
    s->budget = s->cfg->max_tokens >= 0 ? s->cfg->max_tokens : 1 << 30;
    job_start(j, s->n_prompt, s->n_fed);
}

/* Preempt s: its blocks go back to the pool; what it must evaluate again
   to resume (its prompt, or every token its cache held) becomes its
   prompt.  Recomputing gives the same bits, so its reply is unchanged. */
static void park(slot *s) {
    if (s->n_fed == s->n_prompt && s->has_last) {
        int32_t *hist = malloc((size_t)(s->n_cached ? s->n_cached : 1) * sizeof *hist);
        if (hist) {
            memcpy(hist, s->cached, (size_t)s->n_cached * sizeof *hist);
            free(s->prompt);
            s->prompt = hist;
            s->n_prompt = s->n_cached;
        }
    }
    picolm_seq_truncate(s->seq, 0);
    s->n_cached = s->n_fed = 0;
    s->parked = 1;
}

/* Blocks for k more positions of s: else the least recently used idle
   cache goes, then the newest running sequence is preempted (possibly s).
   Returns 0, or -1 when s itself was preempted or cannot fit at all. */
static int make_room(runner *r, slot *s, int k) {
    while (picolm_seq_reserve(s->seq, k)) {
        slot *idle = NULL, *newest = NULL;
        int running = 0;
        for (int i = 0; i < r->n_slots; i++) {
            slot *o = &r->slots[i];
            if (!o->j && o->n_cached && (!idle || o->used < idle->used)) idle = o;
            if (o->j && !o->parked) {
                running++;
                if (!newest || o->since > newest->since) newest = o;
            }
        }
        if (idle) {
            picolm_seq_truncate(idle->seq, 0);
            idle->n_cached = 0;
        } else if (running > 1) {
            park(newest);
            r->preempted++;
            if (newest == s) return -1;
        } else {
            return -1; /* alone and still too big for the pool */
        }
    }
    return 0;
}

static void release(slot *s);

/* End s's reply: the counters first, so that /metrics already shows it
   when the client has the last byte. */
static void finish(http_server *h, slot *s, const char *reason) {
    http_note_done(h, s->j);
    job_finish(s->j, reason);
    release(s);
}

static void release(slot *s) {
    s->parked = 0;
    picolm_sampler_free(s->smp);
    s->smp = NULL;
    free(s->prompt);
    s->prompt = NULL;
    job_unref(s->j);
    s->j = NULL;
}

/* log-softmax of the logits, and the k most likely tokens (for logprobs). */
static void logprobs(runner *r, const float *x, int k, api_alt *top, int *n_top) {
    const int nv = r->n_vocab;
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
        top[i].text = picolm_token_piece(r->m, ids[i], &top[i].len);
        top[i].logprob = r->lp[ids[i]];
    }
}

/* Sample the next token from s's logits and hand it to the client.
   Returns NULL, or the finish reason when the reply is complete. */
static const char *emit(runner *r, slot *s) {
    job *j = s->j;
    const api_request *q = &j->req;
    char err[512];
    const int32_t room = picolm_seq_n_ctx(s->seq) - picolm_seq_n_past(s->seq) + 1, want = s->budget - s->n_gen;
    const int32_t left = want < room ? want : room;
    api_alt top[API_MAX_TOP_LOGPROBS];
    int n_top = 0;
    int32_t tok;
    if (q->logprobs) logprobs(r, s->logits, q->top_logprobs, top, &n_top);
    if (picolm_sampler_sample(s->smp, s->logits, left, &tok, err, sizeof err)) {
        fprintf(stderr, "picolm-server: %s: %s\n", j->id, err);
        return "length";
    }
    if (picolm_is_eog(r->m, tok)) {
        return "stop";
    }
    picolm_sampler_accept(s->smp, tok);
    s->n_gen++;
    size_t pl;
    const char *piece = picolm_token_piece(r->m, tok, &pl);
    if (job_token(j, piece, pl, q->logprobs ? r->lp[tok] : 0, top, n_top, mono_now())) {
        return "stop";
    }
    if (s->n_gen >= s->budget || picolm_seq_n_past(s->seq) >= picolm_seq_n_ctx(s->seq)) {
        return "length";
    }
    s->last = tok;
    s->has_last = 1;
    return NULL;
}

/* One step for every active slot, in one forward pass: up to a chunk of
   prompt tokens, from the oldest prompts still being read (chunked prefill:
   a long prompt does not stall the others), the last token of each one
   decoding; then a
   token for each slot whose logits are ready.  A slot that is done is
   released (and reported). */
static int step_all(runner *r, http_server *h) {
    char err[512];
    int n = 0, first[r->n_slots], count[r->n_slots], order[r->n_slots], n_order = 0;
    /* prompt tokens this step, oldest prompt first: the first reply starts
       as soon as its own prompt is read, and a step (so every decoding
       sequence's next token) never waits for more than one chunk */
    int budget = r->o.prefill_chunk;
    /* oldest first: when the pool runs short, the newest (not yet in
       this step) is the one preempted */
    for (int i = 0; i < r->n_slots; i++) {
        if (!r->slots[i].j || r->slots[i].parked) continue;
        int at = n_order++;
        while (at > 0 && r->slots[order[at - 1]].since > r->slots[i].since) order[at] = order[at - 1], at--;
        order[at] = i;
    }
    for (int o = 0; o < n_order; o++) {
        const int i = order[o];
        slot *s = &r->slots[i];
        first[i] = n, count[i] = 0;
        if (!s->j || s->parked) continue;
        if (job_backlogged(s->j)) continue; /* its client reads slowly: it waits */
        const int prefill = s->n_fed < s->n_prompt;
        const int k = !prefill ? 1 : s->n_prompt - s->n_fed < budget ? s->n_prompt - s->n_fed : budget;
        if (!k) continue; /* the step's prompt tokens went to older sequences */
        if (prefill) budget -= k;
        if (make_room(r, s, k)) {
            if (!s->parked) finish(h, s, "length"); /* alone, and the pool cannot hold it */
            continue;
        }
        const int32_t *src = prefill ? s->prompt + s->n_fed : &s->last;
        if (prefill) s->n_fed += k;
        for (int t = 0; t < k; t++) r->who[n] = s->seq, r->toks[n] = src[t], r->want[n++] = 0;
        /* logits: for the next token, unless a resumed sequence still has
           its last sampled token to feed */
        if (!prefill || (s->n_fed == s->n_prompt && !s->has_last)) r->want[n - 1] = 1;
        count[i] = k;
        s->used = r->clock;
    }
    if (!n) return 0;
    int failed = picolm_decode(r->step, r->who, r->toks, n, r->want, r->logits, err, sizeof err);
    if (failed) fprintf(stderr, "picolm-server: a step failed: %s\n", err);
    /* the model file shrank under the mapping: the step read zeros */
    const int lost = cli_model_fault();
    if (lost) failed = 1;
    for (int o = 0, row = 0; o < n_order; o++) {
        const int i = order[o];
        slot *s = &r->slots[i];
        if (!count[i] || !s->j || s->parked) continue;
        memcpy(s->cached + s->n_cached, r->toks + first[i], (size_t)count[i] * sizeof *r->toks);
        s->n_cached += count[i];
        const char *done = NULL;
        if (failed) {
            picolm_seq_truncate(s->seq, 0); /* what the cache holds is unknown */
            s->n_cached = 0;
            done = lost ? "error" : "length";
        } else if (r->want[first[i] + count[i] - 1]) {
            memcpy(s->logits, r->logits + (size_t)row++ * r->n_vocab, (size_t)r->n_vocab * sizeof(float));
            done = emit(r, s);
        }
        if (done) finish(h, s, done);
    }
    return n;
}

static void report(runner *r, http_server *h) {
    int running = 0;
    for (int i = 0; i < r->n_slots; i++) running += r->slots[i].j && !r->slots[i].parked;
    const int total = picolm_kv_n_blocks(r->pool);
    http_note_kv(h, total - picolm_kv_n_free(r->pool), total, running, r->preempted);
}

/* Resume preempted sequences, oldest first, while the pool (with idle
   caches evicted, least recently used first) has room for what they must
   evaluate again.  One that can never fit, with nothing else running,
   ends its reply. */
static void unpark(runner *r, http_server *h) {
    int promised = 0; /* blocks the sequences resumed here will take in the next step */
    for (;;) {
        slot *old = NULL, *idle = NULL;
        int running = 0;
        for (int i = 0; i < r->n_slots; i++) {
            slot *s = &r->slots[i];
            if (s->parked && (!old || s->since < old->since)) old = s;
            if (!s->j && s->n_cached && (!idle || s->used < idle->used)) idle = s;
            running += s->j && !s->parked;
        }
        if (!old) return;
        const int bs = picolm_kv_block_size(r->pool), need = (old->n_prompt + bs) / bs;
        const int n_free = picolm_kv_n_free(r->pool), all_free = n_free == picolm_kv_n_blocks(r->pool);
        if (need > n_free - promised) {
            if (idle) {
                picolm_seq_truncate(idle->seq, 0);
                idle->n_cached = 0;
                continue;
            }
            if (!running && all_free) finish(h, old, "length");
            if (running || !all_free) return;
            continue;
        }
        old->parked = 0;
        seat(r, old, old->prompt, old->n_prompt);
        promised += need;
    }
}

void runner_loop(runner *r, job_queue *q, http_server *h) {
    report(r, h);
    for (;;) {
        int active = 0, closed = 0, parked = 0;
        unpark(r, h);
        for (int i = 0; i < r->n_slots; i++) active += r->slots[i].j != NULL, parked += r->slots[i].parked;
        /* new requests join at the next step while a slot is free (and
           nothing preempted waits for blocks: it goes first) */
        while (active < r->n_slots && !parked) {
            job *j = jq_pop(q, active == 0);
            r->clock++;
            if (!j) {
                closed = active == 0;
                break;
            }
            /* a client that left while its request waited is not served */
            if (job_cancelled(j) || !j->prep) job_fail(j, &(api_error){.status = 499, .message = "cancelled"});
            else {
                admit(r, j);
                active++;
                report(r, h);
                continue;
            }
            job_unref(j);
        }
        if (closed) break;
        /* a client gone ends its reply where it is; the server stopping
           ends every reply with a last chunk that says so */
        const int stopping = jq_closing(q);
        for (int i = 0; i < r->n_slots; i++) {
            slot *s = &r->slots[i];
            if (s->j && (stopping || job_cancelled(s->j))) finish(h, s, stopping ? "shutdown" : "length");
        }
        /* nothing to step (every client behind on reading): wait a little */
        if (!step_all(r, h)) jq_wait(q, 0.005);
        report(r, h);
    }
}
