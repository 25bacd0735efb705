/* The OpenAI wire format: see api.h. */
#include "api.h"
#include "toolcall.h"

#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int api_fail(api_error *e, int status, const char *type, const char *param, const char *code, const char *fmt, ...) {
    e->status = status;
    snprintf(e->type, sizeof e->type, "%s", type);
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    snprintf(e->code, sizeof e->code, "%s", code ? code : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return -1;
}

#define BAD(param, ...) api_fail(e, 400, "invalid_request_error", param, NULL, __VA_ARGS__)

/* ---- typed getters: null means "not given" (return 1), else 0 / -1 ---- */

static const char *type_name(json_object *v) {
    switch (json_object_get_type(v)) {
    case json_type_null: return "null";
    case json_type_boolean: return "a boolean";
    case json_type_double:
    case json_type_int: return "a number";
    case json_type_object: return "an object";
    case json_type_array: return "an array";
    case json_type_string: return "a string";
    }
    return "?";
}

static int get_number(json_object *v, const char *param, double lo, double hi, double *out, api_error *e) {
    if (json_object_is_type(v, json_type_null)) return 1;
    if (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int))
        return BAD(param, "'%s' must be a number, not %s", param, type_name(v));
    errno = 0;
    double d = json_object_get_double(v);
    if (errno == ERANGE || !isfinite(d) || d < lo || d > hi)
        return BAD(param, "'%s' must be between %g and %g", param, lo, hi);
    *out = d;
    return 0;
}

/* An integer: a JSON number with no fraction, in [lo, hi]. */
static int get_int64(json_object *v, const char *param, int64_t lo, int64_t hi, int64_t *out, api_error *e) {
    if (json_object_is_type(v, json_type_null)) return 1;
    if (json_object_is_type(v, json_type_int)) {
        errno = 0;
        int64_t x = json_object_get_int64(v);
        /* json-c saturates integers beyond int64 (and sets errno) */
        if (errno == ERANGE || x == INT64_MAX || x == INT64_MIN || x < lo || x > hi)
            return BAD(param, "'%s' must be an integer between %lld and %lld", param, (long long)lo, (long long)hi);
        *out = x;
        return 0;
    }
    if (json_object_is_type(v, json_type_double)) {
        double d = json_object_get_double(v);
        if (!isfinite(d) || d != floor(d) || d < (double)lo || d > (double)hi)
            return BAD(param, "'%s' must be an integer between %lld and %lld", param, (long long)lo, (long long)hi);
        *out = (int64_t)d;
        return 0;
    }
    return BAD(param, "'%s' must be an integer, not %s", param, type_name(v));
}

static int get_int(json_object *v, const char *param, int lo, int hi, int *out, api_error *e) {
    int64_t x;
    int rc = get_int64(v, param, lo, hi, &x, e);
    if (!rc) *out = (int)x;
    return rc;
}

static int get_bool(json_object *v, const char *param, int *out, api_error *e) {
    if (json_object_is_type(v, json_type_null)) return 1;
    if (!json_object_is_type(v, json_type_boolean)) return BAD(param, "'%s' must be a boolean, not %s", param, type_name(v));
    *out = json_object_get_boolean(v);
    return 0;
}

/* Text for the engine: no NUL (it takes C strings), and UTF-8 without the
   surrogates an escape like \ud800 decodes to. */
static int check_text(const char *s, size_t n, const char *param, api_error *e) {
    if (memchr(s, 0, n)) return BAD(param, "'%s' contains a NUL character", param);
    if (!api_utf8_valid(s, n)) return BAD(param, "'%s' is not valid UTF-8 (a lone surrogate escape?)", param);
    return 0;
}

/* A string without NUL characters (the engine takes C strings), copied. */
static int get_string(json_object *v, const char *param, char **out, api_error *e) {
    if (json_object_is_type(v, json_type_null)) return 1;
    if (!json_object_is_type(v, json_type_string)) return BAD(param, "'%s' must be a string, not %s", param, type_name(v));
    size_t n = (size_t)json_object_get_string_len(v);
    const char *s = json_object_get_string(v);
    if (check_text(s, n, param, e)) return -1;
    free(*out);
    *out = strdup(s);
    if (!*out) return api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    return 0;
}

