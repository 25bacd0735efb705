/* Shared front-end behaviour of picolm and the tools; see cli.h. */
#include "cli.h"
#include "cpu.h"
#include "util.h"

#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int cli_usage_error(const char *tool, const char *msg) {
    fprintf(stderr, "%s: %s\n(see %s --help)\n", tool, msg, tool);
    return CLI_USAGE;
}

void cli_where(const picolm_config *c, const char *section, const char *key, const char *flag, char *buf, size_t n) {
    char w[1100];
    config_where(c, section, key, w, sizeof w);
    if (!config_is_set(c, section, key)) snprintf(buf, n, "%s", "");
    else if (!strcmp(w, "command line")) snprintf(buf, n, "%s: ", flag);
    else snprintf(buf, n, "%s: [%s] %s: ", w, section, key);
}

int cli_check_env(const char *tool) {
    /* a typo in the mask would silently test nothing */
    const char *mask = getenv("PICOLM_CPU_MASK");
    uint64_t m;
    char err[256];
    if (mask && *mask && cpu_parse_mask(mask, &m, err, sizeof err)) {
        fprintf(stderr, "%s: PICOLM_CPU_MASK: %s\n", tool, err);
        return CLI_USAGE;
    }
    return 0;
}

static const uint8_t *g_model_base;
static size_t g_model_len;
static volatile sig_atomic_t g_model_fault;

int cli_model_fault(void) { return g_model_fault; }

/* A fault inside the model's mapping (the file shrank under it): zeros over
   the mapping, and the faulting read runs again.  Any other SIGBUS is the
   default death. */
static void on_sigbus(int sig, siginfo_t *si, void *uc) {
    (void)uc;
    const uint8_t *a = si->si_addr;
    if (g_model_base && a >= g_model_base && a < g_model_base + g_model_len &&
        mmap((void *)g_model_base, g_model_len, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != MAP_FAILED) {
        g_model_fault = 1;
        return;
    }
    signal(sig, SIG_DFL);
}

static void guard_model(const engine *e) {
    const gguf_file *f = &e->model.gguf;
    if (!f->mapped || g_model_base) return;
    const long page = sysconf(_SC_PAGESIZE);
    g_model_base = f->base;
    g_model_len = (f->size + (size_t)page - 1) / (size_t)page * (size_t)page;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, NULL);
}

engine *cli_build_engine(const picolm_config *c, const char *tool, const char *model, int tokenizer, int *rc) {
    char err[2048];
    if ((*rc = cli_check_env(tool))) return NULL;
    *rc = CLI_FAIL;
    /* more threads than CPUs: they take turns, and each barrier waits for a
       descheduled one (prefill was 500x slower at -j 1000 on 2 CPUs) */
    const int cpus = cpu_count_online();
    if (c->threads > cpus)
        fprintf(stderr, "%s: warning: %d threads on %d online CPUs: the extra threads only wait for each other (much slower); "
                        "use -j %d or less\n", tool, c->threads, cpus, cpus);
    const gguf_limits lim = {c->max_metadata, c->max_tensors, c->max_string, c->max_array,
                             c->max_dim > INT64_MAX ? INT64_MAX : (int64_t)c->max_dim};
    engine_opts o = {.model_path = model, .plugin_dir = c->plugin_dir, .backend = c->backend, .threads = c->threads,
                     .tokenizer = tokenizer, .limits = &lim, .verbose = c->verbose};
    engine *e = build_engine(&o, err, sizeof err);
    if (e) {
        guard_model(e);
        *rc = CLI_OK;
        return e;
    }
    /* the registry's two messages about a backend by name (plugins.c) */
    if (strcmp(c->backend, "auto") && (!strncmp(err, "no backend named", 16) || !strncmp(err, "backend '", 9))) {
        char where[1200];
        cli_where(c, "engine", "backend", "--backend", where, sizeof where);
        fprintf(stderr, "%s: %s%s\n", tool, where, err);
        *rc = CLI_USAGE;
        return NULL;
    }
    fprintf(stderr, "%s: %s\n", tool, err);
    return NULL;
}

int cli_context(const picolm_config *c, const char *tool, int n_ctx_train) {
    const int want = c->context > 0 ? c->context : n_ctx_train;
    if (want <= n_ctx_train) return want;
    if (config_is_set(c, "engine", "context"))
        fprintf(stderr, "%s: warning: context %d is beyond the model's limit of %d tokens, which cannot be exceeded: using %d\n", tool,
                want, n_ctx_train, n_ctx_train);
    else if (c->verbose)
        fprintf(stderr, "%s: context %d clamped to the model's %d\n", tool, want, n_ctx_train);
    return n_ctx_train;
}

