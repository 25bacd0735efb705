/*
 * GGUF writer round trip, and picolm-quantize on a synthetic model whose rows
 * are not multiples of 256 (llama.cpp's fallback types), plus its refusals.
 *
 * Also a helper for the shell tests (no numpy needed):
 *   test_quantize --cmp-logits OURS.f32 REF.f32 N_VOCAB MAX_NRMSE MAX_KL
 * prints the max per-position nRMSE and mean KL(ref || ours), exit 0 if within.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "engine.h"
#include "gguf.h"
#include "gguf_write.h"
#include "testlib.h"

/* The figures of ../shared/tools/cmp_logits.py, in C. */
static int cmp_logits(const char *ours, const char *ref, int nv, double max_nrmse, double max_kl) {
    size_t na, nb;
    float *a = tl_slurp(ours, &na), *b = tl_slurp(ref, &nb);
    na /= sizeof(float);
    nb /= sizeof(float);
    if (!a || !b || !na || na != nb || nv <= 0 || na % (size_t)nv) {
        printf("cmp-logits: cannot read %s / %s, or their sizes differ\n", ours, ref);
        free(a);
        free(b);
        return 2;
    }
    const size_t np = na / (size_t)nv;
    const tl_logits_cmp r = tl_compare_logits(a, b, (int)np, nv);
    const int ok = r.nrmse_max <= max_nrmse && r.kl_mean <= max_kl;
    printf("%s nRMSE max %.4f (limit %g) KL mean %.2e (limit %g) over %zu positions\n", ok ? "ok" : "FAILED", r.nrmse_max, max_nrmse,
           r.kl_mean, max_kl, np);
    free(a);
    free(b);
    return ok ? 0 : 1;
}

