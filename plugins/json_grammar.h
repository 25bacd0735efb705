/* The byte-level JSON automaton shared by the json and json_schema sampler
   plugins (header-only: each plugin is its own shared object).
 *
 * A pushdown automaton over one RFC 8259 value: a small copyable state
 * (nesting capped at JG_MAX_DEPTH, a bit per level says object or array),
 * stepped one byte at a time.  Strings are checked to be valid UTF-8 (no
 * overlongs, no surrogates, no raw control characters); escapes include
 * \uXXXX.  At most JG_MAX_WS whitespace bytes in a row between tokens:
 * enough for pretty-printing, but a model cannot pad the document with
 * blank lines until the budget forces it shut (a subset of RFC 8259).
 *
 * jg_closing_cost() is the length in bytes of the shortest completion, the
 * basis of both plugins' token budget. */
#ifndef PICOLM_JSON_GRAMMAR_H
#define PICOLM_JSON_GRAMMAR_H
#include <limits.h>
#include <stdint.h>
#include <string.h>

#define JG_MAX_DEPTH 64
#define JG_MAX_WS 16

enum {
    JG_START,      /* before a top-level object or array: ws, '{' or '[' */
    JG_VALUE,      /* a value is required (after ':' or an array's ','; any value) */
    JG_ARR_FIRST,  /* after '[': a value or ']' */
    JG_OBJ_FIRST,  /* after '{': a key or '}' */
    JG_OBJ_KEY,    /* after an object's ',': a key */
    JG_COLON,      /* after a key */
    JG_AFTER,      /* after a value in a container: ',' or the closer */
    JG_STR,        /* inside a string (key says which kind) */
    JG_STR_ESC,    /* after a backslash */
    JG_STR_HEX,    /* in \uXXXX, n digits left */
    JG_STR_UTF8,   /* in a multi-byte character, n bytes left, next in [lo, hi] */
    JG_NUM_MINUS,  /* "-": a digit must follow */
    JG_NUM_ZERO,   /* leading "0": '.', 'e' or the end */
    JG_NUM_INT,    /* "1".."9" digits */
    JG_NUM_DOT,    /* "1.": a digit must follow */
    JG_NUM_FRAC,   /* "1.5" */
    JG_NUM_E,      /* "1e": sign or digit */
    JG_NUM_ESIGN,  /* "1e+": digit */
    JG_NUM_EXP,    /* "1e5" */
    JG_LIT,        /* inside true/false/null, n letters matched */
    JG_DONE,       /* the value is complete */
    JG_ERROR
};

typedef struct jg_state {
    uint64_t stack;   /* bit d: nesting level d is an object (else an array) */
    uint8_t mode, depth, key, n, lit, lo, hi;
    uint8_t ws;       /* consecutive structural whitespace so far */
    uint8_t obj;      /* JG_START: the top-level value must be an object */
} jg_state;

/* The initial states: a top-level object or array, or any one value. */
static const jg_state jg_document = {0, JG_START, 0, 0, 0, 0, 0x80, 0xBF, 0, 0};
static const jg_state jg_any_value = {0, JG_VALUE, 0, 0, 0, 0, 0x80, 0xBF, 0, 0};

static const char *const jg_literals[3] = {"true", "false", "null"};

