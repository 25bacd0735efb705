/* picolm-server: an OpenAI-compatible HTTP server over one mapped model. */
#include <errno.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "picolm/picolm.h"
#include "cli.h"
#include "http.h"
#include "job.h"
#include "run.h"

static const char *T = "picolm-server";

static void usage(FILE *o) {
    fprintf(o,
            "usage: picolm-server MODEL [options]\n"
            "Serves the model over HTTP with OpenAI's API: POST /v1/chat/completions and\n"
            "/v1/completions (streamed with \"stream\": true), GET /v1/models, /health,\n"
            "/metrics (Prometheus) and a chat page at /.  Up to --slots requests are\n"
            "generated at once, each step advancing every one of them; a request's output\n"
            "does not depend on the others.  Stops on SIGINT / SIGTERM.\n"
            "Chat requests take tools and tool_choice (calls always valid against the\n"
            "function's parameters and complete) and response_format json_schema: see\n"
            "docs/agents.md and docs/server.md.\n"
            "options:\n"
            "  --host H              address to bind (default 127.0.0.1: this machine only;\n"
            "                        0.0.0.0 or :: to serve the network)\n"
            "  --port P              TCP port (default 8080)\n"
            "  --api-key K           require \"Authorization: Bearer K\" on /v1/* and /metrics\n"
            "                        (default: [server] api_key, else $PICOLM_API_KEY, else none;\n"
            "                        an empty key is an error)\n"
            "  --allow-host NAME     also answer requests whose Host header is NAME (repeatable,\n"
            "                        or NAME,NAME; .example.com: its subdomains; *: any).  IP\n"
            "                        literals, localhost and --host are always accepted: other\n"
            "                        names get a 403 (DNS rebinding)\n"
            "  --cors ORIGIN         let pages from ORIGIN (e.g. https://app.example; *: any)\n"
            "                        call the API (repeatable); requests from other sites'\n"
            "                        pages get a 403.  Request bodies must be application/json\n"
            "  --max-body BYTES      largest request body (default 1M; K/M suffixes)\n"
            "  --max-connections N   requests in flight at once; more get 429 (default 32)\n"
            "  --queue N             requests waiting for the model; more get 503 (default 16)\n"
            "  --idle-timeout S      close a connection silent for S seconds, or one whose\n"
            "                        client has not read for S seconds (default 60)\n"
            "  --header-timeout S    close a connection that has not sent a complete request\n"
            "                        header S seconds after it opened or its last reply (10)\n"
            "  --max-connections-per-ip N  connections from one address (default\n"
            "                        max-connections / 2 + 8); /health is answered whatever\n"
            "                        the load\n"
            "  --chat-template NAME  the chat template (default: the model's; see picolm --help)\n"
            "  --max-prompt-tokens N longer prompts get a 400 (default: the context)\n"
            "  --slots N             sequences generated at once (default 4), each up to\n"
            "                        the context (-c)\n"
            "  --kv-ram BYTES        the KV-cache pool, shared by every sequence in blocks\n"
            "                        (K/M/G suffixes; default: --slots full contexts, or what\n"
            "                        half of the machine's memory leaves, said at start).  When\n"
            "                        it runs out, cached prefixes go first, then the newest\n"
            "                        sequence waits (and is evaluated again later)\n"
            "  --ram BYTES           the whole server's memory budget (K/M/G suffixes; INI\n"
            "                        [engine] ram): the KV pool gets what the mapped weights,\n"
            "                        the buffers and the code leave of it (unless --kv-ram)\n"
            "  --kv-block N          positions per KV block (default 16)\n"
            "  --kv-blocks N         the pool in blocks instead of bytes\n"
            "  --prefill-chunk N     prompt tokens per step, oldest prompt first, so that a\n"
            "                        long prompt does not stall the others' replies (default 64)\n"
            "  -n N                  max_tokens when a request gives none (default 256;\n"
            "                        -1: until the context is full)\n"
            "Each option above (but --kv-blocks, -n, --ram and --chat-template: [generate]\n"
            "chat_template) is also a key of the INI's [server] section, with _ for - (e.g.\n"
            "max_connections = 8; allow_host and cors take NAME,NAME); the flags add to or\n"
            "override it.\n"
            "  -h, --help            this text\n"
            "Sampling defaults for what a request leaves out come from the INI's [sampler]\n"
            "section (see picolm --help); the request's values override them.\n"
            "shared with picolm (INI keys from --config apply too):\n");
    config_common_usage(o);
    fprintf(o, "Exit status: 0 after a signal, 1 runtime failure, 2 usage error.\n");
}