/* ---- the fields ---- */

static int parse_stop(json_object *v, api_request *r, api_error *e) {
    if (json_object_is_type(v, json_type_null)) return 0;
    if (json_object_is_type(v, json_type_string)) {
        if (get_string(v, "stop", &r->stop[0], e) < 0) return -1;
        r->n_stop = r->stop[0][0] ? 1 : 0;
        return 0;
    }
    if (!json_object_is_type(v, json_type_array)) return BAD("stop", "'stop' must be a string or an array of strings");
    size_t n = json_object_array_length(v);
    if (n > API_MAX_STOP) return BAD("stop", "'stop' has %zu sequences; at most %d are supported", n, API_MAX_STOP);
    for (size_t i = 0; i < n; i++) {
        char *s = NULL;
        if (get_string(json_object_array_get_idx(v, i), "stop", &s, e)) {
            free(s);
            return e->status ? -1 : BAD("stop", "'stop' must be an array of strings, not null items");
        }
        if (!s[0]) {
            free(s);
            return BAD("stop", "'stop' sequences must not be empty");
        }
        r->stop[r->n_stop++] = s;
    }
    return 0;
}

/* Content: a string, or OpenAI's array of {"type": "text", "text": ...} parts. */
static int parse_content(json_object *v, char **out, api_error *e) {
    if (json_object_is_type(v, json_type_string) || json_object_is_type(v, json_type_null)) {
        int rc = get_string(v, "messages.content", out, e);
        if (rc < 0) return -1;
        if (rc == 1 && !(*out = strdup(""))) return api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
        return 0;
    }
    if (!json_object_is_type(v, json_type_array))
        return BAD("messages.content", "a message's content must be a string or an array of text parts");
    api_buf b = {0};
    api_buf_add(&b, "", 0);
    for (size_t i = 0, n = json_object_array_length(v); i < n; i++) {
        json_object *part = json_object_array_get_idx(v, i), *type, *text;
        if (!json_object_is_type(part, json_type_object) || !json_object_object_get_ex(part, "type", &type) ||
            !json_object_is_type(type, json_type_string) || strcmp(json_object_get_string(type), "text") ||
            !json_object_object_get_ex(part, "text", &text) || !json_object_is_type(text, json_type_string)) {
            api_buf_free(&b);
            return BAD("messages.content", "only text content parts ({\"type\": \"text\", \"text\": ...}) are supported");
        }
        size_t len = (size_t)json_object_get_string_len(text);
        if (check_text(json_object_get_string(text), len, "messages.content", e)) {
            api_buf_free(&b);
            return -1;
        }
        api_buf_add(&b, json_object_get_string(text), len);
    }
    if (b.oom) {
        api_buf_free(&b);
        return api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    }
    *out = b.s;
    return 0;
}