/* ------------------------------------------------------------------------ */
static void test_writer(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/w.gguf", dir);
    /* a source file to copy pairs from: made by the writer itself */
    gguf_writer *w = picolm_gguf_writer_new();
    CHECK(w != NULL, "writer: created");
    if (!w) return;
    picolm_gguf_writer_set_str(w, "general.architecture", "llama");
    picolm_gguf_writer_set_u32(w, "general.alignment", 64);
    picolm_gguf_writer_set_u32(w, "general.file_type", 0);
    picolm_gguf_writer_set_u32(w, "x.count", 7);
    picolm_gguf_writer_set_u32(w, "general.file_type", 15); /* replaces: moves to the end */
    CHECK(picolm_gguf_writer_n_kv(w) == 4, "writer: setting an existing key replaces it (%d pairs)", picolm_gguf_writer_n_kv(w));
    CHECK(picolm_gguf_writer_remove(w, "x.count") == 1 && picolm_gguf_writer_remove(w, "x.count") == 0, "writer: remove");
    CHECK(picolm_gguf_writer_alignment(w) == 64, "writer: alignment from general.alignment");
    const int64_t ne1[2] = {3, 5}, ne2[1] = {7};
    float a[15], b[7];
    for (int i = 0; i < 15; i++) a[i] = (float)i * 0.5f;
    for (int i = 0; i < 7; i++) b[i] = -(float)i;
    picolm_gguf_writer_add_tensor(w, "a", 1, 2, ne1, PICOLM_TYPE_F32, sizeof a);
    picolm_gguf_writer_add_tensor(w, "bb", 2, 1, ne2, PICOLM_TYPE_F32, sizeof b);
    char err[512];
    FILE *f = fopen(path, "wb");
    int ok = f && !picolm_gguf_writer_write_header(w, f, err, sizeof err) && !picolm_gguf_writer_write_tensor(w, f, a, sizeof a, err, sizeof err) &&
             picolm_gguf_writer_write_tensor(w, f, b, 3, err, sizeof err) != 0 /* wrong size is refused */ &&
             !picolm_gguf_writer_write_tensor(w, f, b, sizeof b, err, sizeof err);
    if (f) ok &= !fclose(f);
    CHECK(ok, "writer: header and two tensors written (%s)", ok ? "" : err);
    const uint64_t want_size = picolm_gguf_writer_file_size(w);
    picolm_gguf_writer_free(w);

    gguf_file g;
    if (build_gguf(&g, path, NULL, err, sizeof err)) { CHECK(0, "writer: output parses (%s)", err); return; }
    CHECK(g.size == want_size, "writer: file size %zu = predicted %llu", g.size, (unsigned long long)want_size);
    CHECK(g.alignment == 64 && g.data_offset % 64 == 0, "writer: data section aligned to 64 (at %llu)", (unsigned long long)g.data_offset);
    CHECK(g.n_kv == 3 && gguf_str_eq(g.kv[2].key, "general.file_type") && g.kv[2].v.u == 15, "writer: key order and replaced value");
    CHECK(g.n_tensors == 2 && g.tensors[0].offset == 0 && g.tensors[1].offset == 64, "writer: tensor offsets padded to the alignment");
    CHECK(!memcmp(g.base + g.data_offset, a, sizeof a) && !memcmp(g.base + g.data_offset + 64, b, sizeof b), "writer: tensor data");
    CHECK(g.tensors[1].n_dims == 1 && g.tensors[1].ne[0] == 7, "writer: tensor shape");

    /* copy every pair of a real model and compare the re-read values */
    const char *sd = getenv("PICOLM_SHARED") ? getenv("PICOLM_SHARED") : "../shared";
    char src[4096];
    snprintf(src, sizeof src, "%s/models/tiny-shakespeare-f32.gguf", sd);
    gguf_file s;
    if (access(src, R_OK) || build_gguf(&s, src, NULL, err, sizeof err)) {
        SKIP("writer: metadata copy: %s not readable", src);
        free_gguf(&g);
        return;
    }
    w = picolm_gguf_writer_new();
    for (uint64_t i = 0; i < s.n_kv; i++) gguf_writer_copy_kv(w, &s.kv[i]);
    snprintf(path, sizeof path, "%s/kv.gguf", dir);
    f = fopen(path, "wb");
    ok = f && !picolm_gguf_writer_write_header(w, f, err, sizeof err);
    if (f) ok &= !fclose(f);
    picolm_gguf_writer_free(w);
    gguf_file c;
    if (!ok || build_gguf(&c, path, NULL, err, sizeof err)) {
        CHECK(0, "writer: copied metadata parses (%s)", err);
    } else {
        int same = c.n_kv == s.n_kv;
        for (uint64_t i = 0; same && i < s.n_kv; i++) {
            const gguf_kv *x = &s.kv[i], *y = &c.kv[i];
            same = x->key.len == y->key.len && !memcmp(x->key.ptr, y->key.ptr, x->key.len) && x->type == y->type;
            if (!same) break;
            if (x->type == GGUF_STRING) same = x->v.s.len == y->v.s.len && !memcmp(x->v.s.ptr, y->v.s.ptr, x->v.s.len);
            else if (x->type == GGUF_ARRAY) {
                same = x->v.arr.type == y->v.arr.type && x->v.arr.n == y->v.arr.n;
                for (uint64_t k = 0; same && k < x->v.arr.n; k++) {
                    if (x->v.arr.type == GGUF_STRING)
                        same = x->v.arr.strs[k].len == y->v.arr.strs[k].len &&
                               !memcmp(x->v.arr.strs[k].ptr, y->v.arr.strs[k].ptr, x->v.arr.strs[k].len);
                    else {
                        const size_t es = gguf_vtype_size(x->v.arr.type);
                        same = !memcmp(x->v.arr.data + k * es, y->v.arr.data + k * es, es);
                    }
                }
            } else same = !memcmp(&x->v, &y->v, sizeof x->v.u);
        }
        CHECK(same, "writer: %llu metadata pairs of the f32 model copied verbatim (strings, arrays, scalars)", (unsigned long long)s.n_kv);
        free_gguf(&c);
    }
    free_gguf(&s);
    free_gguf(&g);
}

