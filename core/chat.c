/* Chat templates and multi-turn sessions: see chat.h. */
#include "chat.h"
#include "util.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static const char *const kind_names[CHAT_N_KINDS] = {"zephyr", "chatml", "llama2"};

const char *chat_kind_name(int kind) { return kind >= 0 && kind < CHAT_N_KINDS ? kind_names[kind] : "unknown"; }

int chat_kind_from_name(const char *name) {
    for (int k = 0; k < CHAT_N_KINDS; k++)
        if (!strcasecmp(name, kind_names[k])) return k;
    if (!strcasecmp(name, "tinyllama")) return CHAT_ZEPHYR;
    if (!strcasecmp(name, "llama-2") || !strcasecmp(name, "llama_2")) return CHAT_LLAMA2;
    return -1;
}

static int contains(const char *s, size_t n, const char *needle) {
    size_t l = strlen(needle);
    for (size_t i = 0; i + l <= n; i++)
        if (!memcmp(s + i, needle, l)) return 1;
    return 0;
}

int chat_kind_detect(const char *t, size_t n) {
    if (!t) return -1;
    /* most specific first: a ChatML template may mention other markers */
    if (contains(t, n, "<|im_start|>")) return CHAT_CHATML;
    if (contains(t, n, "<|user|>") && contains(t, n, "<|assistant|>")) return CHAT_ZEPHYR;
    if (contains(t, n, "[INST]") && contains(t, n, "[/INST]")) return CHAT_LLAMA2;
    return -1;
}

int chat_kind_resolve(const char *name, const gguf_file *f, int *kind, char *note, size_t notelen, char *err, size_t errlen) {
    if (note && notelen) note[0] = '\0';
    if (name && *name && strcasecmp(name, "auto")) {
        *kind = chat_kind_from_name(name);
        if (*kind < 0) return pl_fail(err, errlen, "unknown chat template '%s' (known: auto, zephyr, chatml, llama2)", name);
        return 0;
    }
    gguf_str s;
    if (!f || gguf_get_str(f, "tokenizer.chat_template", &s)) {
        *kind = CHAT_ZEPHYR;
        if (note && notelen) snprintf(note, notelen, "the model has no chat template; using zephyr (choose with --chat-template)");
        return 0;
    }
    *kind = chat_kind_detect(s.ptr, (size_t)s.len);
    if (*kind < 0)
        return pl_fail(err, errlen,
                    "the model's chat template is not one picolm recognises (zephyr, chatml, llama2); pick one with --chat-template NAME");
    return 0;
}

/* growable string */
typedef struct sbuf {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->n + n + 1) * 2;
        char *q = realloc(b->p, cap);
        if (!q) { b->oom = 1; return; }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}
