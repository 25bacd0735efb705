/* Multi-turn chat sessions: see chat.h. */
#include "chat.h"
#include "cli.h"
#include "util.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---------------- sessions ---------------- */

static int is_role(const chat_msg *m, const char *role) { return !strcmp(m->role, role); }

static void add_stop(picolm_config *c, const char *s) {
    for (int i = 0; i < c->n_stops; i++)
        if (!strcmp(c->stops[i], s)) return;
    if (c->n_stops < PICOLM_MAX_STOPS && strlen(s) < sizeof c->stops[0]) snprintf(c->stops[c->n_stops++], sizeof c->stops[0], "%s", s);
}

static void add_end_id(chat_session *s, const char *text) {
    int32_t id = tokenizer_find(s->e->tok, text, strlen(text));
    if (id < 0 || id == tokenizer_eos(s->e->tok)) return;
    for (int i = 0; i < s->n_end_ids; i++)
        if (s->end_ids[i] == id) return;
    if (s->n_end_ids < (int)(sizeof s->end_ids / sizeof s->end_ids[0])) s->end_ids[s->n_end_ids++] = id;
}

/* What ends an assistant turn in each template: its end-of-turn marker, and
   the marker of the next turn in case the model skips the first. */
static const char *const turn_end[CHAT_N_KINDS][2] = {
    [CHAT_CHATML] = {"<|im_end|>", "<|im_start|>"},
    [CHAT_LLAMA2] = {"</s>", "[INST]"},
    [CHAT_LLAMA2_SYS] = {"</s>", "[INST]"},
    [CHAT_LLAMA2_SYS_BOS] = {"</s>", "[INST]"},
    [CHAT_LLAMA2_SYS_STRIP] = {"</s>", "[INST]"},
    [CHAT_MISTRAL_V7] = {"</s>", "[INST]"},
    [CHAT_PHI3] = {"<|end|>", "<|user|>"},
    [CHAT_ZEPHYR] = {"<|endoftext|>", "<|user|>"},
    [CHAT_GEMMA] = {"<end_of_turn>", "<start_of_turn>"},
    [CHAT_LLAMA3] = {"<|eot_id|>", "<|start_header_id|>"},
    [CHAT_GLMEDGE] = {"<|user|>", "<|system|>"},
};

/* The one place that decides where a reply ends, beside the vocabulary's
   own end-of-generation set (tokenizer_is_eog, which generate_decode always
   stops at).  The template's markers end it too: as a token when the
   vocabulary has them (end_ids: the next turn's header is no EOG token, and
   an older file may not mark its end-of-turn token as one), else as text
   (stop strings, for vocabularies where a marker is plain text). */
static void setup_turn_end(chat_session *s) {
    for (int i = 0; i < 2; i++) {
        add_end_id(s, turn_end[s->kind][i]);
        add_stop(s->cfg, turn_end[s->kind][i]);
    }
}

static int push_msg(chat_session *s, const char *role, const char *text, size_t len) {
    if (s->n_msgs == s->cap_msgs) {
        int cap = s->cap_msgs ? 2 * s->cap_msgs : 8;
        chat_msg *m = realloc(s->msgs, (size_t)cap * sizeof *m);
        if (!m) return -1;
        s->msgs = m;
        s->cap_msgs = cap;
    }
    char *c = malloc(len + 1);
    if (!c) return -1;
    memcpy(c, text, len);
    c[len] = '\0';
    s->msgs[s->n_msgs++] = (chat_msg){.role = role, .content = c, .len = len};
    return 0;
}

static void drop_msgs(chat_session *s, int from, int count) {
    if (count <= 0) return; /* msgs may still be NULL: no pointer arithmetic on it */
    for (int i = from; i < from + count; i++) free((char *)s->msgs[i].content);
    memmove(s->msgs + from, s->msgs + from + count, (size_t)(s->n_msgs - from - count) * sizeof *s->msgs);
    s->n_msgs -= count;
}

/* The conversation starts with the system prompt, if any. */
static int start_conversation(chat_session *s) {
    drop_msgs(s, 0, s->n_msgs);
    const char *sys = s->cfg->system_prompt;
    return *sys ? push_msg(s, "system", sys, strlen(sys)) : 0;
}

int chat_session_open(chat_session *s, engine *e, const picolm_config *cfg, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    s->e = e;
    char note[256];
    if (chat_kind_resolve(cfg->chat_template, &e->model.gguf, &s->kind, note, sizeof note, err, errlen)) return -1;
    if (note[0]) fprintf(stderr, "picolm: chat: %s\n", note);
    else if (cfg->verbose) fprintf(stderr, "picolm: chat: template %s\n", chat_kind_name(s->kind));
    const int kv = cfg->kv_type;
    s->cfg = malloc(sizeof *s->cfg);
    if (!s->cfg) return pl_fail(err, errlen, "out of memory");
    *s->cfg = *cfg;
    setup_turn_end(s);
    if (start_conversation(s)) { pl_fail(err, errlen, "out of memory"); goto bad; }
    if (generate_check_memory(e, cfg, err, errlen)) goto bad;
    if (build_ctx(&s->c, &e->model, generate_n_ctx(e, cfg), cfg->batch, kv, e->pool, err, errlen)) goto bad;
    if (cli_sampling_build(&s->smp, &e->reg, cfg, tokenizer_vocab(e->tok), err, errlen)) goto bad;
    s->hist = malloc((size_t)s->c.seq.n_ctx * sizeof *s->hist);
    if (!s->hist) { pl_fail(err, errlen, "out of memory"); goto bad; }
    return 0;
bad:
    chat_session_close(s);
    return -1;
}

