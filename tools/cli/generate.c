#include "generate.h"
#include "cli.h"
#include "tool.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void generate_peak_rss(size_t *kb) {
    FILE *s = fopen("/proc/self/status", "r");
    char line[256];
    *kb = 0;
    while (s && fgets(line, sizeof line, s)) sscanf(line, "VmHWM: %zu", kb);
    if (s) fclose(s);
}

void generate_rss(size_t *anon_kb, size_t *file_kb, size_t *peak_anon_kb) {
    size_t a = 0, f = 0, hwm = 0;
    FILE *s = fopen("/proc/self/status", "r");
    if (s) {
        char line[256];
        while (fgets(line, sizeof line, s)) {
            sscanf(line, "RssAnon: %zu", &a);
            sscanf(line, "RssFile: %zu", &f);
            sscanf(line, "VmHWM: %zu", &hwm);
        }
        fclose(s);
    }
    if (anon_kb) *anon_kb = a;
    if (file_kb) *file_kb = f;
    if (peak_anon_kb) *peak_anon_kb = hwm;
}

/* ---------------- streaming output ---------------- */

void out_init(out_stream *o, const picolm_config *cfg, FILE *f) {
    memset(o, 0, sizeof *o);
    o->cfg = cfg;
    o->f = f;
    o->last = '\n';
}

/* Write and flush (the text streams as it is made); a failure stops the
   stream and keeps errno for out_error. */
static int out_write(out_stream *o, const char *s, size_t n) {
    if (o->werr) return -1;
    errno = 0;
    if ((n && fwrite(s, 1, n, o->f) != n) || fflush(o->f)) {
        o->werr = errno ? errno : EIO;
        o->stopped = 1;
        if (o->werr == EPIPE) clearerr(o->f); /* the reader is gone: stop, but no error to report at exit */
        return -1;
    }
    if (n) o->last = s[n - 1];
    return 0;
}

int out_error(const out_stream *o, char *err, size_t errlen) {
    if (!o->werr || o->werr == EPIPE) return 0;
    return tool_fail(err, errlen, "cannot write the output: %s", strerror(o->werr));
}

/* Longest suffix of buf that is a proper prefix of some stop string. */
static size_t stop_prefix_len(const out_stream *o) {
    size_t best = 0;
    for (int s = 0; s < o->cfg->n_stops; s++) {
        const char *st = o->cfg->stops[s];
        size_t sl = strlen(st);
        for (size_t k = sl - 1; k > best && k >= 1; k--)
            if (k <= o->n && !memcmp(o->buf + o->n - k, st, k)) { best = k; break; }
    }
    return best;
}

int out_push(out_stream *o, const char *s, size_t n) {
    if (o->stopped) return 1;
    while (n > 0) {
        size_t take = sizeof o->buf - o->n;
        if (take > n) take = n;
        memcpy(o->buf + o->n, s, take);
        o->n += take;
        s += take;
        n -= take;
        for (int k = 0; k < o->cfg->n_stops; k++) {
            const char *st = o->cfg->stops[k];
            size_t sl = strlen(st);
            if (!sl || sl > o->n) continue;
            for (size_t i = 0; i + sl <= o->n; i++)
                if (!memcmp(o->buf + i, st, sl)) {
                    out_write(o, o->buf, i);
                    o->n = 0;
                    o->stopped = 1;
                    return 1;
                }
        }
        size_t hold = stop_prefix_len(o);
        size_t emit = picolm_utf8_complete(o->buf, o->n - hold);
        /* a full buffer must drain even if a (huge) partial match is pending */
        if (emit == 0 && o->n == sizeof o->buf) emit = o->n / 2;
        if (emit) {
            if (out_write(o, o->buf, emit)) return 1;
            memmove(o->buf, o->buf + emit, o->n - emit);
            o->n -= emit;
        }
    }
    return 0;
}

int out_flush(out_stream *o) {
    const int r = out_write(o, o->buf, o->stopped ? 0 : o->n);
    o->n = 0;
    return r;
}

/* ---------------- generation ---------------- */

