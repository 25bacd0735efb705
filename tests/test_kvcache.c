/* KV-cache files: the parser on hand-made and damaged images (every
   truncation, every single-byte corruption), identity checks, and a
   save/restore round trip on the tiny model that must give the logits of a
   plain prefill bit for bit. */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "ctx.h"
#include "engine.h"
#include "kvcache.h"

static void w32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static void w64(uint8_t *p, uint64_t v) { w32(p, (uint32_t)v); w32(p + 4, (uint32_t)(v >> 32)); }

/* A valid image: 2 layers, kv_dim 32 (f16: 64-byte rows), vocab 100, 3
   tokens; version 2 with a recurrent state when id has one. */
static uint8_t *make_image(size_t *size, const kvcache_id *id, uint32_t n_tok, uint32_t n_ctx) {
    const size_t hdr = id->state_floats ? KVCACHE_HEADER_BYTES + 8 : KVCACHE_HEADER_BYTES;
    const size_t states = id->state_floats ? (size_t)(n_tok / id->interval + 1) * id->state_floats * 4 : 0;
    size_t n = hdr + 4 * (size_t)n_tok + 2 * (size_t)id->n_layer * n_tok * id->row_bytes + states + 8;
    uint8_t *p = calloc(1, n);
    memcpy(p, KVCACHE_MAGIC, 8);
    w32(p + 8, id->state_floats ? 2 : 1);
    w32(p + 12, id->kv_type);
    w64(p + 16, id->model_size);
    w64(p + 24, id->model_hash);
    w32(p + 32, id->n_layer);
    w32(p + 36, id->kv_dim);
    w32(p + 40, id->row_bytes);
    w32(p + 44, id->n_vocab);
    w32(p + 48, n_ctx);
    w32(p + 52, n_tok);
    if (id->state_floats) w32(p + KVCACHE_HEADER_BYTES, id->state_floats), w32(p + KVCACHE_HEADER_BYTES + 4, id->interval);
    for (uint32_t i = 0; i < n_tok; i++) w32(p + hdr + 4 * i, 10 + i);
    for (size_t i = hdr + 4 * (size_t)n_tok; i < n - 8; i++) p[i] = (uint8_t)(i * 7);
    w64(p + n - 8, kvcache_fnv1a(p, n - 8, KVCACHE_FNV_OFFSET));
    *size = n;
    return p;
}
static void reseal(uint8_t *p, size_t n) { w64(p + n - 8, kvcache_fnv1a(p, n - 8, KVCACHE_FNV_OFFSET)); }

/* Version 2: a recurrent state, checkpointed every `interval` positions. */
static void state_tests(void) {
    kvcache_id id = {.model_size = 1, .model_hash = 2, .kv_type = KV_F16, .n_layer = 1, .kv_dim = 32, .row_bytes = 64, .n_vocab = 100,
                     .state_floats = 6, .interval = 4};
    size_t n;
    uint8_t *img = make_image(&n, &id, 9, 16);
    kvcache_view v;
    char err[512];
    int r = kvcache_load_buffer(img, n, &id, &v, err, sizeof err);
    CHECK(r == 0, "a version 2 image with a recurrent state loads (%s)", r ? err : "ok");
    if (!r) {
        CHECK(v.states == v.kv + 2 * 9 * 64, "its checkpoints follow the K/V rows");
        CHECK(kvcache_usable(&v, 9) == 9 && kvcache_usable(&v, 8) == 8 && kvcache_usable(&v, 7) == 4 && kvcache_usable(&v, 3) == 0 &&
              kvcache_usable(&v, 20) == 9, "usable prefixes: the whole file, else the last checkpoint (9, 8, 4, 0, 9)");
        free_kvcache_view(&v);
    }
    kvcache_id other = id;
    other.interval = 8;
    r = kvcache_load_buffer(img, n, &other, &v, err, sizeof err);
    CHECK(r == KVCACHE_STALE && strstr(err, "checkpoints"), "checkpoints at another interval: stale (this model's, replaceable): %s", err);
    other = id;
    other.state_floats = 0;
    r = kvcache_load_buffer(img, n, &other, &v, err, sizeof err);
    CHECK(r == KVCACHE_FOREIGN && strstr(err, "state"), "a state the model does not have: foreign: %s", err);
    uint8_t *cp = malloc(n);
    memcpy(cp, img, n); w32(cp + KVCACHE_HEADER_BYTES + 4, 0); reseal(cp, n);
    r = kvcache_load_buffer(cp, n, NULL, &v, err, sizeof err);
    CHECK(r < 0, "a checkpoint interval of 0 is refused: %s", err);
    r = kvcache_load_buffer(img, n - 4, NULL, &v, err, sizeof err);
    CHECK(r < 0, "a truncated state is refused: %s", err);
    free(cp);
    free(img);
}

