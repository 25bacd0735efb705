/* A small JSON document model: see jsondoc.h. */
#include "jsondoc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JD_MAX_DEPTH 256

typedef struct jd_parser {
    const char *s;
    size_t n, i;
    int depth;
    const char *why; /* the first error */
} jd_parser;

static int fail(jd_parser *p, const char *why) {
    if (!p->why) p->why = why;
    return -1;
}

static void skip_ws(jd_parser *p) {
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r')) p->i++;
}

static int hex4(jd_parser *p, unsigned *out) {
    unsigned v = 0;
    for (int k = 0; k < 4; k++, p->i++) {
        const int c = p->i < p->n ? (unsigned char)p->s[p->i] : -1;
        const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return fail(p, "a \\u escape needs four hex digits");
        v = v << 4 | (unsigned)d;
    }
    *out = v;
    return 0;
}

static void put_utf8(pl_sbuf *b, unsigned cp) {
    char o[4];
    size_t n;
    if (cp < 0x80) o[0] = (char)cp, n = 1;
    else if (cp < 0x800) o[0] = (char)(0xC0 | cp >> 6), o[1] = (char)(0x80 | (cp & 0x3F)), n = 2;
    else if (cp < 0x10000) o[0] = (char)(0xE0 | cp >> 12), o[1] = (char)(0x80 | (cp >> 6 & 0x3F)), o[2] = (char)(0x80 | (cp & 0x3F)), n = 3;
    else o[0] = (char)(0xF0 | cp >> 18), o[1] = (char)(0x80 | (cp >> 12 & 0x3F)), o[2] = (char)(0x80 | (cp >> 6 & 0x3F)), o[3] = (char)(0x80 | (cp & 0x3F)), n = 4;
    pl_sbuf_add(b, o, n);
}

/* The length of the UTF-8 character at s[0..n) (RFC 3629: no overlong
   forms, no surrogates), 0 when invalid. */
static size_t utf8_char(const unsigned char *s, size_t n) {
    const unsigned c = s[0];
    size_t len;
    unsigned lo = 0x80, hi = 0xBF;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    else return 0;
    if (len > n || s[1] < lo || s[1] > hi) return 0;
    for (size_t k = 2; k < len; k++)
        if ((s[k] & 0xC0) != 0x80) return 0;
    return len;
}

/* A string at p->i (its opening quote): decoded into *out (malloc'd). */
static int parse_string(jd_parser *p, char **out, size_t *len) {
    pl_sbuf b = {0};
    pl_sbuf_add(&b, "", 0);
    p->i++;
    for (;;) {
        if (p->i >= p->n) { free(b.p); return fail(p, "a string is not closed"); }
        const unsigned char c = (unsigned char)p->s[p->i];
        if (c == '"') break;
        if (c < 0x20) { free(b.p); return fail(p, "a control character inside a string"); }
        if (c != '\\') {
            const size_t k = utf8_char((const unsigned char *)p->s + p->i, p->n - p->i);
            if (!k) { free(b.p); return fail(p, "a string is not valid UTF-8"); }
            pl_sbuf_add(&b, p->s + p->i, k);
            p->i += k;
            continue;
        }
        if (++p->i >= p->n) { free(b.p); return fail(p, "a string is not closed"); }
        const char e = p->s[p->i++];
        const char *simple = strchr("\"\\/bfnrt", e);
        if (simple && e) {
            static const char to[] = "\"\\/\b\f\n\r\t";
            pl_sbuf_add(&b, &to[simple - "\"\\/bfnrt"], 1);
            continue;
        }
        unsigned cp, lo;
        if (e != 'u' || hex4(p, &cp)) { free(b.p); return fail(p, "a bad escape in a string"); }
        if (cp >= 0xDC00 && cp <= 0xDFFF) { free(b.p); return fail(p, "a lone low surrogate escape"); }
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (p->i + 2 > p->n || p->s[p->i] != '\\' || p->s[p->i + 1] != 'u') { free(b.p); return fail(p, "a lone high surrogate escape"); }
            p->i += 2;
            if (hex4(p, &lo) || lo < 0xDC00 || lo > 0xDFFF) { free(b.p); return fail(p, "a lone high surrogate escape"); }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        }
        put_utf8(&b, cp);
    }
    p->i++;
    if (b.oom) { free(b.p); return fail(p, "out of memory"); }
    *out = b.p;
    *len = b.n;
    return 0;
}

