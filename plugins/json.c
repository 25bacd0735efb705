/* json: PROCESS, constrain generation to one RFC 8259 JSON document (--json).
 *
 * The top-level value must be an object or an array (so the end of the
 * document is unambiguous), an object alone with json_object = 1 (OpenAI's
 * response_format json_object); whitespace may precede it, nothing may
 * follow it.
 * A candidate survives only if every byte of its decoded piece keeps the
 * output a valid JSON prefix (with at most JSON_MAX_WS whitespace bytes in a
 * row between tokens): a pushdown automaton (a small copyable state,
 * nesting capped at JSON_MAX_DEPTH) is run over the piece from the current
 * state.  Strings are checked to be valid UTF-8 (no overlongs, no surrogates,
 * no raw control characters); escapes include \uXXXX.
 *
 * EOS is allowed only once the document is complete, and then it is the only
 * choice.  Budget: with n_remaining tokens left, a token is kept only if the
 * shortest byte sequence that completes the document afterwards fits in the
 * remaining n_remaining - 1 tokens, one token per byte.  That is feasible
 * because create() checks the vocabulary has single-byte tokens for every
 * byte such a shortest completion uses ({ } ] " : 0, the letters of
 * true/false/null, UTF-8 continuation bytes), so by induction a document
 * can always be closed in time.
 *
 * Which tokens are generated: accept() after apply() is the chosen token;
 * an accept() with no apply() before it is a prompt token and restarts the
 * document (so a new turn of a chat starts a new document).
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "picolm/plugin.h"

#define JSON_MAX_DEPTH 64
/* Consecutive whitespace bytes allowed between tokens of the grammar: enough
   for pretty-printing, but a model cannot pad the document with blank lines
   until the budget forces it shut (still a subset of RFC 8259). */
#define JSON_MAX_WS 16

enum {
    M_START,      /* before the top-level value: ws, '{' or '[' */
    M_VALUE,      /* a value is required (after ':' or an array's ',') */
    M_ARR_FIRST,  /* after '[': a value or ']' */
    M_OBJ_FIRST,  /* after '{': a key or '}' */
    M_OBJ_KEY,    /* after an object's ',': a key */
    M_COLON,      /* after a key */
    M_AFTER,      /* after a value in a container: ',' or the closer */
    M_STR,        /* inside a string (key says which kind) */
    M_STR_ESC,    /* after a backslash */
    M_STR_HEX,    /* in \uXXXX, n digits left */
    M_STR_UTF8,   /* in a multi-byte character, n bytes left, next in [lo, hi] */
    M_NUM_MINUS,  /* "-": a digit must follow */
    M_NUM_ZERO,   /* leading "0": '.', 'e' or the end */
    M_NUM_INT,    /* "1".."9" digits */
    M_NUM_DOT,    /* "1.": a digit must follow */
    M_NUM_FRAC,   /* "1.5" */
    M_NUM_E,      /* "1e": sign or digit */
    M_NUM_ESIGN,  /* "1e+": digit */
    M_NUM_EXP,    /* "1e5" */
    M_LIT,        /* inside true/false/null, n letters matched */
    M_DONE,       /* the document is complete */
    M_ERROR
};

typedef struct jstate {
    uint64_t stack;   /* bit d: nesting level d is an object (else an array) */
    uint8_t mode, depth, key, n, lit, lo, hi;
    uint8_t ws;       /* consecutive structural whitespace so far */
    uint8_t obj;      /* the top-level value must be an object */
} jstate;

static const char *const literals[3] = {"true", "false", "null"};

