/* libFuzzer harness: tokenizer_encode / tokenizer_piece on arbitrary bytes.
   Vocabularies are built once: the repo's tiny-shakespeare model (1024 SPM
   tokens), tests/bad/good.gguf (300) and, when $PICOLM_SHARED is there, the
   Llama-2 vocabulary (32000, with user-defined tokens) and the byte-level
   BPE vocabularies of Llama 3 and Qwen2.  The first input byte picks the
   vocabulary and the flags; the rest is the text.
   Checked: ids in range, the count protocol (cap 0 sizing, -needed), and,
   without special parsing, that decoding gives the input back (SPM: with
   the dummy-prefix space and U+2581 read as a space; BPE: with invalid
   UTF-8 read as U+FFFD, as llama.cpp does). */
#include "common.h"
#include "gguf.h"
#include "tokenizer.h"
#include "unicode.h"

static tokenizer *toks[5];
static int n_toks;

static void load(const char *path) {
    gguf_file f;
    char err[512];
    if (build_gguf(&f, path, NULL, err, sizeof err)) return;
    if (!build_tokenizer(&toks[n_toks], &f, err, sizeof err)) n_toks++;
    else fprintf(stderr, "fuzz-tokenizer: %s: %s\n", path, err);
    free_gguf(&f);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    load("models/tiny-shakespeare-q8_0.gguf");
    load("tests/bad/good.gguf");
    const char *sh = getenv("PICOLM_SHARED");
    char p[1024];
    static const char *const shared[] = { "llama-spm", "llama-bpe", "qwen2" };
    for (size_t i = 0; i < sizeof shared / sizeof shared[0]; i++) {
        snprintf(p, sizeof p, "%s/reference/tokenizer/ggml-vocab-%s.gguf", sh ? sh : "../shared", shared[i]);
        load(p);
    }
    if (!n_toks) { fprintf(stderr, "fuzz-tokenizer: no vocabulary (run from the repo root)\n"); abort(); }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const tokenizer *t = toks[data[0] % n_toks];
    const int add_bos = (data[0] >> 2) & 1, special = (data[0] >> 3) & 1;
    const char *text = (const char *)data + 1;
    const size_t len = size - 1;
    const int need = tokenizer_encode(t, text, len, add_bos, special, NULL, 0);
    if (need == -1) return 0; /* documented error */
    const int cap = need < 0 ? -need : need;
    FUZZ_ASSERT(cap <= (int)len * 4 + 2, "%d tokens for %zu bytes", cap, len);
    int32_t *ids = malloc(((size_t)cap + 1) * sizeof *ids);
    const int n = tokenizer_encode(t, text, len, add_bos, special, ids, cap);
    FUZZ_ASSERT(n == cap, "sized %d, encoded %d", cap, n);
    if (cap > 0) FUZZ_ASSERT(tokenizer_encode(t, text, len, add_bos, special, ids, cap - 1) == -cap, "-needed protocol");
    const int32_t nv = tokenizer_n_vocab(t);
    size_t out_len = 0;
    char *out = malloc(len * 3 + 16);
    for (int i = 0; i < n; i++) {
        FUZZ_ASSERT(ids[i] >= 0 && ids[i] < nv, "id %d out of range", ids[i]);
        size_t pl;
        const char *p = tokenizer_piece(t, ids[i], &pl);
        if (i == 0 && add_bos) { FUZZ_ASSERT(ids[0] == tokenizer_bos(t), "BOS missing"); continue; }
        FUZZ_ASSERT(out_len + pl <= len * 3 + 16, "decoded text too long");
        memcpy(out + out_len, p, pl);
        out_len += pl;
    }
    if (!special && tokenizer_is_bpe(t)) {
        /* lossless: every byte is a token (GPT-2 byte map); invalid UTF-8
           is read as U+FFFD before that */
        char *exp = malloc(len * 3 + 16);
        size_t el = 0;
        for (size_t i = 0; i < len;) {
            uint32_t cp;
            i += unicode_decode_utf8((const unsigned char *)text + i, len - i, &cp);
            el += unicode_encode_utf8(cp, exp + el);
        }
        FUZZ_ASSERT(out_len == el && !memcmp(out, exp, el), "BPE round trip differs (%zu vs %zu bytes)", out_len, el);
        free(exp);
    } else if (!special && tokenizer_unk(t) >= 0) {
        /* lossless round trip, modulo the dummy prefix and U+2581 -> ' ' */
        char *exp = malloc(len + 2);
        size_t el = 0;
        if (len) exp[el++] = ' ';
        for (size_t i = 0; i < len; i++) {
            if (i + 2 < len && !memcmp(text + i, "\xe2\x96\x81", 3)) { exp[el++] = ' '; i += 2; continue; }
            exp[el++] = text[i];
        }
        /* byte fallback exists for all 256 bytes in these vocabularies, so
           nothing may turn into <unk> */
        /* a U+2581 swallowed by an invalid lead byte comes back as its 3
           bytes (byte fallback), as in llama.cpp: compare modulo U+2581 */
        size_t ol = 0;
        for (size_t i = 0; i < out_len; i++) {
            if (i + 2 < out_len && !memcmp(out + i, "\xe2\x96\x81", 3)) { out[ol++] = ' '; i += 2; continue; }
            out[ol++] = out[i];
        }
        FUZZ_ASSERT(ol == el && !memcmp(out, exp, el), "round trip differs (%zu vs %zu bytes)", ol, el);
        free(exp);
    }
    size_t k = tokenizer_utf8_prefix(text, len);
    FUZZ_ASSERT(k <= len && len - k < 4, "tokenizer_utf8_prefix %zu of %zu", k, len);
    tokenizer_find(t, text, len);
    size_t pl;
    tokenizer_piece(t, (int32_t)(len * 7919u), &pl);
    tokenizer_piece(t, -1 - (int32_t)len, &pl);
    free(out);
    free(ids);
    return 0;
}
