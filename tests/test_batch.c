/* Continuous batching (llama_forward_seqs): sequences evaluated together in
   one step — prefill chunks of some beside decode tokens of others — give
   every token bit-for-bit the logits of its sequence evaluated alone.  This
   is what lets picolm-server promise that a request's output does not
   depend on what else is being served.  Models: the trained demo model in
   models/ (MHA), and the shared rand-qwen3 (GQA, q/k head norms) and
   rand-llama3 (rope_freqs) when present; f16 and q8_0 KV caches. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "engine.h"

#define NSEQ 3
#define NGEN 6

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* prompts: NSEQ different token runs of different lengths */
static const int PLEN[NSEQ] = {5, 11, 2};

static void prompt_of(int s, int nv, int32_t *out) {
    for (int i = 0; i < PLEN[s]; i++) out[i] = (int32_t)((7 + 131 * s + 17 * i * (s + 1)) % nv);
}

/* Alone: the prompt in one batch, then greedy tokens one by one; the
   logits after the prompt and after each generated token (NGEN + 1 rows). */
static int solo(engine *e, int kv, int s, float *rows, char *err, size_t errlen) {
    const int nv = e->model.hp.n_vocab;
    int32_t p[16];
    prompt_of(s, nv, p);
    llama_ctx c;
    if (build_ctx(&c, &e->model, 64, 16, kv, e->pool, err, errlen)) return -1;
    int rc = llama_forward(&c, p, PLEN[s], NULL, err, errlen);
    for (int g = 0; !rc && g <= NGEN; g++) {
        memcpy(rows + (size_t)g * nv, c.logits, (size_t)nv * sizeof(float));
        int32_t t = argmax(c.logits, nv);
        if (g < NGEN) rc = llama_forward(&c, &t, 1, NULL, err, errlen);
    }
    free_ctx(&c);
    return rc;
}

/* Together: every step takes a chunk of up to 3 prompt tokens from each
   sequence still in its prompt and the next token of each one decoding
   (sequence 2 joins late, at step 2), all in one llama_forward_seqs. */
static int together(engine *e, int kv, float *rows[NSEQ], char *err, size_t errlen) {
    const int nv = e->model.hp.n_vocab;
    llama_ctx step, seq[NSEQ];
    int32_t prompt[NSEQ][16], next[NSEQ];
    int fed[NSEQ] = {0}, got[NSEQ] = {0}, rc = 0;
    if (build_ctx(&step, &e->model, 64, 32, kv, e->pool, err, errlen)) return -1;
    for (int s = 0; s < NSEQ; s++) {
        prompt_of(s, nv, prompt[s]);
        if (build_ctx(&seq[s], &e->model, 64, 1, kv, e->pool, err, errlen)) return -1;
    }
    float *logits = malloc((size_t)NSEQ * nv * sizeof(float));
    for (int it = 0; !rc; it++) {
        llama_ctx *who[32];
        int32_t toks[32];
        uint8_t want[32];
        int owner[NSEQ], n = 0;
        for (int s = 0; s < NSEQ; s++) {
            owner[s] = -1;
            if (got[s] > NGEN || (s == 2 && it < 2)) continue;
            if (fed[s] < PLEN[s]) {
                int k = PLEN[s] - fed[s] < 3 ? PLEN[s] - fed[s] : 3;
                for (int i = 0; i < k; i++) who[n] = &seq[s], toks[n] = prompt[s][fed[s] + i], want[n++] = 0;
                fed[s] += k;
                if (fed[s] == PLEN[s]) want[n - 1] = 1, owner[s] = 0;
            } else {
                who[n] = &seq[s], toks[n] = next[s], want[n++] = 1, owner[s] = 0;
            }
        }
        if (!n) break;
        rc = llama_forward_seqs(&step, who, toks, n, want, logits, err, errlen);
        /* the logits rows come in batch order: sequence order here */
        for (int s = 0, r = 0; s < NSEQ && !rc; s++) {
            if (owner[s] < 0) continue;
            const float *l = logits + (size_t)r++ * nv;
            memcpy(rows[s] + (size_t)got[s] * nv, l, (size_t)nv * sizeof(float));
            next[s] = argmax(l, nv);
            got[s]++;
        }
    }
    for (int s = 0; s < NSEQ; s++) free_ctx(&seq[s]);
    free_ctx(&step);
    free(logits);
    return rc;
}