/* A number in [lo, hi], with an optional K/M/G suffix on a non-negative one
   (checked before multiplying: no overflow). */
static int parse_num(const char *v, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (!*v || end == v || errno || x < lo || x > hi) return -1;
    long mul = 1;
    if (*end == 'K' || *end == 'k') mul = 1024, end++;
    else if (*end == 'M' || *end == 'm') mul = 1024L * 1024, end++;
    else if (*end == 'G' || *end == 'g') mul = 1024L * 1024 * 1024, end++;
    if (*end || (mul > 1 && (x < 0 || x > hi / mul))) return -1;
    *out = x * mul;
    return 0;
}

/* Append each NAME of a NAME,NAME list to list (strings of argv, cut in place). */
static int add_names(char *v, const char **list, int *n, int cap) {
    for (char *t = strtok(v, ","); t; t = strtok(NULL, ",")) {
        if (*n >= cap) return -1;
        list[(*n)++] = t;
    }
    return 0;
}

/* The model file as it was mapped: a per-request check that it is still
   the same file at the same size (another program may truncate or
   overwrite it), and the SIGBUS guard's verdict. */
typedef struct model_watch {
    const char *path;
    struct stat st;
    char why[256];
} model_watch;

static const char *model_problem(void *p) {
    model_watch *w = p;
    struct stat now;
    if (w->why[0]) return w->why;
    const char *what = cli_model_fault() ? "could not be read (truncated?)"
                       : stat(w->path, &now) ? "is gone"
                       : now.st_ino != w->st.st_ino || now.st_dev != w->st.st_dev ? "was replaced"
                       : now.st_size != w->st.st_size ? "changed size"
                       : now.st_mtim.tv_sec != w->st.st_mtim.tv_sec || now.st_mtim.tv_nsec != w->st.st_mtim.tv_nsec ? "was modified"
                       : NULL;
    if (!what) return NULL;
    /* once wrong, for good: the mapped weights cannot be trusted again */
    snprintf(w->why, sizeof w->why, "the model file %s %s while the server ran: restart the server", w->path, what);
    return w->why;
}

typedef struct sched_arg {
    runner *r;
    job_queue *q;
    http_server *h;
} sched_arg;

static void *sched_main(void *p) {
    sched_arg *a = p;
    runner_loop(a->r, a->q, a->h);
    return NULL;
}

