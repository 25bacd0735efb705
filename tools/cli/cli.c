/* Shared front-end behaviour of picolm and the tools; see cli.h. */
#include "cli.h"
#include "tool.h"

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
    char err[256];
    if (picolm_cpu_mask_check(err, sizeof err)) {
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

static void guard_model(const picolm_model *m) {
    const void *base;
    size_t size;
    if (picolm_model_mapping(m, &base, &size) || g_model_base) return;
    const long page = sysconf(_SC_PAGESIZE);
    g_model_base = base;
    g_model_len = (size + (size_t)page - 1) / (size_t)page * (size_t)page;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, NULL);
}

picolm_runtime *cli_runtime(const picolm_config *c, const char *tool, int *rc) {
    char err[2048];
    if ((*rc = cli_check_env(tool))) return NULL;
    /* more threads than CPUs: they take turns, and each barrier waits for a
       descheduled one (prefill was 500x slower at -j 1000 on 2 CPUs) */
    const int cpus = picolm_cpu_count();
    if (c->threads > cpus)
        fprintf(stderr, "%s: warning: %d threads on %d online CPUs: the extra threads only wait for each other (much slower); "
                        "use -j %d or less\n", tool, c->threads, cpus, cpus);
    const picolm_runtime_params p = {.plugin_dir = c->plugin_dir, .backend = c->backend, .threads = c->threads, .verbose = c->verbose};
    int code;
    picolm_runtime *rt = picolm_runtime_new(&p, &code, err, sizeof err);
    *rc = rt ? CLI_OK : code == PICOLM_ERR_USAGE ? CLI_USAGE : CLI_FAIL;
    if (rt) return rt;
    char where[1200] = "";
    if (*rc == CLI_USAGE) cli_where(c, "engine", "backend", "--backend", where, sizeof where);
    fprintf(stderr, "%s: %s%s\n", tool, where, err);
    return NULL;
}

picolm_model *cli_load_model(const picolm_config *c, const char *tool, const char *path, int text, int *rc) {
    char err[2048];
    picolm_runtime *rt = cli_runtime(c, tool, rc);
    if (!rt) return NULL;
    const picolm_limits lim = {c->max_metadata, c->max_tensors, c->max_string, c->max_array, c->max_dim};
    const picolm_model_params p = {.path = path, .runtime = rt, .limits = &lim, .weights_only = !text};
    picolm_model *m = picolm_model_load(&p, err, sizeof err);
    if (!m) {
        fprintf(stderr, "%s: %s\n", tool, err);
        picolm_runtime_free(rt);
        *rc = CLI_FAIL;
        return NULL;
    }
    guard_model(m);
    return m;
}

