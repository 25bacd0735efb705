/* Request preparation off the step loop: see prep.h. */
#include "prep.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "cli.h"
#include "generate.h"
#include "toolcall.h"

void prep_free(prepared *p) {
    if (!p) return;
    picolm_sampler_free(p->smp);
    free(p->cfg);
    free(p->toks);
    free(p);
}

static void prep_free_void(void *p) { prep_free(p); }

prepared *prep_take(job *j) {
    prepared *p = j->prep;
    j->prep = NULL;
    j->prep_free = NULL;
    return p;
}

/* A seed nobody can predict, below 2^53 so that a JavaScript client reads
   it back exactly. */
static uint64_t fresh_seed(void) {
    uint64_t s = 0;
    if (getrandom(&s, sizeof s, GRND_NONBLOCK) != (ssize_t)sizeof s) {
        static unsigned long long n;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        s = ((uint64_t)ts.tv_sec * 1000000007u) ^ (uint64_t)ts.tv_nsec ^ (__atomic_add_fetch(&n, 1, __ATOMIC_RELAXED) << 40);
        s ^= s >> 29, s *= 0xbf58476d1ce4e5b9u, s ^= s >> 32;
    }
    return s & ((1ull << 53) - 1);
}

/* The request's settings: the server's, with what the request sets.  No
   seed in the request (nor in the INI): a fresh one. */
static int settings(const prep_env *env, picolm_config *cfg, const api_request *q, api_error *ae) {
    char v[64], err[512];
    *cfg = *env->cfg;
    struct { unsigned bit; const char *key; double val; int is_int; } keys[] = {
        {API_SET_TEMPERATURE, "temperature", q->temperature, 0}, {API_SET_TOP_P, "top_p", q->top_p, 0},
        {API_SET_TOP_K, "top_k", q->top_k, 1},                   {API_SET_MIN_P, "min_p", q->min_p, 0},
        {API_SET_PRESENCE, "presence_penalty", q->presence_penalty, 0},
        {API_SET_FREQUENCY, "freq_penalty", q->frequency_penalty, 0},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        if (!(q->set & keys[i].bit)) continue;
        if (keys[i].is_int) snprintf(v, sizeof v, "%d", (int)keys[i].val);
        else snprintf(v, sizeof v, "%.9g", keys[i].val);
        if (config_set_param(cfg, keys[i].key, v, "request", 0, err, sizeof err))
            return api_fail(ae, 400, "invalid_request_error", keys[i].key, NULL, "%s", err);
    }
    if (q->set & API_SET_SEED) cfg->seed = q->seed;
    else if (!config_is_set(env->cfg, "generate", "seed")) cfg->seed = fresh_seed();
    if (q->set & API_SET_MAX_TOKENS) cfg->max_tokens = q->max_tokens;
    cfg->json_mode = q->json_object;
    /* OpenAI's json_object is an object, never a top-level array */
    if (q->json_object && config_set_param(cfg, "json_object", "1", "request", 0, err, sizeof err))
        return api_fail(ae, 500, "server_error", NULL, NULL, "%s", err);
    if (q->json_object && cfg->max_tokens >= 0 && cfg->max_tokens < 2)
        return api_fail(ae, 400, "invalid_request_error", "max_tokens", NULL,
                        "response_format json_object needs max_tokens of at least 2 (the server's default is %d)", cfg->max_tokens);
    return 0;
}

/* A chat with tools (or calls and results) as the family's template
   renders it; a forced call is opened in the prompt. */
static char *render_tools(const prep_env *env, const api_request *q, size_t *len, api_error *ae) {
    char err[512];
    picolm_tool *tools;
    picolm_chat_msg *msgs;
    picolm_tool_call *calls;
    int forced;
    const int constrained = api_calls_tools(q, &forced);
    char *text = NULL;
    if (!api_tool_views(q, &tools, &msgs, &calls)) {
        const picolm_chat_tools t = {tools, q->n_tools, constrained && forced, NULL};
        text = picolm_chat_render_tools(env->m, env->chat_tmpl, msgs, q->n_msgs, &t, 1, len, err, sizeof err);
        if (!text) api_fail(ae, 400, "invalid_request_error", "messages", NULL, "%s", err);
    } else {
        api_fail(ae, 500, "server_error", NULL, NULL, "out of memory");
    }
    free(tools), free(msgs), free(calls);
    return text;
}

/* The sampler keys of a call (json_schema and the key that makes it
   optional) or of response_format json_schema; *schema is the text to free. */
static int constraint_keys(const prep_env *env, job *j, picolm_param *p, int *n, char **schema, api_error *ae) {
    const api_request *q = &j->req;
    char err[512], msg[600];
    int forced;
    *n = 0;
    *schema = NULL;
    if (q->json_schema) {
        p[(*n)++] = (picolm_param){"json_schema", q->json_schema};
        return 0;
    }
    if (!api_calls_tools(q, &forced)) return 0;
    const picolm_tool_format *f = env->tool_fmt;
    picolm_tool *tools;
    picolm_chat_msg *msgs;
    picolm_tool_call *calls;
    if (api_tool_views(q, &tools, &msgs, &calls)) *schema = NULL, snprintf(err, sizeof err, "out of memory");
    else *schema = picolm_tool_schema(f, tools, q->n_tools, q->tool_choice == API_TOOL_NAMED ? q->tool_name : NULL, err, sizeof err);
    free(tools), free(msgs), free(calls);
    if (!*schema) {
        api_schema_error(q, err, msg, sizeof msg);
        return api_fail(ae, 400, "invalid_request_error", "tools", NULL, "%s", msg);
    }
    p[(*n)++] = (picolm_param){"json_schema", *schema};
    *n += picolm_tool_sampler_key(f, forced, &p[*n]);
    if (!(j->tools = job_tools_new(f, forced, j->id))) return api_fail(ae, 500, "server_error", NULL, NULL, "out of memory");
    return 0;
}

