/* Shared front-end behaviour of picolm and the tools; see cli.h. */
#include "cli.h"
#include "cpu.h"
#include "util.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    if (e) { *rc = CLI_OK; return e; }
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