static int parse_messages(json_object *v, api_request *r, api_error *e) {
    if (!json_object_is_type(v, json_type_array)) return BAD("messages", "'messages' must be an array");
    size_t n = json_object_array_length(v);
    if (n == 0) return BAD("messages", "'messages' must not be empty");
    if (n > 4096) return BAD("messages", "'messages' has %zu entries; at most 4096 are supported", n);
    r->msgs = calloc(n, sizeof *r->msgs);
    if (!r->msgs) return api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_object *m = json_object_array_get_idx(v, i), *role = NULL, *content = NULL;
        api_msg *msg = &r->msgs[r->n_msgs++];
        if (!json_object_is_type(m, json_type_object)) return BAD("messages", "messages[%zu] must be an object", i);
        json_object_object_foreach(m, key, val) {
            int rc;
            if (!strcmp(key, "role")) role = val;
            else if (!strcmp(key, "content")) content = val;
            else if ((rc = api_parse_message_field(key, val, msg, i, e)) < 0) return -1;
            else if (rc) return BAD("messages", "messages[%zu]: unsupported field '%s' (picolm takes role, content, tool_calls, tool_call_id, name and, ignored, parsed, refusal and annotations)", i, key);
        }
        if (!role || !json_object_is_type(role, json_type_string))
            return BAD("messages", "messages[%zu] needs a string 'role'", i);
        const char *rs = json_object_get_string(role);
        /* "developer" is OpenAI's newer name for the system role */
        const char *canon = !strcmp(rs, "developer") ? "system" : rs;
        if (strcmp(canon, "system") && strcmp(canon, "user") && strcmp(canon, "assistant") && strcmp(canon, "tool"))
            return BAD("messages", "messages[%zu]: unsupported role '%.40s' (supported: system, developer, user, assistant, tool)", i, rs);
        /* an assistant message that made calls may have no content */
        if (!content && !msg->n_calls) return BAD("messages", "messages[%zu] needs 'content'", i);
        if (!(msg->role = strdup(canon))) return api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
        if (content ? parse_content(content, &msg->content, e) : !(msg->content = strdup("")))
            return e->status ? -1 : api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    }
    return 0;
}

static int parse_prompt(json_object *v, api_request *r, api_error *e) {
    /* a one-element array of strings is the same prompt; more would be n > 1 */
    if (json_object_is_type(v, json_type_array)) {
        if (json_object_array_length(v) != 1)
            return BAD("prompt", "'prompt' must be one string (batches of prompts are not supported)");
        v = json_object_array_get_idx(v, 0);
    }
    if (!json_object_is_type(v, json_type_string)) return BAD("prompt", "'prompt' must be a string");
    return get_string(v, "prompt", &r->prompt, e);
}

static int parse_response_format(json_object *v, api_request *r, api_error *e) {
    json_object *t;
    if (json_object_is_type(v, json_type_null)) return 0;
    if (!json_object_is_type(v, json_type_object) || !json_object_object_get_ex(v, "type", &t) ||
        !json_object_is_type(t, json_type_string))
        return BAD("response_format", "'response_format' must be an object with a string 'type'");
    const char *s = json_object_get_string(t);
    if (!strcmp(s, "json_object")) r->json_object = 1;
    else if (r->chat && !strcmp(s, "json_schema")) return api_parse_schema_format(v, r, e);
    else if (strcmp(s, "text"))
        return BAD("response_format", "response_format type '%.40s' is not supported (supported: text, json_object%s)", s,
                   r->chat ? ", json_schema" : "");
    return 0;
}

static int parse_stream_options(json_object *v, api_request *r, api_error *e) {
    if (json_object_is_type(v, json_type_null)) return 0;
    if (!json_object_is_type(v, json_type_object)) return BAD("stream_options", "'stream_options' must be an object");
    json_object_object_foreach(v, key, val) {
        if (strcmp(key, "include_usage")) return BAD("stream_options", "unsupported stream option '%s'", key);
        if (get_bool(val, "stream_options.include_usage", &r->include_usage, e) < 0) return -1;
    }
    return 0;
}

/* Record a parsed optional value: rc 0 = set, 1 = null, -1 = error. */
static int mark(int rc, api_request *r, unsigned bit) {
    if (rc == 0) r->set |= bit;
    return rc < 0 ? -1 : 0;
}

