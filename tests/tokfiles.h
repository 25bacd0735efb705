/* Helpers shared by the tokenizer tests: files, llama.cpp's .inp/.out
   vector format, encoding into a fresh array, and a tiny GGUF writer for
   hand-built vocabularies. */
#ifndef PICOLM_TEST_TOKFILES_H
#define PICOLM_TEST_TOKFILES_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gguf.h"
#include "testlib.h"
#include "tokenizer.h"

#define SEP "\n__ggml_vocab_test__\n"

/* the whole file, or NULL */
static inline char *read_file(const char *path, size_t *len) { return tl_slurp(path, len); }

static inline tokenizer *load_tok(const char *path, gguf_file *gf) {
    char err[512];
    if (build_gguf(gf, path, NULL, err, sizeof err)) { printf("build_gguf %s: %s\n", path, err); return NULL; }
    tokenizer *t = NULL;
    if (build_tokenizer(&t, gf, err, sizeof err)) { printf("build_tokenizer %s: %s\n", path, err); t = NULL; }
    return t;
}

/* encode into a fresh array (sized by a first call); n < 0 on error */
static inline int32_t *encode(const tokenizer *t, const char *s, size_t len, int bos, int special, int *n) {
    int need = tokenizer_encode(t, s, len, bos, special, NULL, 0);
    int cap = need < 0 ? -need : 1;
    int32_t *v = malloc((size_t)cap * sizeof *v);
    *n = tokenizer_encode(t, s, len, bos, special, v, cap);
    return v;
}

static inline int ids_equal_line(const int32_t *ids, int n, const char *line, size_t ll, char *why, size_t wl) {
    int k = 0;
    const char *p = line, *e = line + ll;
    while (p < e) {
        while (p < e && *p == ' ') p++;
        if (p >= e) break;
        long v = strtol(p, (char **)&p, 10);
        if (k >= n || ids[k] != v) {
            snprintf(why, wl, "token %d: got %d, expected %ld", k, k < n ? (int)ids[k] : -1, v);
            return 0;
        }
        k++;
    }
    if (k != n) { snprintf(why, wl, "got %d tokens, expected %d", n, k); return 0; }
    return 1;
}

/* Splits an .inp/.out pair; calls back per case.  Returns cases seen. */
typedef void (*case_fn)(void *ctx, int idx, const char *in, size_t inl, const char *out, size_t outl);
static inline int for_each_case(const char *inp, size_t inl, const char *out, size_t outl, case_fn fn, void *ctx) {
    const char *p = inp, *e = inp + inl, *o = out, *oe = out + outl;
    int idx = 0;
    size_t sl = strlen(SEP);
    while (p < e) {
        const char *m = memmem(p, (size_t)(e - p), SEP, sl);
        if (!m) break;
        const char *nl = memchr(o, '\n', (size_t)(oe - o));
        if (!nl) break;
        fn(ctx, idx++, p, (size_t)(m - p), o, (size_t)(nl - o));
        p = m + sl;
        o = nl + 1;
    }
    return idx;
}

static inline void preview(char *dst, size_t dl, const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n && k + 5 < dl && i < 24; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f) dst[k++] = (char)c;
        else k += (size_t)snprintf(dst + k, dl - k, "\\x%02x", c);
    }
    dst[k] = 0;
}

static inline double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct { unsigned char *b; size_t n, cap; } wbuf;
static inline void wput(wbuf *w, const void *p, size_t n) {
    if (w->n + n > w->cap) { w->cap = (w->n + n) * 2 + 256; w->b = realloc(w->b, w->cap); }
    memcpy(w->b + w->n, p, n); w->n += n;
}
static inline void w32(wbuf *w, uint32_t v) { wput(w, &v, 4); }
static inline void w64(wbuf *w, uint64_t v) { wput(w, &v, 8); }
static inline void wstr(wbuf *w, const char *s, size_t n) { w64(w, n); wput(w, s, n); }
static inline void wkey(wbuf *w, const char *k, uint32_t type) { wstr(w, k, strlen(k)); w32(w, type); }

/* A tokenizer from the GGUF bytes in w (freed), or NULL with err set */
static inline tokenizer *tok_from_gguf(wbuf *w, char *err, size_t errlen) {
    gguf_file gf;
    tokenizer *t = NULL;
    if (gguf_parse(&gf, w->b, w->n, NULL, err, errlen) == 0) {
        if (build_tokenizer(&t, &gf, err, errlen)) t = NULL;
        free_gguf(&gf);
    }
    free(w->b);
    return t;
}

/* encode(s) == want?  Prints both when not. */
static inline int enc_eq(const tokenizer *t, const char *s, int special, const int32_t *want, int nw) {
    int n;
    int32_t *ids = encode(t, s, strlen(s), 0, special, &n);
    int ok = n == nw && (n == 0 || memcmp(ids, want, (size_t)n * sizeof *ids) == 0);
    if (!ok) {
        printf("  \"%s\": got", s);
        for (int i = 0; i < n; i++) printf(" %d", (int)ids[i]);
        printf("  want");
        for (int i = 0; i < nw; i++) printf(" %d", (int)want[i]);
        printf("\n");
    }
    free(ids);
    return ok;
}
#endif