static void parser_tests(void) {
    kvcache_id id = {.model_size = 123456, .model_hash = 0x1122334455667788ull, .kv_type = KV_F16, .n_layer = 2, .kv_dim = 32,
                     .row_bytes = 64, .n_vocab = 100};
    size_t n;
    uint8_t *img = make_image(&n, &id, 3, 16);
    kvcache_view v;
    char err[512];
    int r = kvcache_load_buffer(img, n, &id, &v, err, sizeof err);
    CHECK(r == 0, "a valid image loads (%s)", r ? err : "ok");
    if (!r) {
        CHECK(v.n_tokens == 3 && v.tokens[0] == 10 && v.tokens[2] == 12 && v.n_ctx_saved == 16, "tokens and context read back");
        int32_t q[4] = {10, 11, 99, 1};
        CHECK(kvcache_common_prefix(&v, q, 4) == 2, "common prefix of [10 11 12] and [10 11 99 1] is 2");
        CHECK(v.kv == img + KVCACHE_HEADER_BYTES + 12, "K/V rows point after the tokens");
        free_kvcache_view(&v);
    }
    CHECK(kvcache_load_buffer(img, n, NULL, &v, err, sizeof err) == 0, "structural check alone (expect = NULL) accepts it");
    free_kvcache_view(&v);

    /* identity mismatches, each named */
    kvcache_id o = id;
    o.model_hash ^= 1;
    r = kvcache_load_buffer(img, n, &o, &v, err, sizeof err);
    CHECK(r == KVCACHE_FOREIGN && strstr(err, "different model"), "another model's hash: foreign (left alone): %s", err);
    o = id;
    o.model_size++;
    r = kvcache_load_buffer(img, n, &o, &v, err, sizeof err);
    CHECK(r == KVCACHE_FOREIGN && strstr(err, "different model"), "another model's size: foreign");
    o = id;
    o.kv_type = KV_Q8_0;
    r = kvcache_load_buffer(img, n, &o, &v, err, sizeof err);
    CHECK(r == KVCACHE_STALE && strstr(err, "KV type f16"), "a KV type mismatch: stale: %s", err);
    o = id;
    o.n_layer = 3;
    r = kvcache_load_buffer(img, n, &o, &v, err, sizeof err);
    CHECK(r == KVCACHE_FOREIGN && strstr(err, "shape"), "a shape mismatch: foreign: %s", err);

    /* every truncation and every extension */
    int bad = 0;
    for (size_t k = 0; k < n; k++)
        if (kvcache_load_buffer(img, k, NULL, &v, err, sizeof err) == 0) { bad++; free_kvcache_view(&v); }
    CHECK(bad == 0, "all %zu truncations are refused (%d accepted)", n, bad);
    bad = 0;
    for (size_t k = 0; k < n; k++)
        if (kvcache_load_buffer(img, k, &id, &v, err, sizeof err) != KVCACHE_FOREIGN) bad++;
    CHECK(bad == 0, "every truncation is foreign, never replaced (%d not)", bad);
    uint8_t *big = calloc(1, n + 64);
    memcpy(big, img, n);
    r = kvcache_load_buffer(big, n + 1, NULL, &v, err, sizeof err);
    CHECK(r == KVCACHE_FOREIGN && strstr(err, "size"), "trailing bytes: foreign: %s", err);
    free(big);
    /* every single-byte corruption (the checksum or the header checks) */
    bad = 0;
    uint8_t *cp = malloc(n);
    for (size_t k = 0; k < n; k++) {
        memcpy(cp, img, n);
        cp[k] ^= 0x5a;
        if (kvcache_load_buffer(cp, n, NULL, &v, err, sizeof err) == 0) { bad++; free_kvcache_view(&v); }
    }
    CHECK(bad == 0, "all %zu single-byte corruptions are refused (%d accepted)", n, bad);

    /* lying headers with a valid checksum */
    memcpy(cp, img, n); w32(cp + 52, 0xffffffffu); reseal(cp, n);
    r = kvcache_load_buffer(cp, n, NULL, &v, err, sizeof err);
    CHECK(r < 0, "n_tokens 2^32-1 is refused: %s", err);
    memcpy(cp, img, n); w32(cp + 32, 0x7fffffffu); w32(cp + 48, 0x7fffffffu); reseal(cp, n);
    r = kvcache_load_buffer(cp, n, NULL, &v, err, sizeof err);
    CHECK(r < 0, "2^31 layers is refused: %s", err);
    memcpy(cp, img, n); w32(cp + 40, 128); reseal(cp, n);
    r = kvcache_load_buffer(cp, n, NULL, &v, err, sizeof err);
    CHECK(r < 0 && strstr(err, "inconsistent"), "a row size that does not follow from kv_dim is refused: %s", err);
    memcpy(cp, img, n); w32(cp + 48, 2); reseal(cp, n);
    r = kvcache_load_buffer(cp, n, NULL, &v, err, sizeof err);
    CHECK(r < 0, "more tokens than the context is refused: %s", err);
    memcpy(cp, img, n); w32(cp + KVCACHE_HEADER_BYTES + 4, 100); reseal(cp, n);
    r = kvcache_load_buffer(cp, n, NULL, &v, err, sizeof err);
    CHECK(r == KVCACHE_FOREIGN && strstr(err, "vocabulary"), "a token outside the vocabulary: foreign: %s", err);
    memcpy(cp, img, n); w32(cp + 8, 3); reseal(cp, n);
    r = kvcache_load_buffer(cp, n, &id, &v, err, sizeof err);
    CHECK(r == KVCACHE_STALE && strstr(err, "version 3"), "another format version: stale: %s", err);
    memcpy(cp, img, n); w32(cp + 8, 2); reseal(cp, n);
    r = kvcache_load_buffer(cp, n, NULL, &v, err, sizeof err);
    CHECK(r < 0, "a version 1 image read as version 2 is refused: %s", err);
    memcpy(cp, img, n); cp[0] = 'X';
    r = kvcache_load_buffer(cp, n, &id, &v, err, sizeof err);
    CHECK(r == KVCACHE_FOREIGN && strstr(err, "magic"), "a bad magic: foreign: %s", err);
    memcpy(cp, img, n); w32(cp + 12, 7); reseal(cp, n);
    r = kvcache_load_buffer(cp, n, NULL, &v, err, sizeof err);
    CHECK(r < 0 && strstr(err, "KV type"), "an unknown KV type is refused: %s", err);
    CHECK(kvcache_load_buffer(NULL, 0, NULL, &v, err, sizeof err) < 0, "a NULL buffer is refused");
    free(cp);
    free(img);
}

