/*
 * Architecture details that the reference logits cannot isolate, on
 * hand-made F32 files whose output is known in closed form.
 *
 * The final RMS norm's epsilon: with every layer matrix zero, each layer
 * adds nothing to the residual stream, so the logits are the final norm of
 * the token's embedding times the output matrix (here the identity):
 * logit_j = e_j / sqrt(mean(e^2) + eps).  The embeddings are small (rms
 * 0.05), so eps 0.005 and 1e-5 give logits 1.7x apart: a final norm with a
 * fixed eps (1e-5) fails here, while on tiny-shakespeare-ropescale (eps
 * 0.005) it only moved the nRMSE against llama.cpp from 0.0278 to 0.0273:
 * a trained model's residual stream is large at the final norm.  The same for each architecture of the
 * table (qwen2 with zero biases, qwen3 with unit head norms).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "ctx.h"
#include "engine.h"
#include "gguf_write.h"

enum { DIM = 32, FF = 64, VOCAB = 32, HEADS = 2, HD = DIM / HEADS };

typedef struct tdesc {
    char name[48];
    int64_t ne[2];
    int kind; /* 0 zeros, 1 ones, 2 embeddings, 3 identity */
} tdesc;

static float embd(int t, int i) { return 0.05f * sinf(1.0f + (float)t * 0.37f + (float)i * 1.3f) * 1.41421356f; }

static int write_model(const char *path, const char *arch, float eps) {
    gguf_writer *w = picolm_gguf_writer_new();
    if (!w) return -1;
    char key[96];
#define KEY(k) (snprintf(key, sizeof key, "%s." k, arch), key)
    picolm_gguf_writer_set_str(w, "general.architecture", arch);
    picolm_gguf_writer_set_u32(w, KEY("block_count"), 1);
    picolm_gguf_writer_set_u32(w, KEY("embedding_length"), DIM);
    picolm_gguf_writer_set_u32(w, KEY("feed_forward_length"), FF);
    picolm_gguf_writer_set_u32(w, KEY("attention.head_count"), HEADS);
    picolm_gguf_writer_set_u32(w, KEY("attention.head_count_kv"), HEADS);
    picolm_gguf_writer_set_u32(w, KEY("context_length"), 16);
    gguf_kv e = {.key = {strlen(KEY("attention.layer_norm_rms_epsilon")), key}, .type = GGUF_FLOAT32};
    e.v.f = eps;
    gguf_writer_copy_kv(w, &e);
#undef KEY
    tdesc t[32];
    int n = 0;
#define ADD(nm, a, b, k) do { snprintf(t[n].name, sizeof t[n].name, "%s", nm); t[n].ne[0] = a; t[n].ne[1] = b; t[n].kind = k; n++; } while (0)
    ADD("token_embd.weight", DIM, VOCAB, 2);
    ADD("output_norm.weight", DIM, 1, 1);
    ADD("output.weight", DIM, VOCAB, 3);
    ADD("blk.0.attn_norm.weight", DIM, 1, 1);
    ADD("blk.0.attn_q.weight", DIM, DIM, 0);
    ADD("blk.0.attn_k.weight", DIM, DIM, 0);
    ADD("blk.0.attn_v.weight", DIM, DIM, 0);
    if (!strcmp(arch, "qwen2")) {
        ADD("blk.0.attn_q.bias", DIM, 1, 0);
        ADD("blk.0.attn_k.bias", DIM, 1, 0);
        ADD("blk.0.attn_v.bias", DIM, 1, 0);
    }
    if (!strcmp(arch, "qwen3")) {
        ADD("blk.0.attn_q_norm.weight", HD, 1, 1);
        ADD("blk.0.attn_k_norm.weight", HD, 1, 1);
    }
    ADD("blk.0.attn_output.weight", DIM, DIM, 0);
    ADD("blk.0.ffn_norm.weight", DIM, 1, 1);
    ADD("blk.0.ffn_gate.weight", DIM, FF, 0);
    ADD("blk.0.ffn_up.weight", DIM, FF, 0);
    ADD("blk.0.ffn_down.weight", FF, DIM, 0);
#undef ADD
    for (int i = 0; i < n; i++)
        picolm_gguf_writer_add_tensor(w, t[i].name, strlen(t[i].name), t[i].ne[1] == 1 ? 1 : 2, t[i].ne, PICOLM_TYPE_F32,
                               (uint64_t)(t[i].ne[0] * t[i].ne[1]) * 4);
    char err[256];
    FILE *f = fopen(path, "wb");
    int ok = f && !picolm_gguf_writer_write_header(w, f, err, sizeof err);
    for (int i = 0; ok && i < n; i++) {
        const int64_t cols = t[i].ne[0], rows = t[i].ne[1];
        float *buf = calloc((size_t)(cols * rows), sizeof *buf);
        if (!buf) { ok = 0; break; }
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++)
                buf[r * cols + c] = t[i].kind == 1 ? 1.0f : t[i].kind == 2 ? embd((int)r, (int)c) : t[i].kind == 3 ? (float)(r == c) : 0.0f;
        ok = !picolm_gguf_writer_write_tensor(w, f, buf, (uint64_t)(cols * rows) * 4, err, sizeof err);
        free(buf);
    }
    if (f) ok &= !fclose(f);
    picolm_gguf_writer_free(w);
    return ok ? 0 : -1;
}

static void final_norm_eps(const char *dir, const char *arch, float eps) {
    char path[1024], err[1024];
    snprintf(path, sizeof path, "%s/%s-%g.gguf", dir, arch, eps);
    if (write_model(path, arch, eps)) { CHECK(0, "%s: model written", path); return; }
    engine_opts o = {.model_path = path, .threads = 1};
    engine *e = build_engine(&o, err, sizeof err);
    CHECK(e != NULL, "%s eps %g: loads (%s)", arch, eps, e ? "ok" : err);
    if (!e) return;
    llama_ctx c;
    if (build_ctx(&c, &e->model, 8, 4, KV_F16, e->pool, err, sizeof err)) { CHECK(0, "context: %s", err); free_engine(e); return; }
    const int32_t toks[3] = {3, 17, 30};
    double worst = 0;
    for (int k = 0; k < 3; k++) {
        if (ctx_forward(&c, &toks[k], 1, NULL, err, sizeof err)) { CHECK(0, "forward: %s", err); break; }
        double ss = 0;
        for (int i = 0; i < DIM; i++) ss += (double)embd(toks[k], i) * embd(toks[k], i);
        const double inv = 1.0 / sqrt(ss / DIM + eps);
        for (int j = 0; j < VOCAB; j++) {
            const double want = embd(toks[k], j) * inv, d = fabs(c.logits[j] - want) / (fabs(want) + 1e-3);
            if (d > worst) worst = d;
        }
    }
    CHECK(worst < 1e-4, "%s: final norm uses the file's eps %g: logits = e / sqrt(mean(e^2) + eps) (worst relative error %.1e)", arch, eps, worst);
    free_ctx(&c);
    free_engine(e);
}

int main(void) {
    char dir[] = "/tmp/picolm-archtest-XXXXXX";
    if (!mkdtemp(dir)) { CHECK(0, "mkdtemp"); return CHECK_DONE(); }
    static const char *archs[] = {"llama", "qwen2", "qwen3"};
    for (int a = 0; a < 3; a++) {
        final_norm_eps(dir, archs[a], 0.005f);
        final_norm_eps(dir, archs[a], 1e-5f);
    }
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) printf("note: could not remove %s\n", dir);
    return CHECK_DONE();
}
