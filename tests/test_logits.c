/* Differential test against llama.cpp: for every model in $PICOLM_SHARED/models
   with reference logits, evaluate the reference tokens one position at a
   time and compare (nRMSE per position, mean KL), check greedy continuations,
   and check that batched prefill equals token-by-token evaluation.
   PICOLM_BACKEND selects the backend (default auto). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ctx.h"
#include "engine.h"
#include "testlib.h"

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* greedy_exact: 1 = the continuation must equal the reference's token for
   token; 2 = or leave it only at a near-tie: where our best logit is ahead
   of the reference's token by at most 0.05 standard deviations of the
   logits (half the nRMSE limit: a difference the tolerances allow) */
/* models: the directory of NAME.gguf; refs: of its NAME.tokens.i32,
   .logits.f32 (every position's, or the last positions' only) and
   .greedy.i32 */
static void run_model(const char *models, const char *refs, const char *name, const char *backend, int greedy_exact) {
    char path[1024], tp[1024], lp[1024], gp[1024], err[1024];
    snprintf(path, sizeof path, "%s/%s.gguf", models, name);
    snprintf(tp, sizeof tp, "%s/%s.tokens.i32", refs, name);
    snprintf(lp, sizeof lp, "%s/%s.logits.f32", refs, name);
    snprintf(gp, sizeof gp, "%s/%s.greedy.i32", refs, name);
    size_t tn, ln, gn;
    int32_t *toks = tl_slurp(tp, &tn);
    float *ref = tl_slurp(lp, &ln);
    int32_t *greedy = tl_slurp(gp, &gn);
    if (!toks || !ref || !greedy) { SKIP("%s: reference files missing", name); goto out; }
    engine_opts o = {.model_path = path, .backend = backend, .threads = 2};
    engine *e = build_engine(&o, err, sizeof err);
    CHECK(e != NULL, "%s: loads (%s)", name, e ? "ok" : err);
    if (!e) goto out;
    const int n = (int)(tn / 4), nv = e->model.hp.n_vocab, ng = (int)(gn / 4);
    const int nref = (int)(ln / ((size_t)nv * 4)); /* rows in the reference: the last nref positions */
    CHECK(nref >= 1 && nref <= n && ln == (size_t)nref * nv * 4, "%s: reference shape %d (of %d) x %d", name, nref, n, nv);
    float *ours = malloc((size_t)n * nv * sizeof(float));
    llama_ctx c;
    if (build_ctx(&c, &e->model, n + ng + 1, 16, KV_F16, e->pool, err, sizeof err)) { CHECK(0, "%s: context: %s", name, err); free_engine(e); free(ours); goto out; }
    int ok = 1;
    for (int i = 0; i < n && ok; i++) ok = !ctx_forward(&c, toks + i, 1, ours + (size_t)i * nv, err, sizeof err);
    CHECK(ok, "%s: evaluates %d positions one at a time", name, n);
    tl_logits_cmp r = tl_compare_logits(ours + (size_t)(n - nref) * nv, ref, nref, nv);
    const int is_f = strstr(name, "-f32") || strstr(name, "-f16");
    const double lim = is_f ? 0.01 : strstr(name, "-bf16") ? 0.03 : 0.10;
    CHECK(r.nrmse_max <= lim, "%s: nRMSE max %.4f <= %.2f", name, r.nrmse_max, lim);
    CHECK(r.kl_mean <= 1e-3, "%s: mean KL %.2e <= 1e-3 (top-1 agreement %.1f%%)", name, r.kl_mean, r.top1 * 100);
    printf("info: %s: nRMSE max %.4f, mean KL %.2e, top-1 %.1f%%\n", name, r.nrmse_max, r.kl_mean, r.top1 * 100);

    /* greedy continuation from the reference prompt */
    int32_t eos = -1;
    uint32_t ev;
    if (!gguf_get_u32(&e->model.gguf, "tokenizer.ggml.eos_token_id", &ev)) eos = (int32_t)ev;
    int same = 0, first_diff = -1;
    float margin = 0;
    int32_t tok = argmax(c.logits, nv);
    for (int i = 0; i < ng; i++) {
        if (tok == greedy[i]) same++;
        else if (first_diff < 0) {
            /* where a continuation leaves the reference: how near a tie it was */
            first_diff = i;
            /* in units of the logits' spread there, the scale nRMSE uses */
            double mean = 0, var = 0;
            for (int v = 0; v < nv; v++) mean += c.logits[v];
            mean /= nv;
            for (int v = 0; v < nv; v++) var += (c.logits[v] - mean) * (c.logits[v] - mean);
            const double sd = sqrt(var / nv);
            margin = greedy[i] >= 0 && greedy[i] < nv ? (c.logits[tok] - c.logits[greedy[i]]) / sd : INFINITY;
            printf("info: %s: greedy token %d: ours %d (logit %.5f), reference %d (logit %.5f here): margin %.5f = %.4f std\n", name, i, tok,
                   c.logits[tok], greedy[i], greedy[i] >= 0 && greedy[i] < nv ? c.logits[greedy[i]] : NAN,
                   greedy[i] >= 0 && greedy[i] < nv ? c.logits[tok] - c.logits[greedy[i]] : NAN, margin);
        }
        if (tok == eos || first_diff >= 0) break;
        if (getenv("PICOLM_TEST_DEBUG")) printf("debug: %d: %d\n", i, tok);
        if (ctx_forward(&c, &tok, 1, NULL, err, sizeof err)) break;
        tok = argmax(c.logits, nv);
    }
    if (greedy_exact == 1)
        CHECK(first_diff < 0 && same == ng, "%s: greedy continuation identical (%d/%d tokens)", name, same, ng);
    else if (greedy_exact == 2)
        CHECK((first_diff < 0 && same == ng) || margin <= 0.05f,
              "%s: greedy continuation identical (%d/%d tokens) or leaving it at a near-tie (margin %.4f <= 0.05 std of the logits)", name,
              same, ng, margin);
    else
        printf("info: %s: greedy continuation agrees for the first %d of %d tokens\n", name, same, ng);

    /* batched prefill (chunks of 16) must equal token-by-token evaluation */
    llama_ctx cb;
    float *batched = malloc((size_t)n * nv * sizeof(float));
    if (!build_ctx(&cb, &e->model, n, 16, KV_F16, e->pool, err, sizeof err)) {
        ok = 1;
        for (int i = 0; i < n && ok; i += 16) ok = !ctx_forward(&cb, toks + i, n - i < 16 ? n - i : 16, batched + (size_t)i * nv, err, sizeof err);
        tl_logits_cmp rb = tl_compare_logits(batched, ours, n, nv);
        tl_logits_cmp rr = tl_compare_logits(batched + (size_t)(n - nref) * nv, ref, nref, nv);
        /* the criterion: batched equals token-by-token within the
           logits tolerances (kernels may sum in a different order, and on
           these small models a 1e-7 matmul difference can flip a Q8
           activation rounding downstream) */
        CHECK(ok && rb.nrmse_max <= lim && rb.kl_mean <= 1e-3 && rr.nrmse_max <= lim && rr.kl_mean <= 1e-3,
              "%s: batched prefill (16) vs one-at-a-time nRMSE %.2e KL %.1e, vs reference %.4f / KL %.1e", name, rb.nrmse_max, rb.kl_mean,
              rr.nrmse_max, rr.kl_mean);
        free_ctx(&cb);
    }
    free(batched);
    free_ctx(&c);
    free(ours);
    free_engine(e);
out:
    free(toks);
    free(ref);
    free(greedy);
}