static void sb_str(sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

char *chat_format_turn(int kind, const char *bos, const char *eos, const char *system, const char *user, size_t ulen, int first) {
    sbuf b = {0};
    const int sys = first && system && *system;
    sb_add(&b, "", 0);
    switch (kind) {
    case CHAT_CHATML:
        if (!first) sb_str(&b, "<|im_end|>\n");
        if (sys) { sb_str(&b, "<|im_start|>system\n"); sb_str(&b, system); sb_str(&b, "<|im_end|>\n"); }
        sb_str(&b, "<|im_start|>user\n");
        sb_add(&b, user, ulen);
        sb_str(&b, "<|im_end|>\n<|im_start|>assistant\n");
        break;
    case CHAT_LLAMA2:
        /* "<s>[INST] <<SYS>>\n{sys}\n<</SYS>>\n\n{user} [/INST] {reply}</s><s>[INST] ..." */
        if (!first) { sb_str(&b, eos); sb_str(&b, bos); }
        sb_str(&b, "[INST] ");
        if (sys) { sb_str(&b, "<<SYS>>\n"); sb_str(&b, system); sb_str(&b, "\n<</SYS>>\n\n"); }
        sb_add(&b, user, ulen);
        sb_str(&b, " [/INST]");
        break;
    default: /* zephyr / TinyLlama: "<|user|>\n{user}</s>\n<|assistant|>\n" */
        if (!first) { sb_str(&b, eos); sb_str(&b, "\n"); }
        if (sys) { sb_str(&b, "<|system|>\n"); sb_str(&b, system); sb_str(&b, eos); sb_str(&b, "\n"); }
        sb_str(&b, "<|user|>\n");
        sb_add(&b, user, ulen);
        sb_str(&b, eos);
        sb_str(&b, "\n<|assistant|>\n");
        break;
    }
    if (b.oom) { free(b.p); return NULL; }
    return b.p;
}

/* ---------------- sessions ---------------- */

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

static void token_text(const tokenizer *t, int32_t id, const char *dflt, char *out, size_t n) {
    size_t l = 0;
    const char *p = id >= 0 ? tokenizer_text(t, id, &l) : NULL;
    if (!p || !l || l >= n) snprintf(out, n, "%s", dflt);
    else { memcpy(out, p, l); out[l] = '\0'; }
}

int chat_open(chat_session *s, engine *e, const picolm_config *cfg, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    s->e = e;
    char note[256];
    if (chat_kind_resolve(cfg->chat_template, &e->model.gguf, &s->kind, note, sizeof note, err, errlen)) return -1;
    if (note[0]) fprintf(stderr, "picolm: chat: %s\n", note);
    else if (cfg->verbose) fprintf(stderr, "picolm: chat: template %s\n", chat_kind_name(s->kind));
    const int kv = generate_kv_type(cfg->kv_type);
    if (kv < 0) return pl_fail(err, errlen, "unknown kv_type '%s' (f16 or q8_0)", cfg->kv_type);
    s->cfg = malloc(sizeof *s->cfg);
    if (!s->cfg) return pl_fail(err, errlen, "out of memory");
    *s->cfg = *cfg;
    token_text(e->tok, tokenizer_bos(e->tok), "<s>", s->bos, sizeof s->bos);
    token_text(e->tok, tokenizer_eos(e->tok), "</s>", s->eos, sizeof s->eos);
    /* end of turn: as a token when the vocabulary has it, else as text */
    switch (s->kind) {
    case CHAT_CHATML:
        add_end_id(s, "<|im_end|>");
        add_end_id(s, "<|im_start|>");
        add_stop(s->cfg, "<|im_end|>");
        add_stop(s->cfg, "<|im_start|>");
        break;
    case CHAT_LLAMA2:
        add_stop(s->cfg, "[INST]");
        add_stop(s->cfg, s->eos);
        break;
    default:
        add_end_id(s, "<|user|>");
        add_stop(s->cfg, "<|user|>");
        add_stop(s->cfg, s->eos);
        break;
    }
    if (generate_check_memory(e, cfg, err, errlen)) goto bad;
    if (build_ctx(&s->c, &e->model, generate_n_ctx(e, cfg), cfg->batch, kv, e->pool, err, errlen)) goto bad;
    if (sampling_build(&s->smp, &e->reg, cfg, tokenizer_vocab(e->tok), err, errlen)) goto bad;
    s->hist = malloc((size_t)s->c.n_ctx * sizeof *s->hist);
    if (!s->hist) { pl_fail(err, errlen, "out of memory"); goto bad; }
    return 0;
bad:
    chat_close(s);
    return -1;
}

void chat_close(chat_session *s) {
    sampling_free(s->smp);
    free_ctx(&s->c);
    free(s->cfg);
    free(s->hist);
    memset(s, 0, sizeof *s);
}

void chat_reset(chat_session *s) {
    s->c.n_past = 0;
    s->n_hist = 0;
    s->turns = 0;
    if (s->smp) sampling_reset(s->smp);
}

int chat_turn(chat_session *s, const char *user, size_t len, FILE *out, char *err, size_t errlen) {
    const engine *e = s->e;
    const int first = s->turns == 0 || s->c.n_past == 0;
    char *text = chat_format_turn(s->kind, s->bos, s->eos, s->cfg->system_prompt, user, len, first);
    if (!text) return pl_fail(err, errlen, "out of memory");
    int32_t *toks = NULL;
    int n = 0;
    /* the template's markers are special tokens: always parse them */
    int rc = generate_tokenize(e, text, strlen(text), first && tokenizer_add_bos(e->tok), 1, &toks, &n, err, errlen);
    free(text);
    if (rc) return -1;
    memset(&s->st, 0, sizeof s->st);
    const int room = s->c.n_ctx - s->c.n_past;
    if (n >= room) {
        free(toks);
        if (first)
            pl_fail(err, errlen, "the message is %d tokens with the template, which does not fit in the context of %d (use -c to enlarge it)", n,
                 s->c.n_ctx);
        else
            pl_fail(err, errlen, "the conversation has filled the context: %d of %d tokens used, and this message needs %d more",
                 s->c.n_past, s->c.n_ctx, n + 1);
        return 1;
    }
    double t = pl_now();
    if (first && s->cfg->cache_path[0]) rc = generate_prefill(e, s->cfg, &s->c, toks, n, &s->st, err, errlen);
    else rc = generate_prefill_plain(&s->c, toks, n, err, errlen);
    if (rc) { free(toks); return -1; }
    for (int i = 0; i < n; i++) sampling_accept(s->smp, toks[i]);
    memcpy(s->hist + s->n_hist, toks, (size_t)n * sizeof *toks);
    s->n_hist += n;
    free(toks);
    s->st.prefill_s = pl_now() - t;
    s->st.n_prompt = n;

    out_stream o;
    out_init(&o, s->cfg, out);
    /* feed_last: the next turn continues after the reply's last token */
    gen_decode_args a = {.end_ids = s->end_ids, .n_end_ids = s->n_end_ids, .feed_last = 1,
                         .hist = s->hist, .n_hist = &s->n_hist, .hist_cap = s->c.n_ctx};
    t = pl_now();
    rc = generate_decode(e, s->cfg, &s->c, s->smp, &o, &a, &s->st, &s->last_end, err, errlen);
    out_flush(&o);
    s->st.decode_s = pl_now() - t;
    if (rc) return -1;
    s->turns++;
    return 0;
}

/* One message from in: a line, continued while it ends in '\'.  NULL at EOF. */
static char *read_message(FILE *in, FILE *msg, size_t *len) {
    sbuf b = {0};
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
            sb_add(&b, line, (size_t)r - 1);
            sb_add(&b, "\n", 1);
            fputs(". ", msg);
            fflush(msg);
            continue;
        }
        sb_add(&b, line, (size_t)r);
        free(line);
        if (b.oom) { free(b.p); return NULL; }
        if (!b.p) sb_add(&b, "", 0);
        *len = b.n;
        return b.p;
    }
}