int generate_tokenize(const picolm_model *m, const char *text, size_t len, int add_bos, int special, int32_t **out, int *n,
                      char *err, size_t errlen) {
    *out = NULL;
    *n = 0;
    if (len > ((size_t)256 << 20)) return tool_fail(err, errlen, "the prompt is too long (%zu bytes; the limit is 256 MiB)", len);
    /* 4 * len + 4 always fits (tokenizer.h) */
    const size_t cap = 4 * len + 4 + (add_bos ? 1 : 0);
    if (cap > INT32_MAX) return tool_fail(err, errlen, "the prompt is too long");
    int32_t *t = malloc(cap * sizeof *t);
    if (!t) return tool_fail(err, errlen, "out of memory");
    int k = picolm_tokenize(m, text ? text : "", len, add_bos, special, t, (int)cap);
    if (k < 0) {
        free(t);
        return tool_fail(err, errlen, "cannot tokenize the prompt");
    }
    *out = t;
    *n = k;
    return 0;
}

picolm_context *generate_context(picolm_model *m, const picolm_config *cfg, int n_ctx, char *err, size_t errlen) {
    const picolm_context_params p = {.n_ctx = n_ctx, .n_batch = cfg->batch, .kv_type = cfg->kv_type, .no_sampler = 1};
    return picolm_context_new(m, &p, err, errlen);
}

int generate_prefill(const picolm_config *cfg, picolm_context *c, const int32_t *toks, int n, gen_stats *st, char *err,
                     size_t errlen) {
    st->n_reused = 0;
    int fresh = 0; /* the cache file does not exist yet */
    picolm_seq *seq = picolm_context_seq(c);
    if (picolm_n_past(c) != 0) return tool_fail(err, errlen, "internal: prefill into a non-empty context");
    const char *path = cfg->cache_path;
    if (path[0]) {
        char msg[512];
        int common = 0;
        /* the longest prefix the file shares with toks, short of the last
           token (its logits start the reply); a recurrent state: its last
           checkpoint at or below */
        const int r = picolm_seq_load(seq, path, toks, n, &common, msg, sizeof msg);
        if (r == PICOLM_ERR_FOREIGN) /* someone else's file: never overwrite it */
            return tool_fail(err, errlen, "cache %s: %s; it is left as it was: remove it or name another file", path, msg);
        if (r < 0) {
            fprintf(stderr, "picolm: cache: ignoring %s: %s\n", path, msg);
        } else if (r == 1) {
            fresh = 1;
        } else {
            st->n_reused = common;
            fprintf(stderr, "picolm: cache: reused %d of %d prompt tokens\n", common, n);
        }
    }
    const int past = picolm_n_past(c);
    if (picolm_eval(c, toks + past, n - past, err, errlen)) return -1;
    if (path[0]) {
        char msg[1200];
        if (picolm_seq_save(seq, path, toks, n, msg, sizeof msg)) {
            fprintf(stderr, "picolm: cache: not saved: %s\n", msg);
            st->cache_unsaved = 1;
        } else if (fresh) {
            fprintf(stderr, "picolm: cache: created %s (%d prompt tokens)\n", path, n);
        } else if (cfg->verbose) {
            fprintf(stderr, "picolm: cache: saved %d tokens to %s\n", n, path);
        }
    }
    return 0;
}

