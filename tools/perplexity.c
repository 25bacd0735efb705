/*
 * picolm-perplexity: llama.cpp's perplexity method.  The whole text is
 * tokenized once (BOS first when the model adds one), cut into
 * non-overlapping windows of CTX tokens, each window is evaluated from an
 * empty cache with its first token replaced by BOS, and the second half of
 * each window is scored: -log softmax(logits[j])[token j+1].  Final figure:
 * PPL = exp(mean nll) +/- PPL * sqrt(var(nll) / (N - 1)), as llama.cpp.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "picolm/picolm.h"
#include "cli.h"
#include "tool.h"

static void usage(FILE *o) {
    fprintf(o,
            "usage: picolm-perplexity MODEL TEXT_FILE [options]\n"
            "Perplexity of MODEL on TEXT_FILE, computed as llama.cpp's llama-perplexity does\n"
            "(non-overlapping windows, each starting with BOS, second half of each window scored).\n"
            "options:\n"
            "  --batch N         tokens per forward pass (default: the window size)\n"
            "  --chunks N        score only the first N windows (default: all)\n"
            "  -h, --help        this text\n"
            "shared with picolm (INI keys from --config apply too); -c is the window size, default and\n"
            "at most the model's context length (a larger -c is clamped, with a warning):\n");
    config_common_usage(o);
    fprintf(o, "Output: \"[i]ppl,\" after each window (running figure), then \"PPL = X +/- Y\".\n"
               "Exit status: 0 success, 1 runtime failure, 2 usage error.\n");
}

/* -log softmax(logits)[tok], in double like llama.cpp's log_softmax */
static double nll_of(const float *logits, int n, int tok) {
    float mx = logits[0];
    for (int i = 1; i < n; i++) mx = logits[i] > mx ? logits[i] : mx;
    double sum = 0;
    for (int i = 0; i < n; i++) sum += exp((double)(logits[i] - mx));
    return log(sum) - (double)(logits[tok] - mx);
}

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n == cap) {
            char *q = realloc(buf, cap *= 2);
            if (!q) { free(buf); buf = NULL; break; }
            buf = q;
        }
        const size_t k = fread(buf + n, 1, cap - n, f);
        n += k;
        if (!k) break;
    }
    if (buf && ferror(f)) { free(buf); buf = NULL; }
    fclose(f);
    *len = n;
    return buf;
}

