/* SentencePiece tokenizer: llama.cpp's reference vectors, the reference
   prompts' token files, SentencePiece-generated cases, hand-built
   vocabularies (merge order, specials, validation) and robustness. */
#include <stdint.h>
#include <time.h>

#include "check.h"
#include "gguf.h"
#include "tokenizer.h"
#include "tokfiles.h"

#define U2581 "\xE2\x96\x81"

struct case_ctx { const tokenizer *t; int fails; int total; int per_case_check; };

static void check_case(void *vctx, int idx, const char *in, size_t inl, const char *out, size_t outl) {
    struct case_ctx *c = vctx;
    int n;
    int32_t *ids = encode(c->t, in, inl, 0, 0, &n);
    char why[128] = "encode failed", pv[128];
    int ok = n >= 0 && ids_equal_line(ids, n, out, outl, why, sizeof why);
    preview(pv, sizeof pv, in, inl);
    c->total++;
    if (!ok) c->fails++;
    if (c->per_case_check) CHECK(ok, "llama-spm case %d \"%s\"%s%s", idx, pv, ok ? "" : ": ", ok ? "" : why);
    else if (!ok) printf("mismatch: case %d \"%s\": %s\n", idx, pv, why);
    free(ids);
}

/* decode(ids) == expect ? */
static int roundtrip_ok(const tokenizer *t, const int32_t *ids, int n, const char *expect, size_t el) {
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        size_t pl;
        const char *p = tokenizer_piece(t, ids[i], &pl);
        if (k + pl > el || memcmp(expect + k, p, pl) != 0) return 0;
        k += pl;
    }
    return k == el;
}