int generate_decode(const picolm_model *m, const picolm_config *cfg, picolm_context *c, picolm_sampler *smp, out_stream *out,
                    const gen_decode_args *a, gen_stats *st, int *end, char *err, size_t errlen) {
    *end = GEN_END_BUDGET;
    /* -n < 0: until EOS or the context is full */
    const int budget = cfg->max_tokens < 0 ? INT32_MAX : cfg->max_tokens;
    for (int i = 0; i < budget; i++) {
        int32_t tok;
        /* tokens that can still be printed: the generation budget or the
           room left in the context, whichever is smaller (--json closes
           its document within it) */
        const int32_t room = picolm_n_ctx(c) - picolm_n_past(c) + 1;
        const int32_t left = budget - i < room ? budget - i : room;
        if (picolm_sampler_sample(smp, picolm_logits(c), left, &tok, err, errlen)) return -1;
        /* any end-of-generation token (EOS, <|eot_id|>, <|im_end|>, ...) */
        if (picolm_is_eog(m, tok) && (!cfg->ignore_eos || cli_grammar(cfg))) { *end = GEN_END_EOS; break; }
        int is_end = 0;
        for (int k = 0; a && k < a->n_end_ids; k++) is_end |= tok == a->end_ids[k];
        if (is_end) { *end = GEN_END_EOS; break; }
        picolm_sampler_accept(smp, tok);
        st->n_gen++;
        size_t pl;
        const char *piece = picolm_token_piece(m, tok, &pl);
        const int stopped = out_push(out, piece, pl);
        if (out->werr) { *end = GEN_END_STOP; return out_error(out, err, errlen); }
        if (picolm_n_past(c) >= picolm_n_ctx(c)) { *end = GEN_END_CTX; break; }
        if (stopped) *end = GEN_END_STOP;
        const int feed = i + 1 < budget ? !stopped : a && a->feed_last;
        if (feed) {
            if (picolm_eval(c, &tok, 1, err, errlen)) return -1;
            if (cli_model_fault())
                return tool_fail(err, errlen, "the model file %s was truncated while this ran: its weights are lost", cfg->model_path);
            if (a && a->hist && *a->n_hist < a->hist_cap) a->hist[(*a->n_hist)++] = tok;
        }
        if (stopped) break;
    }
    return 0;
}

int generate_n_ctx(const picolm_model *m, const picolm_config *cfg) {
    /* the model cannot attend further than it was trained to: clamp */
    const int train = picolm_n_ctx_train(m), n_ctx = cfg->context > 0 ? cfg->context : train;
    return n_ctx < train ? n_ctx : train;
}

void generate_print_stats(const picolm_model *m, const picolm_config *cfg, const gen_stats *st, int n_ctx) {
    const picolm_runtime *rt = picolm_model_runtime(m);
    const int nthr = picolm_runtime_threads(rt);
    const int kv = cfg->kv_type;
    const int n_pre = st->n_prompt - st->n_reused;
    fprintf(stderr, "picolm: load %.2f s | prefill %d token%s %.2f s (%.1f tok/s)", st->load_s, n_pre, n_pre == 1 ? "" : "s",
            st->prefill_s, n_pre / (st->prefill_s > 0 ? st->prefill_s : 1e-9));
    if (st->n_reused) fprintf(stderr, " + %d from the cache", st->n_reused);
    fprintf(stderr, " | generate %d token%s %.2f s (%.1f tok/s)\n", st->n_gen, st->n_gen == 1 ? "" : "s", st->decode_s,
            st->n_gen / (st->decode_s > 0 ? st->decode_s : 1e-9));
    fprintf(stderr, "picolm: backend %s, %d thread%s | memory: %.1f MB anonymous (KV %.1f MB), %.1f MB mapped from the model file; "
            "peak RSS %.1f MB\n",
            picolm_runtime_backend(rt), nthr, nthr == 1 ? "" : "s", st->rss_anon_kb / 1024.0,
            (double)picolm_kv_bytes_per_token(m, kv < 0 ? 0 : kv) * n_ctx / (1 << 20), st->rss_file_kb / 1024.0,
            st->rss_peak_kb / 1024.0);
}

