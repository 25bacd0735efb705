/* Small hand-made vocabularies for the grammar samplers' tests (test_json,
   test_schema): 0 <unk>, 1 <s>, 2 </s> (control; EOS = 2), then tokens. */
#ifndef PICOLM_TEST_TVOCAB_H
#define PICOLM_TEST_TVOCAB_H
#include <stdlib.h>
#include <string.h>

#include "picolm/plugin.h"

typedef struct tvocab {
    picolm_vocab v;
    int n, cap;
    const char **piece;
    uint32_t *len;
    int32_t *type;
} tvocab;

static inline void tv_init(tvocab *t, int cap) {
    memset(t, 0, sizeof *t);
    t->cap = cap;
    t->piece = calloc((size_t)cap, sizeof *t->piece);
    t->len = calloc((size_t)cap, sizeof *t->len);
    t->type = calloc((size_t)cap, sizeof *t->type);
    for (int i = 0; i < 3; i++) { t->piece[i] = ""; t->type[i] = i ? 3 : 2; }
    t->n = 3;
    t->v = (picolm_vocab){3, 1, 2, t->piece, t->len, t->type};
}

/* Add a token of len bytes (type 1 normal, 6 byte, ...): its id. */
static inline int tv_add(tvocab *t, const char *s, uint32_t len, int type) {
    char *dst = malloc(len + 1);
    memcpy(dst, s, len);
    dst[len] = 0;
    t->piece[t->n] = dst;
    t->len[t->n] = len;
    t->type[t->n] = type;
    t->v.n_vocab = t->n + 1;
    return t->n++;
}

static inline void tv_free(tvocab *t) {
    for (int i = 3; i < t->n; i++) free((char *)t->piece[i]);
    free(t->piece); free(t->len); free(t->type);
}

/* All 256 bytes as byte tokens: byte b is token 3 + b. */
static inline void byte_vocab(tvocab *t, int cap) {
    tv_init(t, cap);
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        tv_add(t, &c, 1, 6);
    }
}
#endif