/* ------------------------------------------------------------------------ */
/* A tiny llama-shaped F32 model with n_embd 96 (rows not multiples of 256).  */
static int write_synth(const char *path, int n_embd, int n_ff, int n_vocab, int n_layer) {
    gguf_writer *w = picolm_gguf_writer_new();
    if (!w) return -1;
    picolm_gguf_writer_set_str(w, "general.architecture", "llama");
    picolm_gguf_writer_set_u32(w, "llama.block_count", (uint32_t)n_layer);
    picolm_gguf_writer_set_u32(w, "llama.embedding_length", (uint32_t)n_embd);
    picolm_gguf_writer_set_u32(w, "llama.feed_forward_length", (uint32_t)n_ff);
    picolm_gguf_writer_set_u32(w, "llama.attention.head_count", 4);
    picolm_gguf_writer_set_u32(w, "llama.attention.head_count_kv", 1);
    picolm_gguf_writer_set_u32(w, "general.file_type", 0);
    struct { char name[64]; int64_t ne[2]; int nd; } t[128];
    int n = 0;
#define ADD(nm, a, b, d) do { snprintf(t[n].name, sizeof t[n].name, "%s", nm); t[n].ne[0] = a; t[n].ne[1] = b; t[n].nd = d; n++; } while (0)
    ADD("token_embd.weight", n_embd, n_vocab, 2);
    ADD("output_norm.weight", n_embd, 1, 1);
    ADD("output.weight", n_embd, n_vocab, 2);
    for (int l = 0; l < n_layer; l++) {
        char nm[64];
        const char *names[] = {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"};
        const int64_t shp[][2] = {{n_embd, 1}, {n_embd, n_embd}, {n_embd, n_embd / 4}, {n_embd, n_embd / 4}, {n_embd, n_embd},
                                  {n_embd, 1}, {n_embd, n_ff}, {n_embd, n_ff}, {n_ff, n_embd}};
        for (int k = 0; k < 9; k++) {
            snprintf(nm, sizeof nm, "blk.%d.%s.weight", l, names[k]);
            ADD(nm, shp[k][0], shp[k][1], shp[k][1] == 1 ? 1 : 2);
        }
    }
#undef ADD
    for (int i = 0; i < n; i++) picolm_gguf_writer_add_tensor(w, t[i].name, strlen(t[i].name), (uint32_t)t[i].nd, t[i].ne, PICOLM_TYPE_F32,
                                                       (uint64_t)(t[i].ne[0] * t[i].ne[1]) * 4);
    char err[256];
    FILE *f = fopen(path, "wb");
    int ok = f && !picolm_gguf_writer_write_header(w, f, err, sizeof err);
    uint32_t seed = 12345;
    for (int i = 0; ok && i < n; i++) {
        const size_t ne = (size_t)(t[i].ne[0] * t[i].ne[1]);
        float *buf = malloc(ne * sizeof *buf);
        if (!buf) { ok = 0; break; }
        for (size_t k = 0; k < ne; k++) {
            seed = seed * 1664525u + 1013904223u;
            buf[k] = ((float)(seed >> 8) / 16777216.0f - 0.5f) * 0.2f;
        }
        ok = !picolm_gguf_writer_write_tensor(w, f, buf, ne * 4, err, sizeof err);
        free(buf);
    }
    if (f) ok &= !fclose(f);
    picolm_gguf_writer_free(w);
    return ok ? 0 : -1;
}

static int run(const char *cmd) {
    int rc = system(cmd);
    return rc == -1 ? -1 : WEXITSTATUS(rc);
}

static const char *type_of(const gguf_file *g, const char *name) {
    const gguf_tensor *t = gguf_find_tensor(g, name);
    return t ? gguf_type_name(t->type) : "(missing)";
}

static void test_fallbacks(const char *dir) {
    const char *B = build_dir();
    char q[1024], in[1024], out[1024], cmd[8192], log[1024];
    snprintf(q, sizeof q, "%s/bin/picolm-quantize", B);
    if (access(q, X_OK)) { SKIP("quantize: %s not built", q); return; }
    snprintf(in, sizeof in, "%s/synth.gguf", dir);
    snprintf(out, sizeof out, "%s/synth-q4_k_m.gguf", dir);
    snprintf(log, sizeof log, "%s/log.txt", dir);
    CHECK(!write_synth(in, 96, 160, 64, 8), "synthetic F32 model written (n_embd 96, n_ff 160, 8 layers)");
    snprintf(cmd, sizeof cmd, "%s %s %s Q4_K_M -j 2 >%s 2>&1", q, in, out, log);
    CHECK(run(cmd) == 0, "quantize: synthetic model to Q4_K_M");
    gguf_file g;
    char err[512];
    if (build_gguf(&g, out, NULL, err, sizeof err)) { CHECK(0, "quantize: output parses (%s)", err); return; }
    /* llama.cpp: output -> Q8_0 when its rows are not whole Q4_K blocks; Q4_K -> Q5_0;
       Q6_K (attn_v / ffn_down with more bits) -> Q8_0; ffn_down rows of 160 take
       Q5_0 (160 % 32 == 0). 8 layers: use_more_bits = layers 0, 7, and (i-1)%3==2 -> 3, 6. */
    CHECK(!strcmp(type_of(&g, "output.weight"), "Q8_0"), "fallback: output.weight Q8_0 (got %s)", type_of(&g, "output.weight"));
    CHECK(!strcmp(type_of(&g, "token_embd.weight"), "Q5_0"), "fallback: token_embd Q4_K -> Q5_0 (got %s)", type_of(&g, "token_embd.weight"));
    CHECK(!strcmp(type_of(&g, "blk.0.attn_v.weight"), "Q8_0") && !strcmp(type_of(&g, "blk.1.attn_v.weight"), "Q5_0") &&
              !strcmp(type_of(&g, "blk.3.attn_v.weight"), "Q8_0") && !strcmp(type_of(&g, "blk.7.attn_v.weight"), "Q8_0"),
          "fallback: attn_v Q6_K -> Q8_0 on layers 0,3,7, Q4_K -> Q5_0 on 1 (got %s %s %s %s)", type_of(&g, "blk.0.attn_v.weight"),
          type_of(&g, "blk.1.attn_v.weight"), type_of(&g, "blk.3.attn_v.weight"), type_of(&g, "blk.7.attn_v.weight"));
    CHECK(!strcmp(type_of(&g, "blk.6.ffn_down.weight"), "Q8_0") && !strcmp(type_of(&g, "blk.2.ffn_down.weight"), "Q5_0"),
          "fallback: ffn_down by layer (6: %s, 2: %s)", type_of(&g, "blk.6.ffn_down.weight"), type_of(&g, "blk.2.ffn_down.weight"));
    CHECK(!strcmp(type_of(&g, "blk.0.attn_norm.weight"), "F32"), "norms stay F32");
    uint32_t ft = 0;
    CHECK(!gguf_get_u32(&g, "general.file_type", &ft) && ft == 15, "general.file_type = 15 (Q4_K_M)");
    free_gguf(&g);

    /* Q2_K on 96-wide rows: Q2_K/Q3_K fall back to IQ4_NL */
    snprintf(out, sizeof out, "%s/synth-q2_k.gguf", dir);
    snprintf(cmd, sizeof cmd, "%s %s %s q2_k -j 1 >%s 2>&1", q, in, out, log);
    if (run(cmd) == 0 && !build_gguf(&g, out, NULL, err, sizeof err)) {
        CHECK(!strcmp(type_of(&g, "blk.0.attn_q.weight"), "IQ4_NL") && !strcmp(type_of(&g, "blk.0.ffn_down.weight"), "IQ4_NL"),
              "fallback: Q2_K mix -> IQ4_NL (attn_q %s, ffn_down %s)", type_of(&g, "blk.0.attn_q.weight"), type_of(&g, "blk.0.ffn_down.weight"));
        free_gguf(&g);
    } else CHECK(0, "quantize: synthetic model to Q2_K");

    /* --pure has no fallback: refused, and no output or temp file left behind */
    snprintf(out, sizeof out, "%s/pure.gguf", dir);
    snprintf(cmd, sizeof cmd, "%s %s %s Q4_K --pure >%s 2>&1", q, in, out, log);
    int rc = run(cmd);
    snprintf(cmd, sizeof cmd, "grep -q 'output.weight.*not a multiple' %s", log);
    CHECK(rc == 1 && run(cmd) == 0, "--pure Q4_K on 96-wide rows refused naming the tensor (rc %d)", rc);
    snprintf(cmd, sizeof cmd, "ls %s | grep -q pure", dir);
    CHECK(run(cmd) != 0, "refusal leaves no output or temp file");

    /* pure Q8_0 works on 96-wide rows and every matrix is Q8_0 */
    snprintf(cmd, sizeof cmd, "%s %s %s Q8_0 --pure >%s 2>&1", q, in, out, log);
    if (run(cmd) == 0 && !build_gguf(&g, out, NULL, err, sizeof err)) {
        int all = 1;
        for (uint64_t i = 0; i < g.n_tensors; i++)
            all &= g.tensors[i].n_dims == 1 ? g.tensors[i].type == PICOLM_TYPE_F32 : g.tensors[i].type == PICOLM_TYPE_Q8_0;
        CHECK(all, "--pure Q8_0: every matrix Q8_0, vectors F32");
        free_gguf(&g);
    } else CHECK(0, "quantize: --pure Q8_0 on the synthetic model");

    /* refusals: quantized input, unknown type */
    const char *sd = getenv("PICOLM_SHARED") ? getenv("PICOLM_SHARED") : "../shared";
    snprintf(cmd, sizeof cmd, "%s %s/models/tiny-shakespeare-q4_k.gguf %s/x.gguf Q4_0 >%s 2>&1", q, sd, dir, log);
    if (!access(in, R_OK)) {
        char p[4096];
        snprintf(p, sizeof p, "%s/models/tiny-shakespeare-q4_k.gguf", sd);
        if (!access(p, R_OK)) {
            rc = run(cmd);
            snprintf(cmd, sizeof cmd, "grep -q 'is Q4_K: the input must be an F32, F16 or BF16 model' %s", log);
            CHECK(rc == 1 && run(cmd) == 0, "quantized input refused with a clear message (rc %d)", rc);
        } else SKIP("quantize: shared q4_k model absent");
    }
    snprintf(cmd, sizeof cmd, "%s %s %s/x.gguf Q7_Z >%s 2>&1", q, in, dir, log);
    rc = run(cmd);
    snprintf(cmd, sizeof cmd, "grep -q \"unknown type 'Q7_Z'\" %s", log);
    CHECK(rc == 2 && run(cmd) == 0, "unknown type refused (rc %d)", rc);
}

int main(int argc, char **argv) {
    if (argc == 7 && !strcmp(argv[1], "--cmp-logits"))
        return cmp_logits(argv[2], argv[3], atoi(argv[4]), atof(argv[5]), atof(argv[6]));
    char dir[] = "/tmp/picolm-test-quantize-XXXXXX";
    if (!mkdtemp(dir)) { CHECK(0, "mkdtemp"); return 1; }
    test_writer(dir);
    test_fallbacks(dir);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) { /* best effort */ }
    return CHECK_DONE();
}
