/*
 * Code point flags, lenient UTF-8, the GPT-2 byte map and the BPE
 * pre-tokenizers.  The splits reproduce llama.cpp's unicode_regex_split:
 * its hand-written GPT-2 and Llama-3 matchers, and, for the expressions it
 * hands to std::regex over a "collapsed" text (Qwen2's \p{N}, SmolLM's and
 * the default's extra passes), the same leftmost, ordered-alternation
 * matches written out as loops.  Each pass refines the previous pass's
 * words; text between two matches is a word of its own.
 */
#include "unicode.h"

#include <string.h>

#include "unicode_table.h" /* generated: $(BUILD)/gen, see mk/unicode.mk */

uint16_t unicode_flags(uint32_t cp) {
    if (cp < 256) return unicode_latin1[cp];
    if (cp > 0x10FFFF) return UCD_UNDEFINED;
    /* last range whose first code point is <= cp */
    size_t lo = 0, hi = sizeof unicode_ranges / sizeof unicode_ranges[0];
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if ((unicode_ranges[mid] >> 9) <= cp) lo = mid;
        else hi = mid;
    }
    return (uint16_t)(unicode_ranges[lo] & 0x1FF);
}

const char *unicode_version(void) { return UNICODE_TABLE_VERSION; }

size_t unicode_decode_utf8(const unsigned char *s, size_t n, uint32_t *cp) {
    unsigned c = s[0];
    size_t k;
    if (c < 0x80) { *cp = c; return 1; }
    if (!(c & 0x40)) k = 0;          /* a continuation byte cannot start */
    else if (!(c & 0x20)) k = 2;
    else if (!(c & 0x10)) k = 3;
    else if (!(c & 0x08)) k = 4;
    else k = 0;
    if (k == 0 || k > n) { *cp = 0xFFFD; return 1; }
    uint32_t v = c & (0x7F >> k);
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xC0) != 0x80) { *cp = 0xFFFD; return 1; }
        v = (v << 6) | (s[i] & 0x3F);
    }
    *cp = v > 0x10FFFF ? 0xFFFD : v;
    return k;
}

size_t unicode_encode_utf8(uint32_t cp, char *o) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | cp >> 6); o[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12); o[1] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18); o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* GPT-2 keeps the 188 printable bytes; the other 68 (0x00-0x20, 0x7F-0xA0,
   0xAD) count up from U+0100 in byte order. */
uint32_t unicode_byte_to_cp(uint8_t b) {
    if (b <= 0x20) return 0x100 + b;
    if (b >= 0x7F && b <= 0xA0) return 0x100 + 33 + (b - 0x7F);
    if (b == 0xAD) return 0x100 + 67;
    return b;
}

int unicode_cp_to_byte(uint32_t cp) {
    if (cp < 0x100) return unicode_byte_to_cp((uint8_t)cp) == cp ? (int)cp : -1;
    if (cp < 0x100 + 33) return (int)(cp - 0x100);
    if (cp < 0x100 + 67) return (int)(cp - 0x100 - 33 + 0x7F);
    return cp == 0x100 + 67 ? 0xAD : -1;
}

/* ------------------------------------------------------------------------ */
/* Pre-tokenizer passes                                                       */
/* ------------------------------------------------------------------------ */

typedef struct {
    const uint32_t *cp;
    const uint16_t *fl;
    size_t lo, hi;    /* the word being refined */
    size_t *out, n;   /* word lengths written so far */
    size_t prev;      /* end of the last word written */
} pass;

#define OUT_OF_RANGE 0xFFFFFFFFu

/* flags / code point inside the word, 0 / OUT_OF_RANGE outside it */
static inline uint16_t F(const pass *p, size_t i) { return i >= p->lo && i < p->hi ? p->fl[i] : 0; }
static inline uint32_t C(const pass *p, size_t i) { return i >= p->lo && i < p->hi ? p->cp[i] : OUT_OF_RANGE; }

/* close a word at end (nothing when empty); returns its length */
static size_t cut(pass *p, size_t end) {
    size_t len = end - p->prev;
    if (len) p->out[p->n++] = len;
    p->prev = end;
    return len;
}