static int parse_field(const char *key, json_object *v, api_request *r, api_error *e) {
    int64_t i64;
    int one = 1, flag = 0, rc;
    if (!strcmp(key, "model")) return get_string(v, key, &r->model, e) < 0 ? -1 : 0;
    if (r->chat && !strcmp(key, "messages")) return parse_messages(v, r, e);
    if (!r->chat && !strcmp(key, "prompt")) return parse_prompt(v, r, e);
    if (!strcmp(key, "max_tokens") || (r->chat && !strcmp(key, "max_completion_tokens")))
        return mark(get_int(v, key, 1, 1 << 30, &r->max_tokens, e), r, API_SET_MAX_TOKENS);
    if (!strcmp(key, "temperature")) return mark(get_number(v, key, 0, 2, &r->temperature, e), r, API_SET_TEMPERATURE);
    if (!strcmp(key, "top_p")) return mark(get_number(v, key, 0, 1, &r->top_p, e), r, API_SET_TOP_P);
    if (!strcmp(key, "min_p")) return mark(get_number(v, key, 0, 1, &r->min_p, e), r, API_SET_MIN_P);
    if (!strcmp(key, "top_k")) return mark(get_int(v, key, 0, 1 << 30, &r->top_k, e), r, API_SET_TOP_K);
    if (!strcmp(key, "presence_penalty"))
        return mark(get_number(v, key, -2, 2, &r->presence_penalty, e), r, API_SET_PRESENCE);
    if (!strcmp(key, "frequency_penalty"))
        return mark(get_number(v, key, -2, 2, &r->frequency_penalty, e), r, API_SET_FREQUENCY);
    if (!strcmp(key, "seed")) {
        rc = get_int64(v, key, INT64_MIN + 1, INT64_MAX - 1, &i64, e);
        if (rc == 0) r->seed = (uint64_t)i64;
        return mark(rc, r, API_SET_SEED);
    }
    if (!strcmp(key, "stop")) return parse_stop(v, r, e);
    if (!strcmp(key, "stream")) return get_bool(v, key, &r->stream, e) < 0 ? -1 : 0;
    if (!strcmp(key, "stream_options")) return parse_stream_options(v, r, e);
    if (!strcmp(key, "response_format")) return parse_response_format(v, r, e);
    if (!strcmp(key, "user")) {
        char *u = NULL; /* an end-user id for abuse tracking: checked, not needed here */
        rc = get_string(v, key, &u, e);
        free(u);
        return rc < 0 ? -1 : 0;
    }
    if (!strcmp(key, "n") || (!r->chat && !strcmp(key, "best_of"))) {
        if ((rc = get_int(v, key, 1, 1 << 30, &one, e)) < 0) return -1;
        if (one != 1) return BAD(key, "'%s' must be 1: picolm-server returns one choice per request", key);
        return 0;
    }
    if (r->chat && !strcmp(key, "logprobs")) return get_bool(v, key, &r->logprobs, e) < 0 ? -1 : 0;
    if (r->chat && !strcmp(key, "tools")) return api_parse_tools(v, r, e);
    if (r->chat && !strcmp(key, "tool_choice")) return api_parse_tool_choice(v, r, e);
    if (r->chat && !strcmp(key, "parallel_tool_calls")) return get_bool(v, key, &flag, e) < 0 ? -1 : 0; /* a reply holds at most one call */
    if (r->chat && !strcmp(key, "top_logprobs"))
        return get_int(v, key, 0, API_MAX_TOP_LOGPROBS, &r->top_logprobs, e) < 0 ? -1 : 0;
    if (!r->chat && !strcmp(key, "logprobs")) {
        /* completions: logprobs = N asks for the N most likely alternatives */
        if ((rc = get_int(v, key, 0, 5, &r->top_logprobs, e)) < 0) return -1;
        r->logprobs = rc == 0;
        return 0;
    }
    if (!r->chat && !strcmp(key, "echo")) {
        if (get_bool(v, key, &flag, e) < 0) return -1;
        if (flag) return BAD(key, "'echo': true is not supported");
        return 0;
    }
    if (!r->chat && !strcmp(key, "suffix")) {
        if (!json_object_is_type(v, json_type_null)) return BAD(key, "'suffix' is not supported");
        return 0;
    }
    return BAD(key, "unrecognized request argument supplied: %.60s", key);
}

static int hex4(const char *s, size_t n, size_t i, unsigned *out) {
    if (i + 4 > n) return 0;
    *out = 0;
    for (size_t k = i; k < i + 4; k++) {
        const char c = s[k];
        const unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0') : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                         : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10) : 16u;
        if (d > 15) return 0;
        *out = *out * 16 + d;
    }
    return 1;
}

