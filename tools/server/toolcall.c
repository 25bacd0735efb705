/* Tool calls and JSON Schema output in the OpenAI API: see toolcall.h. */
#include "toolcall.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BAD(param, ...) api_fail(e, 400, "invalid_request_error", param, NULL, __VA_ARGS__)
#define OOM() api_fail(e, 500, "server_error", NULL, NULL, "out of memory")
#define MAX_TOOLS 128

static int is(json_object *v, enum json_type t) { return json_object_is_type(v, t); }

/* A string field, copied (no NUL inside: the engine takes C strings). */
static int take_string(json_object *v, const char *what, char **out, api_error *e) {
    if (!is(v, json_type_string)) return BAD(what, "'%s' must be a string", what);
    const size_t n = (size_t)json_object_get_string_len(v);
    if (memchr(json_object_get_string(v), 0, n)) return BAD(what, "'%s' contains a NUL character", what);
    free(*out);
    if (!(*out = strdup(json_object_get_string(v)))) return OOM();
    return 0;
}

/* A JSON value as text (numbers as the client wrote them). */
static int take_json(json_object *v, char **out, api_error *e) {
    size_t n;
    const char *s = json_object_to_json_string_length(v, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &n);
    free(*out);
    if (!s || !(*out = strdup(s))) return OOM();
    return 0;
}

static int name_ok(const char *s) {
    size_t n = 0;
    for (; s[n]; n++)
        if (!isalnum((unsigned char)s[n]) && s[n] != '_' && s[n] != '-') return 0;
    return n >= 1 && n <= 64;
}

static int parse_function(json_object *fn, api_tool *t, size_t i, api_error *e) {
    if (!is(fn, json_type_object)) return BAD("tools", "tools[%zu].function must be an object", i);
    json_object_object_foreach(fn, key, val) {
        int rc = 0;
        if (!strcmp(key, "name")) rc = take_string(val, "tools.function.name", &t->name, e);
        else if (!strcmp(key, "description")) rc = is(val, json_type_null) ? 0 : take_string(val, "tools.function.description", &t->description, e);
        else if (!strcmp(key, "parameters")) {
            if (!is(val, json_type_object) && !is(val, json_type_null))
                return BAD("tools", "tools[%zu].function.parameters must be a JSON Schema object", i);
            rc = is(val, json_type_null) ? 0 : take_json(val, &t->parameters, e);
        } else if (!strcmp(key, "strict")) {
            if (!is(val, json_type_boolean) && !is(val, json_type_null)) return BAD("tools", "tools[%zu].function.strict must be a boolean", i);
        } else return BAD("tools", "tools[%zu].function: unsupported field '%.40s'", i, key);
        if (rc) return -1;
    }
    if (!t->name) return BAD("tools", "tools[%zu].function needs a 'name'", i);
    if (!name_ok(t->name)) return BAD("tools", "tools[%zu].function.name '%.80s' must be 1 to 64 of a-z, A-Z, 0-9, _ and -", i, t->name);
    return 0;
}

int api_parse_tools(json_object *v, api_request *r, api_error *e) {
    if (is(v, json_type_null)) return 0;
    if (!is(v, json_type_array)) return BAD("tools", "'tools' must be an array");
    const size_t n = json_object_array_length(v);
    if (n > MAX_TOOLS) return BAD("tools", "'tools' has %zu functions; at most %d are supported", n, MAX_TOOLS);
    if (!n) return 0;
    if (!(r->tools = calloc(n, sizeof *r->tools))) return OOM();
    for (size_t i = 0; i < n; i++) {
        json_object *t = json_object_array_get_idx(v, i), *type = NULL, *fn = NULL;
        if (!is(t, json_type_object)) return BAD("tools", "tools[%zu] must be an object", i);
        r->n_tools++;
        json_object_object_foreach(t, key, val) {
            if (!strcmp(key, "type")) type = val;
            else if (!strcmp(key, "function")) fn = val;
            else return BAD("tools", "tools[%zu]: unsupported field '%.40s'", i, key);
        }
        if (!type || !is(type, json_type_string) || strcmp(json_object_get_string(type), "function"))
            return BAD("tools", "tools[%zu].type must be \"function\" (the only kind supported)", i);
        if (!fn) return BAD("tools", "tools[%zu] needs a 'function'", i);
        if (parse_function(fn, &r->tools[i], i, e)) return -1;
        for (size_t k = 0; k < i; k++)
            if (!strcmp(r->tools[k].name, r->tools[i].name)) return BAD("tools", "two tools are named '%s'", r->tools[i].name);
    }
    return 0;
}