int generate_run(picolm_model *m, const picolm_config *cfg, const char *prompt, size_t len, gen_stats *st, char *err, size_t errlen) {
    int rc = -1;
    int32_t *toks = NULL, *hist = NULL;
    picolm_sampler *smp = NULL;
    picolm_context *c = NULL;

    const int n_ctx = generate_n_ctx(m, cfg), train = picolm_n_ctx_train(m);

    /* 1. tokenize: special tokens only when asked (or in chat mode) */
    const int special = cfg->special >= 0 ? cfg->special : cfg->chat;
    const int add_bos = picolm_add_bos(m);
    int n;
    if (generate_tokenize(m, prompt, len, add_bos, special, &toks, &n, err, errlen)) return -1;
    if (n == 0) { tool_fail(err, errlen, "empty prompt and the model has no BOS token"); goto done; }

    /* 2. the prompt must leave room for at least one generated token */
    if (n >= n_ctx) {
        if (!cfg->truncate) {
            if (n_ctx < train)
                tool_fail(err, errlen, "the prompt is %d tokens, which does not fit in the context of %d (use -c to enlarge it, up to the "
                        "model's %d, or --truncate to keep the last tokens)", n, n_ctx, train);
            else
                tool_fail(err, errlen, "the prompt is %d tokens, which does not fit in the model's context of %d tokens, its limit, "
                        "which cannot be exceeded (use --truncate to keep the last tokens)", n, n_ctx);
            goto done;
        }
        int keep = n_ctx / 2 > 0 ? n_ctx / 2 : 1; /* leave half the context for the reply */
        int first = add_bos ? 1 : 0;
        memmove(toks + first, toks + n - (keep - first), (size_t)(keep - first) * sizeof *toks);
        fprintf(stderr, "picolm: prompt truncated from %d to its last %d tokens (--truncate)\n", n, keep);
        n = keep;
    }
    if (generate_check_memory(m, cfg, err, errlen)) goto done;
    if (!(c = generate_context(m, cfg, n_ctx, err, errlen))) goto done;
    if (cli_sampler_new(&smp, m, cfg, err, errlen)) goto done;
    if (cfg->verbose) {
        char desc[512];
        picolm_sampler_describe(smp, desc, sizeof desc);
        fprintf(stderr, "picolm: sampler: %s\n", desc);
    }

    /* 3. prefill (reusing a cached prefix with --cache) */
    double t = tool_now();
    if (generate_prefill(cfg, c, toks, n, st, err, errlen)) goto done;
    for (int i = 0; i < n; i++) picolm_sampler_accept(smp, toks[i]);
    st->prefill_s = tool_now() - t;
    st->n_prompt = n;

    /* 4. decode: sample, stream, feed back */
    int n_hist = 0;
    gen_decode_args a = {0};
    if (cfg->cache_path[0]) {
        /* remember the evaluated tokens so the cache can cover the reply too */
        hist = malloc((size_t)picolm_n_ctx(c) * sizeof *hist);
        if (!hist) { tool_fail(err, errlen, "out of memory"); goto done; }
        memcpy(hist, toks, (size_t)n * sizeof *hist);
        n_hist = n;
        a.hist = hist;
        a.n_hist = &n_hist;
        a.hist_cap = picolm_n_ctx(c);
    }
    out_stream out;
    out_init(&out, cfg, stdout);
    t = tool_now();
    int end;
    if (generate_decode(m, cfg, c, smp, &out, &a, st, &end, err, errlen)) goto done;
    /* on a terminal, end with a newline so the shell prompt does not land on
       the text; into a pipe or file, exactly the generated text */
    if (!out_flush(&out) && out.last != '\n' && isatty(fileno(stdout))) out_write(&out, "\n", 1);
    if (out_error(&out, err, errlen)) goto done;
    if (end == GEN_END_CTX) fprintf(stderr, "picolm: context full (%d tokens)\n", picolm_n_ctx(c));
    st->decode_s = tool_now() - t;
    /* extend the cache with the reply (unless the first save failed: no file) */
    if (hist && n_hist > n && n_hist == picolm_n_past(c) && !st->cache_unsaved && access(cfg->cache_path, F_OK) == 0) {
        char msg[1200];
        if (picolm_seq_save(picolm_context_seq(c), cfg->cache_path, hist, n_hist, msg, sizeof msg))
            fprintf(stderr, "picolm: cache: not saved: %s\n", msg);
    }
    generate_rss(&st->rss_anon_kb, &st->rss_file_kb, NULL);
    generate_peak_rss(&st->rss_peak_kb);
    generate_print_stats(m, cfg, st, n_ctx);
    rc = 0;
done:
    picolm_sampler_free(smp);
    picolm_context_free(c);
    free(toks);
    free(hist);
    return rc;
}