/* Every \uD800-\uDFFF escape is half of a pair (json-c turns a lone one
   into U+FFFD silently).  Escapes occur only inside strings, so pairs of
   backslash + character are enough to follow them. */
static int escapes_valid(const char *s, size_t n) {
    for (size_t i = 0; i + 1 < n; i++) {
        if (s[i] != '\\') continue;
        unsigned u, v;
        if (s[++i] != 'u' || !hex4(s, n, i + 1, &u)) continue;
        i += 4;
        if (u >= 0xDC00 && u <= 0xDFFF) return 0;
        if (u < 0xD800 || u > 0xDBFF) continue;
        if (i + 6 >= n || s[i + 1] != '\\' || s[i + 2] != 'u' || !hex4(s, n, i + 3, &v) || v < 0xDC00 || v > 0xDFFF) return 0;
        i += 6;
    }
    return 1;
}

int api_parse_request(const char *body, size_t len, int chat, api_request *r, api_error *e) {
    memset(r, 0, sizeof *r);
    memset(e, 0, sizeof *e);
    r->chat = chat;
    if (len > (size_t)0x7fffffff) return BAD(NULL, "request body too large");
    /* json-c lets overlong forms and encoded surrogates through, and stops
       at a NUL byte: the body is checked first, byte by byte */
    if (memchr(body, 0, len)) return BAD(NULL, "the request body contains a NUL byte (at byte %zu)", (size_t)((const char *)memchr(body, 0, len) - body));
    if (!api_utf8_valid(body, len)) return BAD(NULL, "the request body is not valid UTF-8");
    if (!escapes_valid(body, len)) return BAD(NULL, "the request body has a \\u escape of a lone surrogate (not a character)");
    json_tokener *tok = json_tokener_new_ex(32);
    if (!tok) return api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
    json_object *root = json_tokener_parse_ex(tok, body, (int)len);
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    size_t end = json_tokener_get_parse_end(tok);
    json_tokener_free(tok);
    if (!root || jerr != json_tokener_success) {
        json_object_put(root);
        if (jerr == json_tokener_continue) return BAD(NULL, "the request body is not complete JSON");
        return BAD(NULL, "the request body is not valid JSON: %s (at byte %zu)", json_tokener_error_desc(jerr), end);
    }
    for (; end < len; end++)
        if (!strchr(" \t\r\n", body[end])) {
            json_object_put(root);
            return BAD(NULL, "the request body has data after its JSON value (at byte %zu)", end);
        }
    int rc = 0;
    if (!json_object_is_type(root, json_type_object)) rc = BAD(NULL, "the request body must be a JSON object");
    else {
        json_object_object_foreach(root, key, val) {
            if ((rc = parse_field(key, val, r, e))) break;
        }
    }
    if (!rc && chat && !r->msgs) rc = BAD("messages", "'messages' is required");
    if (!rc && !chat && !r->prompt) rc = BAD("prompt", "'prompt' is required");
    if (!rc && r->top_logprobs && chat && !r->logprobs) rc = BAD("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    if (!rc && r->include_usage && !r->stream) rc = BAD("stream_options", "'stream_options' is only allowed with 'stream': true");
    if (!rc) rc = api_check_tools(r, e);
    if (!rc && r->json_object && (r->set & API_SET_MAX_TOKENS) && r->max_tokens < 2)
        rc = BAD("max_tokens", "response_format json_object needs 'max_tokens' of at least 2: no JSON object fits in fewer tokens");
    json_object_put(root);
    if (rc) api_free_request(r);
    return rc ? -1 : 0;
}

void api_free_request(api_request *r) {
    api_free_tools(r);
    for (int i = 0; i < r->n_msgs; i++) {
        free(r->msgs[i].role);
        free(r->msgs[i].content);
    }
    free(r->msgs);
    free(r->model);
    free(r->prompt);
    for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
    int chat = r->chat;
    memset(r, 0, sizeof *r);
    r->chat = chat;
}

/* ---- output ---- */

void api_buf_add(api_buf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->s, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}

void api_buf_free(api_buf *b) {
    free(b->s);
    memset(b, 0, sizeof *b);
}

static void put_json(api_buf *out, json_object *o) {
    size_t n;
    const char *s = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &n);
    api_buf_add(out, s, n);
    json_object_put(o);
}