int api_parse_tool_choice(json_object *v, api_request *r, api_error *e) {
    static const char *const names[] = {"auto", "none", "required"};
    if (is(v, json_type_null)) return 0;
    if (is(v, json_type_string)) {
        for (int k = 0; k < 3; k++)
            if (!strcmp(json_object_get_string(v), names[k])) return r->tool_choice = k, 0;
        return BAD("tool_choice", "'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}");
    }
    json_object *type, *fn, *name;
    if (!is(v, json_type_object) || !json_object_object_get_ex(v, "type", &type) || !is(type, json_type_string) ||
        strcmp(json_object_get_string(type), "function") || !json_object_object_get_ex(v, "function", &fn) ||
        !json_object_object_get_ex(fn, "name", &name))
        return BAD("tool_choice", "'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}");
    r->tool_choice = API_TOOL_NAMED;
    return take_string(name, "tool_choice.function.name", &r->tool_name, e);
}

int api_parse_schema_format(json_object *v, api_request *r, api_error *e) {
    json_object *js = NULL, *schema = NULL;
    json_object_object_foreach(v, key, val) {
        if (!strcmp(key, "json_schema")) js = val;
        else if (strcmp(key, "type")) return BAD("response_format", "response_format: unsupported field '%.40s'", key);
    }
    if (!js || !is(js, json_type_object)) return BAD("response_format", "response_format json_schema needs a 'json_schema' object");
    char *name = NULL, *desc = NULL;
    int rc = 0;
    json_object_object_foreach(js, k2, v2) {
        if (!strcmp(k2, "name")) rc = take_string(v2, "response_format.json_schema.name", &name, e);
        else if (!strcmp(k2, "description")) rc = take_string(v2, "response_format.json_schema.description", &desc, e);
        else if (!strcmp(k2, "schema")) schema = v2;
        else if (!strcmp(k2, "strict")) rc = is(v2, json_type_boolean) || is(v2, json_type_null) ? 0 : BAD("response_format", "response_format.json_schema.strict must be a boolean");
        else rc = BAD("response_format", "response_format.json_schema: unsupported field '%.40s'", k2);
        if (rc) break;
    }
    if (!rc && !name) rc = BAD("response_format", "response_format.json_schema needs a 'name'");
    if (!rc && !name_ok(name)) rc = BAD("response_format", "response_format.json_schema.name must be 1 to 64 of a-z, A-Z, 0-9, _ and -");
    if (!rc && (!schema || !is(schema, json_type_object))) rc = BAD("response_format", "response_format.json_schema needs a 'schema' object");
    free(name), free(desc);
    return rc ? rc : take_json(schema, &r->json_schema, e);
}

static int parse_calls(json_object *v, api_msg *m, size_t i, api_error *e) {
    if (is(v, json_type_null)) return 0;
    if (!is(v, json_type_array)) return BAD("messages", "messages[%zu].tool_calls must be an array", i);
    const size_t n = json_object_array_length(v);
    if (n > MAX_TOOLS) return BAD("messages", "messages[%zu] has %zu tool calls; at most %d are supported", i, n, MAX_TOOLS);
    if (!n) return 0;
    if (!(m->calls = calloc(n, sizeof *m->calls))) return OOM();
    for (size_t k = 0; k < n; k++) {
        json_object *c = json_object_array_get_idx(v, k), *fn = NULL, *x;
        api_call *call = &m->calls[m->n_calls++];
        if (!is(c, json_type_object)) return BAD("messages", "messages[%zu].tool_calls[%zu] must be an object", i, k);
        json_object_object_foreach(c, key, val) {
            if (!strcmp(key, "id")) { if (take_string(val, "messages.tool_calls.id", &call->id, e)) return -1; }
            else if (!strcmp(key, "type")) {
                if (!is(val, json_type_string) || strcmp(json_object_get_string(val), "function"))
                    return BAD("messages", "messages[%zu].tool_calls[%zu].type must be \"function\"", i, k);
            } else if (!strcmp(key, "function")) fn = val;
            else return BAD("messages", "messages[%zu].tool_calls[%zu]: unsupported field '%.40s'", i, k, key);
        }
        if (!fn || !is(fn, json_type_object) || !json_object_object_get_ex(fn, "name", &x) || take_string(x, "messages.tool_calls.function.name", &call->name, e))
            return e->status ? -1 : BAD("messages", "messages[%zu].tool_calls[%zu] needs a function with a name", i, k);
        /* the arguments: a JSON text as OpenAI sends them (an object is taken too) */
        if (json_object_object_get_ex(fn, "arguments", &x) && !is(x, json_type_null)) {
            if (is(x, json_type_string) ? take_string(x, "messages.tool_calls.function.arguments", &call->arguments, e) : take_json(x, &call->arguments, e)) return -1;
        }
    }
    return 0;
}