/* ---------------- memory plan (--fit, and the start-up check) ---------------- */

typedef struct mem_plan {
    double weights, kv_tok, bufs, runtime;
    double code;         /* libraries and plugins mapped from files (measured; 0: not) */
    int measured;        /* runtime is what the process holds, not an estimate */
    int n_ctx;
} mem_plan;

static double resident_bytes(const mem_plan *p, int n_ctx) { return p->kv_tok * n_ctx + p->bufs + p->runtime; }

/* Largest context whose resident set fits in ram bytes (capped at the model's). */
static long max_ctx_for(const mem_plan *p, double ram, int n_ctx_train) {
    long n = (long)((ram - p->bufs - p->runtime) / p->kv_tok);
    if (n > n_ctx_train) n = n_ctx_train;
    return n < 0 ? 0 : n;
}

/* The plan's per-token and fixed parts for a model, KV type, batch and thread count. */
static void fill_plan(const picolm_model *m, int kv, int batch, int n_threads, mem_plan *p) {
    const int train = picolm_n_ctx_train(m), nb = batch < train ? batch : train; /* a context caps the batch at its size */
    picolm_memory mem;
    picolm_model_memory(m, 0, nb, kv, n_threads, &mem);
    p->weights = (double)mem.weights;
    p->kv_tok = (double)mem.kv_per_token;
    p->bufs = (double)mem.batch;
    p->runtime = 4.0 * (1 << 20); /* code, stacks, plugin tables, allocator slack (estimate) */
}

/* Bytes mapped from files other than the model and resident now (the code
   and data of libraries and plugins). */
static double file_maps(const picolm_model *m) {
    double rss = 0;
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512];
    unsigned long long lo = 0, hi = 0, kb;
    int counted = 0;
    const void *base = NULL;
    size_t size = 0;
    picolm_model_mapping(m, &base, &size);
    const uintptr_t m0 = (uintptr_t)base, m1 = m0 + size;
    while (f && fgets(line, sizeof line, f)) {
        char path[256] = "";
        if (sscanf(line, "%llx-%llx %*s %*s %*s %*s %255s", &lo, &hi, path) >= 2 && strchr(line, '-') < strchr(line, ' ')) {
            counted = path[0] == '/' && !(lo < m1 && hi > m0);
            continue;
        }
        if (counted && sscanf(line, "Rss: %llu kB", &kb) == 1) rss += (double)kb * 1024;
    }
    if (f) fclose(f);
    return rss;
}

/* The plan with the runtime measured: what the loaded engine holds now (the
   tokenizer and its vocabulary tables, the plugins) with the sampler chain
   a run builds (vocabulary-sized candidate lists), plus the logits and the
   prompt's tokens; the code is what is mapped from files besides the model. */
static void make_plan(picolm_model *m, const picolm_config *cfg, mem_plan *p) {
    fill_plan(m, cfg->kv_type, cfg->batch, 0, p);
    p->n_ctx = generate_n_ctx(m, cfg);
    if (!picolm_model_vocab(m)) return;
    picolm_sampler *smp = NULL;
    char err[256];
    if (cli_sampler_new(&smp, m, cfg, err, sizeof err)) return;
    size_t anon_kb = 0;
    generate_rss(&anon_kb, NULL, NULL);
    picolm_sampler_free(smp);
    const double nv = picolm_n_vocab(m);
    p->runtime = (double)anon_kb * 1024 + nv * sizeof(float) + (double)p->n_ctx * 2 * sizeof(int32_t);
    p->code = file_maps(m);
    p->measured = 1;
}

double generate_resident_bytes(const picolm_model *m, int n_ctx, int kv_type, int batch, int n_threads) {
    mem_plan p;
    fill_plan(m, kv_type, batch, n_threads, &p);
    return resident_bytes(&p, n_ctx);
}

