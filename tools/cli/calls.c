/* picolm --tools / --messages: see calls.h. */
#include "calls.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "generate.h"
#include "tool.h"

int calls_mode(const picolm_config *cfg) { return cfg->tools_path[0] || cfg->messages_path[0]; }

/* A value that is inline JSON (starts with c after blanks), else a file
   ("-": stdin), read whole. */
static char *read_arg(const char *v, char c, size_t *len) {
    const char *s = v;
    while (isspace((unsigned char)*s)) s++;
    if (*s == c) return *len = strlen(s), strdup(s);
    errno = 0;
    FILE *f = strcmp(v, "-") ? fopen(v, "rb") : stdin;
    char *text = f ? cli_read_all(f, len) : NULL;
    if (f && f != stdin) fclose(f);
    return text;
}

typedef struct calls_job {
    picolm_tool *tools;
    picolm_chat_msg *hist, *msgs;
    int n_tools, n_hist, n;
    char *tools_text, *hist_text, *schema;
} calls_job;

static void job_free(calls_job *j) {
    free(j->tools), free(j->hist), free(j->msgs);
    free(j->tools_text), free(j->hist_text), free(j->schema);
}

/* The tools and the conversation: 0, or a usage error's message. */
static int load(calls_job *j, const picolm_config *cfg, const char *prompt, size_t len, char *err, size_t errlen) {
    char where[1200], why[1024];
    size_t n;
    if (cfg->tools_path[0]) {
        cli_where(cfg, "generate", "tools", "--tools", where, sizeof where);
        if (!(j->tools_text = read_arg(cfg->tools_path, '[', &n)))
            return tool_fail(err, errlen, "%scannot read %s: %s", where, cfg->tools_path, strerror(errno ? errno : ENOMEM));
        if ((j->n_tools = picolm_tools_from_json(j->tools_text, n, &j->tools, why, sizeof why)) < 0)
            return tool_fail(err, errlen, "%s%s", where, why);
    }
    if (cfg->messages_path[0]) {
        cli_where(cfg, "generate", "messages", "--messages", where, sizeof where);
        if (!(j->hist_text = read_arg(cfg->messages_path, '[', &n)))
            return tool_fail(err, errlen, "%scannot read %s: %s", where, cfg->messages_path, strerror(errno ? errno : ENOMEM));
        if ((j->n_hist = picolm_chat_from_json(j->hist_text, n, &j->hist, why, sizeof why)) < 0)
            return tool_fail(err, errlen, "%s%s", where, why);
    }
    /* a trailing newline of piped input is not part of the message */
    while (len && (prompt[len - 1] == '\n' || prompt[len - 1] == '\r')) len--;
    if (!(j->msgs = calloc((size_t)j->n_hist + 2, sizeof *j->msgs))) return tool_fail(err, errlen, "out of memory");
    if (cfg->system_prompt[0] && !(j->n_hist && !strcmp(j->hist[0].role, "system")))
        j->msgs[j->n++] = (picolm_chat_msg){.role = "system", .content = cfg->system_prompt, .len = strlen(cfg->system_prompt)};
    for (int i = 0; i < j->n_hist; i++) j->msgs[j->n++] = j->hist[i];
    if (len) j->msgs[j->n++] = (picolm_chat_msg){.role = "user", .content = prompt, .len = len};
    if (!j->n) return tool_fail(err, errlen, "no conversation: give a prompt (-p, -f or stdin) or --messages FILE");
    return 0;
}

/* --tool-choice: 0 auto, 1 none, 2 required or a named function (*name). */
static int choice(const calls_job *j, const picolm_config *cfg, const char **name, char *err, size_t errlen) {
    char where[1200];
    const char *c = cfg->tool_choice;
    *name = NULL;
    cli_where(cfg, "generate", "tool_choice", "--tool-choice", where, sizeof where);
    if (!strcmp(c, "none") || !j->n_tools) {
        if (strcmp(c, "none") && strcmp(c, "auto")) return tool_fail(err, errlen, "%s'%s' asks for a call, and there are no --tools", where, c);
        return 1;
    }
    if (!strcmp(c, "auto")) return 0;
    if (!strcmp(c, "required")) return 2;
    for (int t = 0; t < j->n_tools; t++)
        if (!strcmp(j->tools[t].name, c)) return *name = c, 2;
    char names[1024] = "";
    for (int t = 0, used = 0; t < j->n_tools && used < (int)sizeof names; t++)
        used += snprintf(names + used, sizeof names - (size_t)used, "%s%s", t ? ", " : "", j->tools[t].name);
    tool_fail(err, errlen, "%s'%s' is not auto, none, required or one of the tools (%s)", where, c, names);
    return -1;
}

