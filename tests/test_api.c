/* The library API (include/picolm/picolm.h) against llama.cpp's reference
   data, through that header alone: tokenize the reference prompt, two
   contexts on one model generating the greedy reference continuation in
   lockstep (each its own KV cache), pieces back to the reference text, a
   chat template, and errors as messages. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "picolm/picolm.h"
#include "testlib.h"

#define MODEL "tiny-shakespeare-q8_0"

static void errors(const char *sh) {
    char err[512] = "", path[1024];
    picolm_model_params mp = {.path = "/nonexistent/model.gguf", .threads = 1};
    picolm_model *m = picolm_model_load(&mp, err, sizeof err);
    CHECK(!m && strstr(err, "/nonexistent/model.gguf"), "a missing model is NULL and a message naming it: %s", err);
    snprintf(path, sizeof path, "%s/models/%s.gguf", sh, MODEL);
    mp.path = path;
    mp.backend = "no-such-backend";
    m = picolm_model_load(&mp, err, sizeof err);
    CHECK(!m && strstr(err, "no-such-backend"), "an unknown backend is a message: %s", err);
    mp.backend = NULL;
    m = picolm_model_load(&mp, err, sizeof err);
    CHECK(m != NULL, "loads %s: %s", MODEL, m ? "ok" : err);
    if (!m) return;
    picolm_context_params cp = {.sampler_chain = "top_k,bogus,dist"};
    picolm_context *c = picolm_context_new(m, &cp, err, sizeof err);
    CHECK(!c && strstr(err, "unknown sampler 'bogus'"), "an unknown sampler is a message: %s", err);
    const picolm_param bad = {"top_k", "many"};
    cp = (picolm_context_params){.sampler_chain = "top_k,dist", .sampler_params = &bad, .n_sampler_params = 1};
    c = picolm_context_new(m, &cp, err, sizeof err);
    CHECK(!c && strstr(err, "top_k") && strstr(err, "'many'"), "a malformed sampler value is a message: %s", err);
    cp = (picolm_context_params){.n_ctx = 8};
    c = picolm_context_new(m, &cp, err, sizeof err);
    CHECK(c != NULL, "a context of 8: %s", c ? "ok" : err);
    int32_t tok;
    CHECK(c && picolm_logits(c) == NULL && picolm_sample(c, &tok, err, sizeof err) < 0, "no logits, no sample, before any eval: %s", err);
    const int32_t nine[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, bad_id[1] = {1 << 30};
    CHECK(c && picolm_eval(c, nine, 9, err, sizeof err) < 0 && strstr(err, "context of 8") && picolm_n_past(c) == 0,
          "9 tokens in a context of 8: refused, nothing evaluated: %s", err);
    CHECK(c && picolm_eval(c, bad_id, 1, err, sizeof err) < 0 && strstr(err, "vocabulary"), "a token id out of range: %s", err);
    picolm_context_free(c);
    picolm_model_free(m);
}

static void greedy_two_contexts(const char *sh) {
    char path[1024], err[512] = "";
    size_t pl, tl, gl, xl;
    snprintf(path, sizeof path, "%s/reference/logits/tiny-shakespeare.prompt.txt", sh);
    char *prompt = tl_slurp(path, &pl);
    snprintf(path, sizeof path, "%s/reference/logits/%s.tokens.i32", sh, MODEL);
    int32_t *ref_toks = tl_slurp(path, &tl);
    snprintf(path, sizeof path, "%s/reference/logits/%s.greedy.i32", sh, MODEL);
    int32_t *greedy = tl_slurp(path, &gl);
    snprintf(path, sizeof path, "%s/reference/logits/%s.greedy.txt", sh, MODEL);
    char *greedy_txt = tl_slurp(path, &xl);
    snprintf(path, sizeof path, "%s/models/%s.gguf", sh, MODEL);
    picolm_model_params mp = {.path = path, .threads = 2};
    picolm_model *m = prompt && ref_toks && greedy && greedy_txt ? picolm_model_load(&mp, err, sizeof err) : NULL;
    if (!m) {
        CHECK(!prompt || !ref_toks || !greedy || !greedy_txt, "loads %s: %s", MODEL, err);
        if (!prompt || !ref_toks || !greedy || !greedy_txt) SKIP("%s: reference files missing", MODEL);
        goto out;
    }
    const int nt = (int)(tl / 4), ng = (int)(gl / 4);
    int32_t toks[1024];
    const int n = picolm_tokenize(m, prompt, pl, picolm_add_bos(m), 0, toks, 1024);
    CHECK(n == nt && !memcmp(toks, ref_toks, tl), "the reference prompt tokenizes to llama.cpp's %d ids (%d)", nt, n);

    /* two contexts, interleaved token by token: each must follow the
       reference on its own KV cache */
    picolm_context *c[2];
    for (int k = 0; k < 2; k++) c[k] = picolm_context_new(m, NULL, err, sizeof err);
    CHECK(c[0] && c[1], "two greedy contexts on one model: %s", c[0] && c[1] ? "ok" : err);
    if (!c[0] || !c[1]) goto done;
    int ok = 1, same[2] = {0, 0};
    for (int k = 0; k < 2 && ok; k++) ok = !picolm_eval(c[k], toks, n, err, sizeof err);
    CHECK(ok, "both evaluate the prompt: %s", ok ? "ok" : err);
    int32_t out[2][256];
    for (int i = 0; i < ng && i < 256 && ok; i++)
        for (int k = 0; k < 2 && ok; k++) {
            ok = !picolm_sample(c[k], &out[k][i], err, sizeof err) && !picolm_eval(c[k], &out[k][i], 1, err, sizeof err);
            same[k] += ok && out[k][i] == greedy[i];
        }
    CHECK(ok && same[0] == ng && same[1] == ng, "both continue as llama.cpp's greedy reference (%d and %d of %d): %s", same[0],
          same[1], ng, ok ? "ok" : err);
    CHECK(picolm_n_past(c[0]) == n + ng && picolm_n_past(c[1]) == n + ng, "each context holds prompt + continuation");

    /* the pieces give the reference text */
    char *txt = malloc(xl + 1024);
    size_t tn = 0;
    for (int i = 0; i < ng && txt; i++) {
        size_t l;
        const char *p = picolm_token_piece(m, out[0][i], &l);
        if (tn + l <= xl + 1024) memcpy(txt + tn, p, l), tn += l;
    }
    CHECK(txt && tn == xl && !memcmp(txt, greedy_txt, xl), "the pieces of the continuation are the reference text");
    free(txt);

    /* reset: the same prompt again gives the same first token */
    picolm_reset(c[1]);
    int32_t again = -1;
    ok = picolm_n_past(c[1]) == 0 && !picolm_eval(c[1], toks, n, err, sizeof err) && !picolm_sample(c[1], &again, err, sizeof err);
    CHECK(ok && again == greedy[0], "after reset the context starts over (%d, reference %d)", again, greedy[0]);
