/* picolm-logits: evaluate token ids and write every position's logits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "generate.h"
#include "util.h"

static void usage(FILE *o) {
    fprintf(o,
            "usage: picolm-logits MODEL TOKENS_I32_FILE OUT_F32_FILE [options]\n"
            "Evaluates the little-endian int32 token ids in TOKENS_I32_FILE and writes the\n"
            "float32 logits after every position (n_tokens x n_vocab, row-major) to OUT_F32_FILE.\n"
            "options:\n"
            "  --batch N         evaluate N tokens per forward pass (default 1: one position at a time)\n"
            "  --backend NAME    backend plugin (default auto)\n"
            "  --plugin-dir DIR  extra plugin directory searched first\n"
            "  --kv-type T       f16 (default) or q8_0\n"
            "  -j N              threads (default: all CPUs)\n"
            "  -h, --help        this text\n");
}

int main(int argc, char **argv) {
    const char *pos[3];
    int npos = 0, batch = 1, threads = 0, kv = KV_F16;
    const char *backend = "auto", *pdir = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        if (a[0] == '-' && a[1]) {
            if (i + 1 >= argc) { fprintf(stderr, "picolm-logits: %s needs a value\n", a); return 2; }
            const char *v = argv[++i];
            if (!strcmp(a, "--batch")) batch = atoi(v);
            else if (!strcmp(a, "--backend")) backend = v;
            else if (!strcmp(a, "--plugin-dir")) pdir = v;
            else if (!strcmp(a, "-j")) threads = atoi(v);
            else if (!strcmp(a, "--kv-type")) {
                if ((kv = generate_kv_type(v)) < 0) { fprintf(stderr, "picolm-logits: --kv-type must be f16 or q8_0\n"); return 2; }
            } else { fprintf(stderr, "picolm-logits: unknown option %s (see --help)\n", a); return 2; }
            continue;
        }
        if (npos == 3) { fprintf(stderr, "picolm-logits: too many arguments (see --help)\n"); return 2; }
        pos[npos++] = a;
    }
    if (npos != 3) { usage(stderr); return 2; }
    if (batch < 1) { fprintf(stderr, "picolm-logits: --batch must be >= 1\n"); return 2; }

    for (int i = 0; i < 2; i++)
        if (pl_same_file(pos[i], pos[2])) { /* writing would destroy an input */
            fprintf(stderr, "picolm-logits: %s and %s are the same file: refusing to overwrite the %s\n", pos[i], pos[2], i ? "tokens" : "model");
            return 2;
        }
    FILE *f = fopen(pos[1], "rb");
    if (!f) { perror(pos[1]); return 1; }
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (sz <= 0 || sz % 4) { fprintf(stderr, "picolm-logits: %s: not a non-empty int32 file\n", pos[1]); fclose(f); return 1; }
    int n = (int)(sz / 4);
    int32_t *toks = malloc((size_t)sz);
    if (!toks || fread(toks, 4, (size_t)n, f) != (size_t)n) { fprintf(stderr, "picolm-logits: cannot read %s\n", pos[1]); fclose(f); return 1; }
    fclose(f);

    char err[1024];
    engine_opts o = {.model_path = pos[0], .plugin_dir = pdir, .backend = backend, .threads = threads};
    engine *e = build_engine(&o, err, sizeof err);
    if (!e) { fprintf(stderr, "picolm-logits: %s\n", err); free(toks); return 1; }
    const int nv = e->model.hp.n_vocab;
    llama_ctx c;
    if (build_ctx(&c, &e->model, n, batch, kv, e->pool, err, sizeof err)) {
        fprintf(stderr, "picolm-logits: %s\n", err);
        free_engine(e);
        free(toks);
        return 1;
    }
    float *out = malloc((size_t)n * nv * sizeof(float));
    FILE *of = fopen(pos[2], "wb");
    int rc = 0;
    if (!out || !of) { fprintf(stderr, "picolm-logits: cannot write %s\n", pos[2]); rc = 1; }
    for (int i = 0; !rc && i < n; i += batch) {
        int nb = n - i < batch ? n - i : batch;
        if (llama_forward(&c, toks + i, nb, out + (size_t)i * nv, err, sizeof err)) {
            fprintf(stderr, "picolm-logits: %s\n", err);
            rc = 1;
        }
    }
    if (!rc && fwrite(out, sizeof(float), (size_t)n * nv, of) != (size_t)n * nv) { fprintf(stderr, "picolm-logits: write failed\n"); rc = 1; }
    if (of && fclose(of)) rc = 1;
    if (!rc) fprintf(stderr, "picolm-logits: %d positions x %d logits (backend %s)\n", n, nv, e->d.backend ? e->d.backend->name : "reference");
    free(out);
    free_ctx(&c);
    free_engine(e);
    free(toks);
    return rc;
}