/* Far from the start (1383 tokens), where Llama 3's frequency scaling
   matters: only the last 8 positions' logits are in the reference.  One
   position at a time, as the reference was made, and in batches of 64. */
static void long_context(const char *shared, const char *name, const char *backend) {
    char path[1024], tp[1024], lp[1024], err[1024];
    snprintf(path, sizeof path, "%s/models/%s.gguf", shared, name);
    snprintf(tp, sizeof tp, "%s/reference/logits/%s.long.tokens.i32", shared, name);
    snprintf(lp, sizeof lp, "%s/reference/logits/%s.long.logits.f32", shared, name);
    size_t tn, ln;
    int32_t *toks = tl_slurp(tp, &tn);
    float *ref = tl_slurp(lp, &ln);
    engine_opts o = {.model_path = path, .backend = backend, .threads = 2};
    engine *e = toks && ref ? build_engine(&o, err, sizeof err) : NULL;
    if (!e) { SKIP("%s.long: %s", name, toks && ref ? err : "reference files missing"); goto out; }
    const int n = (int)(tn / 4), nv = e->model.hp.n_vocab, last = 8;
    CHECK(ln == (size_t)last * nv * 4, "%s.long: reference holds the last %d of %d positions", name, last, n);
    float *ours = malloc((size_t)last * nv * sizeof(float));
    for (int batch = 1; batch <= 64 && ours && ln == (size_t)last * nv * 4; batch += 63) {
        llama_ctx c;
        int ok = !build_ctx(&c, &e->model, n, batch, KV_F16, e->pool, err, sizeof err);
        for (int i = 0; ok && i < n - last; i += batch) {
            const int k = n - last - i < batch ? n - last - i : batch;
            ok = !ctx_forward(&c, toks + i, k, NULL, err, sizeof err);
        }
        for (int i = n - last; ok && i < n; i++) {
            ok = !ctx_forward(&c, toks + i, 1, NULL, err, sizeof err);
            memcpy(ours + (size_t)(i - n + last) * nv, c.logits, (size_t)nv * sizeof(float));
        }
        CHECK(ok, "%s.long: evaluates %d tokens in batches of %d (%s)", name, n, batch, ok ? "ok" : err);
        if (ok) {
            tl_logits_cmp r = tl_compare_logits(ours, ref, last, nv);
            printf("info: %s.long (batch %d): nRMSE max %.4f, mean KL %.2e, top-1 %.1f%%\n", name, batch, r.nrmse_max, r.kl_mean, r.top1 * 100);
            CHECK(r.nrmse_max <= 0.10 && r.kl_mean <= 1e-3, "%s.long, batch %d: last %d positions nRMSE max %.4f <= 0.10, mean KL %.2e <= 1e-3",
                  name, batch, last, r.nrmse_max, r.kl_mean);
        }
        free_ctx(&c); /* safe after a failed build_ctx too: it leaves c zeroed */
    }
    free(ours);
    free_engine(e);
out:
    free(toks);
    free(ref);
}

