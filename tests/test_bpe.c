/* Byte-level BPE tokenizer ("gpt2" vocabularies): the pre-tokenizer splits
   against cases worked out by hand from llama.cpp's regexes, merge order and
   per-pre-tokenizer defaults on hand-built vocabularies, llama.cpp's own
   vectors for the Llama 3, Qwen2 and GPT-2 vocabularies, the reference
   prompt's tokens and greedy texts of the model-family files, the EOG sets,
   round trips, and speed. */
#include <stdint.h>

#include "check.h"
#include "gguf.h"
#include "tokenizer.h"
#include "tokfiles.h"
#include "unicode.h"

static double cpu_now(void) { /* this process's CPU time: the machine may be busy */
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* wall-clock limits only where the machine runs the code at native speed */
static int timed(void) { return !getenv("PICOLM_SANITIZER") && !getenv("PICOLM_TEST_WRAPPER"); }

/* text -> GPT-2 code points, as the vocabulary writes it ("Ġ" for ' ', ...) */
static size_t gpt2_text(const char *s, size_t n, char *out) {
    size_t m = 0;
    for (size_t i = 0; i < n; i++) m += unicode_encode_utf8(unicode_byte_to_cp((uint8_t)s[i]), out + m);
    return m;
}

static int32_t find_word(const tokenizer *t, const char *w) {
    char buf[256];
    size_t m = gpt2_text(w, strlen(w), buf);
    return tokenizer_find(t, buf, m);
}

/* ------------------------------------------------------------------------ */
/* Pre-tokenizer splits                                                       */
/* ------------------------------------------------------------------------ */

/* Each expectation follows from the family's expression (unicode.h), read as
   llama.cpp runs it: leftmost match, alternatives in order, and text between
   matches is a word too. */
typedef struct { pretok_kind kind; const char *text; const char *words[12]; const char *why; } split_case;

static const split_case split_cases[] = {
    { PRETOK_LLAMA3, "Hello world", { "Hello", " world" }, "the space is the optional [^\\r\\n\\p{L}\\p{N}] before \\p{L}+" },
    { PRETOK_LLAMA3, "1234567890123", { "123", "456", "789", "012", "3" }, "\\p{N}{1,3}" },
    { PRETOK_LLAMA3, "a   b", { "a", "  ", " b" }, "\\s+(?!\\S) gives the last space to ' b'" },
    { PRETOK_LLAMA3, "x  ", { "x", "  " }, "at the end (?!\\S) holds for the whole run" },
    { PRETOK_LLAMA3, "  \n\n x", { "  \n\n", " x" }, "\\s*[\\r\\n]+ ends at the last newline" },
    { PRETOK_LLAMA3, "\n\n\n", { "\n\n\n" }, "\\s*[\\r\\n]+" },
    { PRETOK_LLAMA3, "I'M here", { "I", "'M", " here" }, "(?i:'m)" },
    { PRETOK_LLAMA3, "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C",
      { "\xE4\xBD\xA0\xE5\xA5\xBD", "\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C" },
      "CJK ideographs are \\p{L}; the full-width comma (Po) is the optional prefix of the next letter run" },
    { PRETOK_LLAMA3, "hi \xF0\x9F\x99\x82\xF0\x9F\x99\x82!\n", { "hi", " \xF0\x9F\x99\x82\xF0\x9F\x99\x82!\n" },
      " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*: emoji (So), '!' and the newline" },
    { PRETOK_LLAMA3, "a\xE3\x80\x80" "b", { "a", "\xE3\x80\x80" "b" }, "U+3000 is White_Space but may prefix a letter run" },
    { PRETOK_LLAMA3, "x\xFF", { "x", "\xEF\xBF\xBD" }, "an invalid byte reads as U+FFFD (So)" },
    { PRETOK_LLAMA3, "def f(x):\n    return x**2\n", { "def", " f", "(x", "):\n", "   ", " return", " x", "**", "2", "\n" },
      "code: '(' prefixes 'x', '):' takes the newline, indentation keeps one space for the word" },
    { PRETOK_QWEN2, "abc123", { "abc", "1", "2", "3" }, "\\p{N}: one digit per word" },
    { PRETOK_QWEN2, "\xEF\xBC\x91\xEF\xBC\x92", { "\xEF\xBC\x91", "\xEF\xBC\x92" }, "full-width digits are \\p{N}" },
    { PRETOK_QWEN2, "a   b\n\n", { "a", "  ", " b", "\n\n" }, "as Llama 3" },
    { PRETOK_GPT2, "I'M here", { "I", "'", "M", " here" }, "GPT-2's contractions are case-sensitive" },
    { PRETOK_GPT2, "a\n\nb", { "a", "\n", "\n", "b" }, "\\s+(?!\\S), then \\s+ for the last newline" },
    { PRETOK_GPT2, "hello   world", { "hello", "  ", " world" }, "\\s+(?!\\S)" },
    { PRETOK_GPT2, "$1234567 x", { "$", "1234567", " x" }, " ?[^\\s\\p{L}\\p{N}]+, then \\p{N}+ unbounded" },
    { PRETOK_SMOLLM, "v2.10", { "v", "2", ".", "1", "0" }, "\\p{N} cuts out every digit first" },
    { PRETOK_SMOLLM, "abc 123", { "abc", " ", "1", "2", "3" }, "the space before a digit is left alone" },
    { PRETOK_DEFAULT, "$100+200", { "$", "100", "+", "200" }, "[\\p{P}$+<=>^~|]+ first" },
    { PRETOK_DEFAULT, "Hello, world!", { "Hello", ",", " world", "!" }, "punctuation runs first, then GPT-2's" },
    { PRETOK_DEFAULT, "1234567", { "123", "456", "7" }, "[0-9][0-9][0-9] last" },
    { PRETOK_DEFAULT, "a`b", { "a", "`", "b" }, "'`' (Sk) is not in the first class" },
};

static void test_splits(void) {
    CHECK(strcmp(unicode_version(), "0") > 0 && unicode_flags('A') == UCD_LETTER && unicode_flags(' ') == (UCD_SEPARATOR | UCD_WHITESPACE) &&
          unicode_flags(0x4E00) == UCD_LETTER && unicode_flags(0x1F642) == UCD_SYMBOL && unicode_flags(0x0378) == UCD_UNDEFINED &&
          unicode_flags(0x3000) == (UCD_SEPARATOR | UCD_WHITESPACE) && unicode_flags(0x85) == (UCD_CONTROL | UCD_WHITESPACE) &&
          unicode_flags(0xFF11) == UCD_NUMBER && unicode_flags(0x110000) == UCD_UNDEFINED,
          "Unicode %s table: letters, separators, White_Space, symbols, unassigned", unicode_version());
    for (size_t c = 0; c < sizeof split_cases / sizeof split_cases[0]; c++) {
        const split_case *sc = &split_cases[c];
        size_t n = strlen(sc->text), nc = 0;
        uint32_t cps[64];
        uint16_t fl[64];
        size_t lens[64], tmp[64];
        for (size_t o = 0; o < n; nc++) {
            o += unicode_decode_utf8((const unsigned char *)sc->text + o, n - o, &cps[nc]);
            fl[nc] = unicode_flags(cps[nc]);
        }
        size_t nw = unicode_pretok_split(sc->kind, cps, fl, nc, lens, tmp), k = 0, c0 = 0;
        int ok = 1;
        for (size_t w = 0; w < nw; w++) {
            char buf[128];
            size_t m = 0;
            for (size_t i = c0; i < c0 + lens[w]; i++) m += unicode_encode_utf8(cps[i], buf + m);
            c0 += lens[w];
            if (!sc->words[k] || strlen(sc->words[k]) != m || memcmp(sc->words[k], buf, m)) ok = 0;
            k++;
        }
        if (sc->words[k]) ok = 0;
        char pv[128];
        preview(pv, sizeof pv, sc->text, n);
        CHECK(ok, "split %d \"%s\" -> %zu words (%s)", (int)sc->kind, pv, nw, sc->why);
    }
}

/* ------------------------------------------------------------------------ */
/* Hand-built vocabularies                                                    */
/* ------------------------------------------------------------------------ */

enum { B_A, B_B, B_C, B_AB, B_BC, B_ABC, B_G, B_GA, B_IMEND, B_USER, B_NL, B_AA, B_EURO, B_EOT, B_PAD, B_N };

typedef struct {
    const char *pre;           /* NULL: key absent */
    const char *const *merges; /* NULL: key absent */
    int add_bos;               /* -1: key absent */
    int merges_not_str;
} bopts;

static tokenizer *bpe_synth(const bopts *o, char *err, size_t errlen) {
    static const char *txt[B_N] = { "a", "b", "c", "ab", "bc", "abc", "\xC4\xA0", ("\xC4\xA0" "a"), "<|im_end|>", "<|user|>",
                                    "\xC4\x8A", "aa", "\xE2\x82\xAC", "<|endoftext|>", "[PAD]" };
    int32_t ty[B_N];
    for (int i = 0; i < B_N; i++) ty[i] = TOKEN_TYPE_NORMAL;
    ty[B_IMEND] = TOKEN_TYPE_CONTROL;
    ty[B_USER] = TOKEN_TYPE_USER_DEFINED;
    ty[B_PAD] = TOKEN_TYPE_CONTROL;
    /* <|endoftext|> stays NORMAL here: llama.cpp makes it a control token */
    size_t nm = 0;
    while (o->merges && o->merges[nm]) nm++;
    wbuf w = { 0 };
    uint64_t nkv = 4 + (o->pre != NULL) + (o->merges != NULL) + (o->add_bos >= 0);
    wput(&w, "GGUF", 4); w32(&w, 3); w64(&w, 0); w64(&w, nkv);
    wkey(&w, "tokenizer.ggml.model", 8); wstr(&w, "gpt2", 4);
    if (o->pre) { wkey(&w, "tokenizer.ggml.pre", 8); wstr(&w, o->pre, strlen(o->pre)); }
    wkey(&w, "tokenizer.ggml.tokens", 9); w32(&w, 8); w64(&w, B_N);
    for (int i = 0; i < B_N; i++) wstr(&w, txt[i], strlen(txt[i]));
    wkey(&w, "tokenizer.ggml.token_type", 9); w32(&w, 5); w64(&w, B_N); wput(&w, ty, sizeof ty);
    if (o->merges) {
        wkey(&w, "tokenizer.ggml.merges", 9);
        if (o->merges_not_str) { w32(&w, 5); w64(&w, nm); for (size_t i = 0; i < nm; i++) w32(&w, (uint32_t)i); }
        else { w32(&w, 8); w64(&w, nm); for (size_t i = 0; i < nm; i++) wstr(&w, o->merges[i], strlen(o->merges[i])); }
    }
    if (o->add_bos >= 0) { wkey(&w, "tokenizer.ggml.add_bos_token", 7); uint8_t v = (uint8_t)o->add_bos; wput(&w, &v, 1); }
    wkey(&w, "tokenizer.ggml.eos_token_id", 4); w32(&w, B_IMEND);
    return tok_from_gguf(&w, err, errlen);
}

#define ENC_IS(t, s, sp, why, ...) do { const int32_t w_[] = { __VA_ARGS__ }; \
    CHECK(enc_eq(t, s, sp, w_, (int)(sizeof w_ / sizeof w_[0])), "hand-built: -> %s (%s)", #__VA_ARGS__, why); } while (0)

static int piece_is(const tokenizer *t, int32_t id, const char *want) {
    size_t l;
    const char *p = tokenizer_piece(t, id, &l);
    return l == strlen(want) && !memcmp(p, want, l);
}

static void test_hand_built(void) {
    char err[512];
    static const char *const m_ab_first[] = { "a b", "b c", NULL };
    static const char *const m_bc_first[] = { "b c", "a b", NULL };
    static const char *const m_full[] = { "a b", "ab c", "\xC4\xA0 a", "a a", NULL };

    bopts o = { "gpt-2", m_ab_first, -1, 0 };
    tokenizer *t = bpe_synth(&o, err, sizeof err);
    CHECK(t != NULL, "hand-built gpt2 vocabulary builds (%s)", t ? "ok" : err);
    if (!t) return;
    ENC_IS(t, "abc", 0, "rank 0 'a b' first, no 'ab c'", B_AB, B_C);
    ENC_IS(t, "a\xC3\xA9" "b", 0, "'é' is two unknown code points whose bytes are no tokens: dropped, as llama.cpp", B_A, B_B);
    ENC_IS(t, "\n", 0, "newline is U+010A", B_NL);
    ENC_IS(t, "a<|user|>b", 0, "user-defined tokens match in plain text", B_A, B_USER, B_B);
    ENC_IS(t, "a<|im_end|>", 1, "control token with parse_special", B_A, B_IMEND);
    ENC_IS(t, "a<|im_end|>", 0, "without: '<|', 'im', ... are text, not in this vocabulary", B_A);
    CHECK(tokenizer_is_bpe(t) && tokenizer_add_bos(t) == 0 && tokenizer_bos(t) == 11 && tokenizer_eos(t) == B_IMEND &&
          tokenizer_unk(t) == -1 && tokenizer_clean_spaces(t) == 1,
          "gpt-2 defaults: no BOS added, BOS id 11 when the key is absent, no unk, clean_spaces");
    CHECK(tokenizer_is_eog(t, B_IMEND) && tokenizer_is_eog(t, B_EOT) && !tokenizer_is_eog(t, B_PAD) && !tokenizer_is_eog(t, B_A) &&
          !tokenizer_is_eog(t, -1) && tokenizer_token_type(t, B_EOT) == TOKEN_TYPE_CONTROL,
          "EOG: EOS and <|endoftext|>, which becomes a control token");
    CHECK(piece_is(t, B_GA, " a") && piece_is(t, B_NL, "\n") && piece_is(t, B_IMEND, "") && piece_is(t, B_EOT, "") &&
          piece_is(t, B_USER, "<|user|>") && piece_is(t, B_EURO, "[UNK_BYTE_0xe282ac\xE2\x82\xAC]"),
          "pieces: byte map inverted, control -> \"\", user-defined as is, outside the map as llama.cpp marks it");
    free_tokenizer(t);

    o.merges = m_bc_first;
    t = bpe_synth(&o, err, sizeof err);
    if (t) { ENC_IS(t, "abc", 0, "rank 0 'b c' first, no 'a bc'", B_A, B_BC); free_tokenizer(t); }

    o.merges = m_full;
    t = bpe_synth(&o, err, sizeof err);
    if (t) {
        ENC_IS(t, "abc", 0, "a+b, then ab+c", B_ABC);
        ENC_IS(t, "aaa", 0, "equal ranks: the leftmost pair merges", B_AA, B_A);
        ENC_IS(t, " a", 0, "' a' is one word, 'Ġ a' merges", B_GA);
        free_tokenizer(t);
    }

    o = (bopts){ "llama-bpe", m_ab_first, -1, 0 };
    t = bpe_synth(&o, err, sizeof err);
    if (t) {
        ENC_IS(t, "abc", 0, "ignore_merges: a word that is a token is taken whole", B_ABC);
        CHECK(tokenizer_add_bos(t) == 1 && tokenizer_clean_spaces(t) == 1, "llama-bpe: BOS added by default");
        int n;
        int32_t *ids = encode(t, "abc", 3, tokenizer_add_bos(t), 0, &n);
        CHECK(n == 2 && ids[0] == 11 && ids[1] == B_ABC, "BOS first where the vocabulary adds it");
        free(ids);
        free_tokenizer(t);
    }
    struct { const char *pre; int key, want_bos, want_clean; } bos[] = {
        { "qwen2", -1, 0, 0 }, { "qwen2", 1, 1, 0 }, { "llama3", 0, 0, 1 }, { "smollm", -1, 0, 0 }, { NULL, -1, 0, 1 },
    };
    for (size_t i = 0; i < sizeof bos / sizeof bos[0]; i++) {
        o = (bopts){ bos[i].pre, m_ab_first, bos[i].key, 0 };
        t = bpe_synth(&o, err, sizeof err);
        CHECK(t && tokenizer_add_bos(t) == bos[i].want_bos && tokenizer_clean_spaces(t) == bos[i].want_clean,
              "pre %s, add_bos_token %d: add_bos %d, clean_spaces %d", bos[i].pre ? bos[i].pre : "(absent: default)", bos[i].key,
              bos[i].want_bos, bos[i].want_clean);
        free_tokenizer(t);
    }

    struct { bopts o; const char *what, *expect; } bad[] = {
        { { "nonsense-pre", m_ab_first, -1, 0 }, "unknown pre-tokenizer", "nonsense-pre" },
        { { "gpt-2", NULL, -1, 0 }, "no merges", "merges" },
        { { "gpt-2", m_ab_first, -1, 1 }, "merges not strings", "merges" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        t = bpe_synth(&bad[i].o, err, sizeof err);
        CHECK(!t && strstr(err, bad[i].expect), "rejects %s (%s)", bad[i].what, err);
        free_tokenizer(t);
    }
}

/* ------------------------------------------------------------------------ */
/* Real vocabularies                                                          */
/* ------------------------------------------------------------------------ */

struct vec_ctx { const tokenizer *t; int fails, total; };

static void vec_case(void *vctx, int idx, const char *in, size_t inl, const char *out, size_t outl) {
    struct vec_ctx *c = vctx;
    int n;
    int32_t *ids = encode(c->t, in, inl, 0, 0, &n);
    char why[128] = "encode failed", pv[128];
    c->total++;
    if (n < 0 || !ids_equal_line(ids, n, out, outl, why, sizeof why)) {
        c->fails++;
        preview(pv, sizeof pv, in, inl);
        printf("  mismatch: case %d \"%s\": %s\n", idx, pv, why);
    }
    free(ids);
}

static void test_vectors(const char *sh, const char *name, tokenizer *t) {
    char p[4096];
    size_t il, ol;
    snprintf(p, sizeof p, "%s/reference/tokenizer/ggml-vocab-%s.gguf.inp", sh, name);
    char *inp = read_file(p, &il);
    snprintf(p, sizeof p, "%s/reference/tokenizer/ggml-vocab-%s.gguf.out", sh, name);
    char *out = read_file(p, &ol);
    struct vec_ctx c = { t, 0, 0 };
    if (inp && out) for_each_case(inp, il, out, ol, vec_case, &c);
    CHECK(c.total >= 40 && c.fails == 0, "%s: llama.cpp's vectors, %d/%d cases identical", name, c.total - c.fails, c.total);
    free(inp); free(out);
}

/* The hand-worked Llama 3 splits on the real vocabulary: with ignore_merges
   a word that is a token is that token, so the ids follow from the split. */
static void test_llama3_words(const tokenizer *t) {
    for (size_t c = 0; c < sizeof split_cases / sizeof split_cases[0]; c++) {
        const split_case *sc = &split_cases[c];
        if (sc->kind != PRETOK_LLAMA3) continue;
        int32_t want[12];
        int nw = 0, all = 1;
        for (; sc->words[nw]; nw++) {
            want[nw] = find_word(t, sc->words[nw]);
            if (want[nw] < 0) all = 0;
        }
        if (!all) continue; /* a word that is no token needs the merges: covered by the vectors */
        char pv[128];
        preview(pv, sizeof pv, sc->text, strlen(sc->text));
        CHECK(enc_eq(t, sc->text, 0, want, nw), "llama-bpe: \"%s\" -> the %d words' own tokens (%s)", pv, nw, sc->why);
    }
}

static void test_real(const char *sh) {
    char p[4096];
    gguf_file gf[3];
    tokenizer *t[3];
    static const char *const names[3] = { "llama-bpe", "qwen2", "gpt-2" };
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/reference/tokenizer/ggml-vocab-%s.gguf", sh, names[i]);
        t[i] = load_tok(p, &gf[i]);
        CHECK(t[i] != NULL, "load %s", names[i]);
        if (!t[i]) return;
        test_vectors(sh, names[i], t[i]);
    }
    tokenizer *l3 = t[0], *qw = t[1], *g2 = t[2];
    int nn_dummy;
    test_llama3_words(l3);

    /* long digit runs: Qwen2 one digit per token (single code points need no merge) */
    int32_t d[13];
    for (int i = 0; i < 13; i++) { char s[2] = { "1234567890123"[i], 0 }; d[i] = find_word(qw, s); }
    CHECK(enc_eq(qw, "1234567890123", 0, d, 13), "qwen2: 13 digits -> 13 digit tokens");

    /* EOG sets: llama.cpp's list of EOG texts plus EOS (ids from the vocabularies) */
    const int32_t *ids;
    int32_t n = tokenizer_eog_ids(l3, &ids);
    CHECK(n == 2 && ids[0] == 128001 && ids[1] == 128009 && tokenizer_find(l3, "<|end_of_text|>", 15) == 128001 &&
          tokenizer_find(l3, "<|eot_id|>", 10) == 128009 && tokenizer_find(l3, "<|eom_id|>", 10) < 0,
          "llama-bpe (Llama 3.0) EOG: <|end_of_text|> (EOS) and <|eot_id|>; no <|eom_id|> in this vocabulary");
    n = tokenizer_eog_ids(qw, &ids);
    CHECK(n == 3 && ids[0] == tokenizer_find(qw, "</s>", 4) && ids[1] == 151643 && tokenizer_find(qw, "<|im_end|>", 10) == ids[2] &&
          tokenizer_find(qw, "<|fim_pad|>", 11) < 0 && tokenizer_token_type(qw, ids[0]) == TOKEN_TYPE_CONTROL,
          "qwen2 EOG: </s> (made a control token, as llama.cpp's EOG texts now name it), <|endoftext|> (EOS) and <|im_end|>; "
          "no FIM tokens in this vocabulary");
    n = tokenizer_eog_ids(g2, &ids);
    CHECK(n == 1 && ids[0] == 50256, "gpt-2 EOG: <|endoftext|>");
    CHECK(tokenizer_add_bos(l3) == 1 && tokenizer_add_bos(qw) == 0 && tokenizer_add_bos(g2) == 0,
          "add_bos (no key in these files): llama-bpe yes, qwen2 and gpt-2 no");

    /* whole-text decoding: llama.cpp's clean-up of tokenization spaces
       where the pre-tokenizer's entry sets it (gpt-2 yes, qwen2 no) */
    {
        const char *src = "Hello , world ! x ' y I 's you 're ok .";
        const char *clean = "Hello, world! x'y I's you're ok.";
        char dec[128];
        int32_t *x = encode(g2, src, strlen(src), 0, 0, &nn_dummy);
        int l1 = tokenizer_detokenize(g2, x, nn_dummy, dec, sizeof dec);
        int ok1 = l1 == (int)strlen(clean) && !memcmp(dec, clean, (size_t)l1);
        free(x);
        x = encode(qw, src, strlen(src), 0, 0, &nn_dummy);
        int l2 = tokenizer_detokenize(qw, x, nn_dummy, dec, sizeof dec);
        int ok2 = l2 == (int)strlen(src) && !memcmp(dec, src, (size_t)l2);
        int l3 = tokenizer_detokenize(qw, x, nn_dummy, dec, 3);
        free(x);
        CHECK(ok1 && ok2 && l3 == -(int)strlen(src), "detokenize: gpt-2 cleans \" ,\" \" !\" \" ' \" \" 's\" \" 're\" \" .\", qwen2 keeps them; -needed when short");
    }

    /* specials only where allowed */
    const char *chat = "<|im_start|>user\nhi<|im_end|>";
    int32_t im_start = tokenizer_find(qw, "<|im_start|>", 12), im_end = tokenizer_find(qw, "<|im_end|>", 10);
    int32_t want[5] = { im_start, find_word(qw, "user"), find_word(qw, "\n"), find_word(qw, "hi"), im_end };
    CHECK(enc_eq(qw, chat, 1, want, 5), "qwen2 parse_special: <|im_start|> user \\n hi <|im_end|>");
    int nn;
    int32_t *plain = encode(qw, chat, strlen(chat), 0, 0, &nn);
    int ok = nn > 5;
    size_t k = 0;
    for (int i = 0; i < nn && ok; i++) {
        size_t pl;
        const char *pc = tokenizer_piece(qw, plain[i], &pl);
        if (plain[i] == im_start || plain[i] == im_end || k + pl > strlen(chat) || memcmp(chat + k, pc, pl)) ok = 0;
        k += pl;
    }
    CHECK(ok && k == strlen(chat), "qwen2 plain text: <|im_start|> and <|im_end|> stay text (%d tokens) and decode back", nn);
    free(plain);

    /* round trips: valid UTF-8 comes back exactly; invalid bytes as U+FFFD */
    static uint64_t rs = 0x2545F4914F6CDD1Dull;
    char *buf = malloc(4096), *exp = malloc(4 * 4096), *got = malloc(64 * 4096);
    for (int v = 0; v < 3; v++) {
        int bad = 0;
        for (int it = 0; it < 150; it++) {
            size_t len = 0, want_n = 1 + it % 300;
            for (size_t i = 0; i < want_n; i++) {
                rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
                uint32_t r = (uint32_t)(rs >> 20), cp;
                if (it % 5 == 4) { buf[len++] = (char)r; continue; } /* raw bytes */
                switch (r % 8) {
                case 0: cp = "\n\t \r"[r / 8 % 4]; break;
                case 1: cp = '0' + r / 8 % 10; break;
                case 2: cp = 0x4E00 + r / 8 % 0x5000; break;
                case 3: cp = 0x1F600 + r / 8 % 0x50; break;
                case 4: cp = 0xA0 + r / 8 % 0x700; break;
                default: cp = 0x20 + r / 8 % 0x5F;
                }
                len += unicode_encode_utf8(cp, buf + len);
            }
            size_t el = 0;
            for (size_t o = 0; o < len;) {
                uint32_t cp;
                o += unicode_decode_utf8((const unsigned char *)buf + o, len - o, &cp);
                el += unicode_encode_utf8(cp, exp + el);
            }
            int32_t *x = encode(t[v], buf, len, 0, 0, &nn);
            size_t gl = 0;
            for (int i = 0; i < nn; i++) {
                size_t pl;
                const char *pc = tokenizer_piece(t[v], x[i], &pl);
                memcpy(got + gl, pc, pl);
                gl += pl;
            }
            if (nn <= 0 || gl != el || memcmp(got, exp, el)) { bad++; printf("  %s: round trip %d differs\n", names[v], it); }
            free(x);
        }
        CHECK(bad == 0, "%s: 150 random texts (CJK, emoji, digits, whitespace, raw bytes) decode back, invalid UTF-8 as U+FFFD", names[v]);
    }
    free(buf); free(exp); free(got);

    /* speed: 1 MiB of English on the 128k vocabulary */
    snprintf(p, sizeof p, "%s/models/heldout.txt", sh);
    size_t hl;
    char *held = read_file(p, &hl);
    if (held) {
        size_t big = (size_t)1 << 20;
        char *text = malloc(big);
        for (size_t i = 0; i < big; i++) text[i] = held[i % hl];
        double t0 = cpu_now();
        int32_t *x = encode(l3, text, big, 1, 0, &nn);
        double dt = cpu_now() - t0;
        printf("info: llama-bpe: 1 MiB -> %d tokens in %.2f s CPU\n", nn, dt);
        CHECK(nn > (int)(big / 8) && (!timed() || dt < 5.0), "1 MiB of text: %d tokens in %.2f s", nn, dt);
        free(x);
        memset(text, 'a', big);
        t0 = cpu_now();
        x = encode(qw, text, big, 0, 0, &nn);
        dt = cpu_now() - t0;
        printf("info: qwen2: 1 MiB of one letter (a single word) -> %d tokens in %.2f s CPU\n", nn, dt);
        CHECK(nn > 0 && (!timed() || dt < 5.0), "1 MiB single word: %d tokens in %.2f s", nn, dt);
        free(x);
        free(text);
        free(held);
    }
    for (int i = 0; i < 3; i++) { free_tokenizer(t[i]); free_gguf(&gf[i]); }
}

/* The model-family files: the reference prompt's ids (BOS first where the
   vocabulary adds it), build time, and the greedy continuation's text. */
static void test_models(const char *sh) {
    static const char *const models[] = { "rand-llama3-q4_k_m", "rand-qwen2-q4_0", "rand-qwen3-q4_k_m" };
    char p[4096];
    size_t pl;
    snprintf(p, sizeof p, "%s/reference/logits/bpe.prompt.txt", sh);
    char *prompt = read_file(p, &pl);
    CHECK(prompt != NULL, "read bpe.prompt.txt");
    if (!prompt) return;
    for (size_t m = 0; m < 3; m++) {
        gguf_file gf;
        char err[512];
        snprintf(p, sizeof p, "%s/models/%s.gguf", sh, models[m]);
        if (build_gguf(&gf, p, NULL, err, sizeof err)) { CHECK(0, "open %s: %s", p, err); continue; }
        tokenizer *t = NULL;
        double t0 = cpu_now();
        int rc = build_tokenizer(&t, &gf, err, sizeof err);
        double dt = cpu_now() - t0;
        printf("info: %s: tokenizer of %d tokens built in %.1f ms CPU\n", models[m], t ? tokenizer_n_vocab(t) : 0, dt * 1e3);
        CHECK(rc == 0 && (!timed() || dt < 0.25), "%s: tokenizer built from the model file in %.1f ms CPU (%s)",
              models[m], dt * 1e3, rc ? err : "ok");
        if (rc) { free_gguf(&gf); continue; }

        size_t rl, gl, tl;
        snprintf(p, sizeof p, "%s/reference/logits/%s.tokens.i32", sh, models[m]);
        char *ref = read_file(p, &rl);
        int n;
        int32_t *ids = encode(t, prompt, pl, tokenizer_add_bos(t), 0, &n);
        int ok = ref && n == (int)(rl / 4) && !memcmp(ids, ref, rl);
        CHECK(ok, "%s: prompt -> %d reference ids%s", models[m], n, tokenizer_add_bos(t) ? " (BOS first)" : " (no BOS)");
        free(ids); free(ref);

        /* Llama 3's long reference: the first 5200 bytes of heldout.txt */
        snprintf(p, sizeof p, "%s/reference/logits/%s.long.tokens.i32", sh, models[m]);
        ref = read_file(p, &rl);
        if (ref) {
            size_t hl;
            snprintf(p, sizeof p, "%s/models/heldout.txt", sh);
            char *held = read_file(p, &hl);
            ids = held && hl >= 5200 ? encode(t, held, 5200, tokenizer_add_bos(t), 0, &n) : NULL;
            CHECK(ids && n == (int)(rl / 4) && !memcmp(ids, ref, rl), "%s: 5200 bytes of Shakespeare -> the %d reference ids of .long",
                  models[m], (int)(rl / 4));
            free(ids); free(held); free(ref);
        }

        /* greedy ids -> text, streamed as picolm does: complete characters only */
        snprintf(p, sizeof p, "%s/reference/logits/%s.greedy.i32", sh, models[m]);
        char *g = read_file(p, &gl);
        snprintf(p, sizeof p, "%s/reference/logits/%s.greedy.txt", sh, models[m]);
        char *txt = read_file(p, &tl);
        if (g && txt) {
            char *outb = malloc(tl + 4096), pend[64];
            size_t on = 0, np = 0;
            int split = 0;
            for (size_t i = 0; i + 4 <= gl; i += 4) {
                int32_t id;
                memcpy(&id, g + i, 4);
                size_t l;
                const char *pc = tokenizer_piece(t, id, &l);
                if (np + l > sizeof pend) break;
                memcpy(pend + np, pc, l);
                np += l;
                size_t emit = tokenizer_utf8_prefix(pend, np);
                for (size_t q = 0; q < emit; q++) outb[on++] = pend[q];
                /* what was emitted so far must end on a character boundary */
                if (emit && on < tl && (txt[on] & 0xC0) == 0x80) split = 1;
                memmove(pend, pend + emit, np - emit);
                np -= emit;
            }
            memcpy(outb + on, pend, np);
            on += np;
            CHECK(on == tl && !memcmp(outb, txt, tl) && !split, "%s: greedy ids decode to greedy.txt byte for byte (%zu bytes), streamed whole characters",
                  models[m], tl);
            free(outb);
        } else {
            CHECK(0, "read %s greedy files", models[m]);
        }
        free(g); free(txt);
        free_tokenizer(t);
        free_gguf(&gf);
    }
    free(prompt);
}

int main(void) {
    test_splits();
    test_hand_built();
    const char *sh = shared_dir("BPE tokenizer reference data");
    if (sh) {
        test_real(sh);
        test_models(sh);
    }
    return CHECK_DONE();
}