static inline uint32_t ascii_lower(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

/* 's 't 're 've 'm 'll 'd at pos (case-insensitive for Llama 3): its length or 0 */
static size_t contraction(const pass *p, size_t pos, int icase) {
    if (p->cp[pos] != '\'' || pos + 1 >= p->hi) return 0;
    uint32_t a = p->cp[pos + 1];
    if (icase) a = ascii_lower(a);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (pos + 2 >= p->hi) return 0;
    uint32_t b = p->cp[pos + 2];
    if (icase) b = ascii_lower(b);
    return (a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l') ? 3 : 0;
}

/* whitespace run at pos: its length, and the end of its last \r or \n (0: none) */
static size_t ws_run(const pass *p, size_t pos, size_t *last_nl) {
    size_t k = 0;
    *last_nl = 0;
    while (F(p, pos + k) & UCD_WHITESPACE) {
        uint32_t c = p->cp[pos + k];
        if (c == '\r' || c == '\n') *last_nl = pos + k + 1;
        k++;
    }
    return k;
}

#define WLN (UCD_WHITESPACE | UCD_LETTER | UCD_NUMBER)

/* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static void pass_gpt2(pass *p) {
    size_t pos = p->lo;
    while (pos < p->hi) {
        const uint32_t c = p->cp[pos];
        size_t k = contraction(p, pos, 0);
        if (k) { pos += cut(p, pos + k); continue; }
        const uint16_t f2 = c == ' ' ? F(p, pos + 1) : p->fl[pos];
        const uint16_t cls = f2 & UCD_LETTER ? UCD_LETTER : f2 & UCD_NUMBER ? UCD_NUMBER : 0;
        if (cls) {
            pos += c == ' ';
            while (F(p, pos) & cls) pos++;
            cut(p, pos);
            continue;
        }
        if (!(f2 & WLN) && f2) {
            pos += c == ' ';
            while (!(F(p, pos) & WLN) && F(p, pos)) pos++;
            cut(p, pos);
            continue;
        }
        size_t nl, n_ws = ws_run(p, pos, &nl);
        if (n_ws > 1 && C(p, pos + n_ws) != OUT_OF_RANGE) pos += n_ws - 1; /* \s+(?!\S) */
        else pos += n_ws ? n_ws : 1;
        cut(p, pos);
    }
}

/* Llama 3 (max_digits 3) and Qwen2 (1):
   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max}
   | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
static void pass_llama3(pass *p, int max_digits) {
    size_t pos = p->lo;
    while (pos < p->hi) {
        const uint32_t c = p->cp[pos];
        const uint16_t f = p->fl[pos];
        size_t k = contraction(p, pos, 1);
        if (k) { pos += cut(p, pos + k); continue; }
        if (!(c == '\r' || c == '\n' || (f & UCD_NUMBER)) && ((f & UCD_LETTER) || (F(p, pos + 1) & UCD_LETTER))) {
            pos++;
            while (F(p, pos) & UCD_LETTER) pos++;
            cut(p, pos);
            continue;
        }
        if (f & UCD_NUMBER) {
            size_t ini = pos;
            while (F(p, pos) & UCD_NUMBER)
                if (++pos - ini >= (size_t)max_digits) { cut(p, pos); ini = pos; }
            cut(p, pos);
            continue;
        }
        const uint16_t f2 = c == ' ' ? F(p, pos + 1) : f;
        if (!(f2 & WLN) && f) {
            pos += c == ' ';
            while (!(F(p, pos) & WLN) && F(p, pos)) pos++;
            while (C(p, pos) == '\r' || C(p, pos) == '\n') pos++;
            cut(p, pos);
            continue;
        }
        size_t nl, n_ws = ws_run(p, pos, &nl);
        if (nl) pos = nl;                                                   /* \s*[\r\n]+ */
        else if (n_ws > 1 && C(p, pos + n_ws) != OUT_OF_RANGE) pos += n_ws - 1; /* \s+(?!\S) */
        else pos += n_ws ? n_ws : 1;
        cut(p, pos);
    }
}

/* members of the classes the std::regex passes use (their collapsed form:
   ASCII as is, other code points by category, whitespace never a member) */
typedef int (*member_fn)(uint32_t c, uint16_t f);