int cli_close_stdout(const char *tool) {
    errno = 0;
    int bad = ferror(stdout) | fflush(stdout);
    int e = errno;
    if (fclose(stdout) && !bad) bad = 1, e = errno;
    /* a reader that closed the pipe wanted no more: not an error to report */
    if (!bad || e == EPIPE) return CLI_OK;
    fprintf(stderr, "%s: cannot write the output: %s\n", tool, e ? strerror(e) : "write error");
    return CLI_FAIL;
}

/* ---- the sampler chain from the configuration ---- */

static void add_name(char *chain, size_t n, const char *name) {
    const size_t used = strlen(chain);
    snprintf(chain + used, n - used, "%s%s", used ? "," : "", name);
}

const char *cli_grammar(const picolm_config *c) { return c->json_schema[0] ? "json_schema" : c->json_mode ? "json" : NULL; }

/* c->sampler_chain with "auto" (or nothing) read as the default chain;
   --json-schema (or --json) puts its grammar first unless the chain names
   it.  The stages the settings switch off are left out by the core
   (picolm_sampler_vtable.neutral). */
static void chain_from_config(const picolm_config *c, const char *grammar, char *chain, size_t n) {
    char buf[sizeof c->sampler_chain], names[sizeof c->sampler_chain + sizeof PICOLM_DEFAULT_CHAIN] = "";
    snprintf(buf, sizeof buf, "%s", c->sampler_chain);
    int named = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (isspace((unsigned char)*tok)) tok++;
        char *e = tok + strlen(tok);
        while (e > tok && isspace((unsigned char)e[-1])) *--e = 0;
        if (!*tok) continue;
        add_name(names, sizeof names, strcmp(tok, "auto") ? tok : PICOLM_DEFAULT_CHAIN);
        named |= grammar && !strcmp(tok, grammar);
    }
    chain[0] = 0;
    if (grammar && !named) add_name(chain, n, grammar);
    add_name(chain, n, names[0] ? names : PICOLM_DEFAULT_CHAIN);
}

char *cli_read_all(FILE *f, size_t *len) {
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    if (!buf) return NULL;
    for (;;) {
        if (n + 1024 > cap) {
            if (cap > ((size_t)64 << 20)) { free(buf); errno = EFBIG; return NULL; }
            char *nb = realloc(buf, cap * 2);
            if (!nb) { free(buf); return NULL; }
            buf = nb;
            cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - n - 1, f);
        n += r;
        if (r == 0) break;
    }
    if (ferror(f)) { free(buf); errno = errno ? errno : EIO; return NULL; }
    buf[n] = 0;
    *len = n;
    return buf;
}

char *cli_schema_text(const picolm_config *c, char *err, size_t errlen) {
    const char *v = c->json_schema;
    while (isspace((unsigned char)*v)) v++;
    if (*v == '{') return strdup(v);
    errno = 0;
    FILE *f = fopen(c->json_schema, "rb");
    size_t len;
    char *text = f ? cli_read_all(f, &len) : NULL;
    if (!text) {
        char where[1200];
        cli_where(c, "generate", "json_schema", "--json-schema", where, sizeof where);
        snprintf(err, errlen, "%scannot read the schema file '%s': %s", where, c->json_schema, strerror(errno ? errno : ENOMEM));
    }
    if (f) fclose(f);
    return text;
}

int cli_sampling_build(sampling **out, const pl_registry *reg, const picolm_config *c, const picolm_vocab *vocab,
                       char *err, size_t errlen) {
    return cli_sampling_build_with(out, reg, c, vocab, NULL, 0, err, errlen);
}