static int count_tmp(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (strstr(de->d_name, ".tmp.")) n++;
    if (d) closedir(d);
    return n;
}

static void model_tests(const char *shared) {
    char path[1024], p4[1024], err[1024];
    snprintf(path, sizeof path, "%s/models/tiny-shakespeare-q8_0.gguf", shared);
    snprintf(p4, sizeof p4, "%s/models/tiny-shakespeare-q4_0.gguf", shared);
    engine_opts o = {.model_path = path, .threads = 2, .tokenizer = 1};
    engine *e = build_engine(&o, err, sizeof err);
    CHECK(e != NULL, "tiny q8_0 loads (%s)", e ? "ok" : err);
    if (!e) return;
    const char *text = "ROMEO:\nBut soft, what light through yonder window breaks?";
    int32_t *toks = malloc((4 * strlen(text) + 5) * sizeof *toks); /* 4 * len + 4 always fits (tokenizer.h) */
    int n = toks ? tokenizer_encode(e->tok, text, strlen(text), 1, 0, toks, (int)(4 * strlen(text) + 5)) : -1;
    CHECK(n > 8, "prompt tokenizes (%d tokens)", n);
    const int nv = e->model.hp.n_vocab;
    char dir[] = "/tmp/picolm-kvtest-XXXXXX";
    if (!mkdtemp(dir)) { CHECK(0, "mkdtemp"); free_engine(e); return; }
    char file[256];
    snprintf(file, sizeof file, "%s/c.kv", dir);

    /* reference: prefill n-1 tokens, then the last one alone */
    llama_ctx a, b;
    float *ref = malloc((size_t)nv * sizeof *ref);
    int ok = !build_ctx(&a, &e->model, 64, 8, KV_F16, e->pool, err, sizeof err);
    ok = ok && !ctx_prefill(&a, toks, n - 1, err, sizeof err) && !ctx_prefill(&a, toks + n - 1, 1, err, sizeof err);
    CHECK(ok, "reference prefill (%s)", ok ? "ok" : err);
    memcpy(ref, a.logits, (size_t)nv * sizeof *ref);
    int r = kvcache_save(file, &a.seq, toks, n, err, sizeof err);
    CHECK(r == 0, "save %d tokens (%s)", n, r ? err : "ok");
    CHECK(count_tmp(dir) == 0, "no temporary file left behind");
    /* save and restore failures are this run's, -1 (picolm_seq_save and
       picolm_seq_load pass them on: never a file verdict nor another code) */
    r = kvcache_save(file, &a.seq, toks, 0, err, sizeof err);
    CHECK(r == -1 && strstr(err, "nothing"), "saving 0 tokens: -1 (%d: %s)", r, err);

    /* load and restore into a fresh context: n-1 rows, then the last token */
    kvcache_id id;
    kvcache_view v;
    void *map;
    size_t msz;
    ok = !build_ctx(&b, &e->model, 64, 8, KV_F16, e->pool, err, sizeof err);
    kvcache_id_of(&b.seq, &id);
    r = kvcache_load_file(file, &id, &v, &map, &msz, err, sizeof err);
    CHECK(ok && r == 0, "load it back (%s)", r ? err : "ok");
    if (r == 0) {
        int common = kvcache_common_prefix(&v, toks, n);
        CHECK(common == n, "the whole prompt matches (%d of %d)", common, n);
        r = kvcache_restore(&b.seq, &v, n + 1, err, sizeof err);
        CHECK(r == -1 && b.seq.n_past == 0, "restoring more positions than the file holds: -1 (%d: %s)", r, err);
        r = kvcache_restore(&b.seq, &v, n - 1, err, sizeof err);
        CHECK(r == 0 && b.seq.n_past == n - 1, "restore %d positions", n - 1);
        r = ctx_prefill(&b, toks + n - 1, 1, err, sizeof err);
        CHECK(r == 0 && !memcmp(b.logits, ref, (size_t)nv * sizeof *ref), "restored prefix + last token: logits identical to a full prefill");
        free_kvcache_view(&v);
        kvcache_unmap(map, msz);
    }
    free_ctx(&b);

    /* a q8_0 KV run refuses the f16 file */
    if (!build_ctx(&b, &e->model, 64, 8, KV_Q8_0, e->pool, err, sizeof err)) {
        kvcache_id_of(&b.seq, &id);
        r = kvcache_load_file(file, &id, &v, &map, &msz, err, sizeof err);
        CHECK(r == KVCACHE_STALE && strstr(err, "KV type"), "q8_0 KV refuses an f16 cache as stale: %s", err);
        free_ctx(&b);
    }
    /* another model refuses it */
    engine_opts o4 = {.model_path = p4, .threads = 1, .tokenizer = 0};
    engine *e4 = build_engine(&o4, err, sizeof err);
    if (e4 && !build_ctx(&b, &e4->model, 64, 8, KV_F16, e4->pool, err, sizeof err)) {
        kvcache_id_of(&b.seq, &id);
        r = kvcache_load_file(file, &id, &v, &map, &msz, err, sizeof err);
        CHECK(r == KVCACHE_FOREIGN && strstr(err, "different model"), "the q4_0 model refuses the q8_0 model's cache as foreign: %s", err);
        free_ctx(&b);
    } else {
        CHECK(0, "q4_0 model loads (%s)", err);
    }
    free_engine(e4);
    kvcache_id_of(&a.seq, &id);
    CHECK(kvcache_load_file("/nonexistent/x.kv", &id, &v, &map, &msz, err, sizeof err) == 1, "a missing file is reported as absent");
    CHECK(kvcache_load_file(dir, &id, &v, &map, &msz, err, sizeof err) == KVCACHE_FOREIGN, "a directory is foreign: %s", err);
    char empty[300];
    snprintf(empty, sizeof empty, "%s/empty.kv", dir);
    FILE *ef = fopen(empty, "w");
    if (ef) fclose(ef);
    CHECK(ef && kvcache_load_file(empty, &id, &v, &map, &msz, err, sizeof err) == 1, "an empty file is as absent (nothing to lose)");
    remove(empty);
    char nofile[300];
    snprintf(nofile, sizeof nofile, "%s/no/such/dir/c.kv", dir);
    r = kvcache_save(nofile, &a.seq, toks, n, err, sizeof err);
    CHECK(r < 0 && strstr(err, "temporary"), "saving into a missing directory fails with a message: %s", err);

    free_ctx(&a);
    free(ref);
    free(toks);
    unlink(file);
    rmdir(dir);
    free_engine(e);
}

int main(void) {
    parser_tests();
    state_tests();
    const char *shared = shared_dir("kvcache model tests");
    if (shared) model_tests(shared);
    return CHECK_DONE();
}