/* A constrained reply needs a budget of its grammar's minimum: max_tokens
   (or the server's default), and the context the prompt leaves. */
static int check_budget(const prep_env *env, const prepared *p, const api_request *q, api_error *ae) {
    char stage[64];
    const int32_t need = picolm_sampler_min_budget(p->smp, stage, sizeof stage);
    const int room = env->n_ctx - p->n + 1, budget = p->cfg->max_tokens >= 0 && p->cfg->max_tokens < room ? p->cfg->max_tokens : room;
    if (!need || budget >= need) return 0;
    const char *what = q->json_schema ? "the shortest document the schema allows" : q->n_tools ? "the shortest tool call" : "the shortest document";
    if (budget == room)
        return api_fail(ae, 400, "invalid_request_error", "messages", "context_length_exceeded",
                        "the prompt leaves %d tokens of the context; %s takes %d", room, what, (int)need);
    return api_fail(ae, 400, "invalid_request_error", "max_tokens", NULL, "max_tokens %d is too small: %s takes %d tokens (sampler %s); use %d or more",
                    budget, what, (int)need, stage, (int)need);
}

/* The prompt's tokens: the chat rendered with the model's template, or
   the completion prompt; special tokens are parsed as llama.cpp's server
   does. */
static int prompt_tokens(const prep_env *env, const api_request *q, int32_t **toks, int *n, api_error *ae) {
    char err[512];
    char *text = NULL;
    size_t len;
    if (q->chat && api_has_tool_parts(q)) {
        if (!(text = render_tools(env, q, &len, ae))) return -1;
    } else if (q->chat) {
        picolm_chat_msg *m = calloc((size_t)q->n_msgs, sizeof *m);
        if (!m) return api_fail(ae, 500, "server_error", NULL, NULL, "out of memory");
        for (int i = 0; i < q->n_msgs; i++)
            m[i] = (picolm_chat_msg){.role = q->msgs[i].role, .content = q->msgs[i].content, .len = strlen(q->msgs[i].content)};
        text = picolm_chat_render(env->m, env->chat_tmpl, m, q->n_msgs, 1, &len, err, sizeof err);
        free(m);
        if (!text) return api_fail(ae, 400, "invalid_request_error", "messages", NULL,
                                    "the %s chat template cannot render these messages", env->chat_tmpl);
    } else {
        text = q->prompt;
        len = strlen(text);
    }
    int rc = generate_tokenize(env->m, text, len, picolm_add_bos(env->m), 1, toks, n, err, sizeof err);
    if (q->chat) free(text);
    if (rc) return api_fail(ae, 400, "invalid_request_error", q->chat ? "messages" : "prompt", NULL, "%s", err);
    const int limit = env->max_prompt_tokens > 0 && env->max_prompt_tokens < env->n_ctx ? env->max_prompt_tokens : env->n_ctx - 1;
    const char *param = q->chat ? "messages" : "prompt";
    if (*n == 0) return api_fail(ae, 400, "invalid_request_error", "prompt", NULL, "the prompt is empty");
    if (*n > limit)
        return api_fail(ae, 400, "invalid_request_error", param, "context_length_exceeded",
                        "the prompt is %d tokens; this server takes at most %d (%s)", *n, limit,
                        limit == env->n_ctx - 1 ? "its context, leaving room for one generated token" : "max_prompt_tokens");
    if (*n >= env->kv_positions)
        return api_fail(ae, 400, "invalid_request_error", param, "context_length_exceeded",
                        "the prompt is %d tokens; the server's KV pool holds %d (--kv-ram)", *n, env->kv_positions - 1);
    return 0;
}

int prep_request(const prep_env *env, job *j, api_error *ae) {
    char err[1024];
    prepared *p = calloc(1, sizeof *p);
    if (!p || !(p->cfg = malloc(sizeof *p->cfg))) {
        free(p);
        return api_fail(ae, 500, "server_error", NULL, NULL, "out of memory");
    }
    const api_request *q = &j->req;
    if (settings(env, p->cfg, q, ae) || prompt_tokens(env, q, &p->toks, &p->n, ae)) goto failed;
    /* the tokenizer's buffer holds 4 tokens per prompt byte: keep what is used */
    int32_t *fit = realloc(p->toks, (size_t)p->n * sizeof *fit);
    if (fit) p->toks = fit;
    picolm_param keys[2];
    int n_keys;
    char *schema = NULL;
    if (constraint_keys(env, j, keys, &n_keys, &schema, ae)) goto failed;
    const int built = cli_sampler_new_with(&p->smp, env->m, p->cfg, keys, n_keys, err, sizeof err);
    free(schema);
    if (built) {
        char msg[600];
        api_schema_error(q, err, msg, sizeof msg);
        api_fail(ae, 400, "invalid_request_error", q->json_schema ? "response_format" : q->n_tools ? "tools" : NULL, NULL, "%s", msg);
        goto failed;
    }
    if (check_budget(env, p, q, ae)) goto failed;
    for (int i = 0; i < p->n; i++) picolm_sampler_accept(p->smp, p->toks[i]);
    j->seed = p->cfg->seed;
    j->prep = p;
    j->prep_free = prep_free_void;
    return 0;
failed:
    prep_free(p);
    return -1;
}