void chat_session_close(chat_session *s) {
    sampling_free(s->smp);
    free_ctx(&s->c);
    drop_msgs(s, 0, s->n_msgs);
    free(s->msgs);
    free(s->cfg);
    free(s->hist);
    memset(s, 0, sizeof *s);
}

void chat_session_reset(chat_session *s) {
    kv_seq_truncate(&s->c.seq, 0);
    s->n_hist = 0;
    s->turns = 0;
    if (s->smp) sampling_reset(s->smp);
    start_conversation(s); /* shrinks or keeps the list: cannot fail */
}

/* The whole conversation as tokens, ending with the assistant's header. */
static int conversation_tokens(chat_session *s, int32_t **toks, int *n, char *err, size_t errlen) {
    size_t len;
    char *text = chat_render(s->kind, s->msgs, s->n_msgs, 1, &len);
    if (!text) return pl_fail(err, errlen, "out of memory");
    /* the template's markers are special tokens: always parse them */
    int rc = generate_tokenize(s->e, text, len, tokenizer_add_bos(s->e->tok), 1, toks, n, err, errlen);
    free(text);
    return rc;
}

/* --truncate: drop the oldest exchanges (keeping the system prompt and the
   new message) until the conversation fits, then, if one message is still
   too long, keep BOS and the last tokens, as a plain prompt does. */
static int truncate_conversation(chat_session *s, int32_t **toks, int *n, char *err, size_t errlen) {
    const int n_ctx = s->c.seq.n_ctx, first = s->n_msgs && is_role(&s->msgs[0], "system") ? 1 : 0;
    int dropped = 0;
    while (*n >= n_ctx && s->n_msgs - first > 1) {
        /* a user message goes with the reply that follows it */
        int k = s->n_msgs - first > 2 && !is_role(&s->msgs[first + 1], "user") ? 2 : 1;
        drop_msgs(s, first, k);
        dropped += k;
        free(*toks);
        *toks = NULL;
        if (conversation_tokens(s, toks, n, err, errlen)) return -1;
    }
    if (dropped) fprintf(stderr, "picolm: chat: dropped the %d oldest messages to fit the context of %d (--truncate)\n", dropped, n_ctx);
    if (*n >= n_ctx) {
        const int keep = n_ctx / 2 > 0 ? n_ctx / 2 : 1, bos = tokenizer_add_bos(s->e->tok) ? 1 : 0;
        memmove(*toks + bos, *toks + *n - (keep - bos), (size_t)(keep - bos) * sizeof **toks);
        fprintf(stderr, "picolm: prompt truncated from %d to its last %d tokens (--truncate)\n", *n, keep);
        *n = keep;
    }
    return 0;
}

/* stdout and a copy of the reply: the reply becomes the assistant message */
typedef struct tee {
    FILE *out;
    pl_sbuf copy;
} tee;

static ssize_t tee_write(void *cookie, const char *buf, size_t n) {
    tee *t = cookie;
    pl_sbuf_add(&t->copy, buf, n);
    size_t w = fwrite(buf, 1, n, t->out);
    fflush(t->out);
    return w == n && !t->copy.oom ? (ssize_t)n : -1;
}