static void run(const char *path, const char *name) {
    char err[1024];
    engine_opts o = {.model_path = path, .threads = 2};
    engine *e = build_engine(&o, err, sizeof err);
    if (!e) { CHECK(0, "%s: loads (%s)", name, err); return; }
    const int nv = e->model.hp.n_vocab;
    for (int kv = KV_F16; kv <= KV_Q8_0; kv++) {
        if (kv == KV_Q8_0 && e->model.hp.head_dim % 32) continue;
        float *alone[NSEQ], *mixed[NSEQ];
        int ok = 1;
        for (int s = 0; s < NSEQ; s++) {
            alone[s] = malloc((size_t)(NGEN + 1) * nv * sizeof(float));
            mixed[s] = calloc((size_t)(NGEN + 1) * nv, sizeof(float));
            ok &= !solo(e, kv, s, alone[s], err, sizeof err);
        }
        ok = ok && !together(e, kv, mixed, err, sizeof err);
        CHECK(ok, "%s kv %s: sequences evaluate alone and together (%s)", name, kv ? "q8_0" : "f16", ok ? "ok" : err);
        for (int s = 0; s < NSEQ && ok; s++)
            CHECK(!memcmp(alone[s], mixed[s], (size_t)(NGEN + 1) * nv * sizeof(float)),
                  "%s kv %s: sequence %d (prompt %d tokens, %d generated): logits together == alone, bit for bit", name,
                  kv ? "q8_0" : "f16", s, PLEN[s], NGEN);
        for (int s = 0; s < NSEQ; s++) free(alone[s]), free(mixed[s]);
    }
    free_engine(e);
}

int main(void) {
    run("models/tiny-shakespeare-q8_0.gguf", "tiny-shakespeare-q8_0");
    const char *shared = shared_dir("test_batch: rand-qwen3, rand-llama3");
    if (shared) {
        const char *names[] = {"rand-qwen3-q4_k_m", "rand-llama3-q4_k_m"};
        for (int i = 0; i < 2; i++) {
            char p[1024];
            snprintf(p, sizeof p, "%s/models/%s.gguf", shared, names[i]);
            run(p, names[i]);
        }
    }
    /* a misuse is an error, not a crash: a batch larger than the step's */
    char err[256];
    engine_opts o = {.model_path = "models/tiny-shakespeare-q8_0.gguf", .threads = 1};
    engine *e = build_engine(&o, err, sizeof err);
    if (e) {
        llama_ctx step, s;
        build_ctx(&step, &e->model, 8, 2, KV_F16, e->pool, err, sizeof err);
        build_ctx(&s, &e->model, 2, 1, KV_F16, e->pool, err, sizeof err);
        llama_ctx *who[3] = {&s, &s, &s};
        int32_t t[3] = {1, 2, 3};
        CHECK(llama_forward_seqs(&step, who, t, 3, NULL, NULL, err, sizeof err) != 0, "a batch over n_batch is refused: %s", err);
        CHECK(llama_forward_seqs(&step, who, t, 2, NULL, NULL, err, sizeof err) == 0, "two tokens fill a context of 2");
        CHECK(llama_forward_seqs(&step, who, t, 1, NULL, NULL, err, sizeof err) != 0, "a full sequence is refused: %s", err);
        free_ctx(&s);
        free_ctx(&step);
        free_engine(e);
    }
    return CHECK_DONE();
}
