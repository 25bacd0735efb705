/* picolm: command-line generation (a drop-in for picoLM's CLI). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "picolm/picolm.h"
#include "calls.h"
#include "chat.h"
#include "cli.h"
#include "config.h"
#include "generate.h"
#include "tool.h"


/* --chat: one reply to the whole prompt, or a conversation on a terminal. */
static int run_chat(picolm_model *m, const picolm_config *cfg, int interactive, const char *msg, size_t len, double load_s) {
    char err[2048];
    chat_session s;
    if (chat_session_open(&s, m, cfg, err, sizeof err)) { fprintf(stderr, "picolm: %s\n", err); return 1; }
    int rc;
    if (interactive) {
        rc = chat_session_interactive(&s, stdin, stdout, stderr) ? CLI_FAIL : CLI_OK;
    } else {
        /* a trailing newline of piped input is not part of the message */
        while (len && (msg[len - 1] == '\n' || msg[len - 1] == '\r')) len--;
        int r = chat_session_turn(&s, msg, len, stdout, err, sizeof err);
        if (r) fprintf(stderr, "picolm: %s\n", err);
        rc = r ? CLI_FAIL : CLI_OK;
        if (!r) {
            fputc('\n', stdout);
            fflush(stdout); /* a failure is reported by cli_close_stdout */
            if (s.last_end == GEN_END_CTX) fprintf(stderr, "picolm: context full (%d tokens)\n", picolm_n_ctx(s.c));
            s.st.load_s = load_s;
            generate_rss(&s.st.rss_anon_kb, &s.st.rss_file_kb, NULL);
            generate_print_stats(m, cfg, &s.st, picolm_n_ctx(s.c));
        }
    }
    chat_session_close(&s);
    return rc;
}

/* Refuse up front what cannot work (a usage error): 0, or -1 with a message. */
static int check_request(const picolm_config *cfg, char *err, size_t errlen) {
    const char *flag = cfg->json_schema[0] ? "--json-schema" : "--json";
    if (cli_grammar(cfg) && cfg->n_stops)
        return tool_fail(err, errlen, "%s and --stop cannot be combined: a stop string could cut the JSON document short "
                                      "(%s ends by itself once the document is complete)", flag, flag);
    if (cfg->json_mode && !cfg->json_schema[0] && cfg->max_tokens >= 0 && cfg->max_tokens < 2)
        return tool_fail(err, errlen, "--json with -n %d: no complete JSON document fits in a budget of fewer than 2 tokens "
                                    "('{' and '}'; use a larger -n, or -n -1)", cfg->max_tokens);
    return 0;
}

