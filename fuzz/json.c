/* libFuzzer harness: the JSON logit processor (plugins/json.c, compiled in).
   Input: [flags][budget][n_extra] then n_extra tokens as [len 1..16][bytes],
   then one byte per generation step choosing among the surviving candidates.
   Vocabulary: the 256 single bytes (ids 0..255; with flag bit 0 the bytes
   0x80..0xBF are marked unused), EOS = 256, the extra multi-byte tokens.
   Checked, as the plugin promises: apply() never fails while budget is
   left, every surviving token keeps the output a valid JSON prefix, the
   document is complete when the budget runs out or EOS is chosen, and
   what was generated is valid JSON by an independent validator below. */
#include <ctype.h>

#include "common.h"

#include "../plugins/json.c"

/* ---- independent RFC 8259 validator (object or array at top level) ---- */
typedef struct { const unsigned char *p, *e; int depth; } vj;
static void ws(vj *v) { while (v->p < v->e && (*v->p == ' ' || *v->p == '\t' || *v->p == '\n' || *v->p == '\r')) v->p++; }
static int lit(vj *v, const char *s) {
    size_t n = strlen(s);
    if ((size_t)(v->e - v->p) < n || memcmp(v->p, s, n)) return 0;
    v->p += n;
    return 1;
}
static int digits(vj *v) {
    const unsigned char *s = v->p;
    while (v->p < v->e && *v->p >= '0' && *v->p <= '9') v->p++;
    return v->p > s;
}
static int number(vj *v) {
    if (v->p < v->e && *v->p == '-') v->p++;
    if (v->p < v->e && *v->p == '0') v->p++;
    else if (!(v->p < v->e && *v->p >= '1' && *v->p <= '9') || !digits(v)) return 0;
    if (v->p < v->e && *v->p == '.') { v->p++; if (!digits(v)) return 0; }
    if (v->p < v->e && (*v->p == 'e' || *v->p == 'E')) {
        v->p++;
        if (v->p < v->e && (*v->p == '+' || *v->p == '-')) v->p++;
        if (!digits(v)) return 0;
    }
    return 1;
}
static int string(vj *v) {
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
static int value(vj *v);
static int container(vj *v) {
    const int obj = *v->p == '{';
    const unsigned char close = obj ? '}' : ']';
    v->p++;
    ws(v);
    if (v->p < v->e && *v->p == close) { v->p++; return 1; }
    for (;;) {
        ws(v);
        if (obj) {
            if (!string(v)) return 0;
            ws(v);
            if (v->p >= v->e || *v->p++ != ':') return 0;
            ws(v);
        }
        if (!value(v)) return 0;
        ws(v);
        if (v->p >= v->e) return 0;
        if (*v->p == close) { v->p++; return 1; }
        if (*v->p++ != ',') return 0;
    }
}
static int value(vj *v) {
    if (v->p >= v->e) return 0;
    switch (*v->p) {
    case '{': case '[': return ++v->depth <= 200 && container(v);
    case '"': return string(v);
    case 't': return lit(v, "true");
    case 'f': return lit(v, "false");
    case 'n': return lit(v, "null");
    default: return number(v);
    }
}
static int valid_json(const unsigned char *s, size_t n) {
    vj v = {s, s + n, 0};
    ws(&v);
    if (v.p >= v.e || (*v.p != '{' && *v.p != '[')) return 0;
    if (!value(&v)) return 0;
    return v.p == v.e;
}

/* ---- harness ---- */
#define NV_MAX (257 + 64)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 3) return 0;
    const uint8_t flags = data[0];
    const int budget0 = 2 + data[1] % 120;
    int n_extra = data[2] % 64;
    size_t pos = 3;
    static char bytes[256];
    static char extra[64][16];
    const char *piece[NV_MAX];
    uint32_t plen[NV_MAX];
    int32_t ttype[NV_MAX];
    for (int b = 0; b < 256; b++) {
        bytes[b] = (char)b;
        piece[b] = &bytes[b];
        plen[b] = 1;
        ttype[b] = (flags & 1) && b >= 0x80 && b <= 0xBF ? 5 : 1;
    }
    piece[256] = "";
    plen[256] = 0;
    ttype[256] = 3;
    int nv = 257;
    for (int i = 0; i < n_extra && pos < size; i++) {
        size_t l = 1 + data[pos++] % 16;
        if (l > size - pos) l = size - pos;
        if (!l) break;
        memcpy(extra[i], data + pos, l);
        pos += l;
        piece[nv] = extra[i];
        plen[nv] = (uint32_t)l;
        ttype[nv] = 1;
        nv++;
    }
    picolm_vocab voc = {.n_vocab = nv, .bos_id = -1, .eos_id = 256, .piece = piece, .piece_len = plen,
                        .token_type = ttype};
    picolm_sampler_init init = {.struct_size = sizeof init, .vocab = &voc};
    void *st = NULL;
    char err[256];
    if (json_vtable.create(&init, &st, err, sizeof err)) return 0;

    picolm_token_data cand[NV_MAX];
    unsigned char out[120 * 16 + 1];
    size_t out_len = 0;
    int budget = budget0, done = 0;
    if (flags & 2) json_vtable.accept(st, 'x'); /* a prompt token: restarts, harmless */
    while (budget > 0) {
        for (int i = 0; i < nv; i++) cand[i] = (picolm_token_data){i, (float)((i * 37 + budget) % 11), 0};
        picolm_candidates c = {cand, (size_t)nv, 0, 0, -1, budget};
        int r = json_vtable.apply(st, &c, err, sizeof err);
        FUZZ_ASSERT(r == 0, "apply failed with %d tokens left: %s", budget, err);
        FUZZ_ASSERT(c.size >= 1 && c.size <= (size_t)nv, "bad candidate count %zu", c.size);
        /* every survivor keeps the text a valid prefix: check one fully */
        const size_t pick = pos < size ? data[pos++] % c.size : 0;
        const int32_t id = c.data[pick].id;
        FUZZ_ASSERT(id >= 0 && id < nv, "survivor id %d", id);
        if (id == 256) { done = 1; budget--; json_vtable.accept(st, id); break; }
        memcpy(out + out_len, piece[id], plen[id]);
        out_len += plen[id];
        json_vtable.accept(st, id);
        budget--;
        if (((json_state *)st)->cur.mode == JG_DONE) done = 1;
        if (pos >= size && done) break;
    }
    FUZZ_ASSERT(done, "budget of %d tokens ran out before the document closed: %.*s", budget0, (int)out_len, out);
    FUZZ_ASSERT(valid_json(out, out_len), "generated text is not valid JSON: %.*s", (int)out_len, out);
    json_vtable.reset(st);
    json_vtable.destroy(st);
    return 0;
}