int api_parse_message_field(const char *key, json_object *v, api_msg *m, size_t i, api_error *e) {
    if (!strcmp(key, "tool_calls")) return parse_calls(v, m, i, e) ? -1 : 0;
    if (!strcmp(key, "tool_call_id")) return is(v, json_type_null) ? 0 : take_string(v, "messages.tool_call_id", &m->tool_call_id, e) ? -1 : 0;
    /* what a reply's message carries, sent back as the SDKs keep it (the
       openai SDK's runTools: parsed, refusal): nothing to render */
    if (!strcmp(key, "parsed") || !strcmp(key, "refusal") || !strcmp(key, "annotations")) return 0;
    if (!strcmp(key, "audio") || !strcmp(key, "function_call"))
        return is(v, json_type_null) ? 0 : BAD("messages", "messages[%zu].%s is not supported", i, key);
    if (!strcmp(key, "name")) { /* a participant's name: checked, not rendered by the templates */
        char *s = NULL;
        const int rc = is(v, json_type_null) ? 0 : take_string(v, "messages.name", &s, e);
        free(s);
        return rc ? -1 : 0;
    }
    return 1;
}

int api_has_tool_parts(const api_request *r) {
    int any = r->n_tools > 0;
    for (int i = 0; i < r->n_msgs && !any; i++) any = r->msgs[i].n_calls || !strcmp(r->msgs[i].role, "tool");
    return any;
}

int api_calls_tools(const api_request *r, int *forced) {
    if (forced) *forced = r->tool_choice == API_TOOL_REQUIRED || r->tool_choice == API_TOOL_NAMED;
    return r->n_tools > 0 && r->tool_choice != API_TOOL_NONE;
}

int api_check_tools(api_request *r, api_error *e) {
    if (!r->n_tools && (r->tool_choice == API_TOOL_REQUIRED || r->tool_choice == API_TOOL_NAMED))
        return BAD("tool_choice", "'tool_choice' asks for a call, and the request has no 'tools'");
    if (r->tool_choice == API_TOOL_NAMED) {
        int found = 0;
        for (int t = 0; t < r->n_tools; t++) found |= !strcmp(r->tools[t].name, r->tool_name);
        if (!found) return BAD("tool_choice", "'tool_choice' names '%.80s', which is not among the tools", r->tool_name);
    }
    for (int i = 0; i < r->n_msgs; i++)
        if (r->msgs[i].n_calls && strcmp(r->msgs[i].role, "assistant"))
            return BAD("messages", "messages[%d]: only assistant messages have tool_calls", i);
    const int calls = api_calls_tools(r, NULL);
    if (calls && (r->json_schema || r->json_object))
        return BAD("response_format", "response_format %s cannot be combined with tools (the reply is either a call or a document)",
                   r->json_schema ? "json_schema" : "json_object");
    if ((calls || r->json_schema) && r->n_stop)
        return BAD("stop", "'stop' cannot be combined with %s: a stop string could cut it short", calls ? "tools" : "response_format json_schema");
    return 0;
}

void api_free_tools(api_request *r) {
    for (int t = 0; t < r->n_tools; t++) free(r->tools[t].name), free(r->tools[t].description), free(r->tools[t].parameters);
    free(r->tools);
    free(r->tool_name);
    free(r->json_schema);
    for (int i = 0; i < r->n_msgs; i++) {
        for (int k = 0; k < r->msgs[i].n_calls; k++) {
            free(r->msgs[i].calls[k].id);
            free(r->msgs[i].calls[k].name);
            free(r->msgs[i].calls[k].arguments);
        }
        free(r->msgs[i].calls);
        free(r->msgs[i].tool_call_id);
    }
}

