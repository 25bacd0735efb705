/* Multi-turn chat sessions: see chat.h. */
#include "chat.h"
#include "cli.h"
#include "tool.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---------------- sessions ---------------- */

static int is_role(const picolm_chat_msg *m, const char *role) { return !strcmp(m->role, role); }

static void add_stop(picolm_config *c, const char *s) {
    for (int i = 0; i < c->n_stops; i++)
        if (!strcmp(c->stops[i], s)) return;
    if (c->n_stops < PICOLM_MAX_STOPS && strlen(s) < sizeof c->stops[0]) snprintf(c->stops[c->n_stops++], sizeof c->stops[0], "%s", s);
}

static void add_end_id(chat_session *s, const char *text) {
    int32_t id = picolm_token_find(s->m, text, strlen(text));
    if (id < 0 || id == picolm_token_eos(s->m)) return;
    for (int i = 0; i < s->n_end_ids; i++)
        if (s->end_ids[i] == id) return;
    if (s->n_end_ids < (int)(sizeof s->end_ids / sizeof s->end_ids[0])) s->end_ids[s->n_end_ids++] = id;
}

/* What ends an assistant turn in each template: its end-of-turn marker, and
   the marker of the next turn in case the model skips the first (none
   listed: the vocabulary's own end-of-generation set only). */
static const char *const turn_end[][3] = {
    {"chatml", "<|im_end|>", "<|im_start|>"},
    {"llama2", "</s>", "[INST]"},
    {"llama2-sys", "</s>", "[INST]"},
    {"llama2-sys-bos", "</s>", "[INST]"},
    {"llama2-sys-strip", "</s>", "[INST]"},
    {"mistral-v7", "</s>", "[INST]"},
    {"phi3", "<|end|>", "<|user|>"},
    {"zephyr", "<|endoftext|>", "<|user|>"},
    {"gemma", "<end_of_turn>", "<start_of_turn>"},
    {"llama3", "<|eot_id|>", "<|start_header_id|>"},
    {"glmedge", "<|user|>", "<|system|>"},
};

/* The one place that decides where a reply ends, beside the vocabulary's
   own end-of-generation set (picolm_is_eog, which generate_decode always
   stops at).  The template's markers end it too: as a token when the
   vocabulary has them (end_ids: the next turn's header is no EOG token, and
   an older file may not mark its end-of-turn token as one), else as text
   (stop strings, for vocabularies where a marker is plain text). */
static void setup_turn_end(chat_session *s) {
    for (size_t k = 0; k < sizeof turn_end / sizeof turn_end[0]; k++)
        for (int i = 1; i < 3 && !strcmp(turn_end[k][0], s->tmpl); i++) {
            add_end_id(s, turn_end[k][i]);
            add_stop(s->cfg, turn_end[k][i]);
        }
}

