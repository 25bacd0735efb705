/* json_schema: PROCESS, constrain generation to one JSON document valid
 * against a JSON Schema (--json-schema), complete within the token budget.
 *
 * The schema (sampler key json_schema, its text) is compiled at create()
 * into nodes: objects (properties in declared order, each optional one may
 * be left out, the required ones may not; no other keys), arrays
 * (minItems/maxItems), strings (minLength/maxLength in code points),
 * numbers and integers (minimum/maximum and the exclusive ones, compared as
 * exact decimals; no exponent, at most 18 digits), literal sets (enum,
 * const, booleans, null: their compact serializations), anyOf alternatives
 * ($ref to $defs resolved), and "any value" (json_grammar.h's automaton: a
 * schema of true or {}, an object without properties, array items without a
 * schema).  A keyword outside that list is an error naming it.
 *
 * Generation runs a pushdown automaton over bytes: a thread is a stack of
 * frames, one per open value; an anyOf forks the thread at the value's first
 * byte (threads that die are dropped, identical ones merged).  Budget: each
 * node knows the length of its shortest document, each frame the bytes its
 * shortest completion still needs (the sum over a thread's frames is its
 * closing cost); with n_remaining tokens left a token is kept only when
 * some thread after it can close in n_remaining - 1 bytes.  create() checks
 * the vocabulary has a single-byte token for every byte a shortest completion
 * may use, so by induction a document always closes in time; min_budget()
 * is the fewest tokens for which a first token exists.
 *
 * Speed on a 152k vocabulary: inside a string most tokens are plain string
 * content, so their code points and pending UTF-8 bytes are computed once
 * and a step only compares counts; every other token is reached through an
 * index by its first two bytes, each prefix simulated once, so that the
 * tokens a state rejects after one or two bytes cost nothing.
 *
 * Which tokens are generated: accept() after apply() is the chosen token;
 * an accept() with no apply() before it is a prompt token and restarts the
 * document (a new turn of a chat starts a new document).  Front ends stop
 * at EOS without accepting it, so after a document that could end (a
 * top-level number may also go on), a token that cannot continue it is the
 * next prompt's; one that can is read as a continuation.
 *
 * Lazy documents (tool calls a model may or may not make): with
 * json_schema_trigger the output is free text until it contains that text
 * (a Hermes "<tool_call>"), and the document follows it; a token that
 * completes the trigger is kept only when a document still fits in the
 * tokens left after it (and the bytes it carries past the trigger start
 * one).  With json_schema_optional the first token decides: one whose
 * first byte starts a document (not a blank) begins it, any other makes
 * the whole output free text (Llama 3's bare JSON calls).  min_budget()
 * is then a call's: the trigger's fewest tokens plus the document's.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_grammar.h"
#include "sampler_common.h"

#define SJ_INF (1 << 28)          /* a cost no budget reaches */
#define SJ_MAX_DEPTH 32           /* frames (open values) per thread */
#define SJ_MAX_THREADS 256        /* threads alive at once (cheapest kept) */
#define SJ_NUM_DIGITS 18          /* digits of a number (exact in int64) */
#define SJ_SAT 4000000000000000000LL /* a bound beyond every such number */

/* ======================================================================== */
/* Schema text: a JSON DOM                                                   */
/* ======================================================================== */

enum { JV_NULL, JV_FALSE, JV_TRUE, JV_NUM, JV_STR, JV_ARR, JV_OBJ };

typedef struct jv {
    uint8_t type;
    uint32_t n;        /* bytes of a string or number text, items, members */
    const char *s;     /* JV_STR: decoded UTF-8, NUL-terminated; JV_NUM: the text */
    struct jv *v;      /* items, or members' values */
    struct jv *k;      /* members' keys (JV_STR) */
    uint32_t *order;   /* JV_OBJ: the members by key (binary search) */
    uint32_t memo;     /* a schema: its node + 1 once compiled */
} jv;

/* Every allocation of a parse, freed together. */
typedef struct arena {
    void **p;
    int n, cap;
} arena;

static void *ar_keep(arena *a, void *p) {
    if (!p) return NULL;
    if (a->n == a->cap) {
        const int cap = a->cap ? 2 * a->cap : 64;
        void **q = realloc(a->p, (size_t)cap * sizeof *q);
        if (!q) { free(p); return NULL; }
        a->p = q;
        a->cap = cap;
    }
    return a->p[a->n++] = p;
}

static void ar_free(arena *a) {
    for (int i = 0; i < a->n; i++) free(a->p[i]);
    free(a->p);
    memset(a, 0, sizeof *a);
}

typedef struct jparse {
    const char *s;
    size_t n, i;
    int depth;
    arena *ar;
    const char *why; /* the first error */
} jparse;

static int jp_fail(jparse *p, const char *why) {
    if (!p->why) p->why = why;
    return 0;
}

static void jp_ws(jparse *p) {
    while (p->i < p->n && jg_is_ws((unsigned char)p->s[p->i])) p->i++;
}

