/* The json logit processor (plugins/json.c) against an independent strict
   JSON validator (a recursive-descent parser written here), through the
   plugin ABI: byte-level automaton checks, random generation under token
   budgets, and speed on a 32000-token vocabulary. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "plugins.h"
#include "tvocab.h"

/* ======================= reference validator (RFC 8259) ================== */

typedef struct jp {
    const unsigned char *s;
    size_t n, i;
    int depth, max_depth;
} jp;

static int peek(const jp *p) { return p->i < p->n ? p->s[p->i] : -1; }
static void skip_ws(jp *p) {
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r')) p->i++;
}
static int eat(jp *p, int c) {
    if (peek(p) != c) return 0;
    p->i++;
    return 1;
}
static int value(jp *p);

/* one UTF-8 encoded character starting at p->i (>= 0x80), strictly */
static int utf8_char(jp *p) {
    const unsigned char *s = p->s + p->i;
    size_t left = p->n - p->i;
    uint32_t cp;
    int len;
    if (s[0] >= 0xC0 && s[0] < 0xE0) { len = 2; cp = s[0] & 0x1F; }
    else if (s[0] >= 0xE0 && s[0] < 0xF0) { len = 3; cp = s[0] & 0x0F; }
    else if (s[0] >= 0xF0 && s[0] < 0xF8) { len = 4; cp = s[0] & 0x07; }
    else return 0;
    if (left < (size_t)len) return 0;
    for (int k = 1; k < len; k++) {
        if ((s[k] & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (s[k] & 0x3F);
    }
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    p->i += (size_t)len;
    return 1;
}

static int is_hexd(int c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

static int string(jp *p) {
    if (!eat(p, '"')) return 0;
    for (;;) {
        int c = peek(p);
        if (c < 0) return 0;
        if (c == '"') { p->i++; return 1; }
        if (c < 0x20) return 0;
        if (c == '\\') {
            p->i++;
            c = peek(p);
            if (c == 'u') {
                p->i++;
                for (int k = 0; k < 4; k++)
                    if (!is_hexd(peek(p))) return 0;
                    else p->i++;
            } else if (c >= 0 && strchr("\"\\/bfnrt", c) && c) {
                p->i++;
            } else {
                return 0;
            }
        } else if (c >= 0x80) {
            if (!utf8_char(p)) return 0;
        } else {
            p->i++;
        }
    }
}

static int digits(jp *p) {
    size_t st = p->i;
    while (peek(p) >= '0' && peek(p) <= '9') p->i++;
    return p->i > st;
}

static int number(jp *p) {
    eat(p, '-');
    if (eat(p, '0')) {
    } else if (peek(p) >= '1' && peek(p) <= '9') {
        digits(p);
    } else {
        return 0;
    }
    if (eat(p, '.') && !digits(p)) return 0;
    if (peek(p) == 'e' || peek(p) == 'E') {
        p->i++;
        if (!eat(p, '+')) eat(p, '-');
        if (!digits(p)) return 0;
    }
    return 1;
}

static int word(jp *p, const char *w) {
    size_t l = strlen(w);
    if (p->n - p->i < l || memcmp(p->s + p->i, w, l)) return 0;
    p->i += l;
    return 1;
}

static int container(jp *p, int open, int close, int object) {
    if (!eat(p, open)) return 0;
    if (++p->depth > p->max_depth) p->max_depth = p->depth;
    skip_ws(p);
    if (eat(p, close)) { p->depth--; return 1; }
    for (;;) {
        skip_ws(p);
        if (object) {
            if (!string(p)) return 0;
            skip_ws(p);
            if (!eat(p, ':')) return 0;
            skip_ws(p);
        }
        if (!value(p)) return 0;
        skip_ws(p);
        if (eat(p, close)) { p->depth--; return 1; }
        if (!eat(p, ',')) return 0;
    }
}

static int value(jp *p) {
    switch (peek(p)) {
    case '{': return container(p, '{', '}', 1);
    case '[': return container(p, '[', ']', 0);
    case '"': return string(p);
    case 't': return word(p, "true");
    case 'f': return word(p, "false");
    case 'n': return word(p, "null");
    default: return number(p);
    }
}

/* Strict RFC 8259 text: ws value ws, any top-level value. */
static int json_valid(const char *s, size_t n, int *max_depth) {
    jp p = {(const unsigned char *)s, n, 0, 0, 0};
    skip_ws(&p);
    if (!value(&p)) return 0;
    skip_ws(&p);
    if (max_depth) *max_depth = p.max_depth;
    return p.i == n;
}

/* What the plugin should accept in full: valid, top-level object/array,
   nothing after the closing bracket, nesting <= 64. */
static int plugin_should_accept(const char *s, size_t n) {
    int depth = 0;
    if (!json_valid(s, n, &depth) || depth > 64) return 0;
    size_t i = 0;
    while (i < n && strchr(" \t\n\r", s[i]) && s[i]) i++;
    if (i == n || (s[i] != '{' && s[i] != '[')) return 0;
    if (s[n - 1] != '}' && s[n - 1] != ']') return 0;
    /* at most 16 whitespace bytes in a row outside strings */
    int in_str = 0, run = 0;
    for (i = 0; i < n; i++) {
        if (in_str) {
            if (s[i] == '\\') i++;
            else if (s[i] == '"') in_str = 0;
            continue;
        }
        if (s[i] == '"') in_str = 1;
        run = strchr(" \t\n\r", s[i]) && s[i] ? run + 1 : 0;
        if (run > 16) return 0;
    }
    return 1;
}

/* ======================= the plugin through its ABI ====================== */

static pl_registry reg;
static const picolm_sampler_vtable *vt;

static void *create(const tvocab *t, char *err, size_t errlen) {
    picolm_sampler_init in = {sizeof in, &reg.host, &t->v, NULL, 0, 0};
    void *st = NULL;
    err[0] = 0;
    if (vt->create(&in, &st, err, errlen)) return NULL;
    return st;
}

static picolm_token_data *cand_buf;

/* Run apply over every token (logit 0); return the allowed count and mark. */
static int allowed(void *st, const tvocab *t, int32_t n_remaining, uint8_t *ok, char *err, size_t errlen) {
    for (int i = 0; i < t->v.n_vocab; i++) cand_buf[i] = (picolm_token_data){i, 0.0f, 0};
    picolm_candidates c = {cand_buf, (size_t)t->v.n_vocab, 0, 0, -1, n_remaining};
    memset(ok, 0, (size_t)t->v.n_vocab);
    if (vt->apply(st, &c, err, errlen)) return -1;
    for (size_t i = 0; i < c.size; i++) ok[cand_buf[i].id] = 1;
    return (int)c.size;
}

/* Does the plugin let this exact byte string through, then allow EOS? */
static int plugin_accepts(void *st, const tvocab *bv, const char *s, size_t n) {
    static uint8_t ok[300];
    char err[256];
    vt->reset(st);
    for (size_t i = 0; i < n; i++) {
        if (allowed(st, bv, -1, ok, err, sizeof err) < 0) return 0;
        const int tok = 3 + (unsigned char)s[i];
        if (!ok[tok]) return 0;
        vt->accept(st, tok);
    }
    if (allowed(st, bv, -1, ok, err, sizeof err) < 0) return 0;
    return ok[2];
}

static const char *VALID[] = {
    "{}", "[]", " \n\t{}", "{\"a\":1}", "[1,2,3]", "[-0,0.5e+10,1E-3,123,-12.75e3,0e0]",
    "[true,false,null]", "{\"a\":[1,2,{\"b\":null}],\"c\":\"x\\u00e9\\n\\\"\\\\\\/\\b\\f\\r\\t\"}",
    "{ \"k\" : { \"x\" : [ ] , \"y\" : { } } }", "[\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"]",
    "[[[[[[[[[[]]]]]]]]]]", "{\"\":\"\"}", "[\"\\uD83D\\uDE00\"]", "[1\n,\n2]", "{\"a\":{\"a\":{\"a\":{}}}}",
    "[0.0001,1e99,-0,9007199254740993]", "[\"\x7f\"]", "\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n[]",
    "[\"                                        \"]",
};

static const char *INVALID[] = {
    "{::,}", "{ [ } ]", "[01]", "[1.]", "[.5]", "[+1]", "{\"a\"}", "{\"a\":}", "[1,]", "{,}", "[\"\\x\"]",
    "[\"\\u12g4\"]", "[\"tab\there\"]", "[tru]", "[True]", "\"str\"", "123", "[1 2]", "{\"a\":1 \"b\":2}",
    "[]]", "[] []", "{} ", "[\"\xc0\x80\"]", "[\"\xed\xa0\x80\"]", "[\"\xf4\x90\x80\x80\"]", "[\"\xe2\x82\"]",
    "[NaN]", "[1e]", "[-]", "[--1]", "{\"a\":1,}", "{1:2}", "[nul]", "[\"abc", "{\"a\":[}", "[1e+]", "[0x10]",
    "", "   ", "[\"\xff\"]", "{'a':1}", "[1,,2]", "[null,]", "[-01]", "[1.e5]", "[\"\\\"]",
    "\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n[]", "[1,                 2]", /* > 16 blanks in a row */
};

/* printable copy for PASS/FAIL lines */
static const char *esc(const char *s) {
    static char buf[4][256];
    static int k;
    char *o = buf[k++ & 3], *e = o + 250;
    char *w = o;
    for (; *s && w < e; s++) {
        unsigned char c = (unsigned char)*s;
        if (c >= 0x20 && c < 0x7f) *w++ = (char)c;
        else w += snprintf(w, 8, "\\x%02x", c);
    }
    *w = 0;
    return o;
}

static void test_automaton(void) {
    tvocab bv;
    byte_vocab(&bv, 300);
    char err[256];
    void *st = create(&bv, err, sizeof err);
    CHECK(st != NULL, "json create on a byte vocabulary (%s)", err);
    if (!st) return;
    /* the validator itself first */
    int vbad = 0;
    for (size_t i = 0; i < sizeof VALID / sizeof *VALID; i++) vbad += !plugin_should_accept(VALID[i], strlen(VALID[i]));
    for (size_t i = 0; i < sizeof INVALID / sizeof *INVALID; i++) vbad += plugin_should_accept(INVALID[i], strlen(INVALID[i]));
    CHECK(!vbad, "reference validator agrees with the hand-made lists (%d disagreements)", vbad);
    CHECK(json_valid("\"str\"", 5, NULL) && json_valid("123 ", 4, NULL) && !json_valid("01", 2, NULL), "validator: scalar top-level values are valid JSON");
    for (size_t i = 0; i < sizeof VALID / sizeof *VALID; i++)
        CHECK(plugin_accepts(st, &bv, VALID[i], strlen(VALID[i])), "accepted: %s", esc(VALID[i]));
    for (size_t i = 0; i < sizeof INVALID / sizeof *INVALID; i++)
        CHECK(!plugin_accepts(st, &bv, INVALID[i], strlen(INVALID[i])), "rejected: %s", esc(INVALID[i]));

    /* nesting cap */
    char deep[200];
    memset(deep, '[', 64);
    memset(deep + 64, ']', 64);
    CHECK(plugin_accepts(st, &bv, deep, 128), "64 nested arrays accepted");
    memset(deep, '[', 65);
    memset(deep + 65, ']', 65);
    CHECK(!plugin_accepts(st, &bv, deep, 130), "65 nested arrays rejected (depth cap)");

    /* random mutations: the plugin agrees with the validator */
    uint64_t r = 12345;
#define RND() (r ^= r << 13, r ^= r >> 7, r ^= r << 17, r)
    static const char alphabet[] = "{}[]\":,0123456789-+.eEtrufalsn \\u\x01\xc3\xa9\xed\xa0";
    int disagree = 0, tried = 0, valid_seen = 0;
    char buf[256];
    for (int it = 0; it < 20000; it++) {
        const char *src = VALID[RND() % (sizeof VALID / sizeof *VALID)];
        size_t n = strlen(src);
        memcpy(buf, src, n);
        int edits = 1 + (int)(RND() % 3);
        for (int e = 0; e < edits; e++) {
            size_t pos = n ? RND() % n : 0;
            char ch = alphabet[RND() % (sizeof alphabet - 1)];
            switch (RND() % 3) {
            case 0: if (n) buf[pos] = ch; break;
            case 1: if (n < sizeof buf - 1) { memmove(buf + pos + 1, buf + pos, n - pos); buf[pos] = ch; n++; } break;
            default: if (n) { memmove(buf + pos, buf + pos + 1, n - pos - 1); n--; } break;
            }
        }
        const int want = plugin_should_accept(buf, n), got = plugin_accepts(st, &bv, buf, n);
        valid_seen += want;
        tried++;
        if (want != got) {
            if (disagree < 5) printf("# disagreement (validator %d, plugin %d): %.*s\n", want, got, (int)n, buf);
            disagree++;
        }
    }
    CHECK(!disagree && valid_seen > 500, "%d random mutations: plugin == validator (%d valid, %d disagreements)", tried, valid_seen, disagree);

    /* prompt tokens (accept without apply) restart the document */
    static uint8_t ok[300];
    vt->reset(st);
    allowed(st, &bv, -1, ok, err, sizeof err);
    vt->accept(st, 3 + '{');
    vt->accept(st, 3 + 'x'); /* a prompt token of the next turn */
    allowed(st, &bv, -1, ok, err, sizeof err);
    CHECK(ok[3 + '['] && !ok[3 + '"'], "a prompt token restarts the document");
    /* after completion only EOS */
    vt->reset(st);
    for (const char *p = "[1]"; *p; p++) { allowed(st, &bv, -1, ok, err, sizeof err); vt->accept(st, 3 + (unsigned char)*p); }
    int n_ok = allowed(st, &bv, -1, ok, err, sizeof err);
    CHECK(n_ok == 1 && ok[2], "complete document: EOS is the only choice (%d allowed)", n_ok);
    vt->destroy(st);

    /* a vocabulary that cannot close documents one byte at a time */
    tvocab nv;
    tv_init(&nv, 300);
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        if (c != '}') tv_add(&nv, &c, 1, 6);
    }
    st = create(&nv, err, sizeof err);
    CHECK(st == NULL && strstr(err, "'}'"), "vocabulary without '}' is refused: %s", err);
    tv_free(&nv);
    tv_free(&bv);
}

/* Random generation with multi-byte pieces and a token budget. */
static const char *FRAGS[] = {
    "{", "}", "[", "]", "\"", ":", ",", "0", "1", "7", "-", ".", "e", "E", "+", " ", "\n", "t", "r", "u", "f", "a", "l",
    "s", "n", "\\", "x", "A", "{\"", "\"}", "\":", "\": ", ", \"", "\",", "\"]", "[{", "}]", "]}", "}}", "]]", "[[",
    "{}", "[]", "true", "false", "null", "null}", " true,", "12", "3.14", "1e10", "-0.5", "e-", "\\u00", "e9", "\\n",
    "\\\"", "key", "hello world", "\xc3\xa9", "\xe2\x82", "\xac", "\xf0\x9f", "\x98\x80", "\t", "\r\n", ": [", "],",
    "\"a\":", "\"b\": {", "}, {", "0}", "\":\"", "\",\"", "\\u", "abc\"", " ", "  ", "\"\"", "{\"x\":[1,2,3]}",
};

static void test_generation(void) {
    tvocab fv;
    tv_init(&fv, 600);
    for (int b = 0; b < 256; b++) { /* byte fallback, as SentencePiece vocabularies have */
        char c = (char)b;
        tv_add(&fv, &c, 1, 6);
    }
    for (size_t i = 0; i < sizeof FRAGS / sizeof *FRAGS; i++) tv_add(&fv, FRAGS[i], (uint32_t)strlen(FRAGS[i]), 1);
    char err[256];
    void *st = create(&fv, err, sizeof err);
    CHECK(st != NULL, "json create on a fragment vocabulary (%s)", err);
    if (!st) return;
    static uint8_t ok[600];
    uint64_t r = 777;
    int runs = 0, bad = 0, errors = 0, hit_eos = 0, hit_budget = 0;
    const int budgets[] = {2, 3, 4, 5, 8, 13, 20, 40, 80, 200};
    for (size_t bi = 0; bi < sizeof budgets / sizeof *budgets; bi++) {
        for (int seed = 0; seed < 300; seed++) {
            const int N = budgets[bi];
            char out[4096];
            size_t n = 0;
            vt->reset(st);
            vt->accept(st, 3 + 'P'); /* a prompt token */
            int eos = 0;
            for (int i = 0; i < N; i++) {
                int cnt = allowed(st, &fv, N - i, ok, err, sizeof err);
                if (cnt <= 0) { if (errors < 3) printf("# error at step %d/%d: %s\n", i, N, err); errors++; break; }
                /* random logits favouring structure-light tokens: pick uniformly among the allowed */
                int pick = (int)(RND() % (uint64_t)cnt), tok = -1;
                for (int t = 0; t < fv.v.n_vocab; t++)
                    if (ok[t] && pick-- == 0) { tok = t; break; }
                vt->accept(st, tok);
                if (tok == 2) { eos = 1; break; }
                memcpy(out + n, fv.piece[tok], fv.len[tok]);
                n += fv.len[tok];
            }
            runs++;
            eos ? hit_eos++ : hit_budget++;
            if (!plugin_should_accept(out, n)) {
                if (bad < 3) printf("# budget %d seed %d produced invalid/incomplete: %.*s\n", N, seed, (int)n, out);
                bad++;
            }
        }
    }
    CHECK(!bad && !errors, "%d random generations (budgets 2..200): every output is complete valid JSON (%d ended by EOS, %d by the budget, %d invalid, %d errors)",
          runs, hit_eos, hit_budget, bad, errors);

    /* budget 1: only a token that completes a document by itself */
    vt->reset(st);
    int cnt = allowed(st, &fv, 1, ok, err, sizeof err), only_complete = cnt > 0;
    for (int t = 0; t < fv.v.n_vocab; t++)
        if (ok[t]) only_complete &= plugin_should_accept(fv.piece[t], fv.len[t]);
    CHECK(only_complete, "budget 1: only self-contained documents allowed (%d tokens: {} [] {\"x\":[1,2,3]})", cnt);
    vt->destroy(st);
    tv_free(&fv);
}

/* Speed on a Llama-sized vocabulary of random pieces. */
static void test_speed(void) {
    tvocab big;
    tv_init(&big, 32000);
    uint64_t r = 4242;
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        tv_add(&big, &c, 1, 6);
    }
    static const char pool[] = "abcdefghijklmnopqrstuvwxyz    ABCDE{}[]\":,0123456789.-";
    while (big.n < 32000) {
        char s[12];
        int len = 1 + (int)(RND() % 10);
        for (int k = 0; k < len; k++) s[k] = pool[RND() % (sizeof pool - 1)];
        tv_add(&big, s, (uint32_t)len, 1);
    }
    char err[256];
    void *st = create(&big, err, sizeof err);
    if (!st) { CHECK(0, "json create on 32000 tokens: %s", err); return; }
    free(cand_buf);
    cand_buf = malloc(32000 * sizeof *cand_buf);
    static uint8_t ok[32000];
    /* inside a string value (the least selective state) */
    allowed(st, &big, -1, ok, err, sizeof err);
    vt->accept(st, 3 + '{');
    allowed(st, &big, -1, ok, err, sizeof err);
    vt->accept(st, 3 + '"');
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int n_ok = 0;
    for (int i = 0; i < 50; i++) n_ok = allowed(st, &big, 500, ok, err, sizeof err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = ((t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6) / 50;
    CHECK(n_ok > 1000, "json apply on 32000 tokens inside a key allows %d tokens", n_ok);
    printf("info: json apply on 32000 tokens: %.3f ms per token\n", ms); /* a figure, not a timed assertion */
    vt->destroy(st);
    tv_free(&big);
}

/* `test_json --validate`: exit 0 when stdin is one complete JSON object or
   array (strict RFC 8259, UTF-8 checked); used by tests/t_json.sh when
   python3 is absent, and as a second opinion when it is present. */
static int validate_stdin(void) {
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, stdin);
    int depth = 0;
    if (n == sizeof buf || !json_valid(buf, n, &depth)) return 1;
    size_t i = 0;
    while (i < n && strchr(" \t\n\r", buf[i]) && buf[i]) i++;
    return i < n && (buf[i] == '{' || buf[i] == '[') ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--validate")) return validate_stdin();
    build_registry(&reg);
    char path[1024];
    snprintf(path, sizeof path, "%s/plugins/sampler-json.so", build_dir());
    int idx = registry_load_file(&reg, path);
    const pl_plugin *p = registry_find(&reg, PICOLM_KIND_SAMPLER, "json");
    CHECK(p != NULL, "load %s (%s)", path, idx >= 0 ? reg.items[idx].why : "?");
    if (!p) return 1;
    vt = p->desc->vtable;
    cand_buf = malloc(600 * sizeof *cand_buf);
    test_automaton();
    test_generation();
    test_speed();
    free(cand_buf);
    free_registry(&reg);
    return CHECK_DONE();
}