static json_object *str_or_null(const char *s) { return s && s[0] ? json_object_new_string(s) : json_object_new_null(); }

void api_error_body(const api_error *e, api_buf *out) {
    json_object *err = json_object_new_object(), *root = json_object_new_object();
    json_object_object_add(err, "message", json_object_new_string(e->message));
    json_object_object_add(err, "type", json_object_new_string(e->type[0] ? e->type : "server_error"));
    json_object_object_add(err, "param", str_or_null(e->param));
    json_object_object_add(err, "code", str_or_null(e->code));
    json_object_object_add(root, "error", err);
    put_json(out, root);
}

int api_utf8_valid(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        const unsigned c = p[i];
        if (c < 0x80) {
            if (!c) return 0;
            i++;
            continue;
        }
        /* the second byte's range rules out overlongs (E0, F0), surrogates
           (ED) and code points above U+10FFFF (F4) */
        unsigned len, lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) len = 2;
        else if (c >= 0xE0 && c <= 0xEF) len = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
        else if (c >= 0xF0 && c <= 0xF4) len = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
        else return 0;
        if (i + len > n || p[i + 1] < lo || p[i + 1] > hi) return 0;
        for (unsigned k = 2; k < len; k++)
            if ((p[i + k] & 0xC0) != 0x80) return 0;
        i += len;
    }
    return 1;
}

size_t api_utf8_complete(const char *s, size_t n) {
    /* step back over at most 3 continuation bytes to the last lead byte */
    size_t i = n, back = 0;
    while (i > 0 && back < 4 && ((unsigned char)s[i - 1] & 0xC0) == 0x80) i--, back++;
    if (i == 0) return back ? 0 : n;
    unsigned char c = (unsigned char)s[i - 1];
    size_t need = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    return back + 1 >= need ? n : i - 1;
}

/* JSON text for bytes that may not be valid UTF-8 (a token can be half a
   character): invalid bytes become U+FFFD; the exact bytes go in "bytes". */
static json_object *text_json(const char *s, size_t n) {
    api_buf b = {0};
    api_buf_add(&b, "", 0);
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        int ok = len > 0 && i + len <= n;
        for (size_t k = 1; ok && k < len; k++) ok = ((unsigned char)s[i + k] & 0xC0) == 0x80;
        if (ok && c) api_buf_add(&b, s + i, len), i += len;
        else api_buf_add(&b, "\xEF\xBF\xBD", 3), i++;
    }
    json_object *o = json_object_new_string_len(b.s ? b.s : "", b.s ? (int)b.n : 0);
    api_buf_free(&b);
    return o;
}

static json_object *bytes_json(const char *s, size_t n) {
    json_object *a = json_object_new_array_ext((int)n);
    for (size_t i = 0; i < n; i++) json_object_array_add(a, json_object_new_int((unsigned char)s[i]));
    return a;
}

static json_object *chat_logprob_entry(const char *text, size_t len, float lp) {
    json_object *o = json_object_new_object();
    json_object_object_add(o, "token", text_json(text, len));
    json_object_object_add(o, "logprob", json_object_new_double(lp));
    json_object_object_add(o, "bytes", bytes_json(text, len));
    return o;
}

/* logprobs of a choice: the chat format ({"content": [...]}) or the
   completions one (parallel arrays; text_offset counts from offset0). */