void cli_free_model(picolm_model *m) {
    if (!m) return;
    picolm_runtime *rt = picolm_model_runtime(m);
    picolm_model_free(m);
    picolm_runtime_free(rt);
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

int cli_sampler_spec_of(const picolm_config *c, const picolm_param *extra, int n_extra, cli_sampler_spec *s, char *err,
                        size_t errlen) {
    /* The typed keys go last with their parsed values (so a flag and an INI
       line that spell one number differently give the samplers the same
       bits); the other [sampler] keys as written. */
    static const char *const typed_keys[CLI_TYPED_KEYS] = {"temperature", "top_p", "top_k", "min_p", "repeat_penalty",
                                                           "freq_penalty", "presence_penalty", "penalty_last_n"};
    snprintf(s->typed[0], 32, "%.9g", (double)c->temperature);
    snprintf(s->typed[1], 32, "%.9g", (double)c->top_p);
    snprintf(s->typed[2], 32, "%d", c->top_k);
    snprintf(s->typed[3], 32, "%.9g", (double)c->min_p);
    snprintf(s->typed[4], 32, "%.9g", (double)c->repeat_penalty);
    snprintf(s->typed[5], 32, "%.9g", (double)c->freq_penalty);
    snprintf(s->typed[6], 32, "%.9g", (double)c->presence_penalty);
    snprintf(s->typed[7], 32, "%d", c->penalty_last_n);
    int np = 0;
    for (int i = 0; i < c->n_params && i < PICOLM_MAX_PARAMS; i++) {
        int dup = !strcmp(c->params[i].key, "chain"); /* the chain itself, not a sampler's */
        for (int k = 0; k < CLI_TYPED_KEYS; k++) dup |= !strcmp(c->params[i].key, typed_keys[k]);
        if (dup) continue;
        config_param_where(&c->params[i], s->places[np], sizeof s->places[np]);
        s->kv[np++] = (picolm_param){c->params[i].key, c->params[i].value};
    }
    for (int k = 0; k < CLI_TYPED_KEYS; k++) {
        config_where(c, "sampler", typed_keys[k], s->places[np], sizeof s->places[np]);
        s->kv[np++] = (picolm_param){typed_keys[k], s->typed[k]};
    }
    s->schema = NULL;
    const char *grammar = cli_grammar(c);
    if (c->json_schema[0]) { /* the schema's text, last (it wins over a [sampler] json_schema) */
        if (!(s->schema = cli_schema_text(c, err, errlen))) return -1;
        config_where(c, "generate", "json_schema", s->places[np], sizeof s->places[np]);
        s->kv[np++] = (picolm_param){"json_schema", s->schema};
    }
    if (n_extra > CLI_EXTRA_KEYS) return tool_fail(err, errlen, "internal: %d extra sampler keys (at most %d)", n_extra, CLI_EXTRA_KEYS);
    for (int i = 0; i < n_extra; i++) { /* a request's, last of all; a schema among them puts its stage first */
        snprintf(s->places[np], sizeof s->places[np], "request");
        s->kv[np++] = extra[i];
        if (!strcmp(extra[i].key, "json_schema")) grammar = "json_schema";
    }
    for (int i = 0; i < np; i++) s->where[i] = s->places[i];
    chain_from_config(c, grammar, s->chain, sizeof s->chain);
    s->p = (picolm_sampler_params){.chain = s->chain, .params = s->kv, .n_params = np, .seed = c->seed, .where = s->where};
    return 0;
}

void cli_sampler_spec_free(cli_sampler_spec *s) {
    free(s->schema);
    s->schema = NULL;
}

int cli_sampler_new(picolm_sampler **out, picolm_model *m, const picolm_config *c, char *err, size_t errlen) {
    return cli_sampler_new_with(out, m, c, NULL, 0, err, errlen);
}

int cli_sampler_new_with(picolm_sampler **out, picolm_model *m, const picolm_config *c, const picolm_param *extra, int n_extra,
                         char *err, size_t errlen) {
    cli_sampler_spec *s = malloc(sizeof *s);
    *out = NULL;
    if (!s) return tool_fail(err, errlen, "out of memory");
    if (!cli_sampler_spec_of(c, extra, n_extra, s, err, errlen)) *out = picolm_sampler_new(m, &s->p, err, errlen);
    cli_sampler_spec_free(s);
    free(s);
    return *out ? 0 : -1;
}

const char *cli_kv_type_name(int kv_type) { return kv_type == PICOLM_KV_Q8_0 ? "q8_0" : "f16"; }

void cli_print_sampler_keys(const picolm_config *c, FILE *out, int as_ini) {
    const picolm_runtime_params rp = {.plugin_dir = c->plugin_dir, .backend = "reference", .threads = 1};
    char err[512];
    picolm_runtime *rt = picolm_runtime_new(&rp, NULL, err, sizeof err);
    const char *name;
    for (int i = 0, first = 1; rt; i++) {
        const picolm_param_desc *d = picolm_runtime_sampler_param(rt, i, &name);
        if (!d) break;
        if (first)
            fprintf(out, as_ini ? "; the keys of the loaded sampler plugins (sampler: key = default, range)\n"
                                : "\n[sampler] keys of the loaded sampler plugins (INI [sampler], or --param KEY=VALUE):\n");
        first = 0;
        const char *ty = d->type == PICOLM_PARAM_INT ? "integer" : "number";
        if (d->type == PICOLM_PARAM_STRING) {
            if (as_ini) fprintf(out, "; %s: %s = %s, text\n", name, d->key, d->def);
            else fprintf(out, "  %-18s %s (%s: text%s%s)\n", d->key, d->help ? d->help : "", name, d->def[0] ? ", default " : "", d->def);
        } else if (as_ini) {
            fprintf(out, "; %s: %s = %s, %s in [%.10g, %.10g]\n", name, d->key, d->def, ty, d->lo, d->hi);
        } else {
            fprintf(out, "  %-18s %s (%s: %s in [%.10g, %.10g], default %s)\n", d->key, d->help ? d->help : "", name, ty, d->lo,
                    d->hi, d->def);
        }
    }
    picolm_runtime_free(rt);
}