static inline int jg_is_ws(unsigned c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
static inline int jg_is_digit(unsigned c) { return c >= '0' && c <= '9'; }
static inline int jg_is_hex(unsigned c) { return jg_is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

static inline void jg_value_done(jg_state *s) { s->mode = s->depth ? JG_AFTER : JG_DONE; }
static inline int jg_top_is_object(const jg_state *s) { return (int)((s->stack >> (s->depth - 1)) & 1u); }

static inline int jg_open(jg_state *s, int object) {
    if (s->depth >= JG_MAX_DEPTH) return 0;
    if (object) s->stack |= 1ull << s->depth;
    else s->stack &= ~(1ull << s->depth);
    s->depth++;
    s->mode = object ? JG_OBJ_FIRST : JG_ARR_FIRST;
    return 1;
}

static inline int jg_close(jg_state *s, unsigned c) {
    if (!s->depth || c != (jg_top_is_object(s) ? '}' : ']')) return 0;
    s->depth--;
    jg_value_done(s);
    return 1;
}

static inline int jg_begin_value(jg_state *s, unsigned c) {
    switch (c) {
    case '{': return jg_open(s, 1);
    case '[': return jg_open(s, 0);
    case '"': s->mode = JG_STR; s->key = 0; return 1;
    case '-': s->mode = JG_NUM_MINUS; return 1;
    case '0': s->mode = JG_NUM_ZERO; return 1;
    case 't': s->lit = 0; break;
    case 'f': s->lit = 1; break;
    case 'n': s->lit = 2; break;
    default:
        if (c >= '1' && c <= '9') { s->mode = JG_NUM_INT; return 1; }
        return 0;
    }
    s->mode = JG_LIT;
    s->n = 1;
    return 1;
}

/* One byte of a string's content from a state inside the string (JG_STR or
   JG_STR_UTF8): the UTF-8 rules.  utf8_ok = 0 forbids non-ASCII bytes. */
static inline int jg_str_byte(jg_state *s, unsigned c, int utf8_ok) {
    if (s->mode == JG_STR_UTF8) {
        if (c < s->lo || c > s->hi) return 0;
        s->lo = 0x80; s->hi = 0xBF;
        if (--s->n == 0) s->mode = JG_STR;
        return 1;
    }
    if (c < 0x20) return 0;
    if (c < 0x80) return 1;
    if (!utf8_ok) return 0;
    s->lo = 0x80; s->hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) s->n = 1;
    else if (c == 0xE0) { s->n = 2; s->lo = 0xA0; }
    else if (c == 0xED) { s->n = 2; s->hi = 0x9F; }  /* no surrogates */
    else if (c >= 0xE1 && c <= 0xEF) s->n = 2;
    else if (c == 0xF0) { s->n = 3; s->lo = 0x90; }
    else if (c == 0xF4) { s->n = 3; s->hi = 0x8F; }  /* <= U+10FFFF */
    else if (c >= 0xF1 && c <= 0xF3) s->n = 3;
    else return 0;                                   /* 80..C1, F5..FF */
    s->mode = JG_STR_UTF8;
    return 1;
}

/* Advance by one byte: 1 = consumed; 0 = the byte cannot continue a valid
   value; 2 = a top-level number ended before this byte, which is not
   consumed (the value is complete: mode JG_DONE).  utf8_ok = 0 forbids
   non-ASCII bytes (the vocabulary could not finish a multi-byte character
   one byte at a time). */
static inline int jg_step(jg_state *s, unsigned c, int utf8_ok) {
    if (s->mode <= JG_AFTER) { /* structural modes: whitespace may appear (only here) */
        if (jg_is_ws(c)) return ++s->ws <= JG_MAX_WS;
        s->ws = 0;
    }
    switch (s->mode) {
    case JG_START:
        if (c == '{' || (c == '[' && !s->obj)) return jg_open(s, c == '{');
        return 0;
    case JG_VALUE:
        return jg_begin_value(s, c);
    case JG_ARR_FIRST:
        return c == ']' ? jg_close(s, c) : jg_begin_value(s, c);
    case JG_OBJ_FIRST:
        if (c == '}') return jg_close(s, c);
        if (c == '"') { s->mode = JG_STR; s->key = 1; return 1; }
        return 0;
    case JG_OBJ_KEY:
        if (c == '"') { s->mode = JG_STR; s->key = 1; return 1; }
        return 0;
    case JG_COLON:
        if (c == ':') { s->mode = JG_VALUE; return 1; }
        return 0;
    case JG_AFTER:
        if (c == ',') { s->mode = jg_top_is_object(s) ? JG_OBJ_KEY : JG_VALUE; return 1; }
        return jg_close(s, c);
    case JG_STR:
        if (c == '"') {
            if (s->key) s->mode = JG_COLON;
            else jg_value_done(s);
            return 1;
        }
        if (c == '\\') { s->mode = JG_STR_ESC; return 1; }
        return jg_str_byte(s, c, utf8_ok);
    case JG_STR_UTF8:
        return jg_str_byte(s, c, utf8_ok);
    case JG_STR_ESC:
        if (c == 'u') { s->mode = JG_STR_HEX; s->n = 4; return 1; }
        if (strchr("\"\\/bfnrt", (int)c) && c) { s->mode = JG_STR; return 1; }
        return 0;
    case JG_STR_HEX:
        if (!jg_is_hex(c)) return 0;
        if (--s->n == 0) s->mode = JG_STR;
        return 1;
    case JG_NUM_MINUS:
        if (c == '0') { s->mode = JG_NUM_ZERO; return 1; }
        if (c >= '1' && c <= '9') { s->mode = JG_NUM_INT; return 1; }
        return 0;
    case JG_NUM_ZERO:
    case JG_NUM_INT:
        if (s->mode == JG_NUM_INT && jg_is_digit(c)) return 1;
        if (c == '.') { s->mode = JG_NUM_DOT; return 1; }
        if (c == 'e' || c == 'E') { s->mode = JG_NUM_E; return 1; }
        break; /* the number ends here */
    case JG_NUM_DOT:
        if (jg_is_digit(c)) { s->mode = JG_NUM_FRAC; return 1; }
        return 0;
    case JG_NUM_FRAC:
        if (jg_is_digit(c)) return 1;
        if (c == 'e' || c == 'E') { s->mode = JG_NUM_E; return 1; }
        break;
    case JG_NUM_E:
        if (c == '+' || c == '-') { s->mode = JG_NUM_ESIGN; return 1; }
        if (jg_is_digit(c)) { s->mode = JG_NUM_EXP; return 1; }
        return 0;
    case JG_NUM_ESIGN:
        if (jg_is_digit(c)) { s->mode = JG_NUM_EXP; return 1; }
        return 0;
    case JG_NUM_EXP:
        if (jg_is_digit(c)) return 1;
        break;
    case JG_LIT: {
        const char *w = jg_literals[s->lit];
        if (c != (unsigned char)w[s->n]) return 0;
        if (w[++s->n] == 0) jg_value_done(s);
        return 1;
    }
    default: /* JG_DONE: nothing may follow; JG_ERROR */
        return 0;
    }
    /* A complete number ended: the byte is read as what follows a value. */
    if (!s->depth) { s->mode = JG_DONE; return 2; }
    s->mode = JG_AFTER;
    return jg_step(s, c, utf8_ok);
}

/* Length in bytes of the shortest completion from s (each open container
   costs its closer). */
static inline int jg_closing_cost(const jg_state *s) {
    const int d = s->depth;
    switch (s->mode) {
    case JG_START: return 2;                         /* {} */
    case JG_DONE: return 0;
    case JG_AFTER: case JG_ARR_FIRST: case JG_OBJ_FIRST:
    case JG_NUM_ZERO: case JG_NUM_INT: case JG_NUM_FRAC: case JG_NUM_EXP:
        return d;
    case JG_VALUE: case JG_NUM_MINUS: case JG_NUM_DOT: case JG_NUM_E: case JG_NUM_ESIGN:
        return 1 + d;                                /* 0 */
    case JG_OBJ_KEY: return 4 + d;                   /* "":0 */
    case JG_COLON: return 2 + d;                     /* :0 */
    case JG_STR: return (s->key ? 3 : 1) + d;        /* " or ":0 */
    case JG_STR_ESC: return 1 + (s->key ? 3 : 1) + d;
    case JG_STR_HEX: case JG_STR_UTF8: return s->n + (s->key ? 3 : 1) + d;
    case JG_LIT: return (int)strlen(jg_literals[s->lit]) - s->n + d;
    default: return INT_MAX / 2;
    }
}

/* The bytes a shortest completion may use, each of which the vocabulary
   must have as a single-byte token (UTF-8 continuation bytes aside: without
   them strings stay ASCII). */
#define JG_CLOSING_BYTES "{}]\":0truefalsn"
#endif