int main(int argc, char **argv) {
    picolm_log_set(picolm_log_stderr, NULL); /* the engine and plugins note things on stderr */
    picolm_config cfg;
    char err[2048];
    config_defaults(&cfg);
    const char *ini = config_find_ini(argc, argv);
    if (ini && config_load_ini(&cfg, ini, err, sizeof err)) { fprintf(stderr, "picolm: %s\n", err); return CLI_USAGE; }
    if (config_parse_args(&cfg, argc, argv, err, sizeof err)) return cli_usage_error("picolm", err);
    if (cfg.show_help) {
        config_usage(argv[0], stdout);
        cli_print_sampler_keys(&cfg, stdout, 0);
        return cli_close_stdout("picolm");
    }
    if (cfg.show_version) { printf("picolm %s (plugin ABI %u)\n", PICOLM_VERSION, PICOLM_ABI_VERSION); return cli_close_stdout("picolm"); }
    if (cfg.dump_config) {
        config_dump(&cfg, stdout);
        cli_print_sampler_keys(&cfg, stdout, 1);
        return cli_close_stdout("picolm");
    }

    if (cfg.chat && strcasecmp(cfg.chat_template, "auto") && !picolm_chat_template(NULL, cfg.chat_template, NULL, 0, err, sizeof err)) {
        char where[1200];
        cli_where(&cfg, "generate", "chat_template", "--chat-template", where, sizeof where);
        snprintf(err, sizeof err, "%sunknown chat template '%s' (known: auto, %s)", where, cfg.chat_template, picolm_chat_templates());
        return cli_usage_error("picolm", err);
    }
    if (!cfg.list_plugins && !cfg.fit && check_request(&cfg, err, sizeof err)) return cli_usage_error("picolm", err);
    if (!cfg.list_plugins && !cfg.model_path) {
        fprintf(stderr, "picolm: no model given\nusage: picolm MODEL [-p PROMPT] [options]   (see picolm --help)\n");
        return CLI_USAGE;
    }
    double t0 = tool_now();
    int rc;
    if (cfg.list_plugins) {
        picolm_runtime *rt = cli_runtime(&cfg, "picolm", &rc);
        if (rt) picolm_runtime_report(rt, stdout);
        else picolm_runtime_report_dir(cfg.plugin_dir, stdout); /* still explain what was found */
        picolm_runtime_free(rt);
        const int wrc = cli_close_stdout("picolm");
        return rt ? wrc : rc;
    }
    picolm_model *m = cli_load_model(&cfg, "picolm", cfg.model_path, 1, &rc);
    if (!m) return rc;
    cfg.context = cli_context(&cfg, "picolm", picolm_n_ctx_train(m));
    if (cfg.fit) {
        const int fit = generate_fit(m, &cfg, stdout);
        cli_free_model(m);
        rc = cli_close_stdout("picolm");
        return fit || rc ? CLI_FAIL : CLI_OK; /* fit > 0: the verdict is DOES NOT FIT */
    }
    /* a sampler name, key or value the plugins refuse is the user's to fix */
    picolm_sampler *probe;
    if (cli_sampler_new(&probe, m, &cfg, err, sizeof err)) {
        char where[1200] = "";
        /* a name in the chain (the keys' messages carry their own place) */
        if (strstr(err, "in chain") || !strncmp(err, "sampler '", 9)) cli_where(&cfg, "sampler", "chain", "--sampler", where, sizeof where);
        fprintf(stderr, "picolm: %s%s\n", where, err);
        /* no sampler plugin at all: an installation problem, not a usage error */
        const int samplers = picolm_runtime_sampler(picolm_model_runtime(m), 0) != NULL;
        cli_free_model(m);
        return samplers ? CLI_USAGE : CLI_FAIL;
    }
    /* a grammar that closes its document needs a budget of a few tokens */
    char stage[64];
    const int32_t need = picolm_sampler_min_budget(probe, stage, sizeof stage);
    picolm_sampler_free(probe);
    if (cfg.max_tokens >= 0 && cfg.max_tokens < need) {
        snprintf(err, sizeof err, "-n %d: too few tokens: the shortest document %s allows takes %d (sampler %s); use -n %d or more",
                 cfg.max_tokens, cfg.json_schema[0] ? "the schema" : "the grammar", (int)need, stage, (int)need);
        cli_free_model(m);
        return cli_usage_error("picolm", err);
    }

    size_t plen = 0;
    char *read_prompt = NULL;
    const char *prompt = cfg.prompt;
    /* --chat on a terminal without -p or -f: an interactive conversation */
    const int interactive = cfg.chat && !calls_mode(&cfg) && !prompt && !cfg.prompt_file && isatty(0);
    if (prompt) {
        plen = strlen(prompt);
    } else if (cfg.prompt_file) {
        FILE *f = fopen(cfg.prompt_file, "rb");
        read_prompt = f ? cli_read_all(f, &plen) : NULL;
        if (!read_prompt) { fprintf(stderr, "picolm: cannot read the prompt from %s: %s\n", cfg.prompt_file, strerror(errno)); }
        if (f) fclose(f);
        if (!read_prompt) { cli_free_model(m); return CLI_FAIL; }
        prompt = read_prompt;
    } else if (!interactive && !cfg.messages_path[0]) { /* --messages: a user message only with -p or -f */
        if (isatty(0)) fprintf(stderr, "picolm: reading the prompt from stdin (end with Ctrl-D)\n");
        read_prompt = cli_read_all(stdin, &plen);
        if (!read_prompt) { fprintf(stderr, "picolm: cannot read the prompt from stdin: %s\n", strerror(errno)); cli_free_model(m); return CLI_FAIL; }
        prompt = read_prompt;
    }
    if (calls_mode(&cfg)) {
        rc = calls_run(m, &cfg, prompt, plen, tool_now() - t0);
    } else if (cfg.chat) {
        rc = run_chat(m, &cfg, interactive, prompt, plen, tool_now() - t0);
    } else {
        gen_stats st = {0};
        st.load_s = tool_now() - t0;
        rc = generate_run(m, &cfg, prompt, plen, &st, err, sizeof err) ? CLI_FAIL : CLI_OK;
        if (rc) fprintf(stderr, "picolm: %s\n", err);
    }
    free(read_prompt);
    cli_free_model(m);
    return rc ? rc : cli_close_stdout("picolm"); /* a failed write was already reported */
}