int chat_session_turn(chat_session *s, const char *user, size_t len, FILE *out, char *err, size_t errlen) {
    const engine *e = s->e;
    const int n_msgs0 = s->n_msgs;
    if (push_msg(s, "user", user, len)) return pl_fail(err, errlen, "out of memory");
    int32_t *toks = NULL;
    int n = 0;
    if (conversation_tokens(s, &toks, &n, err, errlen)) goto fail;
    memset(&s->st, 0, sizeof s->st);
    if (n >= s->c.seq.n_ctx) {
        if (s->cfg->truncate) {
            if (truncate_conversation(s, &toks, &n, err, errlen)) goto fail;
        } else {
            if (s->turns == 0)
                pl_fail(err, errlen, "the message is %d tokens with the template, which does not fit in the context of %d "
                                     "(use -c to enlarge it, or --truncate to drop the oldest tokens)", n, s->c.seq.n_ctx);
            else
                pl_fail(err, errlen, "the conversation has filled the context: it would need %d of %d tokens "
                                     "(--truncate drops the oldest messages instead)", n + 1, s->c.seq.n_ctx);
            free(toks);
            drop_msgs(s, n_msgs0, s->n_msgs - n_msgs0);
            return 1;
        }
    }
    /* the KV cache keeps the longest prefix it shares with the conversation */
    int keep = 0;
    while (keep < s->n_hist && keep < n && s->hist[keep] == toks[keep]) keep++;
    if (keep == n) keep = n - 1; /* the last token is evaluated again for its logits */
    keep = kv_seq_truncate(&s->c.seq, keep); /* a recurrent state: back to its last checkpoint */
    s->n_hist = keep;

    double t = pl_now();
    int rc;
    if (keep == 0 && s->cfg->cache_path[0]) rc = generate_prefill(e, s->cfg, &s->c, toks, n, &s->st, err, errlen);
    else rc = ctx_prefill(&s->c, toks + keep, n - keep, err, errlen);
    if (rc) goto fail;
    for (int i = keep; i < n; i++) sampling_accept(s->smp, toks[i]);
    memcpy(s->hist + keep, toks + keep, (size_t)(n - keep) * sizeof *toks);
    s->n_hist = n;
    s->st.prefill_s = pl_now() - t;
    s->st.n_prompt = s->st.n_reused ? n : n - keep;
    free(toks);
    toks = NULL;

    tee tt = {.out = out};
    FILE *f = fopencookie(&tt, "w", (cookie_io_functions_t){.write = tee_write});
    if (!f) return pl_fail(err, errlen, "out of memory");
    setvbuf(f, NULL, _IONBF, 0);
    out_stream o;
    out_init(&o, s->cfg, f);
    /* feed_last: the next turn continues after the reply's last token */
    gen_decode_args a = {.end_ids = s->end_ids, .n_end_ids = s->n_end_ids, .feed_last = 1,
                         .hist = s->hist, .n_hist = &s->n_hist, .hist_cap = s->c.seq.n_ctx};
    t = pl_now();
    rc = generate_decode(e, s->cfg, &s->c, s->smp, &o, &a, &s->st, &s->last_end, err, errlen);
    out_flush(&o);
    fclose(f);
    s->st.decode_s = pl_now() - t;
    if (!rc && push_msg(s, "assistant", tt.copy.p ? tt.copy.p : "", tt.copy.n)) rc = pl_fail(err, errlen, "out of memory");
    free(tt.copy.p);
    if (rc) return -1;
    s->turns++;
    return 0;
fail:
    free(toks);
    drop_msgs(s, s->n_msgs - 1, 1); /* the new message (--truncate may have dropped older ones) */
    return -1;
}

/* One message from in: a line, continued while it ends in '\'.  NULL at EOF. */
static char *read_message(FILE *in, FILE *msg, size_t *len) {
    pl_sbuf b = {0};
    char *line = NULL;
    size_t cap = 0;
    for (;;) {
        ssize_t r = getline(&line, &cap, in);
        if (r < 0) {
            free(line);
            if (b.p && b.n) { *len = b.n; return b.p; }
            free(b.p);
            return NULL;
        }
        while (r > 0 && (line[r - 1] == '\n' || line[r - 1] == '\r')) r--;
        if (r > 0 && line[r - 1] == '\\') {
            pl_sbuf_add(&b, line, (size_t)r - 1);
            pl_sbuf_add(&b, "\n", 1);
            fputs(". ", msg);
            fflush(msg);
            continue;
        }
        pl_sbuf_add(&b, line, (size_t)r);
        free(line);
        if (b.oom) { free(b.p); return NULL; }
        if (!b.p) pl_sbuf_add(&b, "", 0);
        *len = b.n;
        return b.p;
    }
}

int chat_session_interactive(chat_session *s, FILE *in, FILE *out, FILE *msg) {
    char err[1024];
    fprintf(msg, "picolm: chat (%s template, context %d). Type a message and Enter; a line ending in \\ continues.\n"
                 "        /reset starts over, /exit or Ctrl-D quits.\n",
            chat_kind_name(s->kind), s->c.seq.n_ctx);
    for (;;) {
        fputs("\n> ", msg);
        fflush(msg);
        size_t len;
        char *m = read_message(in, msg, &len);
        if (!m) { fputc('\n', msg); return 0; }
        if (!strcmp(m, "/exit") || !strcmp(m, "/quit")) { free(m); return 0; }
        if (!strcmp(m, "/reset")) {
            chat_session_reset(s);
            fprintf(msg, "picolm: conversation cleared\n");
            free(m);
            continue;
        }
        if (len == 0) { free(m); continue; }
        int rc = chat_session_turn(s, m, len, out, err, sizeof err);
        free(m);
        if (rc < 0) { fprintf(msg, "picolm: %s\n", err); return -1; }
        if (rc == 1) {
            fprintf(msg, "picolm: %s. Type /reset to start a new conversation (or restart with a larger -c).\n", err);
            continue;
        }
        fputc('\n', out);
        fflush(out);
        if (s->last_end == GEN_END_CTX)
            fprintf(msg, "picolm: the context is full (%d tokens): the reply was cut. Type /reset to start a new conversation.\n", s->c.seq.n_ctx);
        if (s->cfg->verbose)
            fprintf(msg, "picolm: turn %d: prefill %d tokens, %d generated, %d of %d context tokens used\n", s->turns, s->st.n_prompt,
                    s->st.n_gen, s->c.seq.n_past, s->c.seq.n_ctx);
    }
}
