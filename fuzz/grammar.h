/* What the grammar harnesses share (fuzz/json.c, fuzz/json_schema.c): a
   vocabulary built from the input, and an independent RFC 8259 validator
   (strict UTF-8, no surrogates, nesting up to 200). */
#ifndef PICOLM_FUZZ_GRAMMAR_H
#define PICOLM_FUZZ_GRAMMAR_H
#include <ctype.h>
#include <string.h>

#include "picolm/plugin.h"

/* The 256 single bytes (ids 0..255; with utf8_off the bytes 0x80..0xBF are
   marked unused), EOS = 256, then up to max_extra tokens taken from the
   input at *pos as [len 1..16][bytes]. */
#define FV_MAX (257 + 64)
typedef struct fvocab {
    char bytes[256], extra[64][16];
    const char *piece[FV_MAX];
    uint32_t plen[FV_MAX];
    int32_t ttype[FV_MAX];
    picolm_vocab v;
} fvocab;

static void fuzz_vocab(fvocab *f, const uint8_t *data, size_t size, size_t *pos, int n_extra, int utf8_off) {
    for (int b = 0; b < 256; b++) {
        f->bytes[b] = (char)b;
        f->piece[b] = &f->bytes[b];
        f->plen[b] = 1;
        f->ttype[b] = utf8_off && b >= 0x80 && b <= 0xBF ? 5 : 1;
    }
    f->piece[256] = "";
    f->plen[256] = 0;
    f->ttype[256] = 3;
    int nv = 257;
    for (int i = 0; i < n_extra && i < 64 && *pos < size; i++) {
        size_t l = 1 + data[(*pos)++] % 16;
        if (l > size - *pos) l = size - *pos;
        if (!l) break;
        memcpy(f->extra[i], data + *pos, l);
        *pos += l;
        f->piece[nv] = f->extra[i];
        f->plen[nv] = (uint32_t)l;
        f->ttype[nv++] = 1;
    }
    f->v = (picolm_vocab){.n_vocab = nv, .bos_id = -1, .eos_id = 256, .piece = f->piece, .piece_len = f->plen, .token_type = f->ttype};
}

typedef struct { const unsigned char *p, *e; int depth; } vj;
static void vj_ws(vj *v) { while (v->p < v->e && (*v->p == ' ' || *v->p == '\t' || *v->p == '\n' || *v->p == '\r')) v->p++; }
static int vj_lit(vj *v, const char *s) {
    size_t n = strlen(s);
    if ((size_t)(v->e - v->p) < n || memcmp(v->p, s, n)) return 0;
    v->p += n;
    return 1;
}
static int vj_digits(vj *v) {
    const unsigned char *s = v->p;
    while (v->p < v->e && *v->p >= '0' && *v->p <= '9') v->p++;
    return v->p > s;
}
static int vj_number(vj *v) {
    if (v->p < v->e && *v->p == '-') v->p++;
    if (v->p < v->e && *v->p == '0') v->p++;
    else if (!(v->p < v->e && *v->p >= '1' && *v->p <= '9') || !vj_digits(v)) return 0;
    if (v->p < v->e && *v->p == '.') { v->p++; if (!vj_digits(v)) return 0; }
    if (v->p < v->e && (*v->p == 'e' || *v->p == 'E')) {
        v->p++;
        if (v->p < v->e && (*v->p == '+' || *v->p == '-')) v->p++;
        if (!vj_digits(v)) return 0;
    }
    return 1;
}
static int vj_string(vj *v) {
    if (v->p >= v->e || *v->p != '"') return 0;
    v->p++;
    while (v->p < v->e) {
        unsigned c = *v->p++;
        if (c == '"') return 1;
        if (c < 0x20) return 0;
        if (c == '\\') {
            if (v->p >= v->e) return 0;
            c = *v->p++;
            if (c == 'u') {
                for (int i = 0; i < 4; i++, v->p++)
                    if (v->p >= v->e || !isxdigit(*v->p)) return 0;
            } else if (!strchr("\"\\/bfnrt", (int)c) || !c) return 0;
            continue;
        }
        if (c < 0x80) continue;
        int k; unsigned cp;
        if (c >= 0xC2 && c <= 0xDF) { k = 1; cp = c & 0x1F; }
        else if (c >= 0xE0 && c <= 0xEF) { k = 2; cp = c & 0x0F; }
        else if (c >= 0xF0 && c <= 0xF4) { k = 3; cp = c & 0x07; }
        else return 0;
        for (int i = 0; i < k; i++) {
            if (v->p >= v->e || (*v->p & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (*v->p++ & 0x3F);
        }
        if ((k == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (k == 3 && (cp < 0x10000 || cp > 0x10FFFF))) return 0;
    }
    return 0;
}
static int vj_value(vj *v);
static int vj_container(vj *v) {
    const int obj = *v->p == '{';
    const unsigned char close = obj ? '}' : ']';
    v->p++;
    vj_ws(v);
    if (v->p < v->e && *v->p == close) { v->p++; return 1; }
    for (;;) {
        vj_ws(v);
        if (obj) {
            if (!vj_string(v)) return 0;
            vj_ws(v);
            if (v->p >= v->e || *v->p++ != ':') return 0;
            vj_ws(v);
        }
        if (!vj_value(v)) return 0;
        vj_ws(v);
        if (v->p >= v->e) return 0;
        if (*v->p == close) { v->p++; return 1; }
        if (*v->p++ != ',') return 0;
    }
}
static int vj_value(vj *v) {
    if (v->p >= v->e) return 0;
    switch (*v->p) {
    case '{': case '[': return ++v->depth <= 200 && vj_container(v);
    case '"': return vj_string(v);
    case 't': return vj_lit(v, "true");
    case 'f': return vj_lit(v, "false");
    case 'n': return vj_lit(v, "null");
    default: return vj_number(v);
    }
}
/* One value, whitespace before it, nothing after; any_top = 0: an object or array. */
static int valid_json(const unsigned char *s, size_t n, int any_top) {
    vj v = {s, s + n, 0};
    vj_ws(&v);
    if (v.p >= v.e || (!any_top && *v.p != '{' && *v.p != '[')) return 0;
    if (!vj_value(&v)) return 0;
    return v.p == v.e;
}

#endif