static int jp_hex4(jparse *p, unsigned *out) {
    unsigned v = 0;
    for (int k = 0; k < 4; k++, p->i++) {
        const unsigned c = p->i < p->n ? (unsigned char)p->s[p->i] : 0;
        if (!jg_is_hex(c)) return jp_fail(p, "bad \\u escape");
        v = v << 4 | (c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
    }
    *out = v;
    return 1;
}

static size_t utf8_put(char *o, unsigned cp) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | cp >> 6); o[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12); o[1] = (char)(0x80 | (cp >> 6 & 0x3F)); o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18); o[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (char)(0x80 | (cp >> 6 & 0x3F)); o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* A string at p->s[p->i] == '"', decoded (escapes, surrogate pairs) into UTF-8. */
static int jp_string(jparse *p, jv *out) {
    size_t end = p->i + 1; /* the closing quote, or the end: decoding never grows */
    while (end < p->n && p->s[end] != '"') end += p->s[end] == '\\' ? 2 : 1;
    char *o = ar_keep(p->ar, malloc(end - p->i + 1));
    if (!o) return jp_fail(p, "out of memory");
    size_t k = 0;
    jg_state u = {0, JG_STR, 0, 0, 0, 0, 0x80, 0xBF, 0, 0};
    for (p->i++;;) {
        if (p->i >= p->n) return jp_fail(p, "unterminated string");
        const unsigned c = (unsigned char)p->s[p->i];
        if (c == '"' && u.mode == JG_STR) { p->i++; break; }
        if (c == '\\' && u.mode == JG_STR) {
            const char *esc = p->i + 1 < p->n ? strchr("\"\\/bfnrtu", p->s[p->i + 1]) : NULL;
            if (!esc || !*esc) return jp_fail(p, "bad escape");
            p->i += 2;
            if (*esc != 'u') { o[k++] = "\"\\/\b\f\n\r\t"[esc - "\"\\/bfnrtu"]; continue; }
            unsigned cp, lo;
            if (!jp_hex4(p, &cp)) return 0;
            if (cp >= 0xDC00 && cp <= 0xDFFF) return jp_fail(p, "lone low surrogate in \\u escape");
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (p->i + 1 >= p->n || p->s[p->i] != '\\' || p->s[p->i + 1] != 'u') return jp_fail(p, "lone high surrogate in \\u escape");
                p->i += 2;
                if (!jp_hex4(p, &lo)) return 0;
                if (lo < 0xDC00 || lo > 0xDFFF) return jp_fail(p, "lone high surrogate in \\u escape");
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            k += utf8_put(o + k, cp);
            continue;
        }
        if (!jg_str_byte(&u, c, 1)) return jp_fail(p, c < 0x20 ? "control character in a string" : "invalid UTF-8 in a string");
        o[k++] = (char)c;
        p->i++;
    }
    o[k] = 0;
    *out = (jv){JV_STR, (uint32_t)k, o, NULL, NULL, NULL, 0};
    return 1;
}

static int jp_number(jparse *p, jv *out) {
    const size_t st = p->i;
    jg_state u = jg_any_value;
    int r;
    do r = jg_step(&u, p->i < p->n ? (unsigned char)p->s[p->i] : ' ', 1);
    while (r == 1 && ++p->i <= p->n);
    if (r != 2) return jp_fail(p, "bad number");
    *out = (jv){JV_NUM, (uint32_t)(p->i - st), p->s + st, NULL, NULL, NULL, 0};
    return 1;
}

static int jp_value(jparse *p, jv *out);

typedef struct keyref {
    const char *s;
    uint32_t n, i;
} keyref;

static int key_cmp(const char *a, uint32_t an, const char *b, uint32_t bn) {
    const int r = memcmp(a, b, an < bn ? an : bn);
    return r ? r : (an > bn) - (an < bn);
}

static int keyref_cmp(const void *a, const void *b) {
    const keyref *x = a, *y = b;
    return key_cmp(x->s, x->n, y->s, y->n);
}

/* An object's members sorted by key (o->order); a key twice is an error. */
static int index_keys(jparse *p, jv *o) {
    keyref *r = malloc((o->n ? o->n : 1) * sizeof *r);
    o->order = ar_keep(p->ar, malloc((o->n ? o->n : 1) * sizeof *o->order));
    if (!r || !o->order) { free(r); return jp_fail(p, "out of memory"); }
    for (uint32_t i = 0; i < o->n; i++) r[i] = (keyref){o->k[i].s, o->k[i].n, i};
    qsort(r, o->n, sizeof *r, keyref_cmp);
    int dup = 0;
    for (uint32_t i = 0; i < o->n; i++) {
        o->order[i] = r[i].i;
        dup |= i && !keyref_cmp(&r[i - 1], &r[i]);
    }
    free(r);
    return dup ? jp_fail(p, "duplicate key in the object that ends here") : 1;
}

/* An array or object: items (and keys) into growing vectors kept by the arena. */
static int jp_container(jparse *p, jv *out, int object) {
    if (++p->depth > 128) return jp_fail(p, "nested too deeply");
    const char close = object ? '}' : ']';
    jv *v = NULL, *k = NULL;
    uint32_t n = 0, cap = 0;
    p->i++;
    jp_ws(p);
    if (p->i < p->n && p->s[p->i] == close) {
        p->i++;
    } else {
        for (;;) {
            if (n == cap) {
                cap = cap ? 2 * cap : 8;
                jv *nv = realloc(v, cap * sizeof *v), *nk = object ? realloc(k, cap * sizeof *k) : NULL;
                if (nv) v = nv;
                if (nk) k = nk;
                if (!nv || (object && !nk)) { free(v); free(k); return jp_fail(p, "out of memory"); }
            }
            jp_ws(p);
            if (object) {
                if (p->i >= p->n || p->s[p->i] != '"') { free(v); free(k); return jp_fail(p, "expected a key"); }
                if (!jp_string(p, &k[n])) { free(v); free(k); return 0; }
                jp_ws(p);
                if (p->i >= p->n || p->s[p->i] != ':') { free(v); free(k); return jp_fail(p, "expected ':'"); }
                p->i++;
            }
            if (!jp_value(p, &v[n++])) { free(v); free(k); return 0; }
            jp_ws(p);
            if (p->i < p->n && p->s[p->i] == close) { p->i++; break; }
            if (p->i >= p->n || p->s[p->i] != ',') { free(v); free(k); return jp_fail(p, object ? "expected ',' or '}'" : "expected ',' or ']'"); }
            p->i++;
        }
    }
    if ((v && !ar_keep(p->ar, v)) || (k && !ar_keep(p->ar, k))) return jp_fail(p, "out of memory");
    *out = (jv){(uint8_t)(object ? JV_OBJ : JV_ARR), n, NULL, v, k, NULL, 0};
    p->depth--;
    return !object || index_keys(p, out);
}

static int jp_word(jparse *p, const char *w, uint8_t type, jv *out) {
    const size_t l = strlen(w);
    if (p->n - p->i < l || memcmp(p->s + p->i, w, l)) return jp_fail(p, "unexpected character");
    p->i += l;
    *out = (jv){type, 0, NULL, NULL, NULL, NULL, 0};
    return 1;
}

static int jp_value(jparse *p, jv *out) {
    jp_ws(p);
    if (p->i >= p->n) return jp_fail(p, "unexpected end");
    switch (p->s[p->i]) {
    case '{': return jp_container(p, out, 1);
    case '[': return jp_container(p, out, 0);
    case '"': return jp_string(p, out);
    case 't': return jp_word(p, "true", JV_TRUE, out);
    case 'f': return jp_word(p, "false", JV_FALSE, out);
    case 'n': return jp_word(p, "null", JV_NULL, out);
    default: return jp_number(p, out);
    }
}

/* Parse text (n bytes); 0 ok, else a message with the line and column. */
static int parse_json(const char *text, size_t n, arena *ar, jv *out, char *err, size_t errlen) {
    jparse p = {text, n, 0, 0, ar, NULL};
    if (jp_value(&p, out)) {
        jp_ws(&p);
        if (p.i == n) return 0;
        jp_fail(&p, "text after the schema");
    }
    int line = 1, col = 1;
    for (size_t i = 0; i < p.i && i < n; i++) {
        if (text[i] == '\n') line++, col = 1;
        else col++;
    }
    snprintf(err, errlen, "json_schema: the schema is not valid JSON: line %d, column %d: %s", line, col, p.why);
    return -1;
}

/* The index of o's member named key (n bytes), or -1. */
static int64_t member_at(const jv *o, const char *key, uint32_t n) {
    if (!o || o->type != JV_OBJ) return -1;
    uint32_t lo = 0, hi = o->n;
    while (lo < hi) {
        const uint32_t m = lo + (hi - lo) / 2, i = o->order[m];
        const int r = key_cmp(o->k[i].s, o->k[i].n, key, n);
        if (!r) return i;
        if (r < 0) lo = m + 1;
        else hi = m;
    }
    return -1;
}

static const jv *member(const jv *o, const char *key) {
    const int64_t i = member_at(o, key, (uint32_t)strlen(key));
    return i < 0 ? NULL : &o->v[i];
}

/* ======================================================================== */
/* Exact decimals: bounds and numeric enum values                            */
/* ======================================================================== */

/* value = (neg ? -1 : 1) * digits * 10^e; no leading or trailing zeros
   (nd = 0: zero) */
typedef struct dec {
    int neg, nd, e;
    char d[48];
} dec;

static int dec_parse(const char *s, uint32_t n, dec *x) {
    memset(x, 0, sizeof *x);
    uint32_t i = 0;
    int frac = 0, dot = 0;
    if (i < n && s[i] == '-') x->neg = 1, i++;
    for (; i < n && (jg_is_digit((unsigned char)s[i]) || s[i] == '.'); i++) {
        if (s[i] == '.') { dot = 1; continue; }
        frac += dot;
        if (!x->nd && s[i] == '0') continue;
        if (x->nd == (int)sizeof x->d) return -1;
        x->d[x->nd++] = s[i];
    }
    long e = 0;
    if (i < n) e = strtol(s + i + 1, NULL, 10); /* the text is a valid JSON number */
    if (e > 100000 || e < -100000) return -1;
    x->e = (int)e - frac;
    while (x->nd && x->d[x->nd - 1] == '0') x->nd--, x->e++;
    if (!x->nd) x->neg = 0, x->e = 0;
    return 0;
}

static int dec_cmp(const dec *a, const dec *b) {
    if (a->neg != b->neg) return a->neg ? -1 : 1;
    const int s = a->neg ? -1 : 1;
    if (!a->nd || !b->nd) return s * ((a->nd > 0) - (b->nd > 0));
    const int ma = a->nd + a->e, mb = b->nd + b->e; /* digits before the point */
    if (ma != mb) return s * (ma > mb ? 1 : -1);
    for (int i = 0; i < a->nd || i < b->nd; i++) {
        const char x = i < a->nd ? a->d[i] : '0', y = i < b->nd ? b->d[i] : '0';
        if (x != y) return s * (x > y ? 1 : -1);
    }
    return 0;
}

/* ceil (up) or floor of x * 10^k, saturated at +-SJ_SAT */
static int64_t dec_scaled(const dec *x, int k, int up) {
    const int ip_digits = x->nd + x->e + k; /* digits of the integer part */
    if (ip_digits > SJ_NUM_DIGITS) return x->neg ? -SJ_SAT : SJ_SAT;
    int64_t ip = 0;
    for (int i = 0; i < ip_digits; i++) ip = ip * 10 + (i < x->nd ? x->d[i] - '0' : 0);
    const int frac = ip_digits < x->nd; /* digits dropped: the last is not 0 */
    if (!x->neg) return ip + (up && frac);
    return -(ip + (!up && frac));
}

static int dec_is_integer(const dec *x) { return x->e >= 0; }

/* ======================================================================== */
/* The compiled grammar                                                      */
/* ======================================================================== */

enum { N_ANY, N_OBJ, N_ARR, N_STR, N_NUM, N_LITS, N_ALT, N_NEVER, N_PENDING };

typedef struct lit {
    const uint8_t *s;
    uint32_t len;
} lit;

typedef struct objx {
    uint32_t n;        /* properties */
    lit *keys;         /* serialized keys ("name", quotes included), sorted */
    uint32_t *decl;    /* declared index of sorted key i */
    uint32_t *klen;    /* by declared index: key length */
    uint32_t *pnode;   /* by declared index: the value's node */
    uint8_t *req;      /* by declared index: required */
    uint32_t *fr;      /* fr[i]: the last property that may come next after i-1 (the first required >= i) */
    int32_t *rc;       /* rc[i]: bytes of the required properties >= i, each with its comma */
} objx;

typedef struct numx {
    int64_t lo[SJ_NUM_DIGITS + 1], hi[SJ_NUM_DIGITS + 1]; /* bounds * 10^k, rounded inwards */
    int32_t sign_cost; /* closing cost after '-' */
} numx;

typedef struct node {
    uint8_t kind;
    uint8_t integer;   /* N_NUM: no fraction */
    uint8_t obj_only;  /* N_ANY: an object */
    int32_t min_len;   /* bytes of the shortest document */
    int32_t md;        /* frames the shortest document nests */
    uint8_t first[32]; /* bytes a value may start with (bitset) */
    uint32_t n;        /* N_LITS: literals; N_ALT: alternatives */
    lit *lits;         /* N_LITS: sorted */
    uint32_t *bmin;    /* N_LITS: the shortest length in each block of SJ_BLOCK */
    uint32_t *alts;    /* N_ALT: concrete nodes */
    uint32_t item;     /* N_ARR */
    uint32_t lo, hi;   /* N_ARR: items; N_STR: code points */
    objx *obj;
    numx *num;
} node;

typedef struct grammar {
    node *nodes;
    uint32_t n_nodes, cap;
    uint32_t root;
    int utf8_ok;
    arena mem;         /* the nodes' tables and literal bytes */
} grammar;

static int bit(const uint8_t *set, unsigned c) { return set[c >> 3] >> (c & 7) & 1; }
static void set_bit(uint8_t *set, unsigned c) { set[c >> 3] |= (uint8_t)(1u << (c & 7)); }

/* ======================================================================== */
/* Threads: stacks of frames                                                 */
/* ======================================================================== */

/* A frame's phase: before its value, or where in it (numbered apart, so
   that a phase names its kind). */
enum {
    P_START = 0,
    O_OPEN, O_KEY, O_COLON, O_VALUE, O_AFTER, O_COMMA, /* object */
    A_OPEN, A_VALUE, A_AFTER, A_COMMA,                 /* array */
    NM_SIGN, NM_ZERO, NM_INT, NM_DOT, NM_FRAC,         /* number */
    IN                                                 /* string, literal, any */
};

typedef struct frame {
    uint32_t node;
    uint8_t phase, pad[3];
    union {
        struct { uint16_t next, cur, lo, hi, pos; } o;   /* key: sorted range [lo, hi), pos bytes matched */
        struct { uint32_t count; } a;
        struct { uint32_t count; uint8_t mode, n, lo, hi, hex; } s; /* mode: JG_STR.. as json_grammar.h */
        struct { int64_t m; uint8_t ki, kf, neg; } num;  /* digits so far as an integer, ki + kf of them */
        struct { uint32_t lo, hi, pos; } l;
        jg_state any;
    } u;
} frame;

typedef struct thread {
    uint16_t depth;
    uint8_t ws, pad;
    frame f[SJ_MAX_DEPTH];
} thread;

static size_t thread_size(const thread *t) { return offsetof(thread, f) + t->depth * sizeof(frame); }
static void thread_copy(thread *d, const thread *s) { memcpy(d, s, thread_size(s)); }

static frame start_frame(uint32_t node) {
    frame f;
    memset(&f, 0, sizeof f);
    f.node = node;
    return f;
}

static int fits(const grammar *g, const thread *t, uint32_t node) { return t->depth + g->nodes[node].md <= SJ_MAX_DEPTH; }

static void push(thread *t, uint32_t node) { t->f[t->depth++] = start_frame(node); }

/* The value on top is complete: its parent (if any) reads what follows. */
static void value_done(thread *t) {
    if (!--t->depth) return;
    frame *p = &t->f[t->depth - 1];
    p->phase = p->phase == O_VALUE ? O_AFTER : A_AFTER;
}

/* ---- literal sets: sorted byte strings, a range [lo, hi) sharing pos bytes ---- */

static int narrow(const lit *L, uint32_t *lo, uint32_t *hi, uint32_t pos, unsigned c) {
    uint32_t a = *lo, b = *hi;
    while (a < b) { /* first with a byte >= c at pos (shorter ones sort first) */
        const uint32_t m = a + (b - a) / 2;
        if (L[m].len <= pos || L[m].s[pos] < c) a = m + 1;
        else b = m;
    }
    const uint32_t first = a;
    b = *hi;
    while (a < b) {
        const uint32_t m = a + (b - a) / 2;
        if (L[m].s[pos] <= c) a = m + 1;
        else b = m;
    }
    if (a == first) return 0;
    *lo = first;
    *hi = a;
    return 1;
}

/* The bytes left of the shortest literal in [lo, hi) after pos: whole
   blocks of SJ_BLOCK by their minimum (bmin), the ends one by one. */
#define SJ_BLOCK 64
static int32_t lits_cost(const node *nd, uint32_t lo, uint32_t hi, uint32_t pos) {
    uint32_t best = UINT32_MAX;
    for (uint32_t i = lo; i < hi;) {
        if (i % SJ_BLOCK == 0 && i + SJ_BLOCK <= hi) {
            if (nd->bmin[i / SJ_BLOCK] < best) best = nd->bmin[i / SJ_BLOCK];
            i += SJ_BLOCK;
        } else {
            if (nd->lits[i].len < best) best = nd->lits[i].len;
            i++;
        }
    }
    return best == UINT32_MAX ? SJ_INF : (int32_t)(best - pos);
}

static int32_t sat_add(int64_t a, int64_t b) { return a + b >= SJ_INF ? SJ_INF : (int32_t)(a + b); }

/* ---- objects ---- */

/* May property j come next (after next - 1), its value fitting at depth? */
static int permitted(const grammar *g, const objx *x, uint32_t next, uint32_t j, int depth) {
    return j >= next && j <= x->fr[next] && j < x->n && x->req[j] != 2 && depth + g->nodes[x->pnode[j]].md <= SJ_MAX_DEPTH;
}

/* Bytes to write property j (key, colon, value) and the required ones after it. */
static int32_t prop_cost(const grammar *g, const objx *x, uint32_t j, uint32_t from_key) {
    return sat_add((int64_t)x->klen[j] - from_key + 1 + g->nodes[x->pnode[j]].min_len, x->rc[j + 1]);
}

/* The cheapest property that may come next, and what it costs; INF if none. */
static int32_t best_next(const grammar *g, const objx *x, uint32_t next, int depth) {
    int32_t best = SJ_INF;
    for (uint32_t j = next; j < x->n && j <= x->fr[next]; j++)
        if (permitted(g, x, next, j, depth)) {
            const int32_t c = prop_cost(g, x, j, 0);
            if (c < best) best = c;
        }
    return best;
}

static int32_t obj_cost(const grammar *g, const frame *f, const objx *x, int depth) {
    switch (f->phase) {
    case O_OPEN: return x->rc[f->u.o.next] ? sat_add(best_next(g, x, f->u.o.next, depth), 1) : 1;
    case O_COMMA: return sat_add(best_next(g, x, f->u.o.next, depth), 1);
    case O_KEY: {
        int32_t best = SJ_INF;
        for (uint32_t k = f->u.o.lo; k < f->u.o.hi; k++) {
            const uint32_t j = x->decl[k];
            if (permitted(g, x, f->u.o.next, j, depth)) {
                const int32_t c = prop_cost(g, x, j, f->u.o.pos);
                if (c < best) best = c;
            }
        }
        return sat_add(best, 1);
    }
    case O_COLON: return sat_add(prop_cost(g, x, f->u.o.cur, x->klen[f->u.o.cur]), 1);
    case O_VALUE: return sat_add(x->rc[f->u.o.cur + 1], 1);
    default: return sat_add(x->rc[f->u.o.next], 1); /* O_AFTER */
    }
}

/* ---- numbers: bytes to the shortest in-range completion of a prefix ---- */

static const int64_t p10[SJ_NUM_DIGITS + 1] = {
    1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000, 10000000000LL, 100000000000LL,
    1000000000000LL, 10000000000000LL, 100000000000000LL, 1000000000000000LL, 10000000000000000LL,
    100000000000000000LL, 1000000000000000000LL};

/* digits m (ki integer, kf fraction), more integer digits allowed (more_int),
   '.' typed (dot), a fraction allowed (frac_ok): the fewest bytes to a number
   in range.  A completion of shape (j more integer digits, kf2 fraction
   digits in all) covers the integers [m * 10^f, (m + 1) * 10^f) in units of
   10^-kf2 (f = j + kf2 - kf free digits, all below m's): try the shapes in
   order of cost. */
static int32_t num_reach(const numx *x, int64_t m, int ki, int kf, int neg, int more_int, int dot, int frac_ok) {
    const int in_frac = dot || kf > 0;
    for (int c = 0; c <= 2 * SJ_NUM_DIGITS + 1; c++)
        for (int j = 0; j <= (more_int ? c : 0); j++) {
            const int rest = c - j;
            int kf2;
            if (in_frac) kf2 = kf + rest;
            else if (!rest) kf2 = 0;
            else if (frac_ok && rest >= 2) kf2 = rest - 1; /* '.' and digits */
            else continue;
            if ((dot && kf2 < 1) || ki + j + kf2 > SJ_NUM_DIGITS) continue;
            const int free = j + kf2 - kf;
            const int64_t a = m * p10[free], b = a + p10[free] - 1;
            const int64_t lo = neg ? -x->hi[kf2] : x->lo[kf2], hi = neg ? -x->lo[kf2] : x->hi[kf2];
            if ((a > lo ? a : lo) <= (b < hi ? b : hi)) return c;
        }
    return SJ_INF;
}

static int32_t num_cost(const node *nd, const frame *f) {
    if (f->phase == NM_SIGN) return nd->num->sign_cost;
    return num_reach(nd->num, f->u.num.m, f->u.num.ki, f->u.num.kf, f->u.num.neg, f->phase == NM_INT, f->phase == NM_DOT,
                     !nd->integer);
}

/* The cheapest number after a sign (or none): a first digit and its completion. */
static int32_t num_first_cost(const node *nd, int neg, unsigned d) {
    const int32_t c = num_reach(nd->num, d, 1, 0, neg, d != 0, 0, !nd->integer);
    return sat_add(c, 1);
}

/* ---- the closing cost ---- */

static int32_t frame_cost(const grammar *g, const thread *t, int i) {
    const frame *f = &t->f[i];
    const node *nd = &g->nodes[f->node];
    if (f->phase == P_START) return nd->min_len;
    switch (nd->kind) {
    case N_OBJ: return obj_cost(g, f, nd->obj, i + 1);
    case N_ARR: {
        const int64_t L = g->nodes[nd->item].min_len, c = f->u.a.count, mi = nd->lo;
        if (f->phase == A_OPEN) return mi ? sat_add(mi * L + mi - 1, 1) : 1;
        if (f->phase == A_COMMA) return sat_add(L + (mi - c - 1 > 0 ? (mi - c - 1) * (L + 1) : 0), 1);
        return sat_add(mi - c > 0 ? (mi - c) * (L + 1) : 0, 1);
    }
    case N_STR: {
        const int64_t pend = f->u.s.mode == JG_STR ? 0 : f->u.s.mode == JG_STR_ESC ? 1 : f->u.s.n;
        return sat_add(pend + (nd->lo > f->u.s.count ? nd->lo - f->u.s.count : 0), 1);
    }
    case N_NUM: return num_cost(nd, f);
    case N_LITS: return lits_cost(nd, f->u.l.lo, f->u.l.hi, f->u.l.pos);
    default: return jg_closing_cost(&f->u.any);
    }
}

static int32_t thread_cost(const grammar *g, const thread *t) {
    int64_t c = 0;
    for (int i = 0; i < t->depth; i++) c += frame_cost(g, t, i);
    return c >= SJ_INF ? SJ_INF : (int32_t)c;
}

/* ---- one byte ---- */

enum { STEP_DEAD = 0, STEP_OK = 1, STEP_ALT = 2, STEP_ENDED = 3, STEP_CHILD = 4 };

static int ws_ok(thread *t) { return ++t->ws <= JG_MAX_WS; }

static int key_step(const grammar *g, thread *t, frame *f, const objx *x, unsigned c) {
    uint32_t lo = f->u.o.lo, hi = f->u.o.hi;
    if (!narrow(x->keys, &lo, &hi, f->u.o.pos, c)) return STEP_DEAD;
    const uint32_t pos = ++f->u.o.pos;
    int any = 0;
    for (uint32_t k = lo; k < hi && !any; k++) any = permitted(g, x, f->u.o.next, x->decl[k], t->depth);
    if (!any) return STEP_DEAD;
    f->u.o.lo = (uint16_t)lo;
    f->u.o.hi = (uint16_t)hi;
    if (hi - lo == 1 && x->keys[lo].len == pos) { /* the key is complete (keys end with '"') */
        f->u.o.cur = (uint16_t)x->decl[lo];
        f->u.o.next = (uint16_t)(f->u.o.cur + 1);
        f->phase = O_COLON;
    }
    return STEP_OK;
}

static int obj_step(const grammar *g, thread *t, frame *f, const objx *x, unsigned c, int ws) {
    if (f->phase == O_KEY) return key_step(g, t, f, x, c);
    if (ws) return ws_ok(t);
    if (f->phase == O_COLON) {
        if (c != ':') return STEP_DEAD;
        f->phase = O_VALUE;
        push(t, x->pnode[f->u.o.cur]);
        return STEP_OK;
    }
    const uint32_t next = f->u.o.next;
    if (c == '}' && f->phase != O_COMMA && !x->rc[next]) { value_done(t); return STEP_OK; }
    if (c == ',' && f->phase == O_AFTER && best_next(g, x, next, t->depth) < SJ_INF) { f->phase = O_COMMA; return STEP_OK; }
    if (c == '"' && f->phase != O_AFTER) {
        f->u.o.lo = 0;
        f->u.o.hi = (uint16_t)x->n;
        f->u.o.pos = 0;
        f->phase = O_KEY;
        return key_step(g, t, f, x, c);
    }
    return STEP_DEAD;
}

static int arr_step(const grammar *g, thread *t, frame *f, const node *nd, unsigned c, int ws) {
    if (ws) return ws_ok(t);
    const uint32_t count = f->u.a.count;
    if (c == ']' && f->phase != A_COMMA && count >= nd->lo) { value_done(t); return STEP_OK; }
    const int more = count < nd->hi && fits(g, t, nd->item);
    if (c == ',' && f->phase == A_AFTER && more) { f->phase = A_COMMA; return STEP_OK; }
    if (f->phase == A_AFTER || !more) return STEP_DEAD;
    f->u.a.count++;
    f->phase = A_VALUE;
    push(t, nd->item);
    return STEP_CHILD;
}

static int str_step(const grammar *g, thread *t, frame *f, const node *nd, unsigned c) {
    jg_state u = {0, f->u.s.mode, 0, 0, f->u.s.n, 0, f->u.s.lo, f->u.s.hi, 0, 0};
    switch (u.mode) {
    case JG_STR:
        if (c == '"') {
            if (f->u.s.count < nd->lo) return STEP_DEAD;
            value_done(t);
            return STEP_OK;
        }
        if (f->u.s.count >= nd->hi) return STEP_DEAD; /* every other byte starts a character */
        if (c == '\\') u.mode = JG_STR_ESC;
        else if (!jg_str_byte(&u, c, g->utf8_ok)) return STEP_DEAD;
        f->u.s.count++;
        break;
    case JG_STR_ESC:
        if (c == 'u') u.mode = JG_STR_HEX, u.n = 4;
        else if (c && strchr("\"\\/bfnrt", (int)c)) u.mode = JG_STR;
        else return STEP_DEAD;
        break;
    case JG_STR_HEX: /* no surrogates (\uD800-\uDFFF): each escape is one code point */
        if (!jg_is_hex(c) || (u.n == 3 && (f->u.s.hex | 0x20) == 'd' && !jg_is_digit(c)) ||
            (u.n == 3 && (f->u.s.hex | 0x20) == 'd' && c >= '8'))
            return STEP_DEAD;
        f->u.s.hex = (uint8_t)c;
        if (--u.n == 0) u.mode = JG_STR;
        break;
    default:
        if (!jg_str_byte(&u, c, g->utf8_ok)) return STEP_DEAD;
    }
    f->u.s.mode = u.mode;
    f->u.s.n = u.n;
    f->u.s.lo = u.lo;
    f->u.s.hi = u.hi;
    return STEP_OK;
}

static int num_step(frame *f, const node *nd, unsigned c) {
    const int digit = jg_is_digit(c), total = f->u.num.ki + f->u.num.kf;
    switch (f->phase) {
    case NM_SIGN:
        if (!digit) return STEP_DEAD;
        f->phase = c == '0' ? NM_ZERO : NM_INT;
        f->u.num.ki = 1;
        f->u.num.m = c - '0';
        break;
    case NM_INT:
        if (digit) {
            if (total >= SJ_NUM_DIGITS) return STEP_DEAD;
            f->u.num.m = f->u.num.m * 10 + (c - '0');
            f->u.num.ki++;
            break;
        }
        /* fall through */
    case NM_ZERO: /* '.' or the end */
        if (c != '.' || nd->integer) return num_cost(nd, f) ? STEP_DEAD : STEP_ENDED;
        f->phase = NM_DOT;
        break;
    case NM_DOT:
    case NM_FRAC:
        if (!digit) return f->phase == NM_FRAC && !num_cost(nd, f) ? STEP_ENDED : STEP_DEAD;
        if (total >= SJ_NUM_DIGITS) return STEP_DEAD;
        f->u.num.m = f->u.num.m * 10 + (c - '0');
        f->u.num.kf++;
        f->phase = NM_FRAC;
        break;
    }
    return num_cost(nd, f) < SJ_INF ? STEP_OK : STEP_DEAD;
}

static int lit_step(thread *t, frame *f, const node *nd, unsigned c) {
    uint32_t lo = f->u.l.lo, hi = f->u.l.hi;
    if (!narrow(nd->lits, &lo, &hi, f->u.l.pos, c)) return nd->lits[f->u.l.lo].len == f->u.l.pos ? STEP_ENDED : STEP_DEAD;
    f->u.l.lo = lo;
    f->u.l.hi = hi;
    f->u.l.pos++;
    if (hi - lo == 1 && nd->lits[lo].len == f->u.l.pos) value_done(t);
    return STEP_OK;
}

static int any_step(const grammar *g, thread *t, frame *f, unsigned c) {
    const int r = jg_step(&f->u.any, c, g->utf8_ok);
    if (r == 2) return STEP_ENDED;
    if (r == 1 && f->u.any.mode == JG_DONE) value_done(t);
    return r;
}

/* The first byte of a value of a concrete node. */
static int begin(const grammar *g, thread *t, frame *f, const node *nd, unsigned c) {
    f->phase = IN;
    switch (nd->kind) {
    case N_OBJ: f->phase = O_OPEN; return STEP_OK;
    case N_ARR: f->phase = A_OPEN; return STEP_OK;
    case N_STR: f->u.s.mode = JG_STR; return STEP_OK;
    case N_NUM:
        f->phase = NM_SIGN;
        if (c != '-') return num_step(f, nd, c);
        f->u.num.neg = 1;
        return nd->num->sign_cost < SJ_INF ? STEP_OK : STEP_DEAD;
    case N_LITS: f->u.l.hi = nd->n; return lit_step(t, f, nd, c);
    default: f->u.any = jg_any_value; return any_step(g, t, f, c);
    }
}

/* Advance thread t by byte c: STEP_OK, STEP_DEAD, or STEP_ALT when the value on top is
   an anyOf to resolve first (c not consumed). */
static int sj_step(const grammar *g, thread *t, unsigned c) {
    const int ws = jg_is_ws(c);
    if (!ws) t->ws = 0;
    while (t->depth) {
        frame *f = &t->f[t->depth - 1];
        const node *nd = &g->nodes[f->node];
        int r;
        if (f->phase == P_START) {
            if (ws) return ws_ok(t);
            if (nd->kind == N_ALT) return STEP_ALT;
            if (!bit(nd->first, c)) return STEP_DEAD;
            r = begin(g, t, f, nd, c);
        } else {
            switch (nd->kind) {
            case N_OBJ: r = obj_step(g, t, f, nd->obj, c, ws); break;
            case N_ARR: r = arr_step(g, t, f, nd, c, ws); break;
            case N_STR: r = str_step(g, t, f, nd, c); break;
            case N_NUM: r = num_step(f, nd, c); break;
            case N_LITS: r = lit_step(t, f, nd, c); break;
            default: r = any_step(g, t, f, c); break;
            }
        }
        if (r == STEP_ENDED) value_done(t); /* c follows the value: its parent reads it */
        else if (r != STEP_CHILD) return r;  /* else the new child reads c */
    }
    return STEP_DEAD; /* nothing may follow the document */
}

/* ---- running bytes over a thread, anyOf forks included ---- */

typedef struct sink {
    thread *out; /* collect the threads here (NULL: only the cheapest cost) */
    int n, cap;
    int32_t best;
} sink;

static void emit(const grammar *g, const thread *t, sink *k) {
    const int32_t c = thread_cost(g, t);
    if (c < k->best) k->best = c;
    if (!k->out || c >= SJ_INF) return;
    int at = k->n;
    if (k->n == k->cap) { /* full: replace the most expensive if this one is cheaper */
        int32_t worst = -1;
        for (int i = 0; i < k->n; i++) {
            const int32_t ci = thread_cost(g, &k->out[i]);
            if (ci > worst) worst = ci, at = i;
        }
        if (worst <= c) return;
    } else {
        k->n++;
    }
    thread_copy(&k->out[at], t);
}

/* Run p[i..n) over t (which it changes), every surviving thread to k. */
static void drive(const grammar *g, thread *t, const uint8_t *p, size_t i, size_t n, sink *k) {
    for (; i < n; i++) {
        const int r = sj_step(g, t, p[i]);
        if (r == STEP_OK) continue;
        if (r == STEP_DEAD) return;
        const node *alt = &g->nodes[t->f[t->depth - 1].node]; /* STEP_ALT: fork */
        for (uint32_t a = 0; a < alt->n; a++) {
            const uint32_t an = alt->alts[a];
            if (!bit(g->nodes[an].first, p[i]) || t->depth - 1 + g->nodes[an].md > SJ_MAX_DEPTH) continue;
            thread u;
            thread_copy(&u, t);
            u.f[u.depth - 1] = start_frame(an);
            drive(g, &u, p, i, n, k);
        }
        return;
    }
    emit(g, t, k);
}

/* ======================================================================== */
/* Compiling a schema                                                        */
/* ======================================================================== */

typedef struct cc {
    grammar *g;
    const jv *root;
    char *err;
    size_t errlen;
    jv any;            /* the schema true (and {}) */
    int depth;         /* compile() calls open (a bound on the C stack) */
    char path[768];    /* where we are, as a JSON pointer */
    char never[600];   /* the first value found that nothing satisfies, and why */
} cc;

static int cfail(cc *c, const char *fmt, const char *a, const char *b) {
    char msg[512];
    snprintf(msg, sizeof msg, fmt, a ? a : "", b ? b : "");
    snprintf(c->err, c->errlen, "json_schema: %s: %s", c->path[0] ? c->path : "#", msg);
    return -1;
}

/* Node id satisfies no value (a type of a list, an alternative, an optional
   property may be left out; the document may still be possible): remember
   why for the message if it is not. */
static int never(cc *c, uint32_t id, const char *fmt, const char *a) {
    char msg[300];
    snprintf(msg, sizeof msg, fmt, a ? a : "");
    if (!c->never[0]) snprintf(c->never, sizeof c->never, "%.280s: %s", c->path[0] ? c->path : "#", msg);
    c->g->nodes[id].kind = N_NEVER;
    return 0;
}

static size_t path_push(cc *c, const char *seg) {
    const size_t at = strlen(c->path);
    snprintf(c->path + at, sizeof c->path - at, "%s/%s", at ? "" : "#", seg);
    return at;
}

static int new_node(cc *c, uint8_t kind, uint32_t *out) {
    grammar *g = c->g;
    if (g->n_nodes == g->cap) {
        const uint32_t cap = g->cap ? 2 * g->cap : 32;
        node *n = realloc(g->nodes, cap * sizeof *n);
        if (!n) return cfail(c, "out of memory", NULL, NULL);
        g->nodes = n;
        g->cap = cap;
    }
    memset(&g->nodes[g->n_nodes], 0, sizeof(node));
    g->nodes[g->n_nodes].kind = kind;
    *out = g->n_nodes++;
    return 0;
}

static void *galloc(cc *c, size_t size) {
    void *p = ar_keep(&c->g->mem, calloc(1, size ? size : 1));
    if (!p) cfail(c, "out of memory", NULL, NULL);
    return p;
}

/* ---- serialized literals (enum, const, keys): compact JSON ---- */

typedef struct buf {
    char *p;
    size_t n, cap;
    int oom;
} buf;

static void bput(buf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) { b->oom = 1; return; }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

static void put_string(buf *b, const char *s, size_t n) {
    bput(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        const unsigned char ch = (unsigned char)s[i];
        const char *e = ch == '"' ? "\\\"" : ch == '\\' ? "\\\\" : ch == '\n' ? "\\n" : ch == '\r' ? "\\r" : ch == '\t' ? "\\t"
                      : ch == '\b' ? "\\b" : ch == '\f' ? "\\f" : NULL;
        char u[8];
        if (!e && ch < 0x20) snprintf(u, sizeof u, "\\u%04x", ch), e = u;
        if (e) bput(b, e, strlen(e));
        else bput(b, (const char *)&ch, 1);
    }
    bput(b, "\"", 1);
}

static void put_value(buf *b, const jv *v) {
    switch (v->type) {
    case JV_NULL: bput(b, "null", 4); break;
    case JV_FALSE: bput(b, "false", 5); break;
    case JV_TRUE: bput(b, "true", 4); break;
    case JV_NUM: bput(b, v->s, v->n); break;
    case JV_STR: put_string(b, v->s, v->n); break;
    default:
        bput(b, v->type == JV_ARR ? "[" : "{", 1);
        for (uint32_t i = 0; i < v->n; i++) {
            if (i) bput(b, ",", 1);
            if (v->type == JV_OBJ) put_string(b, v->k[i].s, v->k[i].n), bput(b, ":", 1);
            put_value(b, &v->v[i]);
        }
        bput(b, v->type == JV_ARR ? "]" : "}", 1);
    }
}

static int lit_cmp(const void *a, const void *b) {
    const lit *x = a, *y = b;
    return key_cmp((const char *)x->s, x->len, (const char *)y->s, y->len);
}

/* The serialization of v, kept by the grammar. */
static int make_lit(cc *c, const jv *v, int as_key, lit *out) {
    buf b = {0};
    if (as_key) put_string(&b, v->s, v->n);
    else put_value(&b, v);
    if (b.oom || !ar_keep(&c->g->mem, b.p)) { free(b.p); return cfail(c, "out of memory", NULL, NULL); }
    *out = (lit){(const uint8_t *)b.p, (uint32_t)b.n};
    return 0;
}

/* ---- what the schema says about a value (enum values are checked with it) ---- */

static int json_equal(const jv *a, const jv *b) {
    if (a->type != b->type) return 0;
    switch (a->type) {
    case JV_NUM: { /* as values; past the exact decimals, as written */
        dec x, y;
        if (dec_parse(a->s, a->n, &x) || dec_parse(b->s, b->n, &y)) return a->n == b->n && !memcmp(a->s, b->s, a->n);
        return !dec_cmp(&x, &y);
    }
    case JV_STR: return a->n == b->n && !memcmp(a->s, b->s, a->n);
    case JV_ARR:
        if (a->n != b->n) return 0;
        for (uint32_t i = 0; i < a->n; i++)
            if (!json_equal(&a->v[i], &b->v[i])) return 0;
        return 1;
    case JV_OBJ:
        if (a->n != b->n) return 0;
        for (uint32_t i = 0; i < a->n; i++) {
            const int64_t at = member_at(b, a->k[i].s, a->k[i].n);
            if (at < 0 || !json_equal(&a->v[i], &b->v[at])) return 0;
        }
        return 1;
    default: return 1;
    }
}

static uint32_t utf8_length(const char *s, uint32_t n) {
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xC0) != 0x80;
    return k;
}