static json_object *logprobs_json(const api_request *r, const api_token *t, int n, size_t *offset) {
    if (!r->logprobs) return json_object_new_null();
    json_object *o = json_object_new_object();
    if (r->chat) {
        json_object *content = json_object_new_array();
        for (int i = 0; i < n; i++) {
            json_object *e = chat_logprob_entry(t[i].text, t[i].len, t[i].logprob), *top = json_object_new_array();
            for (int k = 0; k < t[i].n_top; k++)
                json_object_array_add(top, chat_logprob_entry(t[i].top[k].text, t[i].top[k].len, t[i].top[k].logprob));
            json_object_object_add(e, "top_logprobs", top);
            json_object_array_add(content, e);
        }
        json_object_object_add(o, "content", content);
        return o;
    }
    json_object *tokens = json_object_new_array(), *lps = json_object_new_array(), *tops = json_object_new_array(),
                *offs = json_object_new_array();
    for (int i = 0; i < n; i++) {
        json_object_array_add(tokens, text_json(t[i].text, t[i].len));
        json_object_array_add(lps, json_object_new_double(t[i].logprob));
        json_object *top = json_object_new_object();
        for (int k = 0; k < t[i].n_top; k++) {
            json_object *key = text_json(t[i].top[k].text, t[i].top[k].len);
            json_object_object_add(top, json_object_get_string(key), json_object_new_double(t[i].top[k].logprob));
            json_object_put(key);
        }
        json_object_array_add(tops, r->top_logprobs ? top : (json_object_put(top), json_object_new_null()));
        json_object_array_add(offs, json_object_new_int64((int64_t)*offset));
        *offset += t[i].len;
    }
    json_object_object_add(o, "tokens", tokens);
    json_object_object_add(o, "token_logprobs", lps);
    json_object_object_add(o, "top_logprobs", tops);
    json_object_object_add(o, "text_offset", offs);
    return o;
}

static json_object *usage_json(const api_usage *u) {
    json_object *o = json_object_new_object();
    json_object_object_add(o, "prompt_tokens", json_object_new_int(u->prompt_tokens));
    json_object_object_add(o, "completion_tokens", json_object_new_int(u->completion_tokens));
    json_object_object_add(o, "total_tokens", json_object_new_int(u->prompt_tokens + u->completion_tokens));
    json_object *details = json_object_new_object();
    json_object_object_add(details, "cached_tokens", json_object_new_int(u->cached_tokens));
    json_object_object_add(o, "prompt_tokens_details", details);
    return o;
}

static json_object *head_json(const api_meta *m, const char *object, int seed) {
    json_object *o = json_object_new_object();
    json_object_object_add(o, "id", json_object_new_string(m->id));
    json_object_object_add(o, "object", json_object_new_string(object));
    json_object_object_add(o, "created", json_object_new_int64(m->created));
    json_object_object_add(o, "model", json_object_new_string(m->model));
    if (seed) json_object_object_add(o, "seed", json_object_new_uint64(m->seed));
    return o;
}

/* [{"id", "type": "function", "function": {"name", "arguments"}}] with the
   parts of c that are set (a stream's delta also has "index"). */
static json_object *calls_json(const api_call_out *c, int delta) {
    json_object *call = json_object_new_object(), *fn = json_object_new_object(), *a = json_object_new_array();
    if (delta) json_object_object_add(call, "index", json_object_new_int(0));
    if (c->id) {
        json_object_object_add(call, "id", json_object_new_string(c->id));
        json_object_object_add(call, "type", json_object_new_string("function"));
    }
    if (c->name) json_object_object_add(fn, "name", text_json(c->name, c->name_len));
    json_object_object_add(fn, "arguments", text_json(c->args ? c->args : "", c->args ? c->args_len : 0));
    json_object_object_add(call, "function", fn);
    json_object_array_add(a, call);
    return a;
}