static int parse_number(jd_parser *p, jd_value *v) {
    const size_t start = p->i;
    int is_int = 1;
    if (p->i < p->n && p->s[p->i] == '-') p->i++;
    if (p->i < p->n && p->s[p->i] == '0') p->i++;
    else if (p->i < p->n && p->s[p->i] >= '1' && p->s[p->i] <= '9') while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    else return fail(p, "a bad number");
    if (p->i < p->n && p->s[p->i] == '.') {
        is_int = 0;
        if (++p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9') return fail(p, "a bad number");
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    }
    if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
        is_int = 0;
        if (++p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-')) p->i++;
        if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9') return fail(p, "a bad number");
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    }
    char buf[64], *end;
    const size_t len = p->i - start;
    char *txt = len < sizeof buf ? buf : malloc(len + 1);
    if (!txt) return fail(p, "out of memory");
    memcpy(txt, p->s + start, len);
    txt[len] = 0;
    errno = 0;
    if (is_int) {
        const long long x = strtoll(txt, &end, 10);
        if (errno != ERANGE) v->type = JD_INT, v->i = x;
    }
    if (v->type != JD_INT) v->type = JD_FLOAT, v->f = strtod(txt, &end); /* beyond int64: a double, as nlohmann reads it */
    v->s = txt != buf ? txt : strdup(txt); /* as written, for compact output */
    v->len = len;
    return v->s ? 0 : fail(p, "out of memory");
}

static int parse_value(jd_parser *p, jd_value *v);

static int add_item(jd_parser *p, jd_value *v, size_t *cap) {
    if (v->n < *cap) return 0;
    const size_t nc = *cap ? *cap * 2 : 4;
    jd_value *it = realloc(v->items, nc * sizeof *it);
    if (it) v->items = it;
    if (v->type == JD_OBJ) {
        char **k = it ? realloc(v->keys, nc * sizeof *k) : NULL;
        if (k) v->keys = k;
        size_t *kl = k ? realloc(v->key_len, nc * sizeof *kl) : NULL;
        if (kl) v->key_len = kl;
        if (!kl) return fail(p, "out of memory");
    }
    if (!it) return fail(p, "out of memory");
    *cap = nc;
    return 0;
}

static void free_value(jd_value *v);

static int parse_container(jd_parser *p, jd_value *v) {
    const int obj = p->s[p->i] == '{';
    const char close = obj ? '}' : ']';
    v->type = obj ? JD_OBJ : JD_ARR;
    if (++p->depth > JD_MAX_DEPTH) return fail(p, "nested too deep");
    size_t cap = 0;
    p->i++;
    skip_ws(p);
    if (p->i < p->n && p->s[p->i] == close) { p->i++; p->depth--; return 0; }
    for (;;) {
        char *key = NULL;
        size_t klen = 0;
        if (obj) {
            skip_ws(p);
            if (p->i >= p->n || p->s[p->i] != '"') return fail(p, "an object key must be a string");
            if (parse_string(p, &key, &klen)) return -1;
            skip_ws(p);
            if (p->i >= p->n || p->s[p->i] != ':') { free(key); return fail(p, "':' expected after a key"); }
            p->i++;
        }
        jd_value item;
        memset(&item, 0, sizeof item);
        if (parse_value(p, &item)) { free(key); free_value(&item); return -1; }
        size_t at = v->n;
        for (size_t k = 0; obj && k < v->n; k++) /* a key again: the later value, in the first one's place */
            if (v->key_len[k] == klen && !memcmp(v->keys[k], key, klen)) at = k;
        if (at < v->n) {
            free_value(&v->items[at]);
            v->items[at] = item;
            free(key);
        } else if (add_item(p, v, &cap)) {
            free(key);
            free_value(&item);
            return -1;
        } else {
            v->items[v->n] = item;
            if (obj) v->keys[v->n] = key, v->key_len[v->n] = klen;
            v->n++;
        }
        skip_ws(p);
        if (p->i < p->n && p->s[p->i] == ',') { p->i++; continue; }
        if (p->i < p->n && p->s[p->i] == close) { p->i++; p->depth--; return 0; }
        return fail(p, obj ? "',' or '}' expected" : "',' or ']' expected");
    }
}

static int word(jd_parser *p, const char *w, int type, jd_value *v) {
    const size_t l = strlen(w);
    if (p->i + l > p->n || memcmp(p->s + p->i, w, l)) return fail(p, "an unexpected character");
    p->i += l;
    v->type = type;
    return 0;
}

static int parse_value(jd_parser *p, jd_value *v) {
    skip_ws(p);
    if (p->i >= p->n) return fail(p, "a value is missing");
    switch (p->s[p->i]) {
    case '{': case '[': return parse_container(p, v);
    case '"': v->type = JD_STR; return parse_string(p, &v->s, &v->len);
    case 't': return word(p, "true", JD_TRUE, v);
    case 'f': return word(p, "false", JD_FALSE, v);
    case 'n': return word(p, "null", JD_NULL, v);
    default: return parse_number(p, v);
    }
}

static void free_value(jd_value *v) {
    for (size_t k = 0; k < v->n; k++) {
        free_value(&v->items[k]);
        if (v->keys) free(v->keys[k]);
    }
    free(v->items);
    free(v->keys);
    free(v->key_len);
    free(v->s);
}

void jd_free(jd_value *v) {
    if (!v) return;
    free_value(v);
    free(v);
}

jd_value *jd_parse(const char *text, size_t len, char *err, size_t errlen) {
    jd_parser p = {text, len, 0, 0, NULL};
    jd_value *v = calloc(1, sizeof *v);
    if (!v) return pl_fail(err, errlen, "out of memory"), NULL;
    if (!parse_value(&p, v)) {
        skip_ws(&p);
        if (p.i < p.n) fail(&p, "more after the value");
    }
    if (!p.why) return v;
    jd_free(v);
    pl_fail(err, errlen, "%s (at byte %zu)", p.why, p.i);
    return NULL;
}

const jd_value *jd_get(const jd_value *obj, const char *key) {
    const size_t l = strlen(key);
    for (size_t k = 0; obj && obj->type == JD_OBJ && k < obj->n; k++)
        if (obj->key_len[k] == l && !memcmp(obj->keys[k], key, l)) return &obj->items[k];
    return NULL;
}

/* ---- writing, as llama.cpp's Jinja tojson ---- */

void jd_write_text(pl_sbuf *b, const char *s, size_t n) {
    pl_sbuf t = {0};
    for (size_t i = 0; i < n;) {
        const size_t k = utf8_char((const unsigned char *)s + i, n - i);
        if (k) pl_sbuf_add(&t, s + i, k), i += k;
        else pl_sbuf_add(&t, "\xEF\xBF\xBD", 3), i++;
    }
    if (t.oom) b->oom = 1;
    jd_write_string(b, t.p ? t.p : "", t.n);
    free(t.p);
}

void jd_write_string(pl_sbuf *b, const char *s, size_t n) {
    pl_sbuf_add(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        const char *e = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\b' ? "\\b" : c == '\f' ? "\\f" : c == '\n' ? "\\n"
                      : c == '\r' ? "\\r" : c == '\t' ? "\\t" : NULL;
        char u[8];
        if (!e && c < 0x20) snprintf(u, sizeof u, "\\u%04x", c), e = u;
        if (e) pl_sbuf_add(b, e, strlen(e));
        else pl_sbuf_add(b, s + i, 1);
    }
    pl_sbuf_add(b, "\"", 1);
}

static void newline(pl_sbuf *b, int indent, int level) {
    if (indent < 0) return;
    pl_sbuf_add(b, "\n", 1);
    for (int i = 0; i < indent * level; i++) pl_sbuf_add(b, " ", 1);
}

static void write_value(pl_sbuf *b, const jd_value *v, int indent, int compact, int level) {
    char num[64];
    switch (v->type) {
    case JD_NULL: pl_sbuf_add(b, "null", 4); return;
    case JD_FALSE: pl_sbuf_add(b, "false", 5); return;
    case JD_TRUE: pl_sbuf_add(b, "true", 4); return;
    case JD_INT:
    case JD_FLOAT:
        if (compact) pl_sbuf_add(b, v->s, v->len);
        else if (v->type == JD_INT) pl_sbuf_add(b, num, (size_t)snprintf(num, sizeof num, "%lld", (long long)v->i));
        else pl_sbuf_add(b, num, (size_t)snprintf(num, sizeof num, "%g", v->f));
        return;
    case JD_STR: jd_write_string(b, v->s, v->len); return;
    }
    const int obj = v->type == JD_OBJ;
    const char *sep = compact || indent >= 0 ? "," : ", ";
    pl_sbuf_add(b, obj ? "{" : "[", 1);
    for (size_t k = 0; k < v->n; k++) {
        newline(b, indent, level + 1);
        if (obj) {
            jd_write_string(b, v->keys[k], v->key_len[k]);
            pl_sbuf_add(b, compact ? ":" : ": ", compact ? 1 : 2);
        }
        write_value(b, &v->items[k], indent, compact, level + 1);
        if (k + 1 < v->n) pl_sbuf_add(b, sep, strlen(sep));
    }
    if (v->n) newline(b, indent, level);
    pl_sbuf_add(b, obj ? "}" : "]", 1);
}

void jd_write(pl_sbuf *b, const jd_value *v, int indent, int compact) { write_value(b, v, indent, compact, 0); }