int main(int argc, char **argv) {
    picolm_log_set(picolm_log_stderr, NULL); /* the engine and plugins note things on stderr */
    const char *pos[2];
    int npos = 0, batch = 0, chunks = -1;
    picolm_config cfg;
    char err[2048];
    const char *T = "picolm-perplexity";
    if (config_tool_init(&cfg, argc, argv, err, sizeof err)) { fprintf(stderr, "%s: %s\n", T, err); return CLI_USAGE; }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return cli_close_stdout(T); }
        if (!strcmp(a, "--ctx")) argv[i] = "--context"; /* the old spelling */
        const int common = config_common_arg(&cfg, argc, argv, &i, err, sizeof err);
        if (common < 0) return cli_usage_error(T, err);
        if (common) continue;
        if (a[0] == '-' && a[1]) {
            int *dst = !strcmp(a, "--batch") || !strcmp(a, "-b") ? &batch : !strcmp(a, "--chunks") ? &chunks : NULL;
            if (!dst) { snprintf(err, sizeof err, "unknown option %s", a); return cli_usage_error(T, err); }
            if (i + 1 >= argc) { snprintf(err, sizeof err, "option %s needs a value (N)", a); return cli_usage_error(T, err); }
            char *end;
            const long v = strtol(argv[++i], &end, 10);
            if (!*argv[i] || *end || v < 0 || v > (1 << 24)) {
                snprintf(err, sizeof err, "option %s: '%s' is not a count", a, argv[i]);
                return cli_usage_error(T, err);
            }
            *dst = (int)v;
            continue;
        }
        if (npos == 2) { snprintf(err, sizeof err, "unexpected argument '%s' (MODEL and TEXT_FILE are already given)", a); return cli_usage_error(T, err); }
        pos[npos++] = a;
    }
    if (npos != 2) { usage(stderr); return CLI_USAGE; }
    const int kv = cfg.kv_type;

    size_t len = 0;
    char *text = read_file(pos[1], &len);
    if (!text) { fprintf(stderr, "%s: %s: %s\n", T, pos[1], strerror(errno)); return CLI_FAIL; }
    if (len && text[len - 1] == '\n') len--; /* llama.cpp's -f drops one trailing newline */

    int rc;
    picolm_model *m = cli_load_model(&cfg, T, pos[0], 1, &rc);
    if (!m) { free(text); return rc; }
    const int nv = picolm_n_vocab(m);
    const int ctx = cli_context(&cfg, T, picolm_n_ctx_train(m));
    if (ctx < 4) { fprintf(stderr, "%s: the window must hold at least 4 tokens\n", T); cli_free_model(m); free(text); return CLI_USAGE; }
    if (batch == 0 || batch > ctx) batch = ctx;

    const int add_bos = picolm_add_bos(m);
    const int32_t bos = picolm_token_bos(m);
    const int nthr = picolm_runtime_threads(picolm_model_runtime(m));
    int32_t *toks = NULL;
    float *logits = NULL;
    picolm_context *c = NULL;
    rc = CLI_FAIL;
    const double t_tok = tool_now();
    int nt = picolm_tokenize(m, text, len, add_bos, 0, NULL, 0);
    if (nt < 0 && nt != -1) {
        toks = malloc((size_t)(-nt) * sizeof *toks);
        if (toks) nt = picolm_tokenize(m, text, len, add_bos, 0, toks, -nt);
    } else if (nt >= 0) {
        toks = malloc(1 + (size_t)nt * sizeof *toks);
        if (toks) nt = picolm_tokenize(m, text, len, add_bos, 0, toks, nt);
    }
    if (!toks || nt < 0) { fprintf(stderr, "picolm-perplexity: cannot tokenize %s\n", pos[1]); goto done; }
    if (nt < 2 * ctx) {
        fprintf(stderr, "picolm-perplexity: %s has %d tokens; at least 2 x %d (the window) are needed\n", pos[1], nt, ctx);
        goto done;
    }
    int n_chunk = nt / ctx;
    if (chunks >= 0 && chunks < n_chunk) n_chunk = chunks;
    const int first = ctx / 2;
    fprintf(stderr, "picolm-perplexity: %d tokens (%.2f s to tokenize); %d windows of %d tokens, scoring the last %d of each; "
                    "batch %d, %d thread%s, backend %s\n",
            nt, tool_now() - t_tok, n_chunk, ctx, ctx - 1 - first, batch, nthr, nthr == 1 ? "" : "s",
            picolm_runtime_backend(picolm_model_runtime(m)));

    const picolm_context_params cp = {.n_ctx = ctx, .n_batch = batch, .kv_type = kv, .no_sampler = 1};
    if (!(c = picolm_context_new(m, &cp, err, sizeof err))) { fprintf(stderr, "picolm-perplexity: %s\n", err); goto done; }
    logits = malloc((size_t)ctx * nv * sizeof *logits);
    int32_t *win = malloc((size_t)ctx * sizeof *win);
    if (!logits || !win) { free(win); fprintf(stderr, "picolm-perplexity: out of memory\n"); goto done; }

    double nll = 0, nll2 = 0;
    long count = 0;
    const double t0 = tool_now();
    for (int k = 0; k < n_chunk; k++) {
        const int start = k * ctx;
        memcpy(win, toks + start, (size_t)ctx * sizeof *win);
        if (add_bos && bos >= 0) win[0] = bos;
        picolm_seq_truncate(picolm_context_seq(c), 0); /* each window starts from an empty cache */
        if (picolm_eval_logits(c, win, ctx, logits, err, sizeof err)) { /* in steps of the batch */
            fprintf(stderr, "picolm-perplexity: %s\n", err);
            free(win);
            goto done;
        }
        for (int j = first; j < ctx - 1; j++) {
            const double v = nll_of(logits + (size_t)j * nv, nv, toks[start + j + 1]);
            nll += v;
            nll2 += v * v;
            count++;
        }
        if (k == 0) fprintf(stderr, "picolm-perplexity: %.3f s per window, about %.1f s in all\n", tool_now() - t0, (tool_now() - t0) * n_chunk);
        printf("[%d]%.4f,", k + 1, exp(nll / count));
        fflush(stdout);
    }
    free(win);
    printf("\n");
    {
        const double mean = nll / count, ppl = exp(mean);
        double var = nll2 / count - mean * mean;
        const double unc = var > 0 && count > 1 ? sqrt(var / (count - 1)) * ppl : 0;
        printf("Final estimate: PPL = %.4f +/- %.5f\n", ppl, unc);
        fprintf(stderr, "picolm-perplexity: %ld tokens scored in %.2f s (%.0f tokens/s evaluated)\n", count, tool_now() - t0,
                (double)n_chunk * ctx / (tool_now() - t0));
    }
    rc = cli_close_stdout(T);
done:
    picolm_context_free(c);
    free(logits);
    free(toks);
    free(text);
    cli_free_model(m);
    return rc;
}