static const jv *resolve_ref(const cc *c, const jv *ref);

static int satisfies_rest(const cc *c, const jv *v, const jv *s, int depth);

/* Does value v satisfy schema s (supported keywords only; compile() checked them)? */
static int satisfies(const cc *c, const jv *v, const jv *s, int depth) {
    if (s->type == JV_TRUE || s->type == JV_FALSE) return s->type == JV_TRUE;
    if (depth > 256) return 0;
    const jv *k;
    if ((k = member(s, "$ref"))) {
        const jv *t = resolve_ref(c, k);
        return t && satisfies(c, v, t, depth + 1);
    }
    if ((k = member(s, "anyOf"))) {
        for (uint32_t i = 0; i < k->n; i++)
            if (satisfies(c, v, &k->v[i], depth + 1)) return 1;
        return 0;
    }
    if ((k = member(s, "const")) && !json_equal(v, k)) return 0;
    if ((k = member(s, "enum"))) {
        uint32_t i = 0;
        while (i < k->n && !json_equal(v, &k->v[i])) i++;
        if (i == k->n) return 0;
    }
    return satisfies_rest(c, v, s, depth);
}

/* The same but for s's own enum and const (and no $ref or anyOf in s). */
static int satisfies_rest(const cc *c, const jv *v, const jv *s, int depth) {
    const jv *k;
    if ((k = member(s, "type"))) {
        static const char *const names[] = {"null", "boolean", "boolean", "number", "string", "array", "object"};
        dec x;
        const int is_int = v->type == JV_NUM && !dec_parse(v->s, v->n, &x) && dec_is_integer(&x);
        int ok = 0;
        for (uint32_t i = 0; i < (k->type == JV_ARR ? k->n : 1); i++) {
            const jv *t = k->type == JV_ARR ? &k->v[i] : k;
            ok |= !strcmp(t->s, names[v->type]) || (is_int && !strcmp(t->s, "integer"));
        }
        if (!ok) return 0;
    }
    if (v->type == JV_OBJ) {
        const jv *props = member(s, "properties"), *req = member(s, "required"), *add = member(s, "additionalProperties");
        for (uint32_t i = 0; i < v->n; i++) {
            const int64_t at = member_at(props, v->k[i].s, v->k[i].n);
            const jv *ps = at < 0 ? NULL : &props->v[at];
            if (ps ? !satisfies(c, &v->v[i], ps, depth + 1) : add && add->type == JV_FALSE) return 0;
        }
        for (uint32_t i = 0; req && i < req->n; i++)
            if (member_at(v, req->v[i].s, req->v[i].n) < 0) return 0;
    } else if (v->type == JV_ARR) {
        const jv *it = member(s, "items"), *mi = member(s, "minItems"), *mx = member(s, "maxItems");
        if ((mi && v->n < strtod(mi->s, NULL)) || (mx && v->n > strtod(mx->s, NULL))) return 0;
        for (uint32_t i = 0; it && i < v->n; i++)
            if (!satisfies(c, &v->v[i], it, depth + 1)) return 0;
    } else if (v->type == JV_STR) {
        const jv *mi = member(s, "minLength"), *mx = member(s, "maxLength");
        const uint32_t len = utf8_length(v->s, v->n);
        if ((mi && len < strtod(mi->s, NULL)) || (mx && len > strtod(mx->s, NULL))) return 0;
    } else if (v->type == JV_NUM) {
        static const char *const bounds[4] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
        dec x, b;
        for (int i = 0; i < 4; i++) {
            const jv *bv = member(s, bounds[i]);
            if (!bv || dec_parse(bv->s, bv->n, &b)) continue;
            if (dec_parse(v->s, v->n, &x)) return 0; /* an exponent beyond 10^100000 */
            const int r = dec_cmp(&x, &b);
            if (i == 0 ? r < 0 : i == 1 ? r <= 0 : i == 2 ? r > 0 : r >= 0) return 0;
        }
    }
    return 1;
}

