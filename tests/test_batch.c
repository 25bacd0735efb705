/* Continuous batching (llama_decode): sequences evaluated together in
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
#include "ctx.h"

#define NSEQ 3
#define NGEN 6

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* n tokens of one sequence in one batch: every row's logits into all (NULL: none) */
static int decode_one(llama_batch *b, kv_seq *s, const int32_t *t, int n, float *all, char *err, size_t errlen) {
    kv_seq *who[64];
    uint8_t want[64];
    for (int i = 0; i < n; i++) who[i] = s, want[i] = all != NULL;
    return llama_decode(b, who, t, n, want, all, err, errlen);
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
    int rc = ctx_forward(&c, p, PLEN[s], NULL, err, errlen);
    for (int g = 0; !rc && g <= NGEN; g++) {
        memcpy(rows + (size_t)g * nv, c.logits, (size_t)nv * sizeof(float));
        int32_t t = argmax(c.logits, nv);
        if (g < NGEN) rc = ctx_forward(&c, &t, 1, NULL, err, errlen);
    }
    free_ctx(&c);
    return rc;
}

/* Together: every step takes a chunk of up to 3 prompt tokens from each
   sequence still in its prompt and the next token of each one decoding
   (sequence 2 joins late, at step 2), all in one llama_forward_seqs. */
