/* picolm-logits: evaluate token ids and write every position's logits. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "picolm/picolm.h"
#include "cli.h"
#include "tool.h"

static void usage(FILE *o) {
    fprintf(o,
            "usage: picolm-logits MODEL TOKENS_I32_FILE OUT_F32_FILE [options]\n"
            "Evaluates the little-endian int32 token ids in TOKENS_I32_FILE and writes the\n"
            "float32 logits after every position (n_tokens x n_vocab, row-major) to OUT_F32_FILE.\n"
            "More tokens than the context (the model's, or -c) are refused.\n"
            "options:\n"
            "  --batch N         evaluate N tokens per forward pass (default 1: one position at a time)\n"
            "  --last K          write only the last K positions' logits (K x n_vocab)\n"
            "  -h, --help        this text\n"
            "shared with picolm (INI keys from --config apply too):\n");
    config_common_usage(o);
    fprintf(o, "Exit status: 0 success, 1 runtime failure, 2 usage error.\n");
}

/* A positive int option value, or -1. */
static int parse_count(const char *v) {
    char *end;
    long x = strtol(v, &end, 10);
    return *v && !*end && x >= 1 && x <= (1 << 24) ? (int)x : -1;
}

int main(int argc, char **argv) {
    picolm_log_set(picolm_log_stderr, NULL); /* the engine and plugins note things on stderr */
    const char *pos[3];
    int npos = 0, batch = 1, last = 0;
    picolm_config cfg;
    char err[2048];
    const char *T = "picolm-logits";
    if (config_tool_init(&cfg, argc, argv, err, sizeof err)) { fprintf(stderr, "%s: %s\n", T, err); return CLI_USAGE; }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return cli_close_stdout(T); }
        const int common = config_common_arg(&cfg, argc, argv, &i, err, sizeof err);
        if (common < 0) return cli_usage_error(T, err);
        if (common) continue;
        if (a[0] == '-' && a[1]) {
            int *dst = !strcmp(a, "--batch") ? &batch : !strcmp(a, "--last") ? &last : NULL;
            if (!dst) { snprintf(err, sizeof err, "unknown option %s", a); return cli_usage_error(T, err); }
            if (i + 1 >= argc) { snprintf(err, sizeof err, "option %s needs a value (N)", a); return cli_usage_error(T, err); }
            if ((*dst = parse_count(argv[++i])) < 0) {
                snprintf(err, sizeof err, "option %s: '%s' is not a count of at least 1", a, argv[i]);
                return cli_usage_error(T, err);
            }
            continue;
        }
        if (npos == 3) { snprintf(err, sizeof err, "unexpected argument '%s' (MODEL TOKENS OUT are already given)", a); return cli_usage_error(T, err); }
        pos[npos++] = a;
    }
    if (npos != 3) { usage(stderr); return CLI_USAGE; }
    const int kv = cfg.kv_type;

    for (int i = 0; i < 2; i++)
        if (tool_same_file(pos[i], pos[2])) { /* writing would destroy an input */
            fprintf(stderr, "picolm-logits: %s and %s are the same file: refusing to overwrite the %s\n", pos[i], pos[2], i ? "tokens" : "model");
            return CLI_USAGE;
        }
    FILE *f = fopen(pos[1], "rb");
    if (!f) { fprintf(stderr, "%s: %s: %s\n", T, pos[1], strerror(errno)); return CLI_FAIL; }
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (sz <= 0 || sz % 4) { fprintf(stderr, "%s: %s: not a non-empty int32 file\n", T, pos[1]); fclose(f); return CLI_FAIL; }
    int n = (int)(sz / 4);
    int32_t *toks = malloc((size_t)sz);
    if (!toks || fread(toks, 4, (size_t)n, f) != (size_t)n) { fprintf(stderr, "%s: cannot read %s\n", T, pos[1]); fclose(f); free(toks); return CLI_FAIL; }
    fclose(f);
    if (last > n) last = n;
    if (!last) last = n;

    int rc;
    picolm_model *m = cli_load_model(&cfg, T, pos[0], 0, &rc);
    if (!m) { free(toks); return rc; }
    const int nv = picolm_n_vocab(m);
    const int n_ctx = cli_context(&cfg, T, picolm_n_ctx_train(m));
    if (n > n_ctx) {
        fprintf(stderr, "%s: %s has %d tokens, more than the context of %d%s: positions past it cannot be evaluated\n", T, pos[1], n,
                n_ctx, n_ctx == picolm_n_ctx_train(m) ? " (the model's limit)" : "");
        cli_free_model(m);
        free(toks);
        return CLI_FAIL;
    }
    const picolm_context_params cp = {.n_ctx = n, .n_batch = batch, .kv_type = kv, .no_sampler = 1};
    picolm_context *c = picolm_context_new(m, &cp, err, sizeof err);
    if (!c) {
        fprintf(stderr, "%s: %s\n", T, err);
        cli_free_model(m);
        free(toks);
        return CLI_FAIL;
    }
    /* logits of every position, but only the last `last` are kept */
    const int first = n - last;
    float *out = malloc((size_t)last * nv * sizeof(float));
    float *scratch = first ? malloc((size_t)batch * nv * sizeof(float)) : NULL;
    FILE *of = fopen(pos[2], "wb");
    rc = CLI_OK;
    if (!out || (first && !scratch)) { fprintf(stderr, "%s: out of memory\n", T); rc = CLI_FAIL; }
    else if (!of) { fprintf(stderr, "%s: cannot write %s: %s\n", T, pos[2], strerror(errno)); rc = CLI_FAIL; }
    for (int i = 0; !rc && i < n; i += batch) {
        int nb = n - i < batch ? n - i : batch;
        /* a batch straddling `first` goes to scratch, then its kept rows are copied */
        float *dst = i >= first ? out + (size_t)(i - first) * nv : scratch;
        if (picolm_eval_logits(c, toks + i, nb, dst, err, sizeof err)) {
            fprintf(stderr, "%s: %s\n", T, err);
            rc = CLI_FAIL;
        } else if (i < first && i + nb > first) {
            memcpy(out, scratch + (size_t)(first - i) * nv, (size_t)(i + nb - first) * nv * sizeof(float));
        }
    }
    if (!rc && (fwrite(out, sizeof(float), (size_t)last * nv, of) != (size_t)last * nv || fflush(of))) {
        fprintf(stderr, "%s: cannot write %s: %s\n", T, pos[2], strerror(errno));
        rc = CLI_FAIL;
    }
    if (of && fclose(of) && !rc) { fprintf(stderr, "%s: cannot write %s: %s\n", T, pos[2], strerror(errno)); rc = CLI_FAIL; }
    if (!rc) fprintf(stderr, "%s: %d positions x %d logits (backend %s)\n", T, last, nv, picolm_runtime_backend(picolm_model_runtime(m)));
    free(out);
    free(scratch);
    picolm_context_free(c);
    cli_free_model(m);
    free(toks);
    return rc;
}