done:
    for (int k = 0; k < 2; k++) picolm_context_free(c[k]);

    /* chat: tiny-shakespeare has no template, so auto renders chatml */
    const picolm_chat_msg msgs[2] = {{.role = "system", .content = "You are terse.", .len = 14}, {.role = "user", .content = "Hello", .len = 5}};
    size_t len = 0;
    char *got = picolm_chat_render(m, NULL, msgs, 2, 1, &len, err, sizeof err);
    const char *expect = "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n";
    CHECK(got && len == strlen(expect) && !strcmp(got, expect), "chat: the model's template (chatml by default): %s", got ? got : err);
    free(got);
    got = picolm_chat_render(m, "no-such-template", msgs, 2, 1, &len, err, sizeof err);
    CHECK(!got && strstr(err, "no-such-template"), "an unknown template is a message: %s", err);
    picolm_model_free(m);
out:
    free(prompt);
    free(ref_toks);
    free(greedy);
    free(greedy_txt);
}

/* The logits of toks[0..n) evaluated alone in a fresh sequence of its own
   pool, one row per token (n x nv). */
static float *alone(picolm_model *m, const int32_t *toks, int n, int nv) {
    char err[512];
    picolm_kv *kv = picolm_kv_new(m, &(picolm_kv_params){.block_size = 64, .n_blocks = 1}, err, sizeof err);
    picolm_seq *s = kv ? picolm_seq_new(kv, 64, err, sizeof err) : NULL;
    picolm_batch *b = picolm_batch_new(m, n, err, sizeof err);
    float *rows = malloc((size_t)n * nv * sizeof *rows);
    picolm_seq *who[64];
    uint8_t want[64];
    for (int i = 0; i < n; i++) who[i] = s, want[i] = 1;
    const int r = s && b ? picolm_decode(b, who, toks, n, want, rows, err, sizeof err) : -1;
    CHECK(r == 0, "a sequence alone evaluates (%s)", r ? err : "ok");
    picolm_batch_free(b);
    picolm_seq_free(s);
    picolm_kv_free(kv);
    return rows;
}

/* Two sequences in one batch through the public API: B shares A's first
   positions (a fork), then one step carries A's next tokens and B's own;
   each token's logits equal its sequence evaluated alone, bit for bit.
   Then the pool's limits, truncation and a KV-cache file round trip. */