/* Prefill the prompt, generate the reply into *out (malloc'd). */
static int generate(picolm_model *m, const picolm_config *cfg, const char *text, size_t len, picolm_sampler *smp, char **out,
                    size_t *out_len, gen_stats *st, char *err, size_t errlen) {
    int32_t *toks = NULL;
    int n, rc = -1, end;
    picolm_context *c = NULL;
    const int n_ctx = generate_n_ctx(m, cfg);
    FILE *mem = NULL;
    if (generate_tokenize(m, text, len, picolm_add_bos(m), 1, &toks, &n, err, errlen)) return -1;
    if (n >= n_ctx) {
        tool_fail(err, errlen, "the conversation is %d tokens, which does not fit in the context of %d (-c)", n, n_ctx);
        goto done;
    }
    if (generate_check_memory(m, cfg, err, errlen) || !(c = generate_context(m, cfg, n_ctx, err, errlen))) goto done;
    double t = tool_now();
    if (generate_prefill(cfg, c, toks, n, st, err, errlen)) goto done;
    for (int i = 0; i < n; i++) picolm_sampler_accept(smp, toks[i]);
    st->prefill_s = tool_now() - t;
    st->n_prompt = n;
    if (!(mem = open_memstream(out, out_len))) { tool_fail(err, errlen, "out of memory"); goto done; }
    out_stream o;
    out_init(&o, cfg, mem);
    t = tool_now();
    if (generate_decode(m, cfg, c, smp, &o, NULL, st, &end, err, errlen) || out_flush(&o)) goto done;
    st->decode_s = tool_now() - t;
    rc = 0;
done:
    if (mem && fclose(mem) && !rc) rc = tool_fail(err, errlen, "out of memory");
    generate_rss(&st->rss_anon_kb, &st->rss_file_kb, NULL);
    generate_peak_rss(&st->rss_peak_kb);
    if (!rc) generate_print_stats(m, cfg, st, picolm_n_ctx(c));
    picolm_context_free(c);
    free(toks);
    return rc;
}

int calls_run(picolm_model *m, const picolm_config *cfg, const char *prompt, size_t len, double load_s) {
    char err[2048], msg[2048];
    calls_job j;
    memset(&j, 0, sizeof j);
    picolm_sampler *smp = NULL;
    char *text = NULL, *reply = NULL, *line = NULL;
    size_t tlen = 0, rlen = 0;
    int rc = CLI_USAGE, forced = 0;
    const char *name;
    if (load(&j, cfg, prompt, len, err, sizeof err)) goto out;
    const int ch = choice(&j, cfg, &name, err, sizeof err);
    if (ch < 0) goto out;
    forced = ch == 2;
    if (ch != 1 && cfg->n_stops) {
        snprintf(err, sizeof err, "--tools and --stop cannot be combined: a stop string could cut a call short");
        goto out;
    }
    const char *tmpl = picolm_chat_template(m, cfg->chat_template, msg, sizeof msg, err, sizeof err);
    const picolm_tool_format *fmt = tmpl ? picolm_tool_format_of(m, tmpl, err, sizeof err) : NULL;
    if (!fmt) goto out;
    if (msg[0]) fprintf(stderr, "picolm: %s\n", msg);
    const picolm_chat_tools t = {j.tools, j.n_tools, forced, NULL};
    if (!(text = picolm_chat_render_tools(m, tmpl, j.msgs, j.n, &t, 1, &tlen, err, sizeof err))) goto out;
    picolm_param keys[2];
    int nk = 0;
    if (ch != 1) {
        if (!(j.schema = picolm_tool_schema(fmt, j.tools, j.n_tools, name, err, sizeof err))) goto out;
        keys[nk++] = (picolm_param){"json_schema", j.schema};
        nk += picolm_tool_sampler_key(fmt, forced, &keys[nk]);
    }
    if (cli_sampler_new_with(&smp, m, cfg, keys, nk, msg, sizeof msg)) {
        picolm_tool_error(j.tools, j.n_tools, name, msg, err, sizeof err);
        goto out;
    }
    char stage[64];
    const int32_t need = picolm_sampler_min_budget(smp, stage, sizeof stage);
    if (cfg->max_tokens >= 0 && cfg->max_tokens < need) {
        snprintf(err, sizeof err, "-n %d: too few tokens: the shortest tool call takes %d (sampler %s); use -n %d or more",
                 cfg->max_tokens, (int)need, stage, (int)need);
        goto out;
    }
    if (cfg->verbose) fprintf(stderr, "picolm: tool format %s, %d tools, tool choice %s\n", fmt->name, j.n_tools, cfg->tool_choice);
    rc = CLI_FAIL;
    gen_stats st = {0};
    st.load_s = load_s;
    if (generate(m, cfg, text, tlen, smp, &reply, &rlen, &st, err, sizeof err)) goto out;
    picolm_tool_reply r;
    picolm_tool_reply_init(&r, fmt, forced);
    picolm_tool_reply_scan(&r, reply, rlen, 1);
    if (!(line = picolm_tool_reply_json(&r, reply, rlen))) { snprintf(err, sizeof err, "out of memory"); goto out; }
    printf("%s\n", line);
    rc = CLI_OK;
out:
    if (rc != CLI_OK) fprintf(stderr, "picolm: %s\n", err);
    if (rc == CLI_USAGE) fprintf(stderr, "(see picolm --help)\n");
    picolm_sampler_free(smp);
    free(text), free(reply), free(line);
    job_free(&j);
    return rc;
}
