/*
 * picolm-perplexity: llama.cpp's perplexity method.  The whole text is
 * tokenized once (BOS first when the model adds one), cut into
 * non-overlapping windows of CTX tokens, each window is evaluated from an
 * empty cache with its first token replaced by BOS, and the second half of
 * each window is scored: -log softmax(logits[j])[token j+1].  Final figure:
 * PPL = exp(mean nll) +/- PPL * sqrt(var(nll) / (N - 1)), as llama.cpp.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine.h"
#include "generate.h"
#include "util.h"

static void usage(FILE *o) {
    fprintf(o,
            "usage: picolm-perplexity MODEL TEXT_FILE [options]\n"
            "Perplexity of MODEL on TEXT_FILE, computed as llama.cpp's llama-perplexity does\n"
            "(non-overlapping windows, each starting with BOS, second half of each window scored).\n"
            "options:\n"
            "  -c, --ctx N       window size in tokens (default: the model's context length)\n"
            "  --batch N         tokens per forward pass (default: the window size)\n"
            "  --chunks N        score only the first N windows (default: all)\n"
            "  -j N              threads (default: all CPUs)\n"
            "  --backend NAME    backend plugin (default auto)\n"
            "  --plugin-dir DIR  extra plugin directory searched first\n"
            "  --kv-type T       f16 (default) or q8_0\n"
            "  -h, --help        this text\n"
            "Output: \"[i]ppl,\" after each window (running figure), then \"PPL = X +/- Y\".\n");
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
    const char *pos[2];
    int npos = 0, ctx = 0, batch = 0, threads = 0, chunks = -1, kv = KV_F16;
    const char *backend = "auto", *pdir = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        if (a[0] == '-' && a[1]) {
            if (i + 1 >= argc) { fprintf(stderr, "picolm-perplexity: %s needs a value\n", a); return 2; }
            const char *v = argv[++i];
            if (!strcmp(a, "-c") || !strcmp(a, "--ctx")) ctx = atoi(v);
            else if (!strcmp(a, "--batch") || !strcmp(a, "-b")) batch = atoi(v);
            else if (!strcmp(a, "--chunks")) chunks = atoi(v);
            else if (!strcmp(a, "-j") || !strcmp(a, "--threads")) threads = atoi(v);
            else if (!strcmp(a, "--backend")) backend = v;
            else if (!strcmp(a, "--plugin-dir")) pdir = v;
            else if (!strcmp(a, "--kv-type")) {
                if ((kv = generate_kv_type(v)) < 0) { fprintf(stderr, "picolm-perplexity: --kv-type must be f16 or q8_0\n"); return 2; }
            } else { fprintf(stderr, "picolm-perplexity: unknown option %s (see --help)\n", a); return 2; }
            continue;
        }
        if (npos == 2) { fprintf(stderr, "picolm-perplexity: too many arguments (see --help)\n"); return 2; }
        pos[npos++] = a;
    }
    if (npos != 2) { usage(stderr); return 2; }
    if (ctx < 0 || batch < 0 || threads < 0) { fprintf(stderr, "picolm-perplexity: -c, --batch and -j must be positive\n"); return 2; }

    size_t len = 0;
    char *text = read_file(pos[1], &len);
    if (!text) { perror(pos[1]); return 1; }
    if (len && text[len - 1] == '\n') len--; /* llama.cpp's -f drops one trailing newline */

    char err[1024];
    engine_opts o = {.model_path = pos[0], .plugin_dir = pdir, .backend = backend, .threads = threads, .tokenizer = 1};
    engine *e = build_engine(&o, err, sizeof err);
    if (!e) { fprintf(stderr, "picolm-perplexity: %s\n", err); free(text); return 1; }
    const int nv = e->model.hp.n_vocab;
    if (ctx == 0) ctx = e->model.hp.n_ctx_train;
    if (ctx < 4) { fprintf(stderr, "picolm-perplexity: the window must hold at least 4 tokens\n"); free_engine(e); free(text); return 2; }
    if (batch == 0 || batch > ctx) batch = ctx;

    const int add_bos = tokenizer_add_bos(e->tok);
    const int32_t bos = tokenizer_bos(e->tok);
    int32_t *toks = NULL;
    float *logits = NULL;
    llama_ctx c;
    int have_ctx = 0, rc = 1;
    const double t_tok = pl_now();
    int nt = tokenizer_encode(e->tok, text, len, add_bos, 0, NULL, 0);
    if (nt < 0 && nt != -1) {
        toks = malloc((size_t)(-nt) * sizeof *toks);
        if (toks) nt = tokenizer_encode(e->tok, text, len, add_bos, 0, toks, -nt);
    } else if (nt >= 0) {
        toks = malloc(1 + (size_t)nt * sizeof *toks);
        if (toks) nt = tokenizer_encode(e->tok, text, len, add_bos, 0, toks, nt);
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
                    "batch %d, %d threads, backend %s\n",
            nt, pl_now() - t_tok, n_chunk, ctx, ctx - 1 - first, batch, threadpool_size(e->pool),
            e->d.backend ? e->d.backend->name : "reference");

    if (build_ctx(&c, &e->model, ctx, batch, kv, e->pool, err, sizeof err)) { fprintf(stderr, "picolm-perplexity: %s\n", err); goto done; }
    have_ctx = 1;
    logits = malloc((size_t)ctx * nv * sizeof *logits);
    int32_t *win = malloc((size_t)ctx * sizeof *win);
    if (!logits || !win) { free(win); fprintf(stderr, "picolm-perplexity: out of memory\n"); goto done; }

    double nll = 0, nll2 = 0;
    long count = 0;
    const double t0 = pl_now();
    for (int k = 0; k < n_chunk; k++) {
        const int start = k * ctx;
        memcpy(win, toks + start, (size_t)ctx * sizeof *win);
        if (add_bos && bos >= 0) win[0] = bos;
        c.n_past = 0; /* each window starts from an empty cache */
        for (int b = 0; b < ctx; b += batch) {
            const int nb = ctx - b < batch ? ctx - b : batch;
            if (llama_forward(&c, win + b, nb, logits + (size_t)b * nv, err, sizeof err)) {
                fprintf(stderr, "picolm-perplexity: %s\n", err);
                free(win);
                goto done;
            }
        }
        for (int j = first; j < ctx - 1; j++) {
            const double v = nll_of(logits + (size_t)j * nv, nv, toks[start + j + 1]);
            nll += v;
            nll2 += v * v;
            count++;
        }
        if (k == 0) fprintf(stderr, "picolm-perplexity: %.3f s per window, about %.1f s in all\n", pl_now() - t0, (pl_now() - t0) * n_chunk);
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
        fprintf(stderr, "picolm-perplexity: %ld tokens scored in %.2f s (%.0f tokens/s evaluated)\n", count, pl_now() - t0,
                (double)n_chunk * ctx / (pl_now() - t0));
    }
    rc = 0;
done:
    if (have_ctx) free_ctx(&c);
    free(logits);
    free(toks);
    free(text);
    free_engine(e);
    return rc;
}