/* ---- keywords ---- */

static const char *const annotations[] = {"title", "description", "default", "examples", "$comment", "$schema",
                                          "deprecated", "readOnly", "writeOnly", "$defs", "definitions", NULL};
static const char *const assertions[] = {"type", "properties", "required", "additionalProperties", "enum", "const", "items",
                                         "minItems", "maxItems", "minLength", "maxLength", "minimum", "maximum",
                                         "exclusiveMinimum", "exclusiveMaximum", "anyOf", "$ref", NULL};

static int in_list(const char *const *l, const char *s) {
    for (; *l; l++)
        if (!strcmp(*l, s)) return 1;
    return 0;
}

/* The local reference "#", "#/$defs/NAME" or "#/definitions/NAME" (JSON
   pointer escapes ~0 ~1 and nested paths included), or NULL. */
static const jv *resolve_ref(const cc *c, const jv *ref) {
    if (ref->type != JV_STR || ref->s[0] != '#') return NULL;
    const jv *at = c->root;
    for (const char *p = ref->s + 1; *p && at;) {
        if (*p != '/') return NULL;
        char seg[256];
        size_t k = 0;
        for (p++; *p && *p != '/' && k + 1 < sizeof seg; p++) {
            if (*p == '~' && (p[1] == '0' || p[1] == '1')) seg[k++] = p[1] == '0' ? '~' : '/', p++;
            else seg[k++] = *p;
        }
        seg[k] = 0;
        if (at->type == JV_ARR) {
            char *e;
            const unsigned long i = strtoul(seg, &e, 10);
            at = *e || !k || i >= at->n ? NULL : &at->v[i];
        } else {
            at = member(at, seg);
        }
    }
    return at;
}

static int get_count(cc *c, const jv *s, const char *key, uint32_t def, uint32_t *out) {
    const jv *v = member(s, key);
    *out = def;
    if (!v) return 0;
    dec x;
    if (v->type != JV_NUM || dec_parse(v->s, v->n, &x) || x.neg || !dec_is_integer(&x) || x.nd + x.e > 9)
        return cfail(c, "'%s' must be a non-negative integer below 10^9", key, NULL);
    *out = (uint32_t)dec_scaled(&x, 0, 0);
    return 0;
}

static int compile(cc *c, const jv *s, uint32_t *out);

/* Compile s under the path segment seg. */
static int compile_at(cc *c, const jv *s, const char *seg, uint32_t *out) {
    const size_t at = path_push(c, seg);
    const int r = compile(c, s, out);
    if (!r) c->path[at] = 0;
    return r;
}

/* type: the set of types named (bits 1 << JV_* with number as JV_NUM and
   integer as 1 << 7), or inferred from the keywords present. */
