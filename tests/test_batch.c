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
#include "kvpool.h"

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
static int together(engine *e, int kv, kv_pool *pool, float *rows[NSEQ], char *err, size_t errlen) {
    const int nv = e->model.hp.n_vocab;
    llama_ctx step, seq[NSEQ];
    int32_t prompt[NSEQ][16], next[NSEQ];
    int fed[NSEQ] = {0}, got[NSEQ] = {0}, rc = 0;
    if (build_ctx(&step, &e->model, 64, 32, kv, e->pool, err, errlen)) return -1;
    for (int s = 0; s < NSEQ; s++) {
        prompt_of(s, nv, prompt[s]);
        if (pool ? build_ctx_paged(&seq[s], &e->model, 64, 1, pool, e->pool, err, errlen)
                 : build_ctx(&seq[s], &e->model, 64, 1, kv, e->pool, err, errlen))
            return -1;
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
        /* own caches, then a paged pool of 4-position blocks (runs cut
           inside prompts and replies) */
        for (int paged = 0; paged < 2 && ok; paged++) {
            kv_pool pool;
            if (paged && build_kv_pool(&pool, &e->model, kv, 16, 4, err, sizeof err)) { CHECK(0, "pool: %s", err); break; }
            ok = !together(e, kv, paged ? &pool : NULL, mixed, err, sizeof err);
            const char *how = paged ? "paged (blocks of 4)" : "own caches";
            CHECK(ok, "%s kv %s %s: sequences evaluate alone and together (%s)", name, kv ? "q8_0" : "f16", how, ok ? "ok" : err);
            for (int s = 0; s < NSEQ && ok; s++)
                CHECK(!memcmp(alone[s], mixed[s], (size_t)(NGEN + 1) * nv * sizeof(float)),
                      "%s kv %s %s: sequence %d (prompt %d tokens, %d generated): logits together == alone, bit for bit", name,
                      kv ? "q8_0" : "f16", how, s, PLEN[s], NGEN);
            if (paged) {
                CHECK(pool.n_free == pool.n_blocks, "%s: every block back in the pool after the sequences (%d of %d)", name,
                      pool.n_free, pool.n_blocks);
                free_kv_pool(&pool);
            }
        }
        for (int s = 0; s < NSEQ; s++) free(alone[s]), free(mixed[s]);
    }
    free_engine(e);
}

/* Copy on write: B shares A's first two blocks (8 positions), then both
   go on with different tokens; each equals its own contiguous run. */
