/* picolm: command-line generation (a drop-in for picoLM's CLI). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "chat.h"
#include "util.h"
#include "config.h"
#include "engine.h"
#include "generate.h"
#include "sampling.h"

#define PICOLM_VERSION "0.1.0"

/* Read all of stdin (the prompt when -p is absent). */
static char *read_stdin(size_t *len) {
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
        size_t r = fread(buf + n, 1, cap - n - 1, stdin);
        n += r;
        if (r == 0) break;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

/* --chat: one reply to the whole prompt, or a conversation on a terminal. */
static int run_chat(engine *e, const picolm_config *cfg, int interactive, const char *msg, size_t len, double load_s) {
    char err[2048];
    chat_session s;
    if (chat_open(&s, e, cfg, err, sizeof err)) { fprintf(stderr, "picolm: %s\n", err); return 1; }
    int rc;
    if (interactive) {
        rc = chat_interactive(&s, stdin, stdout, stderr) ? 1 : 0;
    } else {
        /* a trailing newline of piped input is not part of the message */
        while (len && (msg[len - 1] == '\n' || msg[len - 1] == '\r')) len--;
        int r = chat_turn(&s, msg, len, stdout, err, sizeof err);
        if (r) fprintf(stderr, "picolm: %s\n", err);
        rc = r ? 1 : 0;
        if (!r) {
            fputc('\n', stdout);
            fflush(stdout);
            if (s.last_end == GEN_END_CTX) fprintf(stderr, "picolm: context full (%d tokens)\n", s.c.n_ctx);
            s.st.load_s = load_s;
            generate_rss(&s.st.rss_anon_kb, &s.st.rss_file_kb, NULL);
            generate_print_stats(e, cfg, &s.st, s.c.n_ctx);
        }
    }
    chat_close(&s);
    return rc;
}

int main(int argc, char **argv) {
    picolm_config cfg;
    char err[2048];
    config_defaults(&cfg);
    const char *ini = config_find_ini(argc, argv);
    if (ini && config_load_ini(&cfg, ini, err, sizeof err)) { fprintf(stderr, "picolm: %s\n", err); return 2; }
    if (config_parse_args(&cfg, argc, argv, err, sizeof err)) {
        fprintf(stderr, "picolm: %s\n(see picolm --help)\n", err);
        return 2;
    }
    if (cfg.show_help) { config_usage(argv[0], stdout); return 0; }
    if (cfg.show_version) { printf("picolm %s (plugin ABI %u)\n", PICOLM_VERSION, PICOLM_ABI_VERSION); return 0; }
    if (cfg.dump_config) { config_dump(&cfg, stdout); return 0; }

    if (cfg.chat && strcasecmp(cfg.chat_template, "auto") && chat_kind_from_name(cfg.chat_template) < 0) {
        fprintf(stderr, "picolm: unknown chat template '%s' (known: auto, " CHAT_KIND_NAMES ")\n(see picolm --help)\n", cfg.chat_template);
        return 2;
    }
    const gguf_limits lim = {cfg.max_metadata, cfg.max_tensors, cfg.max_string, cfg.max_array,
                             cfg.max_dim > INT64_MAX ? INT64_MAX : (int64_t)cfg.max_dim};
    engine_opts o = {.model_path = cfg.list_plugins ? NULL : cfg.model_path, .plugin_dir = cfg.plugin_dir,
                     .backend = cfg.backend, .threads = cfg.threads, .tokenizer = 1, .limits = &lim};
    if (!cfg.list_plugins && !cfg.model_path) {
        fprintf(stderr, "picolm: no model given\nusage: picolm MODEL [-p PROMPT] [options]   (see picolm --help)\n");
        return 2;
    }
    double t0 = pl_now();
    engine *e = build_engine(&o, err, sizeof err);
    if (!e) {
        if (cfg.list_plugins) { /* still explain what was found */
            pl_registry r;
            char e2[512];
            registry_load(&r, cfg.plugin_dir, e2, sizeof e2);
            registry_print(&r, NULL, stdout);
            registry_free(&r);
        }
        fprintf(stderr, "picolm: %s\n", err);
        return 1;
    }
    if (cfg.list_plugins) {
        registry_print(&e->reg, e->d.backend ? e->d.backend->name : NULL, stdout);
        free_engine(e);
        return 0;
    }
    if (cfg.fit) {
        int rc = generate_fit(e, &cfg, stdout, err, sizeof err);
        if (rc) fprintf(stderr, "picolm: %s\n", err);
        free_engine(e);
        return rc ? 1 : 0;
    }

    size_t plen = 0;
    char *stdin_prompt = NULL;
    const char *prompt = cfg.prompt;
    /* --chat on a terminal without -p: an interactive conversation */
    const int interactive = cfg.chat && !prompt && isatty(0);
    if (prompt) {
        plen = strlen(prompt);
    } else if (!interactive) {
        if (isatty(0)) fprintf(stderr, "picolm: reading the prompt from stdin (end with Ctrl-D)\n");
        stdin_prompt = read_stdin(&plen);
        if (!stdin_prompt) { fprintf(stderr, "picolm: cannot read the prompt from stdin: %s\n", strerror(errno)); free_engine(e); return 1; }
        prompt = stdin_prompt;
    }
    if (cfg.chat) {
        int rc = run_chat(e, &cfg, interactive, prompt, plen, pl_now() - t0);
        free(stdin_prompt);
        free_engine(e);
        return rc;
    }
    gen_stats st = {0};
    st.load_s = pl_now() - t0;
    int rc = generate_run(e, &cfg, prompt, plen, &st, err, sizeof err);
    if (rc) fprintf(stderr, "picolm: %s\n", err);
    free(stdin_prompt);
    free_engine(e);
    return rc ? 1 : 0;
}