static int type_set(cc *c, const jv *s, unsigned *out) {
    static const char *const names[] = {"null", "boolean", "number", "string", "array", "object", "integer"};
    static const unsigned bits[] = {1u << JV_NULL, 1u << JV_TRUE, 1u << JV_NUM, 1u << JV_STR, 1u << JV_ARR, 1u << JV_OBJ, 1u << 7};
    const jv *t = member(s, "type");
    unsigned set = 0;
    if (t) {
        const uint32_t n = t->type == JV_ARR ? t->n : 1;
        for (uint32_t i = 0; i < n; i++) {
            const jv *e = t->type == JV_ARR ? &t->v[i] : t;
            int k = 0;
            while (k < 7 && !(e->type == JV_STR && !strcmp(e->s, names[k]))) k++;
            if (k == 7) return cfail(c, "'type' must name object, array, string, number, integer, boolean or null (or list them)", NULL, NULL);
            set |= bits[k];
        }
        if (!set) return cfail(c, "'type' lists no type", NULL, NULL);
    } else {
        static const char *const kw[][5] = {{"properties", "required", "additionalProperties", NULL},
                                            {"items", "minItems", "maxItems", NULL},
                                            {"minLength", "maxLength", NULL},
                                            {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", NULL}};
        static const unsigned kb[] = {1u << JV_OBJ, 1u << JV_ARR, 1u << JV_STR, 1u << JV_NUM};
        for (int k = 0; k < 4; k++)
            for (int i = 0; kw[k][i]; i++)
                if (member(s, kw[k][i])) set |= kb[k];
    }
    if ((set & (1u << JV_NUM)) && (set & (1u << 7))) set &= ~(1u << 7); /* number includes the integers */
    *out = set;
    return 0;
}

static int compile_object(cc *c, const jv *s, uint32_t id) {
    const jv *props = member(s, "properties"), *req = member(s, "required"), *add = member(s, "additionalProperties");
    if (props && props->type != JV_OBJ) return cfail(c, "'properties' must be an object", NULL, NULL);
    if (req && req->type != JV_ARR) return cfail(c, "'required' must be an array of names", NULL, NULL);
    const int closed = add && add->type == JV_FALSE;
    if (add && add->type != JV_TRUE && add->type != JV_FALSE && !(add->type == JV_OBJ && !add->n))
        return cfail(c, "'additionalProperties' with a schema is unsupported (only false or true)", NULL, NULL);
    uint32_t n = props ? props->n : 0, extra = 0;
    keyref *r = req ? malloc((req->n ? req->n : 1) * sizeof *r) : NULL;
    if (req && !r) return cfail(c, "out of memory", NULL, NULL);
    for (uint32_t i = 0; req && i < req->n; i++) {
        if (req->v[i].type != JV_STR) { free(r); return cfail(c, "'required' must be an array of names", NULL, NULL); }
        r[i] = (keyref){req->v[i].s, req->v[i].n, i};
    }
    if (req) qsort(r, req->n, sizeof *r, keyref_cmp);
    for (uint32_t i = 1; req && i < req->n; i++)
        if (!keyref_cmp(&r[i - 1], &r[i])) {
            const int rc = cfail(c, "'required' names '%s' twice", r[i].s, NULL);
            free(r);
            return rc;
        }
    free(r);
    for (uint32_t i = 0; req && i < req->n; i++) {
        if (member_at(props, req->v[i].s, req->v[i].n) < 0) {
            if (closed) return never(c, id, "required property '%s' is not in 'properties' and additionalProperties is false", req->v[i].s);
            extra++;
        }
    }
    if (!n && !extra && !closed) { /* any object */
        c->g->nodes[id].kind = N_ANY;
        c->g->nodes[id].obj_only = 1;
        return 0;
    }
    n += extra;
    if (n > 65000) return cfail(c, "too many properties", NULL, NULL);
    objx *x = galloc(c, sizeof *x);
    if (!x) return -1;
    x->n = n;
    x->keys = galloc(c, n * sizeof *x->keys);
    x->decl = galloc(c, n * sizeof *x->decl);
    x->klen = galloc(c, n * sizeof *x->klen);
    x->pnode = galloc(c, n * sizeof *x->pnode);
    x->req = galloc(c, n);
    x->fr = galloc(c, (n + 1) * sizeof *x->fr);
    x->rc = galloc(c, (n + 2) * sizeof *x->rc);
    if (!x->keys || !x->decl || !x->klen || !x->pnode || !x->req || !x->fr || !x->rc) return -1;
    uint32_t j = 0;
    for (uint32_t i = 0; props && i < props->n; i++, j++) {
        char seg[300];
        snprintf(seg, sizeof seg, "properties/%s", props->k[i].s);
        if (compile_at(c, &props->v[i], seg, &x->pnode[j]) || make_lit(c, &props->k[i], 1, &x->keys[j])) return -1;
        if (x->keys[j].len > 65000) return cfail(c, "a property name is too long", NULL, NULL);
    }
    for (uint32_t i = 0; req && i < req->n; i++) {
        const int64_t k = member_at(props, req->v[i].s, req->v[i].n);
        if (k >= 0) { x->req[k] = 1; continue; }
        x->req[j] = 1; /* required, not among the properties: any value */
        if (compile(c, &c->any, &x->pnode[j]) || make_lit(c, &req->v[i], 1, &x->keys[j])) return -1;
        j++;
    }
    /* the keys sorted, each with its declared index */
    keyref *kr = malloc(n * sizeof *kr);
    if (!kr) return cfail(c, "out of memory", NULL, NULL);
    for (j = 0; j < n; j++) {
        x->klen[j] = x->keys[j].len;
        kr[j] = (keyref){(const char *)x->keys[j].s, x->keys[j].len, j};
    }
    qsort(kr, n, sizeof *kr, keyref_cmp);
    for (j = 0; j < n; j++) x->keys[j] = (lit){(const uint8_t *)kr[j].s, kr[j].n}, x->decl[j] = kr[j].i;
    free(kr);
    c->g->nodes[id].kind = N_OBJ;
    c->g->nodes[id].obj = x;
    return 0;
}

static int compile_number(cc *c, const jv *s, uint32_t id, int integer) {
    static const char *const bk[4] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
    numx *x = galloc(c, sizeof *x);
    if (!x) return -1;
    for (int k = 0; k <= SJ_NUM_DIGITS; k++) x->lo[k] = -SJ_SAT, x->hi[k] = SJ_SAT;
    for (int i = 0; i < 4; i++) {
        const jv *b = member(s, bk[i]);
        dec d;
        if (!b) continue;
        if (b->type != JV_NUM) return cfail(c, "'%s' must be a number", bk[i], NULL);
        if (dec_parse(b->s, b->n, &d)) return cfail(c, "'%s' has too many digits", bk[i], NULL);
        for (int k = 0; k <= SJ_NUM_DIGITS; k++) {
            if (i < 2) { /* lower: ceil, or floor + 1 when exclusive */
                const int64_t v = i ? dec_scaled(&d, k, 0) + 1 : dec_scaled(&d, k, 1);
                if (v > x->lo[k]) x->lo[k] = v;
            } else {
                const int64_t v = i == 3 ? dec_scaled(&d, k, 1) - 1 : dec_scaled(&d, k, 0);
                if (v < x->hi[k]) x->hi[k] = v;
            }
        }
    }
    node *nd = &c->g->nodes[id];
    nd->kind = N_NUM;
    nd->integer = (uint8_t)integer;
    nd->num = x;
    x->sign_cost = SJ_INF;
    int32_t best = SJ_INF;
    for (unsigned d = 0; d <= 9; d++) {
        const int32_t pos = num_first_cost(nd, 0, d), neg = num_first_cost(nd, 1, d);
        if (pos < SJ_INF) set_bit(nd->first, '0' + d);
        if (pos < best) best = pos;
        if (neg < x->sign_cost) x->sign_cost = neg;
    }
    if (x->sign_cost < SJ_INF) set_bit(nd->first, '-');
    if (sat_add(x->sign_cost, 1) < best) best = sat_add(x->sign_cost, 1);
    nd->min_len = best; /* fixed: needs no other node */
    if (best >= SJ_INF) return never(c, id, "no %s of at most 18 digits (no exponent) lies within the bounds", integer ? "integer" : "number");
    return 0;
}

/* Node id as the literal set of vals[0..n) (const: only those equal to it;
   rest: only those that satisfy the rest of that schema), serialized. */
static int literals(cc *c, uint32_t id, const jv *vals, uint32_t n, const jv *cs, const jv *rest, const char *what) {
    lit *L = galloc(c, (n ? n : 1) * sizeof *L);
    if (!L) return -1;
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        if ((cs && !json_equal(&vals[i], cs)) || (rest && !satisfies_rest(c, &vals[i], rest, 0))) continue;
        if (make_lit(c, &vals[i], 0, &L[k])) return -1;
        k++;
    }
    if (!k) return never(c, id, "no value of '%s' satisfies the rest of the schema", what);
    qsort(L, k, sizeof *L, lit_cmp);
    uint32_t m = 0;
    for (uint32_t i = 0; i < k; i++) /* the same value written twice */
        if (!m || lit_cmp(&L[m - 1], &L[i])) L[m++] = L[i];
    uint32_t *bmin = galloc(c, (m / SJ_BLOCK + 1) * sizeof *bmin);
    if (!bmin) return -1;
    for (uint32_t i = 0; i < m; i++)
        if (i % SJ_BLOCK == 0 || L[i].len < bmin[i / SJ_BLOCK]) bmin[i / SJ_BLOCK] = L[i].len;
    node *nd = &c->g->nodes[id];
    nd->kind = N_LITS;
    nd->lits = L;
    nd->bmin = bmin;
    nd->n = m;
    return 0;
}

/* A node per type in set (an N_ALT over them when several). */
static int compile_types(cc *c, const jv *s, uint32_t id, unsigned set) {
    uint32_t kids[7], nk = 0;
    for (unsigned t = 0; t < 8; t++) {
        if (!(set & (1u << t))) continue;
        uint32_t k = id;
        if (__builtin_popcount(set) > 1 && new_node(c, N_PENDING, &k)) return -1;
        kids[nk++] = k;
        if (t == JV_OBJ) {
            if (compile_object(c, s, k)) return -1;
        } else if (t == JV_ARR) {
            const jv *it = member(s, "items");
            node *nd = &c->g->nodes[k];
            uint32_t item = 0;
            if (it && it->type == JV_ARR) return cfail(c, "'items' as an array (a tuple) is unsupported", NULL, NULL);
            if (it ? compile_at(c, it, "items", &item) : compile(c, &c->any, &item)) return -1;
            nd = &c->g->nodes[k];
            nd->kind = N_ARR;
            nd->item = item;
            if (get_count(c, s, "minItems", 0, &nd->lo) || get_count(c, s, "maxItems", UINT32_MAX, &nd->hi)) return -1;
            if (nd->lo > nd->hi) return never(c, k, "minItems is above maxItems", NULL);
        } else if (t == JV_STR) {
            node *nd = &c->g->nodes[k];
            nd->kind = N_STR;
            if (get_count(c, s, "minLength", 0, &nd->lo) || get_count(c, s, "maxLength", UINT32_MAX, &nd->hi)) return -1;
            if (nd->lo > nd->hi) return never(c, k, "minLength is above maxLength", NULL);
            if (nd->lo > 1000000) return never(c, k, "minLength is above 10^6", NULL);
        } else if (t == JV_NUM || t == 7) {
            if (compile_number(c, s, k, t == 7)) return -1;
        } else { /* null; false, true */
            static const jv words[3] = {{.type = JV_NULL}, {.type = JV_FALSE}, {.type = JV_TRUE}};
            if (literals(c, k, t == JV_NULL ? words : words + 1, t == JV_NULL ? 1 : 2, NULL, NULL, "type")) return -1;
        }
    }
    if (nk > 1) {
        node *nd = &c->g->nodes[id];
        nd->kind = N_ALT;
        nd->n = nk;
        if (!(nd->alts = galloc(c, nk * sizeof *nd->alts))) return -1;
        memcpy(c->g->nodes[id].alts, kids, nk * sizeof *kids);
    }
    return 0;
}

static int compile_schema(cc *c, const jv *s, uint32_t *out);
static int compile_body(cc *c, const jv *s, uint32_t *out);

static int compile(cc *c, const jv *s, uint32_t *out) {
    if (c->depth >= 256) return cfail(c, "schemas nested more than 256 deep (through $ref)", NULL, NULL);
    c->depth++;
    const int rc = compile_schema(c, s, out);
    c->depth--;
    return rc;
}

/* s has only known keywords, and $ref or anyOf (named by only) stands alone. */
static int check_keywords(cc *c, const jv *s) {
    const char *only = member(s, "$ref") ? "$ref" : member(s, "anyOf") ? "anyOf" : NULL;
    for (uint32_t i = 0; s->type == JV_OBJ && i < s->n; i++) {
        const char *k = s->k[i].s;
        if (!in_list(annotations, k) && !in_list(assertions, k) && !(!strcmp(k, "$id") && s == c->root))
            return cfail(c, "unsupported keyword '%s'", k, NULL);
        if (only && in_list(assertions, k) && strcmp(k, only))
            return cfail(c, !strcmp(only, "$ref") ? "'$ref' alongside '%s' is unsupported (put it in the referenced schema)"
                                                  : "'anyOf' alongside '%s' is unsupported (put it in each alternative)", k, NULL);
    }
    return 0;
}

static int compile_schema(cc *c, const jv *s, uint32_t *out) {
    char saved[sizeof c->path];
    int moved = 0; /* the path names a reference's target */
    /* a $ref is its target's node: follow the chain to a schema that is not one */
    for (int hops = 0;; hops++) {
        if (s->type == JV_TRUE || (s->type == JV_OBJ && !s->n)) s = &c->any;
        if (s->memo) { *out = s->memo - 1; break; }
        if (s->type != JV_OBJ && s->type != JV_TRUE && s->type != JV_FALSE) return cfail(c, "a schema must be an object or a boolean", NULL, NULL);
        if (check_keywords(c, s)) return -1;
        const jv *ref = member(s, "$ref");
        if (!ref) break;
        const jv *t = resolve_ref(c, ref);
        if (!t) return cfail(c, "$ref '%s' does not resolve (only local references: #, #/$defs/NAME, #/definitions/NAME)", ref->type == JV_STR ? ref->s : "?", NULL);
        if (hops == 64) return cfail(c, "$ref '%s' refers to itself (through 64 references or more)", ref->s, NULL);
        if (!moved++) memcpy(saved, c->path, sizeof saved);
        snprintf(c->path, sizeof c->path, "%s", ref->s);
        s = t;
    }
    const int rc = s->memo ? 0 : compile_body(c, s, out);
    if (!rc && moved) memcpy(c->path, saved, sizeof saved);
    return rc;
}

/* A schema's own node (no $ref). */
static int compile_body(cc *c, const jv *s, uint32_t *out) {
    uint32_t id;
    if (new_node(c, N_PENDING, &id)) return -1;
    ((jv *)s)->memo = id + 1; /* the DOM is this create()'s own */
    *out = id;
    if (s->type == JV_TRUE) { c->g->nodes[id].kind = N_ANY; return 0; }
    if (s->type == JV_FALSE) { c->g->nodes[id].kind = N_NEVER; return 0; }
    const jv *any_of = member(s, "anyOf");
    if (any_of) {
        if (any_of->type != JV_ARR || !any_of->n) return cfail(c, "'anyOf' must be a non-empty array of schemas", NULL, NULL);
        uint32_t *alts = galloc(c, any_of->n * sizeof *alts);
        if (!alts) return -1;
        for (uint32_t i = 0; i < any_of->n; i++) {
            char seg[32];
            snprintf(seg, sizeof seg, "anyOf/%u", i);
            if (compile_at(c, &any_of->v[i], seg, &alts[i])) return -1;
        }
        node *nd = &c->g->nodes[id];
        nd->kind = N_ALT;
        nd->alts = alts;
        nd->n = any_of->n;
        return 0;
    }
    unsigned set = 0;
    if (type_set(c, s, &set)) return -1;
    if (set ? compile_types(c, s, id, set) : (c->g->nodes[id].kind = N_ANY, 0)) return -1;
    const jv *en = member(s, "enum"), *cs = member(s, "const");
    if (!en && !cs) return 0;
    /* the rest was compiled to check its keywords; the values decide */
    if (en && (en->type != JV_ARR || !en->n)) return cfail(c, "'enum' must be a non-empty array", NULL, NULL);
    c->g->nodes[id].alts = NULL;
    return literals(c, id, en ? en->v : cs, en ? en->n : 1, en ? cs : NULL, s, en ? "enum" : "const");
}

/* ---- after compiling: shortest documents, alternatives, depths ---- */

static int32_t node_min_len(const grammar *g, const node *nd) {
    switch (nd->kind) {
    case N_ANY: return nd->obj_only ? 2 : 1;
    case N_STR: return sat_add(nd->lo, 2);
    case N_NUM: return nd->min_len;
    case N_LITS: return lits_cost(nd, 0, nd->n, 0);
    case N_ARR: {
        const int64_t L = g->nodes[nd->item].min_len;
        return nd->lo ? sat_add(nd->lo * L + nd->lo - 1, 2) : 2;
    }
    case N_OBJ: {
        const objx *x = nd->obj;
        int64_t sum = 2, k = 0;
        for (uint32_t j = 0; j < x->n; j++)
            if (x->req[j] == 1) sum += x->klen[j] + 1 + g->nodes[x->pnode[j]].min_len, k++;
        return sat_add(sum, k ? k - 1 : 0);
    }
    case N_ALT: {
        int32_t best = SJ_INF;
        for (uint32_t a = 0; a < nd->n; a++)
            if (g->nodes[nd->alts[a]].min_len < best) best = g->nodes[nd->alts[a]].min_len;
        return best;
    }
    default: return SJ_INF;
    }
}

/* Alternatives that are anyOf themselves, inlined (depth-first, each node
   once: stamp[k] == mark when k is in out already; seen: on the path). */
static int flatten(cc *c, uint32_t id, uint32_t *out, uint32_t *n, uint32_t *stamp, uint32_t mark, uint8_t *seen) {
    const node *nd = &c->g->nodes[id];
    if (nd->kind != N_ALT) {
        if (stamp[id] != mark) stamp[id] = mark, out[(*n)++] = id;
        return 0;
    }
    if (seen[id]) return cfail(c, "an anyOf contains itself", NULL, NULL);
    seen[id] = 1;
    for (uint32_t a = 0; a < c->g->nodes[id].n; a++)
        if (flatten(c, c->g->nodes[id].alts[a], out, n, stamp, mark, seen)) return -1;
    seen[id] = 0;
    return 0;
}

static int32_t node_md(grammar *g, uint32_t id, int guard) {
    node *nd = &g->nodes[id];
    if (nd->md || guard > 4 * SJ_MAX_DEPTH) return nd->md ? nd->md : SJ_INF;
    int64_t d = 1;
    if (nd->kind == N_OBJ) {
        for (uint32_t j = 0; j < nd->obj->n; j++)
            if (nd->obj->req[j] == 1) { const int64_t k = 1 + (int64_t)node_md(g, nd->obj->pnode[j], guard + 1); if (k > d) d = k; }
    } else if (nd->kind == N_ARR && nd->lo) {
        d = 1 + (int64_t)node_md(g, nd->item, guard + 1);
    } else if (nd->kind == N_ALT) { /* the shortest alternative's (the cheapest one's on a tie) */
        d = SJ_INF;
        for (uint32_t a = 0; a < nd->n; a++) {
            const uint32_t k = nd->alts[a];
            if (g->nodes[k].min_len == nd->min_len && node_md(g, k, guard + 1) < d) d = node_md(g, k, guard + 1);
        }
    }
    nd = &g->nodes[id];
    nd->md = d >= SJ_INF ? SJ_INF : (int32_t)d;
    return nd->md;
}

static int finish(cc *c) {
    grammar *g = c->g;
    /* shortest documents: a fixed point from "none" down */
    for (uint32_t i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].kind != N_NUM) g->nodes[i].min_len = SJ_INF;
    for (int changed = 1; changed;) { /* children come after their parents: last first */
        changed = 0;
        for (uint32_t i = g->n_nodes; i-- > 0;) {
            const int32_t m = node_min_len(g, &g->nodes[i]);
            if (m < g->nodes[i].min_len) g->nodes[i].min_len = m, changed = 1;
        }
    }
    if (g->nodes[g->root].min_len >= SJ_INF)
        return cfail(c, "no finite JSON document satisfies the schema (%s)", c->never[0] ? c->never : "a required value that never ends, or false", NULL);
    uint8_t *seen = calloc(g->n_nodes, 1);
    uint32_t *tmp = malloc(g->n_nodes * sizeof *tmp), *stamp = calloc(g->n_nodes, sizeof *stamp);
    int rc = !seen || !tmp || !stamp ? cfail(c, "out of memory", NULL, NULL) : 0;
    for (uint32_t i = 0; !rc && i < g->n_nodes; i++) {
        node *nd = &g->nodes[i];
        if (nd->kind == N_ALT) { /* concrete alternatives that can end */
            uint32_t n = 0, k = 0;
            if ((rc = flatten(c, i, tmp, &n, stamp, i + 1, seen))) break;
            for (uint32_t a = 0; a < n; a++)
                if (g->nodes[tmp[a]].min_len < SJ_INF) tmp[k++] = tmp[a];
            nd = &g->nodes[i];
            if (!(nd->alts = galloc(c, (k ? k : 1) * sizeof *nd->alts))) { rc = -1; break; }
            memcpy(nd->alts, tmp, k * sizeof *tmp);
            nd->n = k;
            if (!k) nd->kind = N_NEVER;
        } else if (nd->kind == N_ARR && g->nodes[nd->item].min_len >= SJ_INF) {
            nd->hi = 0; /* items that never end: empty arrays only */
        } else if (nd->kind == N_OBJ) { /* properties that never end are never permitted */
            objx *x = nd->obj;
            for (uint32_t j = 0; j < x->n; j++)
                if (g->nodes[x->pnode[j]].min_len >= SJ_INF) x->req[j] = 2;
        }
    }
    free(seen);
    free(tmp);
    free(stamp);
    if (rc) return -1;
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        node *nd = &g->nodes[i];
        if (nd->kind == N_OBJ) { /* fr[], rc[]; a never-ending property is never permitted */
            objx *x = nd->obj;
            x->rc[x->n] = x->rc[x->n + 1] = 0;
            x->fr[x->n] = x->n;
            for (uint32_t j = x->n; j-- > 0;) {
                x->rc[j] = x->req[j] == 1 ? sat_add(x->rc[j + 1], (int64_t)x->klen[j] + 2 + g->nodes[x->pnode[j]].min_len) : x->rc[j + 1];
                x->fr[j] = x->req[j] == 1 ? j : x->fr[j + 1];
            }
        }
    }
    for (uint32_t i = 0; i < g->n_nodes; i++) node_md(g, i, 0);
    if (g->nodes[g->root].md > SJ_MAX_DEPTH) return cfail(c, "the schema nests deeper than 32 values in its shortest document", NULL, NULL);
    /* first bytes (numbers have theirs) */
    for (int pass = 0; pass < 2; pass++)
        for (uint32_t i = 0; i < g->n_nodes; i++) {
            node *nd = &g->nodes[i];
            const char *firsts = nd->kind == N_OBJ || (nd->kind == N_ANY && nd->obj_only) ? "{" : nd->kind == N_ARR ? "["
                               : nd->kind == N_STR ? "\"" : nd->kind == N_ANY ? "{[\"-0123456789tfn" : "";
            for (const char *p = firsts; *p; p++) set_bit(nd->first, (unsigned char)*p);
            for (uint32_t k = 0; nd->kind == N_LITS && k < nd->n; k++) set_bit(nd->first, nd->lits[k].s[0]);
            for (uint32_t a = 0; pass && nd->kind == N_ALT && a < nd->n; a++)
                for (int b = 0; b < 32; b++) nd->first[b] |= g->nodes[nd->alts[a]].first[b];
        }
    return 0;
}