int generate_check_memory(picolm_model *m, const picolm_config *cfg, char *err, size_t errlen) {
    mem_plan p;
    make_plan(m, cfg, &p);
    const int train = picolm_n_ctx_train(m);
    const double MB = 1 << 20, need = resident_bytes(&p, p.n_ctx);
    const long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    const double phys = pages > 0 && psz > 0 ? (double)pages * psz : 0;
    if (phys > 0 && need > phys)
        return tool_fail(err, errlen, "context %d needs %.0f MB of KV cache and buffers, more than this machine's %.0f MB of RAM "
                    "(largest context that fits: %ld; or use --kv-type q8_0)", p.n_ctx, need / MB, phys / MB,
                    max_ctx_for(&p, phys, train));
    const double ram = (double)cfg->ram_bytes;
    if (ram > 0 && need > ram)
        fprintf(stderr, "picolm: warning: context %d will not fit in ram = %.0f MB: it needs %.1f MB resident (KV cache and buffers); "
                "largest context that fits: %ld (see --fit)\n", p.n_ctx, ram / MB, need / MB, max_ctx_for(&p, ram, train));
    else if (ram > 0 && need + p.weights > ram)
        fprintf(stderr, "picolm: note: the %.1f MB of weights will not stay cached beside %.1f MB resident in ram = %.0f MB: "
                "expect reads from storage every token\n", p.weights / MB, need / MB, ram / MB);
    return 0;
}

int generate_fit(picolm_model *m, const picolm_config *cfg, FILE *out) {
    picolm_model_info hp;
    picolm_model_describe(m, &hp);
    mem_plan p;
    make_plan(m, cfg, &p);
    const double MB = 1 << 20;
    const int n_ctx = p.n_ctx;
    fprintf(out, "model        %s\n", cfg->model_path);
    fprintf(out, "shape        dim %d, %d layers, %d heads (%d KV), head_dim %d, ffn %d, vocab %d\n", hp.n_embd, hp.n_layer, hp.n_head,
            hp.n_head_kv, hp.head_dim, hp.n_ff, hp.n_vocab);
    fprintf(out, "weights      %8.1f MB  file-backed mmap (pages come and go with the page cache)\n", p.weights / MB);
    fprintf(out, "KV cache     %8.1f MB  %s, %d tokens x %.1f KB\n", p.kv_tok * n_ctx / MB, cli_kv_type_name(cfg->kv_type), n_ctx, p.kv_tok / 1024);
    fprintf(out, "buffers      %8.1f MB  activations for a batch of %d\n", p.bufs / MB, cfg->batch);
    if (p.measured) fprintf(out, "runtime      %8.1f MB  measured: tokenizer and vocabulary tables, sampler, plugins, logits\n", p.runtime / MB);
    else fprintf(out, "runtime      %8.1f MB  (estimate)\n", p.runtime / MB);
    const double resident = resident_bytes(&p, n_ctx);
    fprintf(out, "resident     %8.1f MB  anonymous, must fit in RAM\n", resident / MB);
    if (p.measured)
        fprintf(out, "peak RSS     %8.1f MB  resident + the weights (every page is read each token) + %.1f MB of code\n",
                (resident + p.weights + p.code) / MB, p.code / MB);
    if (cfg->ram_bytes) {
        const double ram = (double)cfg->ram_bytes;
        const double head = ram - resident - p.weights - p.code;
        fprintf(out, "RAM          %8.1f MB\n", ram / MB);
        fprintf(out, "headroom     %8.1f MB  after the resident set and the whole model cached%s\n", head / MB,
                head < 0 ? " (negative: weights will be re-read from storage each token)" : "");
        const long max_ctx = max_ctx_for(&p, ram, hp.n_ctx_train);
        fprintf(out, "largest context that fits (resident set <= RAM): %ld tokens%s\n", max_ctx,
                max_ctx >= hp.n_ctx_train ? " (the model's maximum)" : "");
        fprintf(out, "largest context with the whole model also cached: %ld tokens\n", max_ctx_for(&p, ram - p.weights - p.code, hp.n_ctx_train));
        fprintf(out, "verdict: %s at context %d\n", resident > ram ? "DOES NOT FIT" : head < 0 ? "fits, but the weights will not stay cached" : "fits", n_ctx);
        if (resident > ram) return 1;
    }
    return 0;
}