/* as roundtrip_ok, with every space on both sides written as U+2581 */
static int roundtrip_escaped(const tokenizer *t, const int32_t *ids, int n, const char *expect, size_t el) {
    size_t cap = 3 * el + 16, a = 0, b = 0;
    char *x = malloc(cap), *y = malloc(cap);
    for (size_t i = 0; i < el; i++) {
        if (expect[i] == ' ') { memcpy(x + a, U2581, 3); a += 3; } else x[a++] = expect[i];
    }
    int ok = 1;
    for (int i = 0; i < n && ok; i++) {
        size_t pl;
        const char *p = tokenizer_piece(t, ids[i], &pl);
        for (size_t j = 0; j < pl; j++) {
            if (b + 3 > cap) { ok = 0; break; }
            if (p[j] == ' ') { memcpy(y + b, U2581, 3); b += 3; } else y[b++] = p[j];
        }
    }
    ok = ok && a == b && memcmp(x, y, a) == 0;
    free(x); free(y);
    return ok;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13; rng_state ^= rng_state >> 7; rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

/* ------------------------------------------------------------------------ */
/* A tiny GGUF writer for hand-built vocabularies                            */
/* ------------------------------------------------------------------------ */
enum { V_UNK, V_S, V_ES, V_BYTE0, V_SPACE = V_BYTE0 + 256, V_A, V_B, V_AB, V_BA, V_USER, V_CTL, V_SPA, V_C, V_N };

typedef struct {
    int no_bytes;          /* leave out the <0xHH> tokens */
    float ba_score;
    int space_prefix;      /* -1 = key absent */
    const char *name;
    /* corruptions */
    int scores_short, bad_type, bos_id, tok_not_str, bad_utf8, bad_byte, model_gpt2, no_tokens, nan_score;
} vopts;

static void build_vocab_gguf(wbuf *w, const vopts *o) {
    const char *txt[V_N];
    char bytes[256][8];
    float sc[V_N];
    int32_t ty[V_N];
    for (int i = 0; i < V_N; i++) { sc[i] = -1.0f; ty[i] = 1; }
    txt[V_UNK] = "<unk>"; ty[V_UNK] = 2; sc[V_UNK] = 0;
    txt[V_S] = "<s>"; ty[V_S] = 3; sc[V_S] = 0;
    txt[V_ES] = "</s>"; ty[V_ES] = 3; sc[V_ES] = 0;
    for (int b = 0; b < 256; b++) {
        snprintf(bytes[b], sizeof bytes[b], o->no_bytes ? "[unused%d]" : "<0x%02X>", b);
        txt[V_BYTE0 + b] = bytes[b];
        ty[V_BYTE0 + b] = o->no_bytes ? 5 : 6;
        sc[V_BYTE0 + b] = 0;
    }
    txt[V_SPACE] = U2581; txt[V_A] = "a"; txt[V_B] = "b"; txt[V_C] = "c";
    txt[V_AB] = "ab"; sc[V_AB] = -2;
    txt[V_BA] = "ba"; sc[V_BA] = o->ba_score;
    txt[V_USER] = "<|user|>"; ty[V_USER] = 4;
    txt[V_CTL] = "<|ctl|>"; ty[V_CTL] = 3;
    txt[V_SPA] = U2581 "a"; sc[V_SPA] = -3;
    if (o->bad_type) ty[V_C] = 9;
    if (o->bad_utf8) txt[V_C] = "\xC3(";
    if (o->bad_byte) ty[V_C] = 6;
    if (o->nan_score) sc[V_C] = 0.0f / 0.0f;

    int nkv = 4 + (o->no_tokens ? -1 : 0) + (o->space_prefix >= 0) + (o->name != NULL) + 3;
    wput(w, "GGUF", 4); w32(w, 3); w64(w, 0); w64(w, (uint64_t)nkv);
    wkey(w, "tokenizer.ggml.model", 8);
    wstr(w, o->model_gpt2 ? "gpt2" : "llama", o->model_gpt2 ? 4 : 5);
    if (!o->no_tokens) {
        wkey(w, "tokenizer.ggml.tokens", 9);
        if (o->tok_not_str) {
            w32(w, 5); w64(w, V_N);
            for (int i = 0; i < V_N; i++) w32(w, (uint32_t)i);
        } else {
            w32(w, 8); w64(w, V_N);
            for (int i = 0; i < V_N; i++) wstr(w, txt[i], strlen(txt[i]));
        }
    }
    wkey(w, "tokenizer.ggml.scores", 9); w32(w, 6);
    uint64_t ns = o->scores_short ? V_N - 1 : V_N;
    w64(w, ns); wput(w, sc, ns * 4);
    wkey(w, "tokenizer.ggml.token_type", 9); w32(w, 5); w64(w, V_N); wput(w, ty, sizeof ty);
    if (o->space_prefix >= 0) { wkey(w, "tokenizer.ggml.add_space_prefix", 7); uint8_t v = (uint8_t)o->space_prefix; wput(w, &v, 1); }
    if (o->name) { wkey(w, "general.name", 8); wstr(w, o->name, strlen(o->name)); }
    wkey(w, "tokenizer.ggml.bos_token_id", 4); w32(w, o->bos_id ? (uint32_t)o->bos_id : 1);
    wkey(w, "tokenizer.ggml.eos_token_id", 4); w32(w, 2);
    wkey(w, "tokenizer.ggml.unknown_token_id", 4); w32(w, 0);
}

static tokenizer *synth(const vopts *o, char *err, size_t errlen) {
    wbuf w = { 0 };
    build_vocab_gguf(&w, o);
    return tok_from_gguf(&w, err, errlen);
}

#define ENC_EQ(t, s, sp, ...) do { const int32_t w_[] = { __VA_ARGS__ }; \
    CHECK(enc_eq(t, s, sp, w_, (int)(sizeof w_ / sizeof w_[0])), "synthetic: \"%s\" special=%d -> %s", s, sp, #__VA_ARGS__); } while (0)

static void test_synthetic(void) {
    char err[512];
    vopts o = { .ba_score = -2, .space_prefix = 0 };
    tokenizer *t = synth(&o, err, sizeof err);
    CHECK(t != NULL, "synthetic vocab builds (%s)", t ? "ok" : err);
    if (!t) return;
    /* equal scores: the leftmost pair merges first */
    ENC_EQ(t, "aba", 0, V_AB, V_A);
    ENC_EQ(t, "abab", 0, V_AB, V_AB);
    ENC_EQ(t, "d", 0, V_BYTE0 + 'd');
    ENC_EQ(t, "a b", 0, V_A, V_SPACE, V_B);
    CHECK(tokenizer_encode(t, "", 0, 0, 1, NULL, 0) == 0, "synthetic: empty text -> no tokens");
    free_tokenizer(t);

    o.ba_score = -1.5f; /* now "ba" outranks "ab" */
    t = synth(&o, err, sizeof err);
    if (t) { ENC_EQ(t, "aba", 0, V_A, V_BA); free_tokenizer(t); }

    o = (vopts){ .ba_score = -2, .space_prefix = -1 }; /* default: dummy prefix on */
    t = synth(&o, err, sizeof err);
    CHECK(t != NULL, "synthetic vocab with dummy prefix builds");
    if (t) {
        ENC_EQ(t, "a", 0, V_SPA);
        ENC_EQ(t, "ab", 0, V_SPACE, V_AB); /* ▁+a (-3) loses to a+b (-2) */
        /* user-defined tokens are split out even without parse_special */
        ENC_EQ(t, "a<|user|>b", 0, V_SPA, V_USER, V_SPACE, V_B);
        ENC_EQ(t, "a<|user|>b", 1, V_SPA, V_USER, V_SPACE, V_B);
        /* control tokens only with parse_special; a dummy prefix follows them */
        ENC_EQ(t, "a<|ctl|>b", 1, V_SPA, V_CTL, V_SPACE, V_B);
        ENC_EQ(t, "<|ctl|>", 0, V_SPACE, V_BYTE0 + '<', V_BYTE0 + '|', V_C, V_BYTE0 + 't', V_BYTE0 + 'l',
               V_BYTE0 + '|', V_BYTE0 + '>');
        ENC_EQ(t, "<s>a</s>", 1, V_S, V_SPA, V_ES);
        ENC_EQ(t, "<unk>", 1, V_UNK);
        ENC_EQ(t, "<|user|>  a", 1, V_USER, V_SPACE, V_SPACE, V_SPA);
        CHECK(tokenizer_find(t, "<|ctl|>", 7) == V_CTL && tokenizer_find(t, "zz", 2) == -1 &&
              tokenizer_find(t, U2581 "a", 4) == V_SPA, "tokenizer_find exact texts");
        size_t l1, l2, l3, l4, l5;
        const char *p1 = tokenizer_piece(t, V_SPA, &l1), *p2 = tokenizer_piece(t, V_BYTE0 + 0x0A, &l2);
        const char *p4 = tokenizer_piece(t, V_USER, &l4);
        tokenizer_piece(t, V_S, &l3);
        tokenizer_piece(t, 99999, &l5);
        CHECK(l1 == 2 && !memcmp(p1, " a", 2) && l2 == 1 && p2[0] == '\n' && l3 == 0 &&
              l4 == 8 && !memcmp(p4, "<|user|>", 8) && l5 == 0, "pieces: ▁a -> \" a\", <0x0A> -> \\n, <s> -> \"\", user-defined as is, bad id -> \"\"");
        const picolm_vocab *v = tokenizer_vocab(t);
        CHECK(v && v->n_vocab == V_N && v->bos_id == 1 && v->eos_id == 2 && v->piece[V_SPA] == p1 &&
              v->piece_len[V_SPA] == 2 && v->token_type[V_CTL] == 3 && v->token_type[V_BYTE0] == 6,
              "picolm_vocab mirrors the tokenizer");
        CHECK(tokenizer_bos(t) == 1 && tokenizer_eos(t) == 2 && tokenizer_unk(t) == 0 &&
              tokenizer_add_bos(t) == 1 && tokenizer_add_eos(t) == 0, "special ids and defaults");
        int32_t two[2];
        CHECK(tokenizer_encode(t, "ab", 2, 1, 0, two, 2) == -3 && tokenizer_encode(t, "ab", 2, 1, 0, NULL, 0) == -3,
              "a too small buffer returns -needed");
        int32_t three[3];
        CHECK(tokenizer_encode(t, "ab", 2, 1, 0, three, 3) == 3 && three[0] == 1 && three[1] == V_SPACE && three[2] == V_AB,
              "exact-size buffer with BOS");
        free_tokenizer(t);
    }

    o = (vopts){ .ba_score = -2, .space_prefix = 1, .name = "Phi-3 Mini 4k" };
    t = synth(&o, err, sizeof err);
    if (t) {
        /* phi-3: whitespace after special tokens is eaten (llama.cpp rstrip) */
        ENC_EQ(t, "<|user|>  a", 1, V_USER, V_SPA);
        ENC_EQ(t, "<s>  a", 1, V_S, V_SPACE, V_SPACE, V_SPA);
        free_tokenizer(t);
    }

    o = (vopts){ .ba_score = -2, .space_prefix = 0, .no_bytes = 1 };
    t = synth(&o, err, sizeof err);
    if (t) { ENC_EQ(t, "adb", 0, V_A, V_UNK, V_B); free_tokenizer(t); }

    /* hostile metadata: each must fail with a message naming the problem */
    struct { vopts o; const char *what, *expect; } bad[] = {
        { { .ba_score = -2, .scores_short = 1 }, "scores shorter than tokens", "scores" },
        { { .ba_score = -2, .bad_type = 1 }, "token type 9", "type" },
        { { .ba_score = -2, .bos_id = 5000 }, "BOS id outside the vocabulary", "bos_token_id" },
        { { .ba_score = -2, .tok_not_str = 1 }, "tokens not strings", "tokens" },
        { { .ba_score = -2, .bad_utf8 = 1 }, "token text not UTF-8", "UTF-8" },
        { { .ba_score = -2, .bad_byte = 1 }, "BYTE token that is not <0xHH>", "BYTE" },
        { { .ba_score = -2, .model_gpt2 = 1 }, "non-llama tokenizer model", "gpt2" },
        { { .ba_score = -2, .no_tokens = 1 }, "no tokens array", "tokens" },
        { { .ba_score = -2, .nan_score = 1 }, "NaN score", "NaN" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        t = synth(&bad[i].o, err, sizeof err);
        CHECK(!t && strstr(err, bad[i].expect), "rejects %s (%s)", bad[i].what, err);
        free_tokenizer(t);
    }
}

static void test_utf8_prefix(void) {
    struct { const char *s; size_t n, want; } c[] = {
        { "", 0, 0 }, { "abc", 3, 3 }, { "a\xC3", 2, 1 }, { "a\xC3\xA9", 3, 3 },
        { "\xE4\xBD", 2, 0 }, { "\xE4\xBD\xA0", 3, 3 }, { "x\xF0\x9F\x99", 4, 1 },
        { "x\xF0\x9F\x99\x82", 5, 5 }, { "\x80\x80", 2, 2 }, { "a\xFF", 2, 2 },
        { "\x80\x80\x80\x80\x80", 5, 5 },
    };
    int ok = 1;
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        size_t g = tokenizer_utf8_prefix(c[i].s, c[i].n);
        if (g != c[i].want) { printf("  tokenizer_utf8_prefix case %zu: %zu != %zu\n", i, g, c[i].want); ok = 0; }
    }
    CHECK(ok, "tokenizer_utf8_prefix holds back only incomplete trailing characters");
}

static void test_llama_ref(const char *sh) {
    char p[4096];
    gguf_file gf;
    snprintf(p, sizeof p, "%s/reference/tokenizer/ggml-vocab-llama-spm.gguf", sh);
    tokenizer *t = load_tok(p, &gf);
    CHECK(t != NULL, "load llama-spm vocabulary");
    if (!t) return;
    CHECK(tokenizer_n_vocab(t) == 32000 && tokenizer_bos(t) == 1 && tokenizer_eos(t) == 2,
          "llama-spm: 32000 tokens, BOS 1, EOS 2");
    size_t il, ol;
    snprintf(p, sizeof p, "%s/reference/tokenizer/ggml-vocab-llama-spm.gguf.inp", sh);
    char *inp = read_file(p, &il);
    snprintf(p, sizeof p, "%s/reference/tokenizer/ggml-vocab-llama-spm.gguf.out", sh);
    char *out = read_file(p, &ol);
    CHECK(inp && out, "read llama-spm .inp/.out");
    if (inp && out) {
        struct case_ctx c = { t, 0, 0, 1 };
        int n = for_each_case(inp, il, out, ol, check_case, &c);
        CHECK(n >= 40, "llama-spm: %d cases parsed", n);
    }
    free(inp); free(out);

    /* parse_special on/off with the real vocabulary */
    int n1, n2, na, nb;
    const char *s = "Hello</s>world<s>";
    int32_t *a = encode(t, s, strlen(s), 1, 1, &n1);
    int32_t *b = encode(t, s, strlen(s), 1, 0, &n2);
    int32_t *x = encode(t, "Hello", 5, 0, 0, &na);
    int32_t *y = encode(t, "world", 5, 0, 0, &nb);
    int ok = n1 == 1 + na + 1 + nb + 1 && a[0] == 1 && !memcmp(a + 1, x, na * 4) && a[1 + na] == 2 &&
             !memcmp(a + 2 + na, y, nb * 4) && a[n1 - 1] == 1;
    CHECK(ok, "parse_special: BOS Hello </s> ▁world <s> (dummy prefix after a special token)");
    ok = n2 > 3 && b[0] == 1;
    for (int i = 1; i < n2; i++) if (b[i] == 1 || b[i] == 2) ok = 0;
    CHECK(ok && roundtrip_ok(t, b + 1, n2 - 1, " Hello</s>world<s>", 18), "special off: <s> and </s> stay plain text");
    free(a); free(b); free(x); free(y);
    /* whole-text decoding drops the dummy-prefix space of the first piece
       only (llama_detokenize): after BOS it stays */
    {
        char dec[64];
        a = encode(t, "Hello world", 11, 0, 0, &n1);
        int l1 = tokenizer_detokenize(t, a, n1, dec, sizeof dec);
        int ok1 = l1 == 11 && !memcmp(dec, "Hello world", 11);
        free(a);
        a = encode(t, "Hello world", 11, 1, 0, &n1);
        int l2 = tokenizer_detokenize(t, a, n1, dec, sizeof dec);
        free(a);
        CHECK(ok1 && l2 == 12 && !memcmp(dec, " Hello world", 12), "detokenize: \"Hello world\", and \" Hello world\" after BOS");
    }
    a = encode(t, "", 0, 1, 1, &n1);
    b = encode(t, "", 0, 0, 1, &n2);
    CHECK(n1 == 1 && a[0] == 1 && n2 == 0, "empty text: [BOS] with BOS, nothing without");
    free(a); free(b);

    /* robustness: random bytes, invalid UTF-8; everything round-trips through
       byte fallback (the dummy prefix adds one leading space) */
    static const char *invalid[] = { "\xC3", "\xC3" "A", "\xFF\xFE\xFD", "\x80" "abc", "\xED\xA0\x80",
                                     "a\xF0\x9F", "\xF8\x88\x80\x80\x80", "\xC0\xAF", "x\0y" };
    static const size_t invalid_len[] = { 1, 2, 3, 4, 3, 3, 5, 2, 3 };
    ok = 1;
    char *buf = malloc(4096), *exp = malloc(4096 + 1);
    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++) {
        a = encode(t, invalid[i], invalid_len[i], 0, 1, &n1);
        exp[0] = ' '; memcpy(exp + 1, invalid[i], invalid_len[i]);
        if (n1 <= 0 || !roundtrip_ok(t, a, n1, exp, invalid_len[i] + 1)) { ok = 0; printf("  invalid case %zu\n", i); }
        free(a);
    }
    CHECK(ok, "invalid UTF-8 encodes via byte tokens and decodes back to the same bytes");
    /* random bytes: invalid lead bytes may swallow an escaped space into byte
       tokens (as in llama.cpp), so compare with spaces written as U+2581 */
    ok = 1;
    int checked = 0;
    for (int it = 0; it < 300; it++) {
        size_t n = 1 + rnd() % 600;
        for (size_t i = 0; i < n; i++) buf[i] = (char)(rnd() & 0xFF);
        if (it % 3 == 0) for (size_t i = 0; i < n; i++) buf[i] = (char)(buf[i] & 0x7F); /* ASCII */
        int special = it & 1;
        a = encode(t, buf, n, 0, special, &n1);
        exp[0] = ' '; memcpy(exp + 1, buf, n);
        int has_special = 0;
        for (int i = 0; i < n1 && special; i++)
            if (tokenizer_token_type(t, a[i]) != 1 && tokenizer_token_type(t, a[i]) != 6) has_special = 1;
        if (n1 < 0 || (!has_special && !roundtrip_escaped(t, a, n1, exp, n + 1))) { ok = 0; printf("  random case %d failed\n", it); }
        for (int i = 0; i < n1; i++) if (a[i] < 0 || a[i] >= 32000) ok = 0;
        if (n1 > (int)(4 * n + 4)) { ok = 0; printf("  random case %d: %d tokens > 4 * len + 4\n", it, n1); }
        checked++;
        free(a);
    }
    CHECK(ok && checked == 300, "%d random byte strings: valid ids, at most 4*len+4 tokens, decode(encode(x)) == \" \" + x up to U+2581/space", checked);

    /* random valid UTF-8 (no U+2581): exact round trip */
    ok = 1;
    for (int it = 0; it < 300; it++) {
        size_t n = 0, want = 1 + rnd() % 200;
        for (size_t i = 0; i < want; i++) {
            uint32_t cp, r = rnd() % 10;
            if (r < 5) cp = 0x20 + rnd() % 0x5F;
            else if (r < 6) cp = "\n\t \r"[rnd() % 4];
            else if (r < 8) cp = 0x80 + rnd() % 0x780;
            else if (r < 9) { do cp = 0x800 + rnd() % 0xF800; while ((cp >= 0xD800 && cp < 0xE000) || cp == 0x2581); }
            else cp = 0x10000 + rnd() % 0x100000;
            if (cp < 0x80) buf[n++] = (char)cp;
            else if (cp < 0x800) { buf[n++] = (char)(0xC0 | cp >> 6); buf[n++] = (char)(0x80 | (cp & 0x3F)); }
            else if (cp < 0x10000) { buf[n++] = (char)(0xE0 | cp >> 12); buf[n++] = (char)(0x80 | ((cp >> 6) & 0x3F)); buf[n++] = (char)(0x80 | (cp & 0x3F)); }
            else { buf[n++] = (char)(0xF0 | cp >> 18); buf[n++] = (char)(0x80 | ((cp >> 12) & 0x3F));
                   buf[n++] = (char)(0x80 | ((cp >> 6) & 0x3F)); buf[n++] = (char)(0x80 | (cp & 0x3F)); }
        }
        a = encode(t, buf, n, 0, 0, &n1);
        exp[0] = ' '; memcpy(exp + 1, buf, n);
        if (n1 <= 0 || !roundtrip_ok(t, a, n1, exp, n + 1)) { ok = 0; printf("  utf8 case %d failed\n", it); }
        free(a);
    }
    CHECK(ok, "300 random valid UTF-8 strings: decode(encode(x)) == \" \" + x exactly");
    free(buf); free(exp);

    /* speed: 256 KiB runs (an O(n^2) tokenizer would take minutes) */
    snprintf(p, sizeof p, "%s/models/heldout.txt", sh);
    size_t hl;
    char *held = read_file(p, &hl);
    if (held) {
        size_t big = 1 << 18;
        char *text = malloc(big);
        for (size_t i = 0; i < big; i++) text[i] = held[i % hl];
        double t0 = now();
        a = encode(t, text, big, 1, 1, &n1);
        double dt = now() - t0;
        char *spaced = malloc(big + 1);
        spaced[0] = ' ';
        memcpy(spaced + 1, text, big);
        CHECK(n1 > (int)(big / 8) && roundtrip_ok(t, a + 1, n1 - 1, spaced, big + 1),
              "256 KiB of Shakespeare: %d tokens in %.2f s, round-trips", n1, dt);
        free(spaced);
        printf("info: 256 KiB encoded in %.2f s\n", dt); /* a figure, not a timed assertion */
        free(a);
        memset(text, 'a', 1 << 18);
        t0 = now();
        a = encode(t, text, 1 << 18, 0, 0, &n1);
        dt = now() - t0;
        CHECK(n1 > 0, "256 KiB of one repeated letter: %d tokens in %.2f s", n1, dt);
        free(a);
        for (size_t i = 0; i + 4 <= (1 << 18); i += 4) memcpy(text + i, "\xF0\x9F\x99\x82", 4);
        t0 = now();
        a = encode(t, text, 1 << 18, 0, 0, &n1);
        dt = now() - t0;
        CHECK(n1 > 0, "256 KiB of emoji (byte fallback): %d tokens in %.2f s", n1, dt);
        free(a);
        free(text);
        free(held);
    }
    char dummy = 'x';
    CHECK(tokenizer_encode(t, &dummy, SIZE_MAX, 0, 0, NULL, 0) == -1, "absurd input length is an error, not a crash");
    free_tokenizer(t);
    free_gguf(&gf);
}

static void test_prompt(const char *sh, const char *model, const char *prompt, const char *ref) {
    char p[4096];
    gguf_file gf;
    snprintf(p, sizeof p, "%s/models/%s", sh, model);
    tokenizer *t = load_tok(p, &gf);
    CHECK(t != NULL, "load %s", model);
    if (!t) return;
    size_t pl, rl;
    snprintf(p, sizeof p, "%s/reference/logits/%s", sh, prompt);
    char *text = read_file(p, &pl);
    snprintf(p, sizeof p, "%s/reference/logits/%s", sh, ref);
    char *refb = read_file(p, &rl);
    if (text && refb) {
        int n;
        int32_t *ids = encode(t, text, pl, tokenizer_add_bos(t), 0, &n);
        int nr = (int)(rl / 4), ok = n == nr, first = -1;
        for (int i = 0; ok && i < n; i++) {
            int32_t r;
            memcpy(&r, refb + 4 * i, 4);
            if (ids[i] != r) { ok = 0; first = i; }
        }
        CHECK(ok, "%s: prompt -> %s (%d tokens, BOS first)%s", model, ref, n, first >= 0 ? " mismatch" : "");
        free(ids);
    } else {
        CHECK(0, "read %s and %s", prompt, ref);
    }
    free(text); free(refb);
    free_tokenizer(t);
    free_gguf(&gf);
}

static void test_generated(const char *sh) {
    size_t il, ol;
    char *inp = read_file("tests/data/tok/tiny-shakespeare.inp", &il);
    char *out = read_file("tests/data/tok/tiny-shakespeare.out", &ol);
    if (!inp || !out) { SKIP("tests/data/tok not found (run from the repo root)"); free(inp); free(out); return; }
    char p[4096];
    gguf_file gf;
    snprintf(p, sizeof p, "%s/models/tiny-shakespeare-q8_0.gguf", sh);
    tokenizer *t = load_tok(p, &gf);
    if (t) {
        struct case_ctx c = { t, 0, 0, 0 };
        for_each_case(inp, il, out, ol, check_case, &c);
        CHECK(c.total >= 200 && c.fails == 0, "tiny-shakespeare vocab vs SentencePiece library: %d/%d cases equal",
              c.total - c.fails, c.total);
        free_tokenizer(t);
        free_gguf(&gf);
    } else {
        CHECK(0, "load %s", p);
    }
    free(inp); free(out);
}

int main(void) {
    test_synthetic();
    test_utf8_prefix();
    const char *sh = shared_dir("tokenizer reference data");
    if (sh) {
        test_llama_ref(sh);
        test_prompt(sh, "tiny-shakespeare-f32.gguf", "tiny-shakespeare.prompt.txt", "tiny-shakespeare-f32.tokens.i32");
        test_prompt(sh, "rand-spm-q8_0.gguf", "rand-spm.prompt.txt", "rand-spm-q8_0.tokens.i32");
        test_generated(sh);
    }
    return CHECK_DONE();
}