/* All logits of the reference tokens, in chunks of `batch`, on `threads` threads. */
static float *eval_threads(const char *path, const int32_t *toks, int n, int batch, int threads, int kv, int *nv) {
    char err[1024];
    engine_opts o = {.model_path = path, .backend = "auto", .threads = threads};
    engine *e = build_engine(&o, err, sizeof err);
    if (!e) return NULL;
    *nv = e->model.hp.n_vocab;
    float *out = malloc((size_t)n * *nv * sizeof(float));
    llama_ctx c;
    int ok = out && !build_ctx(&c, &e->model, n, batch, kv, e->pool, err, sizeof err);
    if (ok) {
        for (int i = 0; i < n && ok; i += batch) ok = !ctx_forward(&c, toks + i, n - i < batch ? n - i : batch, out + (size_t)i * *nv, err, sizeof err);
        free_ctx(&c);
    }
    free_engine(e);
    if (!ok) { free(out); return NULL; }
    return out;
}

/* The work split (matmul rows claimed and stolen per thread, attention
   tasks) must not change a single bit: every row and head is computed by
   the same kernel whatever thread runs it.  More threads than CPUs make
   the threads preempt each other, so rows are stolen; at 8 threads each
   KV head's pair of query heads (this model: 8 heads, 4 KV heads) is
   split into two attention tasks, at fewer it is not.  Both KV cache
   types (the q8_0 one goes through the core's own loop). */
static void thread_independence(const char *shared, const char *name) {
    char path[1024], tp[1024];
    snprintf(path, sizeof path, "%s/models/%s.gguf", shared, name);
    snprintf(tp, sizeof tp, "%s/reference/logits/%s.tokens.i32", shared, name);
    size_t tn;
    int32_t *toks = tl_slurp(tp, &tn);
    if (!toks) { SKIP("%s: reference tokens missing", name); return; }
    const int n = (int)(tn / 4);
    for (int kv = KV_F16; kv <= KV_Q8_0; kv++)
        for (int batch = 1; batch <= 16; batch += 15) {
            const char *kvn = kv == KV_F16 ? "f16" : "q8_0";
            int nv = 0;
            float *base = eval_threads(path, toks, n, batch, 1, kv, &nv);
            CHECK(base != NULL, "%s: evaluates on 1 thread (batch %d, KV %s)", name, batch, kvn);
            static const int threads[] = {2, 3, 7, 8};
            for (size_t k = 0; base && k < sizeof threads / sizeof *threads; k++) {
                int nv2 = 0;
                float *o = eval_threads(path, toks, n, batch, threads[k], kv, &nv2);
                CHECK(o && nv2 == nv && !memcmp(o, base, (size_t)n * nv * sizeof(float)),
                      "%s: batch %d, KV %s: logits on %d threads bit-identical to 1 thread", name, batch, kvn, threads[k]);
                free(o);
            }
            free(base);
        }
    free(toks);
}