static int is_ws(unsigned c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
static int is_digit(unsigned c) { return c >= '0' && c <= '9'; }
static int is_hex(unsigned c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

static void value_done(jstate *s) { s->mode = s->depth ? M_AFTER : M_DONE; }
static int top_is_object(const jstate *s) { return (int)((s->stack >> (s->depth - 1)) & 1u); }

static int open_container(jstate *s, int object) {
    if (s->depth >= JSON_MAX_DEPTH) return 0;
    if (object) s->stack |= 1ull << s->depth;
    else s->stack &= ~(1ull << s->depth);
    s->depth++;
    s->mode = object ? M_OBJ_FIRST : M_ARR_FIRST;
    return 1;
}

static int close_container(jstate *s, unsigned c) {
    if (!s->depth || c != (top_is_object(s) ? '}' : ']')) return 0;
    s->depth--;
    value_done(s);
    return 1;
}

static int begin_value(jstate *s, unsigned c) {
    switch (c) {
    case '{': return open_container(s, 1);
    case '[': return open_container(s, 0);
    case '"': s->mode = M_STR; s->key = 0; return 1;
    case '-': s->mode = M_NUM_MINUS; return 1;
    case '0': s->mode = M_NUM_ZERO; return 1;
    case 't': s->lit = 0; break;
    case 'f': s->lit = 1; break;
    case 'n': s->lit = 2; break;
    default:
        if (c >= '1' && c <= '9') { s->mode = M_NUM_INT; return 1; }
        return 0;
    }
    s->mode = M_LIT;
    s->n = 1;
    return 1;
}

/* Advance by one byte; 0 = the byte cannot continue a valid document.
   utf8_ok = 0 forbids non-ASCII bytes (the vocabulary could not finish a
   multi-byte character one byte at a time). */
static int step(jstate *s, unsigned c, int utf8_ok) {
    if (s->mode <= M_AFTER) { /* structural modes: whitespace may appear (only here) */
        if (is_ws(c)) return ++s->ws <= JSON_MAX_WS;
        s->ws = 0;
    }
    switch (s->mode) {
    case M_START:
        if (c == '{' || (c == '[' && !s->obj)) return open_container(s, c == '{');
        return 0;
    case M_VALUE:
        return begin_value(s, c);
    case M_ARR_FIRST:
        return c == ']' ? close_container(s, c) : begin_value(s, c);
    case M_OBJ_FIRST:
        if (c == '}') return close_container(s, c);
        if (c == '"') { s->mode = M_STR; s->key = 1; return 1; }
        return 0;
    case M_OBJ_KEY:
        if (c == '"') { s->mode = M_STR; s->key = 1; return 1; }
        return 0;
    case M_COLON:
        if (c == ':') { s->mode = M_VALUE; return 1; }
        return 0;
    case M_AFTER:
        if (c == ',') { s->mode = top_is_object(s) ? M_OBJ_KEY : M_VALUE; return 1; }
        return close_container(s, c);
    case M_STR:
        if (c == '"') {
            if (s->key) s->mode = M_COLON;
            else value_done(s);
            return 1;
        }
        if (c == '\\') { s->mode = M_STR_ESC; return 1; }
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
        s->mode = M_STR_UTF8;
        return 1;
    case M_STR_UTF8:
        if (c < s->lo || c > s->hi) return 0;
        s->lo = 0x80; s->hi = 0xBF;
        if (--s->n == 0) s->mode = M_STR;
        return 1;
    case M_STR_ESC:
        if (c == 'u') { s->mode = M_STR_HEX; s->n = 4; return 1; }
        if (strchr("\"\\/bfnrt", (int)c) && c) { s->mode = M_STR; return 1; }
        return 0;
    case M_STR_HEX:
        if (!is_hex(c)) return 0;
        if (--s->n == 0) s->mode = M_STR;
        return 1;
    case M_NUM_MINUS:
        if (c == '0') { s->mode = M_NUM_ZERO; return 1; }
        if (c >= '1' && c <= '9') { s->mode = M_NUM_INT; return 1; }
        return 0;
    case M_NUM_ZERO:
    case M_NUM_INT:
        if (s->mode == M_NUM_INT && is_digit(c)) return 1;
        if (c == '.') { s->mode = M_NUM_DOT; return 1; }
        if (c == 'e' || c == 'E') { s->mode = M_NUM_E; return 1; }
        break; /* the number ends here */
    case M_NUM_DOT:
        if (is_digit(c)) { s->mode = M_NUM_FRAC; return 1; }
        return 0;
    case M_NUM_FRAC:
        if (is_digit(c)) return 1;
        if (c == 'e' || c == 'E') { s->mode = M_NUM_E; return 1; }
        break;
    case M_NUM_E:
        if (c == '+' || c == '-') { s->mode = M_NUM_ESIGN; return 1; }
        if (is_digit(c)) { s->mode = M_NUM_EXP; return 1; }
        return 0;
    case M_NUM_ESIGN:
        if (is_digit(c)) { s->mode = M_NUM_EXP; return 1; }
        return 0;
    case M_NUM_EXP:
        if (is_digit(c)) return 1;
        break;
    case M_LIT: {
        const char *w = literals[s->lit];
        if (c != (unsigned char)w[s->n]) return 0;
        if (w[++s->n] == 0) value_done(s);
        return 1;
    }
    default: /* M_DONE: only EOS may follow; M_ERROR */
        return 0;
    }
    /* A complete number ended: numbers only occur inside containers, so the
       byte is read as what follows a value. */
    s->mode = M_AFTER;
    return step(s, c, utf8_ok);
}

/* Length in bytes of the shortest completion of the document from s (each
   open container costs its closer). */
static int closing_cost(const jstate *s) {
    const int d = s->depth;
    switch (s->mode) {
    case M_START: return 2;                         /* {} */
    case M_DONE: return 0;
    case M_AFTER: case M_ARR_FIRST: case M_OBJ_FIRST:
    case M_NUM_ZERO: case M_NUM_INT: case M_NUM_FRAC: case M_NUM_EXP:
        return d;
    case M_VALUE: case M_NUM_MINUS: case M_NUM_DOT: case M_NUM_E: case M_NUM_ESIGN:
        return 1 + d;                               /* 0 */
    case M_OBJ_KEY: return 4 + d;                   /* "":0 */
    case M_COLON: return 2 + d;                     /* :0 */
    case M_STR: return (s->key ? 3 : 1) + d;        /* " or ":0 */
    case M_STR_ESC: return 1 + (s->key ? 3 : 1) + d;
    case M_STR_HEX: case M_STR_UTF8: return s->n + (s->key ? 3 : 1) + d;
    case M_LIT: return (int)strlen(literals[s->lit]) - s->n + d;
    default: return INT_MAX / 2;
    }
}

typedef struct json_state {
    const picolm_vocab *vocab;
    int32_t n_vocab, eos;
    int utf8_ok;
    uint8_t *usable;     /* per token: may appear in a document at all */
    jstate init;         /* an empty document */
    jstate cur;          /* the document so far */
    int pending;         /* apply() ran since the last accept() */
} json_state;

static const jstate json_initial = {0, M_START, 0, 0, 0, 0, 0x80, 0xBF, 0, 0};

static void json_destroy(void *state) {
    json_state *j = state;
    if (!j) return;
    free(j->usable);
    free(j);
}

static int json_create(const picolm_sampler_init *init, void **state, char *err, size_t errlen) {
    const picolm_vocab *v = init->vocab;
    if (!v || v->n_vocab <= 0 || !v->piece || !v->piece_len) { snprintf(err, errlen, "json: no vocabulary"); return 1; }
    json_state *j = calloc(1, sizeof *j);
    if (!j) { snprintf(err, errlen, "json: out of memory"); return 1; }
    j->vocab = v;
    j->n_vocab = v->n_vocab;
    j->eos = v->eos_id;
    j->init = json_initial;
    for (int i = 0; i < init->n_params; i++)
        if (!strcmp(init->params[i].key, "json_object")) j->init.obj = atoi(init->params[i].value) != 0;
    j->cur = j->init;
    j->usable = calloc((size_t)v->n_vocab, 1);
    if (!j->usable) { snprintf(err, errlen, "json: out of memory"); json_destroy(j); return 1; }
    int single[256] = {0};
    for (int32_t t = 0; t < v->n_vocab; t++) {
        const int32_t type = v->token_type ? v->token_type[t] : 1;
        /* control, unknown and unused tokens never print as JSON text */
        if (t == v->eos_id || t == v->bos_id || type == 2 || type == 3 || type == 5 || !v->piece_len[t] || !v->piece[t]) continue;
        j->usable[t] = 1;
        if (v->piece_len[t] == 1) single[(unsigned char)v->piece[t][0]] = 1;
    }
    const char *need = "{}]\":0truefalsn";
    for (const char *c = need; *c; c++)
        if (!single[(unsigned char)*c]) {
            snprintf(err, errlen, "json: the vocabulary has no single-character token for '%c', needed to close documents within the token budget", *c);
            json_destroy(j);
            return 1;
        }
    j->utf8_ok = 1;
    for (int c = 0x80; c <= 0xBF; c++) j->utf8_ok &= single[c];
    *state = j;
    return 0;
}

static int run_piece(jstate *s, const char *p, uint32_t len, int utf8_ok) {
    for (uint32_t i = 0; i < len; i++)
        if (!step(s, (unsigned char)p[i], utf8_ok)) return 0;
    return 1;
}

static int json_apply(void *state, picolm_candidates *c, char *err, size_t errlen) {
    json_state *j = state;
    if (j->cur.mode == M_ERROR) { snprintf(err, errlen, "json: the output so far is not valid JSON"); return 1; }
    size_t n = 0;
    if (j->cur.mode == M_DONE) { /* complete: force EOS */
        for (size_t i = 0; i < c->size; i++)
            if (c->data[i].id == j->eos && j->eos >= 0) c->data[n++] = c->data[i];
        if (!n) { snprintf(err, errlen, "json: the document is complete but EOS is not available"); return 1; }
        c->data[0].logit = 0; /* keep it selectable whatever its logit was */
        c->size = 1;
        c->sorted = 1;
        c->has_p = 0;
        j->pending = 1;
        return 0;
    }
    /* Which first bytes can follow: rejects most tokens in one lookup. */
    uint8_t first_ok[256];
    for (unsigned b = 0; b < 256; b++) {
        jstate t = j->cur;
        first_ok[b] = (uint8_t)step(&t, b, j->utf8_ok);
    }
    const int budget = c->n_remaining < 0 ? INT_MAX : c->n_remaining - 1; /* tokens left after this one */
    const char *const *piece = j->vocab->piece;
    const uint32_t *plen = j->vocab->piece_len;
    for (size_t i = 0; i < c->size; i++) {
        const int32_t id = c->data[i].id;
        if (id < 0 || id >= j->n_vocab || !j->usable[id] || c->data[i].logit == -INFINITY) continue;
        if (!first_ok[(unsigned char)piece[id][0]]) continue;
        jstate t = j->cur;
        if (!run_piece(&t, piece[id], plen[id], j->utf8_ok)) continue;
        if (closing_cost(&t) > budget) continue;
        c->data[n++] = c->data[i];
    }
    if (!n) {
        snprintf(err, errlen, "json: no candidate token can continue the document%s",
                 c->n_remaining >= 0 ? " within the remaining token budget" : "");
        return 1;
    }
    c->size = n;
    c->has_p = 0;
    j->pending = 1;
    return 0;
}

static void json_accept(void *state, int32_t tok) {
    json_state *j = state;
    if (!j->pending) { /* a prompt token: the next generated text is a new document */
        j->cur = j->init;
        return;
    }
    j->pending = 0;
    if (j->cur.mode == M_DONE) {
        /* only EOS was allowed: anything else is the next prompt's first token */
        if (tok != j->eos) j->cur = j->init;
        return;
    }
    if (tok < 0 || tok >= j->n_vocab || !j->usable[tok] ||
        !run_piece(&j->cur, j->vocab->piece[tok], j->vocab->piece_len[tok], j->utf8_ok))
        j->cur.mode = M_ERROR;
}

static void json_reset(void *state) {
    json_state *j = state;
    j->cur = j->init;
    j->pending = 0;
}

static const picolm_param_desc json_params[] = {
    {"json_object", PICOLM_PARAM_INT, "0", 0, 1, "object", "1: the document must be an object, not an array"},
    {0},
};

static const picolm_sampler_vtable json_vtable = {
    .struct_size = sizeof(picolm_sampler_vtable),
    .role = PICOLM_SAMPLER_PROCESS,
    .params = json_params,
    .create = json_create,
    .destroy = json_destroy,
    .apply = json_apply,
    .accept = json_accept,
    .reset = json_reset,
};

PICOLM_DEFINE_PLUGIN(PICOLM_KIND_SAMPLER, "json", "1.0",
                     "constrain output to one JSON object or array (--json)", 0, 0, &json_vtable);