/* ======================================================================== */
/* The sampler                                                               */
/* ======================================================================== */

/* Tokens sorted by their first byte, then by the second (one-byte tokens
   first): the ids starting with byte b are ord[off[b] .. off[b + 1]). */
typedef struct tindex {
    int32_t *ord;
    uint32_t off[257];
} tindex;

typedef struct sj_state {
    grammar g;
    const picolm_vocab *vocab;
    int32_t n_vocab, eos;
    uint8_t *usable;     /* may appear in a document at all */
    int32_t *pure;       /* plain string content from a clean string state (no '"', no '\\') */
    uint32_t *pure_info; /* code points << 2 | UTF-8 bytes still owed at its end */
    int32_t n_pure;
    tindex all, other;   /* every usable token; those not in pure[] */
    thread *cur;         /* the document so far */
    int n_cur;
    thread *s0, *s1;     /* scratch: after one byte, after two */
    uint64_t *allowed;   /* evaluate(): the tokens kept */
    int32_t min_budget;
    int pending;         /* apply() ran since the last accept() */
    int could_end;       /* that apply() allowed EOS */
    int fresh;           /* no token of this document yet */
    int error;
    /* lazy modes: free text until the document opens */
    int mode;            /* SJ_FIRST, SJ_TRIGGER or SJ_OPTIONAL */
    int free_text;       /* the output so far is free text */
    int decided;         /* SJ_OPTIONAL: the first token chose text or the document */
    int32_t doc_min;     /* the document's own fewest tokens */
    char *trig;          /* SJ_TRIGGER: the text after which the document follows */
    uint32_t trig_len, trig_at; /* its length; how much of it the text ends with */
    uint32_t *trig_fail; /* its KMP failure function */
    int32_t *trig_tok;   /* the tokens that can complete it ... */
    uint64_t *trig_from; /* ... and from which trig_at (bit k) */
    int32_t n_trig;
    uint64_t *text_ok;   /* SJ_OPTIONAL: tokens the first one may be as free text */
    uint8_t doc_first[32]; /* SJ_OPTIONAL: the bytes (not blanks) a document may start with */
} sj_state;

enum { SJ_FIRST, SJ_TRIGGER, SJ_OPTIONAL };

typedef struct ev {
    sj_state *s;
    int32_t budget;   /* closing cost a kept token may leave */
    int32_t min_cost; /* the least any continuing token leaves */
    int eos;          /* the document may end here */
    uint32_t count;
} ev;

static void allow(ev *e, int32_t tok, int32_t cost) {
    if (cost < e->min_cost) e->min_cost = cost;
    if (cost > e->budget) return;
    uint64_t *w = &e->s->allowed[tok >> 6];
    const uint64_t b = 1ull << (tok & 63);
    e->count += !(*w & b);
    *w |= b;
}

/* 0 for a one-byte token, else 1 + its second byte: the order within a
   first byte's tokens. */
static unsigned second(const picolm_vocab *v, int32_t t) { return v->piece_len[t] > 1 ? 1u + (unsigned char)v->piece[t][1] : 0u; }

/* Tokens of index x from thread t: each first byte run once, each first
   two bytes once, the rest of a token from there. */