int api_tool_views(const api_request *r, picolm_tool **tools, picolm_chat_msg **msgs, picolm_tool_call **calls) {
    int n_calls = 0;
    for (int i = 0; i < r->n_msgs; i++) n_calls += r->msgs[i].n_calls;
    *tools = calloc((size_t)r->n_tools + 1, sizeof **tools);
    *msgs = calloc((size_t)r->n_msgs + 1, sizeof **msgs);
    *calls = calloc((size_t)n_calls + 1, sizeof **calls);
    if (!*tools || !*msgs || !*calls) return -1;
    for (int t = 0; t < r->n_tools; t++) (*tools)[t] = (picolm_tool){r->tools[t].name, r->tools[t].description, r->tools[t].parameters};
    for (int i = 0, c = 0; i < r->n_msgs; i++) {
        const api_msg *m = &r->msgs[i];
        (*msgs)[i] = (picolm_chat_msg){m->role, m->content, strlen(m->content), *calls + c, m->n_calls, m->tool_call_id};
        for (int k = 0; k < m->n_calls; k++, c++) (*calls)[c] = (picolm_tool_call){m->calls[k].id, m->calls[k].name, m->calls[k].arguments};
    }
    return 0;
}

void api_schema_error(const api_request *r, const char *msg, char *out, size_t n) {
    /* the call's schema is {"anyOf": [per tool]} (or one tool's): its
       paths start #/anyOf/K/properties/arguments (or #/properties/...) */
    if (r->json_schema) { /* the client's own schema: its paths as they are */
        const char *plugin = strstr(msg, "json_schema: ");
        snprintf(out, n, "response_format.json_schema.schema: %s", plugin ? plugin + 13 : msg);
        return;
    }
    picolm_tool *tools;
    picolm_chat_msg *msgs;
    picolm_tool_call *calls;
    if (!api_tool_views(r, &tools, &msgs, &calls)) picolm_tool_error(tools, r->n_tools, r->tool_choice == API_TOOL_NAMED ? r->tool_name : NULL, msg, out, n);
    else snprintf(out, n, "%s", msg);
    free(tools), free(msgs), free(calls);
}

/* ---- the reply ---- */

struct job_tools {
    picolm_tool_reply rd;
    char id[64];
    int head_sent;     /* the call's first delta (id, name) went out */
    size_t args_sent;  /* bytes of its arguments streamed */
    api_call_out out;
};

job_tools *job_tools_new(const picolm_tool_format *f, int forced, const char *job_id) {
    job_tools *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    picolm_tool_reply_init(&t->rd, f, forced);
    const char *dash = strchr(job_id, '-');
    snprintf(t->id, sizeof t->id, "call_%s", dash ? dash + 1 : job_id);
    return t;
}

void job_tools_free(job_tools *t) { free(t); }

size_t job_tools_scan(job_tools *t, const char *text, size_t len, int final) {
    picolm_tool_reply_scan(&t->rd, text, len, final);
    /* a call cut short (the server stopping) or malformed ends as text */
    if (final && t->rd.call && (!t->rd.done || t->rd.error) && !t->head_sent) return len;
    return t->rd.content_len;
}

void job_tools_stream(job_tools *t, const api_meta *m, const char *text, int *first, api_buf *out) {
    const picolm_tool_reply *rd = &t->rd;
    if (!rd->call || rd->error) return;
    if (!t->head_sent) {
        if (!rd->name_len) return;
        const api_call_out head = {t->id, text + rd->name_off, rd->name_len, "", 0};
        api_call_event(m, *first, &head, out);
        *first = 0;
        t->head_sent = 1;
    }
    const size_t from = rd->args_off + t->args_sent, end = rd->args_off + rd->args_len;
    if (end <= from) return;
    const size_t n = rd->done ? end - from : api_utf8_complete(text + from, end - from);
    if (!n) return;
    const api_call_out part = {NULL, NULL, 0, text + from, n};
    api_call_event(m, 0, &part, out);
    t->args_sent += n;
}

const api_call_out *job_tools_result(job_tools *t, const char *text, size_t len, size_t *content_len, const char **finish) {
    *content_len = job_tools_scan(t, text, len, 1);
    const picolm_tool_reply *rd = &t->rd;
    if (!rd->call || !rd->done || rd->error) return NULL;
    t->out = (api_call_out){t->id, text + rd->name_off, rd->name_len, text + rd->args_off, rd->args_len};
    *finish = "tool_calls";
    return &t->out;
}