void api_response_body(const api_request *r, const api_meta *m, const char *text, size_t len, const api_token *toks,
                       int n_toks, const char *finish, const api_usage *u, const api_call_out *call, api_buf *out) {
    json_object *root = head_json(m, r->chat ? "chat.completion" : "text_completion", 1);
    json_object *choice = json_object_new_object(), *choices = json_object_new_array();
    size_t offset = 0;
    json_object_object_add(choice, "index", json_object_new_int(0));
    if (r->chat) {
        json_object *msg = json_object_new_object();
        json_object_object_add(msg, "role", json_object_new_string("assistant"));
        json_object_object_add(msg, "content", call && !len ? json_object_new_null() : text_json(text, len));
        if (call) json_object_object_add(msg, "tool_calls", calls_json(call, 0));
        json_object_object_add(choice, "message", msg);
    } else {
        json_object_object_add(choice, "text", text_json(text, len));
    }
    json_object_object_add(choice, "logprobs", logprobs_json(r, toks, n_toks, &offset));
    json_object_object_add(choice, "finish_reason", json_object_new_string(finish));
    json_object_array_add(choices, choice);
    json_object_object_add(root, "choices", choices);
    json_object_object_add(root, "usage", usage_json(u));
    put_json(out, root);
}

void api_chunk_event(const api_request *r, const api_meta *m, int first, const char *text, size_t len,
                     const api_token *toks, int n_toks, const char *finish, const api_usage *usage, api_buf *out) {
    json_object *root = head_json(m, r->chat ? "chat.completion.chunk" : "text_completion", first);
    json_object *choices = json_object_new_array();
    if (!usage) {
        json_object *choice = json_object_new_object();
        size_t offset = 0;
        json_object_object_add(choice, "index", json_object_new_int(0));
        if (r->chat) {
            json_object *delta = json_object_new_object();
            if (first) json_object_object_add(delta, "role", json_object_new_string("assistant"));
            if (len || !finish) json_object_object_add(delta, "content", text_json(text, len));
            json_object_object_add(choice, "delta", delta);
        } else {
            json_object_object_add(choice, "text", text_json(text, len));
        }
        json_object_object_add(choice, "logprobs", n_toks ? logprobs_json(r, toks, n_toks, &offset) : json_object_new_null());
        json_object_object_add(choice, "finish_reason", finish ? json_object_new_string(finish) : json_object_new_null());
        json_object_array_add(choices, choice);
    }
    json_object_object_add(root, "choices", choices);
    if (usage) json_object_object_add(root, "usage", usage_json(usage));
    api_buf_add(out, "data: ", 6);
    put_json(out, root);
    api_buf_add(out, "\n\n", 2);
}

void api_call_event(const api_meta *m, int first, const api_call_out *call, api_buf *out) {
    json_object *root = head_json(m, "chat.completion.chunk", first), *choices = json_object_new_array();
    json_object *choice = json_object_new_object(), *delta = json_object_new_object();
    json_object_object_add(choice, "index", json_object_new_int(0));
    if (first) {
        json_object_object_add(delta, "role", json_object_new_string("assistant"));
        json_object_object_add(delta, "content", json_object_new_null());
    }
    json_object_object_add(delta, "tool_calls", calls_json(call, 1));
    json_object_object_add(choice, "delta", delta);
    json_object_object_add(choice, "logprobs", json_object_new_null());
    json_object_object_add(choice, "finish_reason", json_object_new_null());
    json_object_array_add(choices, choice);
    json_object_object_add(root, "choices", choices);
    api_buf_add(out, "data: ", 6);
    put_json(out, root);
    api_buf_add(out, "\n\n", 2);
}

void api_models_body(const char *model_id, long long created, int one, api_buf *out) {
    json_object *m = json_object_new_object();
    json_object_object_add(m, "id", json_object_new_string(model_id));
    json_object_object_add(m, "object", json_object_new_string("model"));
    json_object_object_add(m, "created", json_object_new_int64(created));
    json_object_object_add(m, "owned_by", json_object_new_string("picolm"));
    if (one) {
        put_json(out, m);
        return;
    }
    json_object *root = json_object_new_object(), *data = json_object_new_array();
    json_object_array_add(data, m);
    json_object_object_add(root, "object", json_object_new_string("list"));
    json_object_object_add(root, "data", data);
    put_json(out, root);
}