int main(void) {
    const char *shared = shared_dir("reference logits");
    if (!shared) return 0;
    const char *backend = getenv("PICOLM_BACKEND");
    /* greedy 1: the continuation must be identical (shared/README.md: the
       tiny-shakespeare f32/f16/q8_0 ones, and the ropescale file, "identical,
       as for the plain q8_0 model"; the model-family files' are expected to
       be, a difference is reported with its margin) */
    static const struct { const char *name; int greedy; } models[] = {
        {"tiny-shakespeare-f32", 1}, {"tiny-shakespeare-f16", 1}, {"tiny-shakespeare-bf16", 0}, {"tiny-shakespeare-q8_0", 1},
        {"tiny-shakespeare-q4_0", 0}, {"tiny-shakespeare-q4_1", 0}, {"tiny-shakespeare-q5_0", 0}, {"tiny-shakespeare-q5_1", 0},
        {"tiny-shakespeare-q2_k", 0}, {"tiny-shakespeare-q3_k", 0}, {"tiny-shakespeare-q4_k", 0}, {"tiny-shakespeare-q5_k", 0},
        {"tiny-shakespeare-q6_k", 0}, {"tiny-shakespeare-q4_k_m", 0}, {"tiny-shakespeare-iq4_nl", 0}, {"tiny-shakespeare-iq4_xs", 0},
        {"rand-spm-q8_0", 0}, {"rand-spm-q4_k_m", 0},
        /* linear RoPE scaling factor 2 and rms eps 0.005: a scaling applied
           the wrong way or a fixed eps moves the logits by an nRMSE of 1-2.5 */
        {"tiny-shakespeare-ropescale-q8_0", 1},
        /* llama with rope_freqs (Llama 3.1+), qwen2 (biases, NeoX), qwen3
           (q/k head norms, head_dim 128).  rand-llama3's logits equal the
           reference's (nRMSE < 5e-5) up to prompt position 12; at 13 a
           rounding flips (0.016 after it, on avx2; the scalar backend's
           order differs from position 4) and its continuation leaves the
           reference at token 11, where our best two logits are 0.0008 apart
           (the scalar backend: at token 8, 0.003 apart). */
        {"rand-llama3-q4_k_m", 2}, {"rand-qwen2-q4_0", 1}, {"rand-qwen3-q4_k_m", 1}};
    const char *only = getenv("PICOLM_TEST_MODEL"); /* e.g. "q4_k" to run one model */
    char md[1024], rd[1024];
    snprintf(md, sizeof md, "%s/models", shared);
    snprintf(rd, sizeof rd, "%s/reference/logits", shared);
    for (size_t i = 0; i < sizeof models / sizeof *models; i++)
        if (!only || strstr(models[i].name, only)) run_model(md, rd, models[i].name, backend ? backend : "auto", models[i].greedy);
    /* the families made by tools/oracle (docs/testdata.md): Gemma 3 (a
       window shorter than the prompt, its own RoPE base there, linear
       scaling on the global layers, GeGLU, post-norms, soft-capping), LFM2
       (convolution layers), SmolLM3 (no RoPE in every 4th layer) */
    static const char *families[] = {"rand-gemma3-q8_0", "rand-lfm2-q8_0", "rand-lfm2-q4_k_m", "rand-smollm3-q8_0",
                                     "rand-smollm3-q4_k_m"};
    const char *fd = "tests/data/families";
    for (size_t i = 0; i < sizeof families / sizeof *families; i++)
        if (!only || strstr(families[i], only)) run_model(fd, fd, families[i], backend ? backend : "auto", 2);
    if (!only || strstr("rand-llama3-q4_k_m.long", only)) long_context(shared, "rand-llama3-q4_k_m", backend ? backend : "auto");
    if (!only) thread_independence(shared, "tiny-shakespeare-q4_k_m");
    return CHECK_DONE();
}