static int push_msg(chat_session *s, const char *role, const char *text, size_t len) {
    if (s->n_msgs == s->cap_msgs) {
        int cap = s->cap_msgs ? 2 * s->cap_msgs : 8;
        picolm_chat_msg *m = realloc(s->msgs, (size_t)cap * sizeof *m);
        if (!m) return -1;
        s->msgs = m;
        s->cap_msgs = cap;
    }
    char *c = malloc(len + 1);
    if (!c) return -1;
    memcpy(c, text, len);
    c[len] = '\0';
    s->msgs[s->n_msgs++] = (picolm_chat_msg){.role = role, .content = c, .len = len};
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

int chat_session_open(chat_session *s, picolm_model *m, const picolm_config *cfg, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    s->m = m;
    char note[256];
    if (!(s->tmpl = picolm_chat_template(m, cfg->chat_template, note, sizeof note, err, errlen))) return -1;
    if (note[0]) fprintf(stderr, "picolm: chat: %s\n", note);
    else if (cfg->verbose) fprintf(stderr, "picolm: chat: template %s\n", s->tmpl);
    s->cfg = malloc(sizeof *s->cfg);
    if (!s->cfg) return tool_fail(err, errlen, "out of memory");
    *s->cfg = *cfg;
    setup_turn_end(s);
    if (start_conversation(s)) { tool_fail(err, errlen, "out of memory"); goto bad; }
    if (generate_check_memory(m, cfg, err, errlen)) goto bad;
    if (!(s->c = generate_context(m, cfg, generate_n_ctx(m, cfg), err, errlen))) goto bad;
    if (cli_sampler_new(&s->smp, m, cfg, err, errlen)) goto bad;
    s->hist = malloc((size_t)picolm_n_ctx(s->c) * sizeof *s->hist);
    if (!s->hist) { tool_fail(err, errlen, "out of memory"); goto bad; }
    return 0;
bad:
    chat_session_close(s);
    return -1;
}

void chat_session_close(chat_session *s) {
    picolm_sampler_free(s->smp);
    picolm_context_free(s->c);
    drop_msgs(s, 0, s->n_msgs);
    free(s->msgs);
    free(s->cfg);
    free(s->hist);
    memset(s, 0, sizeof *s);
}

void chat_session_reset(chat_session *s) {
    picolm_seq_truncate(picolm_context_seq(s->c), 0);
    s->n_hist = 0;
    s->turns = 0;
    if (s->smp) picolm_sampler_reset(s->smp);
    start_conversation(s); /* shrinks or keeps the list: cannot fail */
}

/* The whole conversation as tokens, ending with the assistant's header. */
static int conversation_tokens(chat_session *s, int32_t **toks, int *n, char *err, size_t errlen) {
    size_t len;
    char *text = picolm_chat_render(s->m, s->tmpl, s->msgs, s->n_msgs, 1, &len, err, errlen);
    if (!text) return -1;
    /* the template's markers are special tokens: always parse them */
    int rc = generate_tokenize(s->m, text, len, picolm_add_bos(s->m), 1, toks, n, err, errlen);
    free(text);
    return rc;
}

/* --truncate: drop the oldest exchanges (keeping the system prompt and the
   new message) until the conversation fits, then, if one message is still
   too long, keep BOS and the last tokens, as a plain prompt does. */
static int truncate_conversation(chat_session *s, int32_t **toks, int *n, char *err, size_t errlen) {
    const int n_ctx = picolm_n_ctx(s->c), first = s->n_msgs && is_role(&s->msgs[0], "system") ? 1 : 0;
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
        const int keep = n_ctx / 2 > 0 ? n_ctx / 2 : 1, bos = picolm_add_bos(s->m) ? 1 : 0;
        memmove(*toks + bos, *toks + *n - (keep - bos), (size_t)(keep - bos) * sizeof **toks);
        fprintf(stderr, "picolm: prompt truncated from %d to its last %d tokens (--truncate)\n", *n, keep);
        *n = keep;
    }
    return 0;
}

/* stdout and a copy of the reply: the reply becomes the assistant message */
typedef struct tee {
    FILE *out;
    FILE *copy;          /* a memory stream */
} tee;

static ssize_t tee_write(void *cookie, const char *buf, size_t n) {
    tee *t = cookie;
    const size_t c = fwrite(buf, 1, n, t->copy), w = fwrite(buf, 1, n, t->out);
    fflush(t->out);
    return w == n && c == n ? (ssize_t)n : -1;
}