static void sequences(const char *dir, const char *name) {
    char path[1024], err[512] = "";
    snprintf(path, sizeof path, "%s/%s.gguf", dir, name);
    picolm_model *m = picolm_model_load(&(picolm_model_params){.path = path, .threads = 2}, err, sizeof err);
    CHECK(m != NULL, "%s loads (%s)", name, m ? "ok" : err);
    if (!m) return;
    const int nv = picolm_n_vocab(m);
    int32_t a[14], b[14];
    for (int i = 0; i < 14; i++) a[i] = b[i] = (int32_t)(3 + (29 * i) % (nv - 3));
    for (int i = 8; i < 14; i++) b[i] = (int32_t)(5 + (41 * i) % (nv - 5));
    float *ra = alone(m, a, 14, nv), *rb = alone(m, b, 14, nv);

    picolm_kv *kv = picolm_kv_new(m, &(picolm_kv_params){.block_size = 4, .n_blocks = 6}, err, sizeof err);
    picolm_batch *bt = picolm_batch_new(m, 16, err, sizeof err);
    picolm_seq *sa = kv ? picolm_seq_new(kv, 32, err, sizeof err) : NULL;
    CHECK(kv && bt && sa, "a pool of 6 blocks of 4, a batch of 16, a sequence (%s)", err);
    if (!kv || !bt || !sa) goto out;
    float *got = malloc((size_t)14 * nv * sizeof *got);
    /* A's first 10 tokens, every row's logits */
    picolm_seq *who[16];
    uint8_t want[16];
    for (int i = 0; i < 10; i++) who[i] = sa, want[i] = 1;
    int r = picolm_decode(bt, who, a, 10, want, got, err, sizeof err);
    CHECK(r == 0 && picolm_seq_n_past(sa) == 10, "A: 10 tokens in one step (%s)", r ? err : "ok");
    CHECK(!memcmp(got, ra, (size_t)10 * nv * sizeof *got), "A's 10 rows == A alone, bit for bit");
    /* B: a fork of A's first 8 positions (two whole blocks shared) */
    picolm_seq *sb = picolm_seq_fork(sa, 8, err, sizeof err);
    CHECK(sb && picolm_seq_n_past(sb) == 8, "B forks A's first 8 positions (%s)", sb ? "ok" : err);
    if (!sb) goto out2;
    CHECK(picolm_kv_n_free(kv) == 6 - 3, "the fork shares blocks: 3 in use for 10 + 8 positions (%d free)", picolm_kv_n_free(kv));
    /* a fork inside a block: exact without a recurrent state, at the last
       checkpoint with one */
    const int rec = picolm_kv_block_bytes(m, 0, 4) > 4 * picolm_kv_bytes_per_token(m, 0);
    picolm_seq *s9 = picolm_seq_fork(sa, 9, err, sizeof err);
    CHECK(s9 && picolm_seq_n_past(s9) == (rec ? 8 : 9), "%s: a fork of 9 positions takes %d (%d)", name, rec ? 8 : 9,
          s9 ? picolm_seq_n_past(s9) : -1);
    picolm_seq_free(s9);
    /* one step: A's tokens 10..13 and B's 8..13, interleaved */
    int32_t t[16];
    int n = 0;
    for (int i = 0; i < 6; i++) {
        if (i < 4) who[n] = sa, t[n] = a[10 + i], want[n++] = 1;
        who[n] = sb, t[n] = b[8 + i], want[n++] = 1;
    }
    float *mixed = malloc((size_t)n * nv * sizeof *mixed);
    r = picolm_decode(bt, who, t, n, want, mixed, err, sizeof err);
    CHECK(r == 0 && picolm_seq_n_past(sa) == 14 && picolm_seq_n_past(sb) == 14, "one step over both sequences (%s)", r ? err : "ok");
    int same_a = r == 0, same_b = r == 0;
    for (int k = 0, ia = 10, ib = 8; k < n && !r; k++) {
        const float *row = mixed + (size_t)k * nv;
        if (who[k] == sa) same_a &= !memcmp(row, ra + (size_t)ia++ * nv, (size_t)nv * sizeof *row);
        else same_b &= !memcmp(row, rb + (size_t)ib++ * nv, (size_t)nv * sizeof *row);
    }
    CHECK(same_a, "%s: A's logits beside B == A alone, bit for bit", name);
    CHECK(same_b, "%s: B's logits after the shared prefix, beside A == B alone, bit for bit", name);
    /* truncation gives whole blocks back; a pool too small is an error */
    CHECK(picolm_seq_truncate(sb, 8) == 8 && picolm_seq_n_past(sb) == 8, "B cut back to 8");
    int32_t many[16] = {0};
    for (int i = 0; i < 16; i++) who[i] = sb;
    r = picolm_decode(bt, who, many, 16, NULL, NULL, err, sizeof err);
    CHECK(r == PICOLM_ERR_KV_FULL && picolm_seq_n_past(sb) == 8, "16 more positions do not fit the pool: PICOLM_ERR_KV_FULL, nothing evaluated (%s)", err);
    /* a KV-cache file: A's 14 positions saved, restored into a new sequence */
    char file[] = "/tmp/picolm-api-kv-XXXXXX";
    const int fd = mkstemp(file);
    close(fd);
    r = picolm_seq_save(sa, file, a, 14, err, sizeof err);
    CHECK(r == 0, "A saved to a file (%s)", r ? err : "ok");
    picolm_seq_free(sb);
    picolm_seq_free(sa);
    sb = sa = NULL;
    CHECK(picolm_kv_n_free(kv) == 6, "every block back in the pool");
    picolm_seq *sc = picolm_seq_new(kv, 32, err, sizeof err);
    int restored = -1;
    r = sc ? picolm_seq_load(sc, file, a, 14, &restored, err, sizeof err) : -1;
    /* a recurrent state comes back at its last checkpoint (every block of 4) */
    const int want_restored = picolm_kv_block_bytes(m, 0, 4) > 4 * picolm_kv_bytes_per_token(m, 0) ? 12 : 13;
    CHECK(r == 0 && restored == want_restored && picolm_seq_n_past(sc) == restored,
          "%s: restored %d of 14 (the last is evaluated again; a recurrent state at its last checkpoint): %d (%s)", name, want_restored,
          restored, r ? err : "ok");
    float *last = malloc((size_t)nv * sizeof *last);
    r = r ? r : picolm_prefill(bt, sc, a + restored, 14 - restored, last, err, sizeof err);
    CHECK(r == 0 && !memcmp(last, ra + (size_t)13 * nv, (size_t)nv * sizeof *last), "the restored sequence's next logits == alone, bit for bit");
    unlink(file);
    free(last);
    picolm_seq_free(sc);
    free(mixed);
out2:
    picolm_seq_free(sb);
    free(got);
out:
    picolm_seq_free(sa);
    picolm_batch_free(bt);
    picolm_kv_free(kv);
    CHECK(1, "%s: sequences and pool freed", name);
    free(ra), free(rb);
    picolm_model_free(m);
}