static void sharing(const char *path) {
    char err[512];
    engine_opts o = {.model_path = path, .threads = 2};
    engine *e = build_engine(&o, err, sizeof err);
    if (!e) { CHECK(0, "loads: %s", err); return; }
    const int nv = e->model.hp.n_vocab;
    int32_t a[12] = {1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41, 45}, b[12] = {1, 5, 9, 13, 17, 21, 25, 29, 60, 70, 80, 90};
    kv_pool pool;
    llama_ctx pa, pb, ca, cb;
    build_kv_pool(&pool, &e->model, KV_F16, 8, 4, err, sizeof err);
    build_ctx_paged(&pa, &e->model, 32, 16, &pool, e->pool, err, sizeof err);
    build_ctx_paged(&pb, &e->model, 32, 16, &pool, e->pool, err, sizeof err);
    build_ctx(&ca, &e->model, 32, 16, KV_F16, e->pool, err, sizeof err);
    build_ctx(&cb, &e->model, 32, 16, KV_F16, e->pool, err, sizeof err);
    float *la = malloc((size_t)nv * 4 * sizeof(float)), *lb = malloc((size_t)nv * 4 * sizeof(float));
    int ok = !llama_forward(&pa, a, 10, NULL, err, sizeof err);     /* A: 10 positions, blocks 0-2 */
    llama_seq_share(&pb, &pa, 2, 8);                                  /* B: A's first 8 */
    CHECK(pool.ref[pa.blocks[0]] == 2 && pool.ref[pa.blocks[1]] == 2, "shared blocks are referenced twice");
    ok = ok && !llama_forward(&pb, b + 8, 4, lb, err, sizeof err);  /* B writes block 2: its own */
    ok = ok && !llama_forward(&pa, a + 10, 2, la, err, sizeof err); /* A continues in its block 2 */
    float *ra = malloc((size_t)nv * 12 * sizeof(float)), *rb = malloc((size_t)nv * 12 * sizeof(float));
    ok = ok && !llama_forward(&ca, a, 12, ra, err, sizeof err) && !llama_forward(&cb, b, 12, rb, err, sizeof err);
    CHECK(ok, "shared prefix: evaluations run (%s)", ok ? "ok" : err);
    CHECK(ok && !memcmp(lb, rb + (size_t)8 * nv, (size_t)4 * nv * sizeof(float)), "B after a shared prefix == B alone, bit for bit");
    CHECK(ok && !memcmp(la, ra + (size_t)10 * nv, (size_t)2 * nv * sizeof(float)), "A after B wrote beside it == A alone, bit for bit");
    /* a full pool is an error for the caller to handle, never a crash */
    llama_ctx pc;
    build_ctx_paged(&pc, &e->model, 32, 32, &pool, e->pool, err, sizeof err);
    int32_t many[32] = {0};
    CHECK(llama_forward(&pc, many, 32, NULL, err, sizeof err) != 0, "a pool with too few free blocks is refused: %s", err);
    free_ctx(&pc);
    free_ctx(&pa), free_ctx(&pb), free_ctx(&ca), free_ctx(&cb);
    CHECK(pool.n_free == pool.n_blocks, "every block is free again (%d of %d)", pool.n_free, pool.n_blocks);
    free_kv_pool(&pool);
    free(la), free(lb), free(ra), free(rb);
    free_engine(e);
}

/* llama_prefill: a prompt longer than the batch in chunks, the output
   matrix for its last token only (not once per chunk), and the same bits
   as the prompt in one batch. */
static void prefill_once(const char *path) {
    char err[512];
    engine_opts o = {.model_path = path, .threads = 2};
    engine *e = build_engine(&o, err, sizeof err);
    if (!e) { CHECK(0, "loads: %s", err); return; }
    const int nv = e->model.hp.n_vocab;
    int32_t t[11];
    for (int i = 0; i < 11; i++) t[i] = (int32_t)((3 + 37 * i) % nv);
    llama_ctx a, b;
    build_ctx(&a, &e->model, 32, 4, KV_F16, e->pool, err, sizeof err);
    build_ctx(&b, &e->model, 32, 16, KV_F16, e->pool, err, sizeof err);
    float *all = malloc((size_t)nv * 11 * sizeof(float));
    int ok = !llama_prefill(&a, t, 11, err, sizeof err);
    CHECK(ok, "llama_prefill: 11 tokens in batches of 4 (%s)", ok ? "ok" : err);
    CHECK(a.n_past == 11, "llama_prefill: all 11 positions in the cache (%d)", a.n_past);
    CHECK(a.logit_rows == 1, "llama_prefill: the output matrix ran for 1 row, not one per batch (%llu)",
          (unsigned long long)a.logit_rows);
    ok = ok && !llama_forward(&b, t, 11, all, err, sizeof err);
    CHECK(ok && !memcmp(a.logits, all + (size_t)10 * nv, (size_t)nv * sizeof(float)),
          "llama_prefill's last logits == the last row of one batch of 11, bit for bit");
    CHECK(b.logit_rows == 11, "llama_forward with every row asked for: 11 rows (%llu)", (unsigned long long)b.logit_rows);
    CHECK(llama_prefill(&a, t, 0, err, sizeof err) == 0 && a.n_past == 11 && a.logit_rows == 1,
          "llama_prefill of 0 tokens: nothing evaluated, nothing refused");
    CHECK(llama_prefill(&a, t, 22, err, sizeof err) != 0, "llama_prefill past the context is refused: %s", err);
    free(all);
    free_ctx(&a), free_ctx(&b);
    free_engine(e);
}

int main(void) {
    sharing("models/tiny-shakespeare-q8_0.gguf");
    prefill_once("models/tiny-shakespeare-q8_0.gguf");
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