static int is_number(uint32_t c, uint16_t f) { (void)c; return (f & UCD_NUMBER) != 0; }
static int is_ascii_digit(uint32_t c, uint16_t f) { (void)f; return c >= '0' && c <= '9'; }
/* [\p{P}\$\+<=>\^~\|] */
static int is_punct_ext(uint32_t c, uint16_t f) {
    return !(f & UCD_WHITESPACE) && ((f & UCD_PUNCT) || (c < 0x80 && c && strchr("$+<=>^~|", (int)c)));
}

#define MEMBER(p, i, m) ((m)((p)->cp[i], (p)->fl[i]))

/* "\p{N}": every member alone */
static void pass_each(pass *p, member_fn m) {
    for (size_t i = p->lo; i < p->hi; i++)
        if (MEMBER(p, i, m)) { cut(p, i); cut(p, i + 1); }
    cut(p, p->hi);
}

/* "[...]+": maximal runs of members */
static void pass_runs(pass *p, member_fn m) {
    size_t i = p->lo;
    while (i < p->hi) {
        if (!MEMBER(p, i, m)) { i++; continue; }
        cut(p, i);
        while (i < p->hi && MEMBER(p, i, m)) i++;
        cut(p, i);
    }
    cut(p, p->hi);
}

/* "[0-9][0-9][0-9]": leftmost triples */
static void pass_triples(pass *p, member_fn m) {
    size_t i = p->lo;
    while (i + 3 <= p->hi) {
        if (MEMBER(p, i, m) && MEMBER(p, i + 1, m) && MEMBER(p, i + 2, m)) {
            cut(p, i);
            cut(p, i + 3);
            i += 3;
        } else {
            i++;
        }
    }
    cut(p, p->hi);
}

/* the GPT-2 and Llama-3 matchers as class passes: arg via the member slot */
static void step_gpt2(pass *p, member_fn m) { (void)m; pass_gpt2(p); }
static void step_llama3(pass *p, member_fn m) { (void)m; pass_llama3(p, 3); }
static void step_qwen2(pass *p, member_fn m) { (void)m; pass_llama3(p, 1); }

typedef struct { void (*fn)(pass *, member_fn); member_fn member; } pass_step;

static const pass_step steps_default[] = {
    { pass_runs, is_punct_ext }, { step_gpt2, NULL }, { pass_runs, is_number }, { pass_triples, is_ascii_digit }, { NULL, NULL }
};
static const pass_step steps_gpt2[] = { { step_gpt2, NULL }, { NULL, NULL } };
static const pass_step steps_llama3[] = { { step_llama3, NULL }, { NULL, NULL } };
static const pass_step steps_qwen2[] = { { step_qwen2, NULL }, { NULL, NULL } };
static const pass_step steps_smollm[] = { { pass_each, is_number }, { step_gpt2, NULL }, { NULL, NULL } };

static const pass_step *const steps_of[] = {
    [PRETOK_DEFAULT] = steps_default, [PRETOK_GPT2] = steps_gpt2, [PRETOK_LLAMA3] = steps_llama3,
    [PRETOK_QWEN2] = steps_qwen2, [PRETOK_SMOLLM] = steps_smollm,
};

size_t unicode_pretok_split(pretok_kind kind, const uint32_t *cps, const uint16_t *fl, size_t n, size_t *lens, size_t *tmp) {
    if (n == 0) return 0;
    /* ping-pong between the two arrays; the result must end in lens */
    const pass_step *st = steps_of[kind];
    size_t n_steps = 0;
    while (st[n_steps].fn) n_steps++;
    size_t *cur = n_steps % 2 ? tmp : lens, *nxt = n_steps % 2 ? lens : tmp;
    cur[0] = n;
    size_t m = 1;
    for (size_t s = 0; s < n_steps; s++) {
        pass p = { .cp = cps, .fl = fl, .out = nxt, .n = 0 };
        size_t start = 0;
        for (size_t w = 0; w < m; w++) {
            p.lo = p.prev = start;
            p.hi = start + cur[w];
            st[s].fn(&p, st[s].member);
            start = p.hi;
        }
        m = p.n;
        size_t *t = cur; cur = nxt; nxt = t;
    }
    return m;
}