static int together(engine *e, kv_pool *pool, float *rows[NSEQ], char *err, size_t errlen) {
    const int nv = e->model.hp.n_vocab;
    llama_batch step;
    kv_seq seq[NSEQ];
    int32_t prompt[NSEQ][16], next[NSEQ];
    int fed[NSEQ] = {0}, got[NSEQ] = {0}, rc = 0;
    if (build_batch(&step, &e->model, 32, e->pool, err, errlen)) return -1;
    for (int s = 0; s < NSEQ; s++) {
        prompt_of(s, nv, prompt[s]);
        if (build_kv_seq(&seq[s], pool, 64, err, errlen)) return -1;
    }
    float *logits = malloc((size_t)NSEQ * nv * sizeof(float));
    for (int it = 0; !rc; it++) {
        kv_seq *who[32];
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
        rc = llama_decode(&step, who, toks, n, want, logits, err, errlen);
        /* the logits rows come in batch order: sequence order here */
        for (int s = 0, r = 0; s < NSEQ && !rc; s++) {
            if (owner[s] < 0) continue;
            const float *l = logits + (size_t)r++ * nv;
            memcpy(rows[s] + (size_t)got[s] * nv, l, (size_t)nv * sizeof(float));
            next[s] = argmax(l, nv);
            got[s]++;
        }
    }
    for (int s = 0; s < NSEQ; s++) free_kv_seq(&seq[s]);
    free_batch(&step);
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
        /* one block per sequence, then blocks of 4 positions (runs cut
           inside prompts and replies) */
        for (int paged = 0; paged < 2 && ok; paged++) {
            kv_pool pool;
            if (build_kv_pool(&pool, &e->model, kv, paged ? 48 : NSEQ, paged ? 4 : 64, err, sizeof err)) { CHECK(0, "pool: %s", err); break; }
            ok = !together(e, &pool, mixed, err, sizeof err);
            const char *how = paged ? "paged (blocks of 4)" : "one block each";
            CHECK(ok, "%s kv %s %s: sequences evaluate alone and together (%s)", name, kv ? "q8_0" : "f16", how, ok ? "ok" : err);
            for (int s = 0; s < NSEQ && ok; s++)
                CHECK(!memcmp(alone[s], mixed[s], (size_t)(NGEN + 1) * nv * sizeof(float)),
                      "%s kv %s %s: sequence %d (prompt %d tokens, %d generated): logits together == alone, bit for bit", name,
                      kv ? "q8_0" : "f16", how, s, PLEN[s], NGEN);
            CHECK(pool.n_free == pool.n_blocks, "%s: every block back in the pool after the sequences (%d of %d)", name,
                  pool.n_free, pool.n_blocks);
            free_kv_pool(&pool);
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
    kv_seq pa, pb;
    llama_batch step;
    llama_ctx ca, cb;
    build_kv_pool(&pool, &e->model, KV_F16, 8, 4, err, sizeof err);
    build_kv_seq(&pa, &pool, 32, err, sizeof err);
    build_kv_seq(&pb, &pool, 32, err, sizeof err);
    build_batch(&step, &e->model, 32, e->pool, err, sizeof err);
    build_ctx(&ca, &e->model, 32, 16, KV_F16, e->pool, err, sizeof err);
    build_ctx(&cb, &e->model, 32, 16, KV_F16, e->pool, err, sizeof err);
    float *la = malloc((size_t)nv * 4 * sizeof(float)), *lb = malloc((size_t)nv * 4 * sizeof(float));
    int ok = !decode_one(&step, &pa, a, 10, NULL, err, sizeof err); /* A: 10 positions, blocks 0-2 */
    CHECK(kv_seq_share(&pb, &pa, 9) == 9, "B takes A's first 9 positions");
    CHECK(pool.ref[pa.blocks[0]] == 2 && pool.ref[pa.blocks[1]] == 2 && pool.ref[pa.blocks[2]] == 2, "shared blocks are referenced twice");
    kv_seq_truncate(&pb, 8);                                           /* B: A's first 8 */
    CHECK(pb.n_past == 8 && pool.ref[pa.blocks[2]] == 1, "B cut back to 8 gives back its reference to block 2");
    ok = ok && !decode_one(&step, &pb, b + 8, 4, lb, err, sizeof err);  /* B writes block 2: its own */
    ok = ok && !decode_one(&step, &pa, a + 10, 2, la, err, sizeof err); /* A continues in its block 2 */
    float *ra = malloc((size_t)nv * 12 * sizeof(float)), *rb = malloc((size_t)nv * 12 * sizeof(float));
    ok = ok && !ctx_forward(&ca, a, 12, ra, err, sizeof err) && !ctx_forward(&cb, b, 12, rb, err, sizeof err);
    CHECK(ok, "shared prefix: evaluations run (%s)", ok ? "ok" : err);
    CHECK(ok && !memcmp(lb, rb + (size_t)8 * nv, (size_t)4 * nv * sizeof(float)), "B after a shared prefix == B alone, bit for bit");
    CHECK(ok && !memcmp(la, ra + (size_t)10 * nv, (size_t)2 * nv * sizeof(float)), "A after B wrote beside it == A alone, bit for bit");
    /* a full pool is an error for the caller to handle, never a crash */
    kv_seq pc;
    build_kv_seq(&pc, &pool, 32, err, sizeof err);
    int32_t many[32] = {0};
    CHECK(decode_one(&step, &pc, many, 32, NULL, err, sizeof err) == LLAMA_ERR_KV_FULL && pc.n_past == 0,
          "a pool with too few free blocks is refused, nothing evaluated: %s", err);
    free_kv_seq(&pc);
    free_kv_seq(&pa), free_kv_seq(&pb), free_ctx(&ca), free_ctx(&cb);
    free_batch(&step);
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
    int ok = !ctx_prefill(&a, t, 11, err, sizeof err);
    CHECK(ok, "llama_prefill: 11 tokens in batches of 4 (%s)", ok ? "ok" : err);
    CHECK(a.seq.n_past == 11, "llama_prefill: all 11 positions in the cache (%d)", a.seq.n_past);
    CHECK(a.batch.logit_rows == 1, "llama_prefill: the output matrix ran for 1 row, not one per batch (%llu)",
          (unsigned long long)a.batch.logit_rows);
    ok = ok && !ctx_forward(&b, t, 11, all, err, sizeof err);
    CHECK(ok && !memcmp(a.logits, all + (size_t)10 * nv, (size_t)nv * sizeof(float)),
          "llama_prefill's last logits == the last row of one batch of 11, bit for bit");
    CHECK(b.batch.logit_rows == 11, "ctx_forward with every row asked for: 11 rows (%llu)", (unsigned long long)b.batch.logit_rows);
    CHECK(ctx_prefill(&a, t, 0, err, sizeof err) == 0 && a.seq.n_past == 11 && a.batch.logit_rows == 1,
          "llama_prefill of 0 tokens: nothing evaluated, nothing refused");
    CHECK(ctx_prefill(&a, t, 22, err, sizeof err) != 0, "llama_prefill past the context is refused: %s", err);
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
        llama_batch step;
        kv_pool pool;
        kv_seq s;
        build_batch(&step, &e->model, 2, e->pool, err, sizeof err);
        build_kv_pool(&pool, &e->model, KV_F16, 1, 2, err, sizeof err);
        build_kv_seq(&s, &pool, 2, err, sizeof err);
        kv_seq *who[3] = {&s, &s, &s};
        int32_t t[3] = {1, 2, 3};
        const uint8_t want[3] = {1, 1, 1};
        CHECK(llama_decode(&step, who, t, 3, NULL, NULL, err, sizeof err) != 0, "a batch over n_batch is refused: %s", err);
        CHECK(llama_decode(&step, who, t, 1, want, NULL, err, sizeof err) != 0 && s.n_past == 0, "logits wanted with nowhere to go is refused: %s", err);
        CHECK(llama_decode(&step, who, t, 2, NULL, NULL, err, sizeof err) == 0, "two tokens fill a context of 2");
        CHECK(llama_decode(&step, who, t, 1, NULL, NULL, err, sizeof err) != 0, "a full sequence is refused: %s", err);
        free_kv_seq(&s);
        free_kv_pool(&pool);
        free_batch(&step);
        free_engine(e);
    }
    return CHECK_DONE();
}