int main(int argc, char **argv) {
    picolm_log_set(picolm_log_stderr, NULL); /* the engine and plugins note things on stderr */
#ifdef __GLIBC__
    /* requests are prepared on their connections' threads: a vocabulary-
       sized sampler buffer made on one and freed on the scheduler's would
       otherwise stay in that thread's arena, and the server grow with the
       connections it has seen; large blocks go back to the system at once */
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    mallopt(M_ARENA_MAX, 2);
#endif
    picolm_config cfg;
    char err[2048];
    const char *model = NULL;
    if (config_tool_init(&cfg, argc, argv, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", T, err);
        return CLI_USAGE;
    }
    /* the INI's [server] section (or its defaults), then the flags */
    const char *env_key = getenv("PICOLM_API_KEY");
    const int ini_key = config_is_set(&cfg, "server", "api_key");
    http_opts ho = {.host = cfg.srv_host, .port = cfg.srv_port,
                    .api_key = ini_key ? cfg.srv_api_key : env_key,
                    .max_body = (size_t)cfg.srv_max_body, .max_connections = cfg.srv_max_connections,
                    .idle_timeout = cfg.srv_idle_timeout, .header_timeout = cfg.srv_header_timeout};
    const char *key_from = ini_key ? "the INI's [server] api_key" : "PICOLM_API_KEY";
    static const char *allow[64], *cors[64];
    long per_ip = cfg.srv_max_per_ip;
    add_names(cfg.srv_allow_host, allow, &ho.n_allow_hosts, 64);
    add_names(cfg.srv_cors, cors, &ho.n_cors, 64);
    long queue = cfg.srv_queue, max_prompt = cfg.srv_max_prompt_tokens, n_max = cfg.max_tokens, slots = cfg.srv_slots,
         chunk = cfg.srv_prefill_chunk, kv_ram = (long)cfg.srv_kv_ram, block = cfg.srv_kv_block, kv_blocks = 0,
         ram = (long)cfg.ram_bytes;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return cli_close_stdout(T);
        }
        const int common = config_common_arg(&cfg, argc, argv, &i, err, sizeof err);
        if (common < 0) return cli_usage_error(T, err);
        if (common) continue;
        if (a[0] == '-' && a[1]) {
            static const struct { const char *flag; long lo, hi; } nums[] = {
                {"--port", 1, 65535}, {"--max-body", 1, 1L << 30}, {"--max-connections", 1, 4096}, {"--queue", 1, 65536},
                {"--idle-timeout", 1, 86400}, {"--max-prompt-tokens", 1, 1L << 24}, {"--slots", 1, 256},
                {"--prefill-chunk", 1, 4096}, {"--kv-ram", 1, 1L << 40}, {"--kv-block", 1, 4096}, {"--kv-blocks", 1, 1L << 30},
                {"-n", -1, 1L << 24}, {"--ram", 1, 1L << 40}, {"--header-timeout", 1, 3600},
                {"--max-connections-per-ip", 1, 4096}};
            static const char *const strs[] = {"--host", "--api-key", "--allow-host", "--cors", "--chat-template"};
            size_t k = 0;
            while (k < sizeof strs / sizeof strs[0] && strcmp(a, strs[k])) k++;
            if (k < sizeof strs / sizeof strs[0]) {
                if (i + 1 >= argc) {
                    snprintf(err, sizeof err, "option %s needs a value", a);
                    return cli_usage_error(T, err);
                }
                char *v = argv[++i];
                if (k == 0) ho.host = v;
                else if (k == 1) ho.api_key = v, key_from = "--api-key";
                else if (k == 4) {
                    if (!*v || strlen(v) >= sizeof cfg.chat_template) return cli_usage_error(T, "--chat-template needs a template name");
                    snprintf(cfg.chat_template, sizeof cfg.chat_template, "%s", v);
                } else if (add_names(v, k == 2 ? allow : cors, k == 2 ? &ho.n_allow_hosts : &ho.n_cors, 64)) {
                    snprintf(err, sizeof err, "too many %s values (at most 64)", a);
                    return cli_usage_error(T, err);
                }
                continue;
            }
            k = 0;
            while (k < sizeof nums / sizeof nums[0] && strcmp(a, nums[k].flag)) k++;
            if (k == sizeof nums / sizeof nums[0]) {
                snprintf(err, sizeof err, "unknown option %s", a);
                return cli_usage_error(T, err);
            }
            long v;
            if (i + 1 >= argc || parse_num(argv[i + 1], nums[k].lo, nums[k].hi, &v)) {
                snprintf(err, sizeof err, "option %s needs a number from %ld to %ld%s%s", a, nums[k].lo, nums[k].hi,
                         i + 1 < argc ? ", not " : "", i + 1 < argc ? argv[i + 1] : "");
                return cli_usage_error(T, err);
            }
            i++;
            switch (k) {
            case 0: ho.port = (int)v; break;
            case 1: ho.max_body = (size_t)v; break;
            case 2: ho.max_connections = (int)v; break;
            case 3: queue = v; break;
            case 4: ho.idle_timeout = (int)v; break;
            case 5: max_prompt = v; break;
            case 6: slots = v; break;
            case 7: chunk = v; break;
            case 8: kv_ram = v; break;
            case 9: block = v; break;
            case 10: kv_blocks = v; break;
            case 11: n_max = v; break;
            case 12: ram = v; break;
            case 13: ho.header_timeout = (int)v; break;
            default: per_ip = v; break;
            }
            continue;
        }
        if (model) {
            snprintf(err, sizeof err, "unexpected argument '%s' (MODEL is already given)", a);
            return cli_usage_error(T, err);
        }
        model = a;
    }
    if (!model) {
        usage(stderr);
        return CLI_USAGE;
    }
    /* an empty key would silently mean "no key" */
    if (ho.api_key && !ho.api_key[0]) {
        snprintf(err, sizeof err, "the API key from %s is empty (leave it out to run without a key)", key_from);
        return cli_usage_error(T, err);
    }
    ho.allow_hosts = allow;
    ho.cors = cors;
    ho.max_per_ip = per_ip ? (int)per_ip : ho.max_connections / 2 + 8;
    cfg.max_tokens = (int)n_max;

    int rc;
    model_watch watch = {.path = model};
    if (stat(model, &watch.st)) memset(&watch.st, 0, sizeof watch.st);
    picolm_model *m = cli_load_model(&cfg, T, model, 1, &rc);
    if (!m) return rc;
    const int n_ctx = cli_context(&cfg, T, picolm_n_ctx_train(m));
    runner_opts ro = {.cfg = &cfg, .n_ctx = n_ctx, .max_prompt_tokens = (int)max_prompt, .n_slots = (int)slots,
                      .prefill_chunk = (int)chunk, .kv_ram = (size_t)kv_ram, .block_size = (int)block,
                      .kv_blocks = (int)kv_blocks, .ram = (size_t)ram, .max_connections = ho.max_connections};
    runner *r = runner_new(m, &ro, err, sizeof err);
    if (!r) {
        fprintf(stderr, "%s: %s\n", T, err);
        cli_free_model(m);
        return CLI_FAIL;
    }
    /* the model's id: its file name */
    const char *slash = strrchr(model, '/');
    ho.model_id = slash ? slash + 1 : model;
    ho.prepare = runner_prepare;
    ho.prepare_arg = r;
    ho.model_problem = model_problem;
    ho.model_problem_arg = &watch;

    /* signals go to sigwait below, not to the HTTP or scheduler threads */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    job_queue q;
    jq_init(&q, (int)queue);
    http_server *h = http_start(&ho, &q, err, sizeof err);
    if (!h) {
        fprintf(stderr, "%s: %s\n", T, err);
        jq_destroy(&q);
        runner_free(r);
        cli_free_model(m);
        return CLI_FAIL;
    }
    pthread_t sched;
    sched_arg sa = {r, &q, h};
    if (pthread_create(&sched, NULL, sched_main, &sa)) {
        fprintf(stderr, "%s: cannot start the scheduler thread\n", T);
        http_stop(h);
        jq_destroy(&q);
        runner_free(r);
        cli_free_model(m);
        return CLI_FAIL;
    }
    fprintf(stderr, "%s: serving %s on http://%s%s%s:%d/ (context %d, backend %s%s)\n", T, ho.model_id,
            strchr(ho.host, ':') ? "[" : "", ho.host, strchr(ho.host, ':') ? "]" : "", ho.port, n_ctx,
            picolm_runtime_backend(picolm_model_runtime(m)), ho.api_key && ho.api_key[0] ? ", API key required" : "");
    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "%s: %s: stopping\n", T, sig == SIGINT ? "SIGINT" : "SIGTERM");
    /* no new requests; the running ones end at the next step with a last
       chunk that says so ("shutdown"), which reaches their clients before
       the server closes their connections */
    jq_close(&q);
    for (job *j; (j = jq_pop(&q, 0));) {
        job_fail(j, &(api_error){.status = 503, .type = "server_error", .message = "the server is stopping"});
        job_unref(j);
    }
    pthread_join(sched, NULL);
    http_drain(h, 5);
    http_stop(h);
    jq_destroy(&q);
    runner_free(r);
    cli_free_model(m);
    return CLI_OK;
}