int cli_sampling_build_with(sampling **out, const pl_registry *reg, const picolm_config *c, const picolm_vocab *vocab,
                            const picolm_param *extra, int n_extra, char *err, size_t errlen) {
    /* The typed keys go last with their parsed values (so a flag and an INI
       line that spell one number differently give the samplers the same
       bits); the other [sampler] keys as written. */
    static const char *const typed_keys[] = {"temperature", "top_p", "top_k", "min_p", "repeat_penalty",
                                             "freq_penalty", "presence_penalty", "penalty_last_n"};
    enum { N_TYPED = sizeof typed_keys / sizeof typed_keys[0] };
    char typed[N_TYPED][32], where[PICOLM_MAX_PARAMS][300], chain[sizeof c->sampler_chain + sizeof PICOLM_DEFAULT_CHAIN + 8];
    snprintf(typed[0], 32, "%.9g", (double)c->temperature);
    snprintf(typed[1], 32, "%.9g", (double)c->top_p);
    snprintf(typed[2], 32, "%d", c->top_k);
    snprintf(typed[3], 32, "%.9g", (double)c->min_p);
    snprintf(typed[4], 32, "%.9g", (double)c->repeat_penalty);
    snprintf(typed[5], 32, "%.9g", (double)c->freq_penalty);
    snprintf(typed[6], 32, "%.9g", (double)c->presence_penalty);
    snprintf(typed[7], 32, "%d", c->penalty_last_n);
    sampling_param *p = malloc((PICOLM_MAX_PARAMS + N_TYPED + 1 + (size_t)n_extra) * sizeof *p);
    if (!p) return pl_fail(err, errlen, "out of memory");
    int np = 0;
    for (int i = 0; i < c->n_params && i < PICOLM_MAX_PARAMS; i++) {
        int dup = !strcmp(c->params[i].key, "chain"); /* the chain itself, not a sampler's */
        for (int k = 0; k < N_TYPED; k++) dup |= !strcmp(c->params[i].key, typed_keys[k]);
        if (dup) continue;
        config_param_where(&c->params[i], where[np], sizeof where[np]);
        p[np] = (sampling_param){c->params[i].key, c->params[i].value, where[np]};
        np++;
    }
    char twhere[N_TYPED][300];
    for (int k = 0; k < N_TYPED; k++) {
        config_where(c, "sampler", typed_keys[k], twhere[k], sizeof twhere[k]);
        p[np++] = (sampling_param){typed_keys[k], typed[k], twhere[k]};
    }
    char *schema = NULL, swhere[1200];
    const char *grammar = cli_grammar(c);
    if (c->json_schema[0]) { /* the schema's text, last (it wins over a [sampler] json_schema) */
        if (!(schema = cli_schema_text(c, err, errlen))) { free(p); return -1; }
        config_where(c, "generate", "json_schema", swhere, sizeof swhere);
        p[np++] = (sampling_param){"json_schema", schema, swhere};
    }
    for (int i = 0; i < n_extra; i++) { /* a request's, last of all; a schema among them puts its stage first */
        p[np++] = (sampling_param){extra[i].key, extra[i].value, "request"};
        if (!strcmp(extra[i].key, "json_schema")) grammar = "json_schema";
    }
    chain_from_config(c, grammar, chain, sizeof chain);
    const sampling_settings set = {.chain = chain, .params = p, .n_params = np, .seed = c->seed};
    const int rc = sampling_build(out, reg, &set, vocab, err, errlen);
    free(schema);
    free(p);
    return rc;
}

void cli_print_sampler_keys(const picolm_config *c, FILE *out, int as_ini) {
    pl_registry reg;
    char err[512];
    memset(&reg, 0, sizeof reg);
    if (registry_load(&reg, c->plugin_dir, err, sizeof err)) {
        registry_free(&reg);
        return;
    }
    int first = 1;
    for (int i = 0; i < reg.n; i++) {
        const pl_plugin *p = &reg.items[i];
        if (!p->ok || p->kind != PICOLM_KIND_SAMPLER) continue;
        const picolm_sampler_vtable *vt = p->desc->vtable;
        for (const picolm_param_desc *d = vt->params; d && d->key; d++) {
            if (first)
                fprintf(out, as_ini ? "; the keys of the loaded sampler plugins (sampler: key = default, range)\n"
                                    : "\n[sampler] keys of the loaded sampler plugins (INI [sampler], or --param KEY=VALUE):\n");
            first = 0;
            const char *ty = d->type == PICOLM_PARAM_INT ? "integer" : "number";
            if (d->type == PICOLM_PARAM_STRING) {
                if (as_ini) fprintf(out, "; %s: %s = %s, text\n", p->name, d->key, d->def);
                else fprintf(out, "  %-18s %s (%s: text%s%s)\n", d->key, d->help ? d->help : "", p->name, d->def[0] ? ", default " : "", d->def);
            } else if (as_ini) {
                fprintf(out, "; %s: %s = %s, %s in [%.10g, %.10g]\n", p->name, d->key, d->def, ty, d->lo, d->hi);
            } else {
                fprintf(out, "  %-18s %s (%s: %s in [%.10g, %.10g], default %s)\n", d->key, d->help ? d->help : "", p->name, ty, d->lo,
                        d->hi, d->def);
            }
        }
    }
    registry_free(&reg);
}