/* The library prints nothing by itself: its notes (here: an ignored
   PICOLM_CPU_MASK) reach the sink the user sets, else nobody. */
static char logged[2048];
static void collect(int level, const char *msg, void *ud) {
    (void)ud;
    size_t n = strlen(logged);
    snprintf(logged + n, sizeof logged - n, "%d:%s\n", level, msg);
}

static void log_sink(const char *sh) {
    char err[512] = "", path[1024], tmp[] = "/tmp/picolm-api-stderr-XXXXXX";
    snprintf(path, sizeof path, "%s/models/%s.gguf", sh, MODEL);
    const picolm_model_params mp = {.path = path, .threads = 1};
    setenv("PICOLM_CPU_MASK", "no-such-feature", 1);
    const int fd = mkstemp(tmp), saved = dup(2);
    fflush(stderr);
    dup2(fd, 2);
    picolm_model *m = picolm_model_load(&mp, err, sizeof err);
    picolm_model_free(m);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    const off_t printed = lseek(fd, 0, SEEK_END);
    close(fd);
    unlink(tmp);
    CHECK(m && printed == 0, "no sink set: a model loads with a bad PICOLM_CPU_MASK and nothing is printed (%ld bytes on stderr)", (long)printed);
    picolm_log_set(collect, NULL);
    m = picolm_model_load(&mp, err, sizeof err);
    picolm_model_free(m);
    picolm_log_set(NULL, NULL);
    unsetenv("PICOLM_CPU_MASK");
    CHECK(m && strstr(logged, "1:PICOLM_CPU_MASK: unknown CPU feature 'no-such-feature' (ignored)"),
          "with a sink set, the note arrives there as a warning: %s", logged);
}

int main(void) {
    const char *sh = shared_dir("library API");
    if (!sh) return 0;
    errors(sh);
    greedy_two_contexts(sh);
    char models[1024];
    snprintf(models, sizeof models, "%s/models", sh);
    sequences(models, MODEL);
    sequences(models, "rand-qwen3-q4_k_m");
    /* a sliding window shorter than the sequences (gemma3: 8), and a
       recurrent state forked, cut back and restored with them (lfm2) */
    sequences("tests/data/families", "rand-gemma3-q8_0");
    sequences("tests/data/families", "rand-lfm2-q8_0");
    log_sink(sh);
    return CHECK_DONE();
}