int chat_interactive(chat_session *s, FILE *in, FILE *out, FILE *msg) {
    char err[1024];
    fprintf(msg, "picolm: chat (%s template, context %d). Type a message and Enter; a line ending in \\ continues.\n"
                 "        /reset starts over, /exit or Ctrl-D quits.\n",
            chat_kind_name(s->kind), s->c.n_ctx);
    for (;;) {
        fputs("\n> ", msg);
        fflush(msg);
        size_t len;
        char *m = read_message(in, msg, &len);
        if (!m) { fputc('\n', msg); return 0; }
        if (!strcmp(m, "/exit") || !strcmp(m, "/quit")) { free(m); return 0; }
        if (!strcmp(m, "/reset")) {
            chat_reset(s);
            fprintf(msg, "picolm: conversation cleared\n");
            free(m);
            continue;
        }
        if (len == 0) { free(m); continue; }
        int rc = chat_turn(s, m, len, out, err, sizeof err);
        free(m);
        if (rc < 0) { fprintf(msg, "picolm: %s\n", err); return -1; }
        if (rc == 1) {
            fprintf(msg, "picolm: %s. Type /reset to start a new conversation (or restart with a larger -c).\n", err);
            continue;
        }
        fputc('\n', out);
        fflush(out);
        if (s->last_end == GEN_END_CTX)
            fprintf(msg, "picolm: the context is full (%d tokens): the reply was cut. Type /reset to start a new conversation.\n", s->c.n_ctx);
        if (s->cfg->verbose)
            fprintf(msg, "picolm: turn %d: prefill %d tokens, %d generated, %d of %d context tokens used\n", s->turns, s->st.n_prompt,
                    s->st.n_gen, s->c.n_past, s->c.n_ctx);
    }
}