int chat_session_turn(chat_session *s, const char *user, size_t len, FILE *out, char *err, size_t errlen) {
    const int n_msgs0 = s->n_msgs;
    if (push_msg(s, "user", user, len)) return tool_fail(err, errlen, "out of memory");
    int32_t *toks = NULL;
    int n = 0;
    if (conversation_tokens(s, &toks, &n, err, errlen)) goto fail;
    memset(&s->st, 0, sizeof s->st);
    const int n_ctx = picolm_n_ctx(s->c);
    if (n >= n_ctx) {
        if (s->cfg->truncate) {
            if (truncate_conversation(s, &toks, &n, err, errlen)) goto fail;
        } else {
            if (s->turns == 0)
                tool_fail(err, errlen, "the message is %d tokens with the template, which does not fit in the context of %d "
                                     "(use -c to enlarge it, or --truncate to drop the oldest tokens)", n, n_ctx);
            else
                tool_fail(err, errlen, "the conversation has filled the context: it would need %d of %d tokens "
                                     "(--truncate drops the oldest messages instead)", n + 1, n_ctx);
            free(toks);
            drop_msgs(s, n_msgs0, s->n_msgs - n_msgs0);
            return 1;
        }
    }
    /* the KV cache keeps the longest prefix it shares with the conversation */
    int keep = 0;
    while (keep < s->n_hist && keep < n && s->hist[keep] == toks[keep]) keep++;
    if (keep == n) keep = n - 1; /* the last token is evaluated again for its logits */
    keep = picolm_seq_truncate(picolm_context_seq(s->c), keep); /* a recurrent state: back to its last checkpoint */
    s->n_hist = keep;

    double t = tool_now();
    int rc;
    if (keep == 0 && s->cfg->cache_path[0]) rc = generate_prefill(s->cfg, s->c, toks, n, &s->st, err, errlen);
    else rc = picolm_eval(s->c, toks + keep, n - keep, err, errlen);
    if (rc) goto fail;
    for (int i = keep; i < n; i++) picolm_sampler_accept(s->smp, toks[i]);
    memcpy(s->hist + keep, toks + keep, (size_t)(n - keep) * sizeof *toks);
    s->n_hist = n;
    s->st.prefill_s = tool_now() - t;
    s->st.n_prompt = s->st.n_reused ? n : n - keep;
    free(toks);
    toks = NULL;

    char *reply = NULL;
    size_t reply_len = 0;
    tee tt = {.out = out, .copy = open_memstream(&reply, &reply_len)};
    FILE *f = tt.copy ? fopencookie(&tt, "w", (cookie_io_functions_t){.write = tee_write}) : NULL;
    if (!f) {
        if (tt.copy) fclose(tt.copy);
        free(reply);
        return tool_fail(err, errlen, "out of memory");
    }
    setvbuf(f, NULL, _IONBF, 0);
    out_stream o;
    out_init(&o, s->cfg, f);
    /* feed_last: the next turn continues after the reply's last token */
    gen_decode_args a = {.end_ids = s->end_ids, .n_end_ids = s->n_end_ids, .feed_last = 1,
                         .hist = s->hist, .n_hist = &s->n_hist, .hist_cap = n_ctx};
    t = tool_now();
    rc = generate_decode(s->m, s->cfg, s->c, s->smp, &o, &a, &s->st, &s->last_end, err, errlen);
    out_flush(&o);
    fclose(f);
    const int lost = fclose(tt.copy) != 0; /* the copy's memory ran out */
    s->st.decode_s = tool_now() - t;
    if (!rc && (lost || push_msg(s, "assistant", reply ? reply : "", reply_len))) rc = tool_fail(err, errlen, "out of memory");
    free(reply);
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
    char *text = NULL, *line = NULL;
    size_t cap = 0;
    FILE *b = open_memstream(&text, len);
    if (!b) return NULL;
    int got = 0; /* a line was read */
    ssize_t r;
    while ((r = getline(&line, &cap, in)) >= 0) {
        got = 1;
        while (r > 0 && (line[r - 1] == '\n' || line[r - 1] == '\r')) r--;
        const int more = r > 0 && line[r - 1] == '\\';
        fwrite(line, 1, (size_t)(r - more), b);
        if (!more) break;
        fputc('\n', b);
        fputs(". ", msg);
        fflush(msg);
    }
    free(line);
    const int bad = fclose(b) != 0;
    /* EOF: what a continued line gathered, else nothing */
    if (bad || !got || (r < 0 && !*len)) {
        free(text);
        return NULL;
    }
    return text;
}

int chat_session_interactive(chat_session *s, FILE *in, FILE *out, FILE *msg) {
    char err[1024];
    fprintf(msg, "picolm: chat (%s template, context %d). Type a message and Enter; a line ending in \\ continues.\n"
                 "        /reset starts over, /exit or Ctrl-D quits.\n",
            s->tmpl, picolm_n_ctx(s->c));
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
            fprintf(msg, "picolm: the context is full (%d tokens): the reply was cut. Type /reset to start a new conversation.\n", picolm_n_ctx(s->c));
        if (s->cfg->verbose)
            fprintf(msg, "picolm: turn %d: prefill %d tokens, %d generated, %d of %d context tokens used\n", s->turns, s->st.n_prompt,
                    s->st.n_gen, picolm_n_past(s->c), picolm_n_ctx(s->c));
    }
}