static void eval_general(ev *e, const thread *t, const tindex *x) {
    sj_state *s = e->s;
    const grammar *g = &s->g;
    const picolm_vocab *v = s->vocab;
    thread u;
    for (unsigned b0 = 0; b0 < 256; b0++) {
        if (x->off[b0] == x->off[b0 + 1]) continue;
        sink k0 = {s->s0, 0, SJ_MAX_THREADS, SJ_INF};
        const uint8_t c0 = (uint8_t)b0;
        thread_copy(&u, t);
        drive(g, &u, &c0, 0, 1, &k0);
        if (!k0.n) continue;
        for (uint32_t i = x->off[b0], end; i < x->off[b0 + 1]; i = end) {
            const unsigned k = second(v, x->ord[i]);
            uint32_t lo = i + 1, hi = x->off[b0 + 1]; /* end of the run of k */
            while (lo < hi) {
                const uint32_t m = lo + (hi - lo) / 2;
                if (second(v, x->ord[m]) <= k) lo = m + 1;
                else hi = m;
            }
            end = lo;
            if (!k) { /* one-byte tokens */
                for (uint32_t j = i; j < end; j++) allow(e, x->ord[j], k0.best);
                continue;
            }
            sink k1 = {s->s1, 0, SJ_MAX_THREADS, SJ_INF};
            const uint8_t c1 = (uint8_t)(k - 1);
            for (int a = 0; a < k0.n; a++) {
                thread_copy(&u, &k0.out[a]);
                drive(g, &u, &c1, 0, 1, &k1);
            }
            for (uint32_t j = i; j < end && k1.n; j++) {
                const int32_t tok = x->ord[j];
                if (v->piece_len[tok] == 2) { allow(e, tok, k1.best); continue; }
                sink kt = {NULL, 0, 0, SJ_INF};
                for (int a = 0; a < k1.n; a++) {
                    thread_copy(&u, &k1.out[a]);
                    drive(g, &u, (const uint8_t *)v->piece[tok], 2, v->piece_len[tok], &kt);
                }
                if (kt.best < SJ_INF) allow(e, tok, kt.best);
            }
        }
    }
}

/* Inside a string, before any escape or multi-byte character: plain
   content tokens by their counts, the others through the index. */
static int string_clean(const grammar *g, const thread *t) {
    const frame *f = &t->f[t->depth - 1];
    const uint8_t kind = g->nodes[f->node].kind;
    return f->phase != P_START && ((kind == N_STR && f->u.s.mode == JG_STR) || (kind == N_ANY && f->u.any.mode == JG_STR));
}

static void eval_string(ev *e, const thread *t) {
    const sj_state *s = e->s;
    const grammar *g = &s->g;
    const frame *f = &t->f[t->depth - 1];
    const node *nd = &g->nodes[f->node];
    const int32_t below = thread_cost(g, t) - frame_cost(g, t, t->depth - 1);
    const int any = nd->kind == N_ANY;
    const uint32_t cnt = any ? 0 : f->u.s.count, mn = any ? 0 : nd->lo, room = any ? UINT32_MAX : nd->hi - cnt;
    const int32_t base = any ? sat_add(below, jg_closing_cost(&f->u.any)) : sat_add(below, 1);
    for (int32_t i = 0; i < s->n_pure; i++) {
        const uint32_t info = s->pure_info[i], ncp = info >> 2;
        if (ncp > room) continue;
        allow(e, s->pure[i], sat_add(base, (info & 3) + (mn > cnt + ncp ? mn - cnt - ncp : 0)));
    }
    eval_general(e, t, &s->other);
}

static int all_done(const sj_state *s) {
    for (int i = 0; i < s->n_cur; i++)
        if (s->cur[i].depth) return 0;
    return 1;
}

/* The tokens that keep the document valid and closable in budget bytes. */
static void evaluate(sj_state *s, int32_t budget, ev *e) {
    memset(s->allowed, 0, ((size_t)s->n_vocab + 63) / 64 * sizeof *s->allowed);
    *e = (ev){s, budget, SJ_INF, 0, 0};
    for (int i = 0; i < s->n_cur; i++) {
        const thread *t = &s->cur[i];
        if (!thread_cost(&s->g, t)) e->eos = s->eos >= 0; /* complete, or a number or literal that may end here */
        if (!t->depth) continue;
        if (string_clean(&s->g, t)) eval_string(e, t);
        else eval_general(e, t, &s->all);
    }
    if (e->eos) {
        s->allowed[s->eos >> 6] |= 1ull << (s->eos & 63);
        e->count++;
    }
}

static void start_doc(sj_state *s) {
    s->n_cur = 1;
    s->cur[0].depth = 1;
    s->cur[0].ws = s->cur[0].pad = 0;
    s->cur[0].f[0] = start_frame(s->g.root);
    s->fresh = 1;
}

static void reset_doc(sj_state *s) {
    start_doc(s);
    s->could_end = 0;
    s->error = 0;
    s->pending = 0;
    s->free_text = s->mode != SJ_FIRST;
    s->decided = 0;
    s->trig_at = 0;
}

/* ---- free text before the document (json_schema_trigger, json_schema_optional) ---- */

static int usable_piece(const sj_state *s, int32_t tok) { return tok >= 0 && tok < s->n_vocab && s->usable[tok]; }

static uint32_t trig_step(const sj_state *s, uint32_t k, unsigned char c) {
    while (k && (unsigned char)s->trig[k] != c) k = s->trig_fail[k - 1];
    return (unsigned char)s->trig[k] == c ? k + 1 : 0;
}

/* Token tok's bytes after free text that ends with k bytes of the trigger:
   the offset just past the trigger when the token completes it (0: it does
   not), and in *k the trigger bytes the text then ends with. */
static uint32_t trig_scan(const sj_state *s, int32_t tok, uint32_t *k) {
    const char *p = s->vocab->piece[tok];
    for (uint32_t i = 0; i < s->vocab->piece_len[tok]; i++)
        if ((*k = trig_step(s, *k, (unsigned char)p[i])) == s->trig_len) return i + 1;
    return 0;
}

/* The closing cost of a document that starts with bytes p[i..n) (SJ_INF: none). */
static int32_t doc_cost(sj_state *s, const uint8_t *p, size_t i, size_t n) {
    thread u;
    u.depth = 1, u.ws = u.pad = 0, u.f[0] = start_frame(s->g.root);
    sink k = {NULL, 0, 0, SJ_INF};
    drive(&s->g, &u, p, i, n, &k);
    return k.best;
}

/* Free text: every token, except one that would open the document where it
   could not close within the budget (or with bytes it cannot start with). */
static void free_allowed(sj_state *s, int32_t budget, ev *e) {
    const size_t words = ((size_t)s->n_vocab + 63) / 64;
    *e = (ev){s, budget, SJ_INF, s->eos >= 0, 0};
    if (s->mode == SJ_OPTIONAL && !s->decided) { /* the first token: the document's, or text */
        evaluate(s, budget, e);
        for (size_t w = 0; w < words; w++) s->allowed[w] |= s->text_ok[w];
        return;
    }
    memset(s->allowed, 0xff, words * sizeof *s->allowed);
    for (int32_t i = 0; s->mode == SJ_TRIGGER && i < s->n_trig; i++) {
        const int32_t tok = s->trig_tok[i];
        if (!(s->trig_from[i] >> s->trig_at & 1)) continue;
        uint32_t k = s->trig_at;
        const uint32_t end = trig_scan(s, tok, &k);
        const int32_t cost = end == s->vocab->piece_len[tok] ? s->doc_min
                           : doc_cost(s, (const uint8_t *)s->vocab->piece[tok], end, s->vocab->piece_len[tok]);
        if (cost > budget) s->allowed[tok >> 6] &= ~(1ull << (tok & 63));
    }
}

/* The tokens kept now, in s->allowed. */
static void compute_allowed(sj_state *s, int32_t budget, ev *e) {
    if (s->free_text) free_allowed(s, budget, e);
    else evaluate(s, budget, e);
}

static int32_t budget_of(const picolm_candidates *c) { return c->n_remaining < 0 ? SJ_INF - 1 : c->n_remaining - 1; }

static int no_candidate(const sj_state *s, const picolm_candidates *c, char *err, size_t errlen) {
    if (s->error) snprintf(err, errlen, "json_schema: the output so far does not follow the schema");
    else if (s->fresh)
        snprintf(err, errlen, "json_schema: a document of this schema needs a budget of at least %d tokens; %d are left",
                 (int)s->min_budget, (int)c->n_remaining);
    else snprintf(err, errlen, "json_schema: no candidate token can continue the document%s",
                  c->n_remaining >= 0 ? " within the remaining token budget" : "");
    return 1;
}

static int sj_apply(void *state, picolm_candidates *c, char *err, size_t errlen) {
    sj_state *s = state;
    if (s->error) return no_candidate(s, c, err, errlen);
    size_t n = 0;
    if (!s->free_text && all_done(s)) { /* complete: EOS only, selectable whatever its logit */
        for (size_t i = 0; i < c->size && s->eos >= 0; i++)
            if (c->data[i].id == s->eos) c->data[n++] = c->data[i];
        if (!n) { snprintf(err, errlen, "json_schema: the document is complete but EOS is not available"); return 1; }
        c->data[0].logit = 0;
        c->size = 1;
        c->sorted = 1;
    } else {
        ev e;
        compute_allowed(s, budget_of(c), &e);
        for (size_t i = 0; i < c->size; i++) {
            const int32_t id = c->data[i].id;
            if (id >= 0 && id < s->n_vocab && (s->allowed[id >> 6] >> (id & 63) & 1)) c->data[n++] = c->data[i];
        }
        if (!n) return no_candidate(s, c, err, errlen);
        c->size = n;
        s->could_end = e.eos;
    }
    c->has_p = 0;
    s->pending = 1;
    return 0;
}

/* apply() over the full list in id order, without the list. */
static int sj_apply_logits(void *state, const float *logits, float scale, picolm_candidates *c, char *err, size_t errlen) {
    sj_state *s = state;
    if (s->error) return no_candidate(s, c, err, errlen);
    size_t n = 0;
    if (!s->free_text && all_done(s)) {
        if (s->eos < 0 || s->eos >= (int32_t)c->size) { snprintf(err, errlen, "json_schema: the document is complete but EOS is not available"); return 1; }
        c->data[n++] = (picolm_token_data){s->eos, 0.0f, 0.0f};
        c->sorted = 1;
    } else {
        ev e;
        compute_allowed(s, budget_of(c), &e);
        const size_t words = (c->size + 63) / 64;
        for (size_t w = 0; w < words; w++)
            for (uint64_t m = s->allowed[w]; m; m &= m - 1) {
                const size_t id = w * 64 + (size_t)__builtin_ctzll(m);
                if (id < c->size) c->data[n++] = logit_td(logits, scale, id);
            }
        if (!n) return no_candidate(s, c, err, errlen);
        c->sorted = 0;
        s->could_end = e.eos;
    }
    c->size = n;
    c->has_p = 0;
    s->pending = 1;
    return 0;
}

/* A generated token of free text: does it open the document (and where
   in it does the document start)?  Returns 1 and sets *from when it does. */
static int opens_doc(sj_state *s, int32_t tok, uint32_t *from) {
    if (!usable_piece(s, tok)) return 0; /* EOS, control tokens: no text */
    if (s->mode == SJ_OPTIONAL) {
        if (s->decided) return 0;
        s->decided = 1;
        *from = 0;
        return bit(s->doc_first, (unsigned char)s->vocab->piece[tok][0]);
    }
    return (*from = trig_scan(s, tok, &s->trig_at)) != 0;
}

static void sj_accept(void *state, int32_t tok) {
    sj_state *s = state;
    if (!s->pending) { reset_doc(s); return; } /* a prompt token: a new document follows */
    s->pending = 0;
    uint32_t from = 0;
    if (s->free_text) {
        if (!opens_doc(s, tok, &from)) return;
        s->free_text = 0;
        start_doc(s);
        if (from == s->vocab->piece_len[tok]) return; /* the trigger ends the token */
    } else if (all_done(s)) { /* only EOS was allowed: anything else starts the next prompt */
        if (tok != s->eos) reset_doc(s);
        return;
    }
    s->fresh = 0;
    if (tok == s->eos && s->eos >= 0) { /* ended where it could */
        s->n_cur = 1;
        s->cur[0].depth = 0;
        return;
    }
    if (tok < 0 || tok >= s->n_vocab || !s->usable[tok]) { s->error = 1; return; }
    sink k = {s->s0, 0, SJ_MAX_THREADS, SJ_INF};
    thread u;
    for (int i = 0; i < s->n_cur; i++) {
        thread_copy(&u, &s->cur[i]);
        drive(&s->g, &u, (const uint8_t *)s->vocab->piece[tok], from, s->vocab->piece_len[tok], &k);
    }
    if (!k.n && s->could_end) { /* the document ended at a chosen EOS the front end kept: a prompt token */
        reset_doc(s);
        return;
    }
    s->n_cur = 0;
    for (int i = 0; i < k.n; i++) { /* merge identical threads */
        int dup = 0;
        for (int j = 0; j < s->n_cur && !dup; j++)
            dup = thread_size(&k.out[i]) == thread_size(&s->cur[j]) && !memcmp(&k.out[i], &s->cur[j], thread_size(&k.out[i]));
        if (!dup) thread_copy(&s->cur[s->n_cur++], &k.out[i]);
    }
    if (!s->n_cur) s->error = 1;
}

static void sj_reset(void *state) { reset_doc(state); }

static int32_t sj_min_budget(const void *state) { return ((const sj_state *)state)->min_budget; }

static void sj_destroy(void *state) {
    sj_state *s = state;
    if (!s) return;
    ar_free(&s->g.mem);
    free(s->g.nodes);
    free(s->usable);
    free(s->pure);
    free(s->pure_info);
    free(s->all.ord);
    free(s->other.ord);
    free(s->cur);
    free(s->s0);
    free(s->s1);
    free(s->allowed);
    free(s->trig);
    free(s->trig_fail);
    free(s->trig_tok);
    free(s->trig_from);
    free(s->text_ok);
    free(s);
}

/* The usable tokens (those not pure unless want_pure_too), sorted by their
   second byte then, stably, by the first. */
static int build_index(const sj_state *s, const uint8_t *pure_flag, int want_pure_too, tindex *x) {
    const picolm_vocab *v = s->vocab;
    int32_t *tmp = malloc((size_t)s->n_vocab * sizeof *tmp);
    x->ord = malloc((size_t)s->n_vocab * sizeof *x->ord);
    if (!tmp || !x->ord) { free(tmp); return -1; }
    uint32_t cnt[258] = {0};
    int32_t n = 0;
    for (int32_t t = 0; t < s->n_vocab; t++)
        if (s->usable[t] && (want_pure_too || !pure_flag[t])) x->ord[n++] = t, cnt[second(v, t) + 1]++;
    for (int k = 0; k < 257; k++) cnt[k + 1] += cnt[k];
    for (int32_t i = 0; i < n; i++) tmp[cnt[second(v, x->ord[i])]++] = x->ord[i];
    memset(x->off, 0, sizeof x->off);
    for (int32_t i = 0; i < n; i++) x->off[(unsigned char)v->piece[tmp[i]][0] + 1]++;
    for (int b = 0; b < 256; b++) x->off[b + 1] += x->off[b];
    uint32_t fill[256];
    memcpy(fill, x->off, sizeof fill);
    for (int32_t i = 0; i < n; i++) x->ord[fill[(unsigned char)v->piece[tmp[i]][0]]++] = tmp[i];
    free(tmp);
    return 0;
}

/* Bytes a shortest completion of a node may need, each one a single-byte
   token of the vocabulary. */
static void closing_bytes(const grammar *g, uint8_t *need) {
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const node *nd = &g->nodes[i];
        const char *b = nd->kind == N_OBJ ? "{}\":," : nd->kind == N_ARR ? "[]," : nd->kind == N_STR ? "\"0"
                      : nd->kind == N_NUM ? (nd->integer ? "-0123456789" : "-0123456789.") : nd->kind == N_ANY ? JG_CLOSING_BYTES : "";
        for (; *b; b++) set_bit(need, (unsigned char)*b);
        const lit *L = nd->kind == N_LITS ? nd->lits : nd->kind == N_OBJ ? nd->obj->keys : NULL;
        const uint32_t n = nd->kind == N_LITS ? nd->n : nd->kind == N_OBJ ? nd->obj->n : 0;
        for (uint32_t k = 0; L && k < n; k++)
            for (uint32_t j = 0; j < L[k].len; j++) set_bit(need, L[k].s[j]);
    }
}

static int vocab_tables(sj_state *s, char *err, size_t errlen) {
    const picolm_vocab *v = s->vocab;
    int32_t single[256];
    memset(single, -1, sizeof single);
    s->usable = calloc((size_t)v->n_vocab, 1);
    uint8_t *pure_flag = calloc((size_t)v->n_vocab, 1);
    s->pure = malloc((size_t)v->n_vocab * sizeof *s->pure);
    s->pure_info = malloc((size_t)v->n_vocab * sizeof *s->pure_info);
    if (!s->usable || !pure_flag || !s->pure || !s->pure_info) { free(pure_flag); snprintf(err, errlen, "json_schema: out of memory"); return -1; }
    for (int32_t t = 0; t < v->n_vocab; t++) {
        const int32_t type = v->token_type ? v->token_type[t] : 1;
        /* control, unknown and unused tokens never print as JSON text */
        if (t == v->eos_id || t == v->bos_id || type == 2 || type == 3 || type == 5 || !v->piece_len[t] || !v->piece[t]) continue;
        s->usable[t] = 1;
        if (v->piece_len[t] == 1) single[(unsigned char)v->piece[t][0]] = t;
    }
    s->g.utf8_ok = 1;
    for (int c = 0x80; c <= 0xBF; c++) s->g.utf8_ok &= single[c] >= 0;
    uint8_t need[32] = {0};
    closing_bytes(&s->g, need);
    for (unsigned c = 0; c < 256; c++)
        if (bit(need, c) && single[c] < 0) {
            snprintf(err, errlen, c >= 0x20 && c < 0x7F ? "json_schema: the vocabulary has no single-byte token for '%c', needed to close documents within the token budget"
                                                        : "json_schema: the vocabulary has no single-byte token for byte 0x%02x, needed to close documents within the token budget", c);
            free(pure_flag);
            return -1;
        }
    int pad = 0; /* minLength pads with any one-byte character */
    for (unsigned c = 0x20; c < 0x7F; c++) pad |= single[c] >= 0 && c != '"' && c != '\\';
    for (uint32_t i = 0; i < s->g.n_nodes && !pad; i++)
        if (s->g.nodes[i].kind == N_STR && s->g.nodes[i].lo) {
            snprintf(err, errlen, "json_schema: the vocabulary has no single-character token to meet a minLength");
            free(pure_flag);
            return -1;
        }
    for (int32_t t = 0; t < v->n_vocab; t++) {
        if (!s->usable[t]) continue;
        jg_state u = {0, JG_STR, 0, 0, 0, 0, 0x80, 0xBF, 0, 0};
        uint32_t ncp = 0, i = 0;
        for (; i < v->piece_len[t]; i++) {
            const unsigned c = (unsigned char)v->piece[t][i];
            ncp += u.mode == JG_STR;
            if (c == '"' || c == '\\' || !jg_str_byte(&u, c, s->g.utf8_ok)) break;
        }
        if (i < v->piece_len[t] || ncp > (UINT32_MAX >> 2)) continue;
        pure_flag[t] = 1;
        s->pure[s->n_pure] = t;
        s->pure_info[s->n_pure++] = ncp << 2 | (u.mode == JG_STR_UTF8 ? u.n : 0);
    }
    const int rc = build_index(s, pure_flag, 1, &s->all) || build_index(s, pure_flag, 0, &s->other);
    free(pure_flag);
    if (rc) snprintf(err, errlen, "json_schema: out of memory");
    return rc ? -1 : 0;
}

/* json_schema_trigger: its KMP table, the tokens that complete it, and
   the fewest tokens that write it (added to the minimum budget). */
static int trigger_tables(sj_state *s, const char *trig, char *err, size_t errlen) {
    const picolm_vocab *v = s->vocab;
    const uint32_t L = (uint32_t)strlen(trig);
    if (L > 64) { snprintf(err, errlen, "json_schema: json_schema_trigger is %u bytes; at most 64 are supported", L); return -1; }
    s->trig = strdup(trig);
    s->trig_len = L;
    s->trig_fail = calloc(L, sizeof *s->trig_fail);
    s->trig_tok = malloc((size_t)s->n_vocab * sizeof *s->trig_tok);
    s->trig_from = malloc((size_t)s->n_vocab * sizeof *s->trig_from);
    int32_t *dist = malloc((L + 1) * sizeof *dist);
    if (!s->trig || !s->trig_fail || !s->trig_tok || !s->trig_from || !dist) { free(dist); snprintf(err, errlen, "json_schema: out of memory"); return -1; }
    for (uint32_t i = 1, k = 0; i < L; i++) {
        while (k && trig[i] != trig[k]) k = s->trig_fail[k - 1];
        if (trig[i] == trig[k]) k++;
        s->trig_fail[i] = k;
    }
    for (int32_t t = 0; t < s->n_vocab; t++) {
        if (!s->usable[t] || !memchr(v->piece[t], trig[L - 1], v->piece_len[t])) continue;
        uint64_t from = 0;
        for (uint32_t k = 0; k < L; k++) {
            uint32_t at = k;
            if (trig_scan(s, t, &at)) from |= 1ull << k;
        }
        if (from) s->trig_tok[s->n_trig] = t, s->trig_from[s->n_trig++] = from;
    }
    dist[0] = 0;
    for (uint32_t i = 1; i <= L; i++) dist[i] = SJ_INF;
    for (uint32_t i = 0; i < L; i++) {
        if (dist[i] >= SJ_INF) continue;
        for (int32_t t = 0; t < s->n_vocab; t++) {
            const uint32_t n = v->piece_len[t];
            if (s->usable[t] && n && n <= L - i && !memcmp(trig + i, v->piece[t], n) && dist[i] + 1 < dist[i + n]) dist[i + n] = dist[i] + 1;
        }
    }
    const int32_t need = dist[L];
    free(dist);
    if (need >= SJ_INF) { snprintf(err, errlen, "json_schema: the vocabulary cannot write json_schema_trigger '%s'", trig); return -1; }
    s->min_budget = need + s->doc_min;
    return 0;
}

/* json_schema_optional: the bytes a document starts with, and the tokens
   that are text at the first step. */
static int optional_tables(sj_state *s, char *err, size_t errlen) {
    const picolm_vocab *v = s->vocab;
    for (unsigned c = 0; c < 256; c++) {
        const uint8_t b = (uint8_t)c;
        if (!jg_is_ws(c) && doc_cost(s, &b, 0, 1) < SJ_INF) set_bit(s->doc_first, c);
    }
    s->text_ok = calloc(((size_t)s->n_vocab + 63) / 64, sizeof *s->text_ok);
    if (!s->text_ok) { snprintf(err, errlen, "json_schema: out of memory"); return -1; }
    for (int32_t t = 0; t < s->n_vocab; t++)
        if (!s->usable[t] || !bit(s->doc_first, (unsigned char)v->piece[t][0])) s->text_ok[t >> 6] |= 1ull << (t & 63);
    return 0;
}

static int lazy_tables(sj_state *s, const picolm_sampler_init *init, char *err, size_t errlen) {
    const char *trig = find_param(init, "json_schema_trigger");
    long optional = 0;
    if (param_int(init, "json_schema_optional", 0, 1, &optional, err, errlen)) return -1;
    if (trig && *trig && optional) {
        snprintf(err, errlen, "json_schema: json_schema_trigger and json_schema_optional exclude each other");
        return -1;
    }
    s->mode = trig && *trig ? SJ_TRIGGER : optional ? SJ_OPTIONAL : SJ_FIRST;
    return s->mode == SJ_TRIGGER ? trigger_tables(s, trig, err, errlen) : s->mode == SJ_OPTIONAL ? optional_tables(s, err, errlen) : 0;
}

static int sj_create(const picolm_sampler_init *init, void **state, char *err, size_t errlen) {
    const picolm_vocab *v = init->vocab;
    if (!v || v->n_vocab <= 0 || !v->piece || !v->piece_len) { snprintf(err, errlen, "json_schema: no vocabulary"); return 1; }
    const char *text = find_param(init, "json_schema");
    if (!text || !*text) {
        snprintf(err, errlen, "json_schema: no schema: set the sampler key json_schema to the schema's text (picolm: --json-schema FILE)");
        return 1;
    }
    sj_state *s = calloc(1, sizeof *s);
    if (!s) { snprintf(err, errlen, "json_schema: out of memory"); return 1; }
    s->vocab = v;
    s->n_vocab = v->n_vocab;
    s->eos = v->eos_id;
    arena dom = {0};
    jv root;
    cc c = {.g = &s->g, .root = &root, .err = err, .errlen = errlen, .any = {.type = JV_TRUE}};
    int rc = parse_json(text, strlen(text), &dom, &root, err, errlen);
    if (!rc) rc = compile(&c, &root, &s->g.root);
    if (!rc) rc = finish(&c);
    ar_free(&dom); /* the grammar keeps copies of what it needs */
    if (!rc) rc = vocab_tables(s, err, errlen);
    if (!rc) {
        s->cur = malloc(SJ_MAX_THREADS * sizeof *s->cur);
        s->s0 = malloc(SJ_MAX_THREADS * sizeof *s->s0);
        s->s1 = malloc(SJ_MAX_THREADS * sizeof *s->s1);
        s->allowed = calloc(((size_t)v->n_vocab + 63) / 64, sizeof *s->allowed);
        if (!s->cur || !s->s0 || !s->s1 || !s->allowed) rc = -1, snprintf(err, errlen, "json_schema: out of memory");
    }
    if (!rc) { /* the fewest tokens: one, then what the cheapest first token leaves to close */
        ev e;
        reset_doc(s);
        evaluate(s, SJ_INF - 1, &e);
        s->min_budget = s->doc_min = e.min_cost < SJ_INF ? e.min_cost + 1 : 0;
        if (!s->min_budget) rc = -1, snprintf(err, errlen, "json_schema: no token of the vocabulary can start a document of this schema");
    }
    if (!rc) rc = lazy_tables(s, init, err, errlen);
    if (rc) { sj_destroy(s); return 1; }
    reset_doc(s);
    *state = s;
    return 0;
}

static const picolm_param_desc sj_params[] = {
    {"json_schema", PICOLM_PARAM_STRING, "", 0, 0, "schema", "the JSON Schema the output must satisfy (its text; picolm: --json-schema)"},
    {"json_schema_trigger", PICOLM_PARAM_STRING, "", 0, 0, "after", "free text until this text, then the document (a tool call's opening tag)"},
    {"json_schema_optional", PICOLM_PARAM_INT, "0", 0, 1, "optional", "1: the document only if the first token starts one, else free text"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};

PICOLM_DEFINE_SAMPLER("json_schema", "1.0", "constrain output to one JSON document valid against a JSON Schema (--json-schema)",
                      PICOLM_SAMPLER_PROCESS,
                      .params = sj_params, .create = sj_create, .destroy = sj_destroy,
                      .apply = sj_apply, .accept = sj_accept, .reset = sj_reset,
                      .apply_logits = sj_apply_logits, .min_budget = sj_min_budget);
