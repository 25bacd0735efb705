/* Tool calls: the call's schema and the reply's reader (picolm.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_template.h"
#include "jsondoc.h"
#include "picolm/picolm.h"
#include "util.h"

static void add(pl_sbuf *b, const char *s) { pl_sbuf_add(b, s, strlen(s)); }

/* One alternative: {"name": const, KEY: the parameters}, no other keys. */
static int call_schema(pl_sbuf *b, const picolm_tool_format *f, const picolm_tool *t, char *err, size_t errlen) {
    char why[200];
    add(b, "{\"type\":\"object\",\"properties\":{\"name\":{\"const\":\"");
    add(b, t->name);
    add(b, "\"},");
    jd_write_string(b, f->args_key, strlen(f->args_key));
    add(b, ":");
    if (t->parameters && *t->parameters) {
        jd_value *v = jd_parse(t->parameters, strlen(t->parameters), why, sizeof why);
        if (!v) return pl_fail(err, errlen, "the parameters of tool '%s' are not valid JSON: %s", t->name, why);
        const int obj = v->type == JD_OBJ;
        if (obj) jd_write(b, v, -1, 1);
        jd_free(v);
        if (!obj) return pl_fail(err, errlen, "the parameters of tool '%s' are not a JSON Schema object", t->name);
    } else {
        add(b, "{\"type\":\"object\",\"additionalProperties\":false}"); /* no parameters: {} */
    }
    add(b, "},\"required\":[\"name\",");
    jd_write_string(b, f->args_key, strlen(f->args_key));
    add(b, "],\"additionalProperties\":false}");
    return 0;
}

char *picolm_tool_schema(const picolm_tool_format *f, const picolm_tool *tools, int n, const char *only, char *err,
                         size_t errlen) {
    pl_sbuf b = {0};
    int count = 0, rc = 0;
    if (!f || n <= 0) return pl_fail(err, errlen, "no tools"), NULL;
    for (int i = 0; i < n && !rc; i++) {
        if (!chat_tool_name_ok(tools[i].name)) rc = pl_fail(err, errlen, "tool name '%.80s' is not 1 to 64 of [A-Za-z0-9_-]", tools[i].name ? tools[i].name : "");
        for (int j = 0; j < i && !rc; j++)
            if (!strcmp(tools[i].name, tools[j].name)) rc = pl_fail(err, errlen, "two tools are named '%s'", tools[i].name);
    }
    for (int i = 0; i < n && !rc; i++) count += !only || !strcmp(only, tools[i].name);
    if (!rc && !count) rc = pl_fail(err, errlen, "no tool is named '%.80s'", only);
    if (!rc && count > 1) add(&b, "{\"anyOf\":[");
    for (int i = 0, k = 0; i < n && !rc; i++) {
        if (only && strcmp(only, tools[i].name)) continue;
        if (k++) add(&b, ",");
        rc = call_schema(&b, f, &tools[i], err, errlen);
    }
    if (!rc && count > 1) add(&b, "]}");
    pl_sbuf_add(&b, "", 0);
    if (!rc && b.oom) rc = pl_fail(err, errlen, "out of memory");
    if (rc) { free(b.p); return NULL; }
    return b.p;
}

int picolm_tool_sampler_key(const picolm_tool_format *f, int forced, picolm_param *out) {
    if (forced || !f) return 0;
    *out = f->trigger[0] ? (picolm_param){"json_schema_trigger", f->trigger} : (picolm_param){"json_schema_optional", "1"};
    return 1;
}

/* ---- the reply ---- */

enum {
    R_TEXT,     /* free text (the trigger not seen) */
    R_ONLY,     /* free text for good (a reply that did not start with a call) */
    R_OPEN,     /* the call's '{' */
    R_KEY1,     /* "name" */
    R_COLON1, R_NAMEQ, R_NAME, R_COMMA,
    R_KEY2,     /* "arguments" (the format's key) */
    R_COLON2, R_VALUE, R_NEST, R_SCALAR,
    R_END       /* the arguments are complete */
};

void picolm_tool_reply_init(picolm_tool_reply *r, const picolm_tool_format *f, int forced) {
    memset(r, 0, sizeof *r);
    r->f = f;
    r->forced = forced;
    r->call = forced;
    r->state = forced ? R_OPEN : R_TEXT;
}

static int blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* The free text before a call: where the trigger starts, or what can be
   shown (all but a tail that may grow into the trigger). */
static void scan_text(picolm_tool_reply *r, const char *text, size_t len, int final) {
    const char *t = r->f->trigger;
    const size_t tl = strlen(t);
    if (!tl) { /* a call is a whole reply that starts with '{' */
        if (!len) return;
        if (text[0] == '{') r->call = 1, r->state = R_OPEN;
        else r->state = R_ONLY, r->content_len = len;
        return;
    }
    for (size_t i = r->content_len; i + tl <= len; i++)
        if (!memcmp(text + i, t, tl)) {
            r->content_len = i;
            r->call = 1;
            r->state = R_OPEN;
            r->pos = i + tl;
            return;
        }
    size_t hold = 0;
    for (size_t k = tl - 1; k > 0 && !final && !hold; k--)
        if (k <= len && !memcmp(text + len - k, t, k)) hold = k;
    r->content_len = len - hold;
}

/* A literal (quoted key) byte by byte: 1 matched, 0 more to come, -1 not it. */
static int literal(picolm_tool_reply *r, const char *lit, char c) {
    if (c != lit[r->k]) return -1;
    return lit[++r->k] ? 0 : 1;
}

/* A byte of an object, array or string value (strings and escapes followed). */
static void nest_byte(picolm_tool_reply *r, char c) {
    if (r->in_str) {
        if (r->esc) r->esc = 0;
        else if (c == '\\') r->esc = 1;
        else if (c == '"') r->in_str = 0;
    } else if (c == '"') {
        r->in_str = 1;
    } else if (c == '{' || c == '[') {
        r->depth++;
    } else if (c == '}' || c == ']') {
        r->depth--;
    }
    if (!r->depth && !r->in_str) r->state = R_END, r->done = 1, r->args_len = r->pos + 1 - r->args_off;
}

static void scan_call(picolm_tool_reply *r, const char *text, size_t len) {
    char key[80];
    snprintf(key, sizeof key, "\"%s\"", r->f->args_key);
    for (; r->pos < len && !r->error && r->state != R_END; r->pos++) {
        const char c = text[r->pos];
        int m;
        switch (r->state) {
        case R_OPEN: if (!blank(c)) r->error = c != '{', r->state = R_KEY1, r->k = 0; break;
        case R_KEY1:
        case R_KEY2:
            if (!r->k && blank(c)) break;
            m = literal(r, r->state == R_KEY1 ? "\"name\"" : key, c);
            if (m < 0) r->error = 1;
            else if (m) r->state++;
            break;
        case R_COLON1:
        case R_COLON2: if (!blank(c)) r->error = c != ':', r->state++; break;
        case R_NAMEQ: if (!blank(c)) r->error = c != '"', r->state = R_NAME, r->name_off = r->pos + 1; break;
        case R_NAME:
            if (c == '\\') r->error = 1;
            else if (c == '"') r->name_len = r->pos - r->name_off, r->state = R_COMMA;
            break;
        case R_COMMA: if (!blank(c)) r->error = c != ',', r->state = R_KEY2, r->k = 0; break;
        case R_VALUE:
            if (blank(c)) break;
            r->args_off = r->pos;
            r->depth = 0, r->in_str = 0, r->esc = 0;
            r->state = c == '{' || c == '[' || c == '"' ? R_NEST : R_SCALAR;
            if (r->state == R_NEST) nest_byte(r, c); /* the value's first byte */
            break;
        case R_NEST: nest_byte(r, c); break;
        case R_SCALAR:
            if (blank(c) || c == ',' || c == '}') r->state = R_END, r->done = 1, r->args_len = r->pos - r->args_off;
            break;
        }
    }
    if (r->state == R_NEST || r->state == R_SCALAR) r->args_len = r->pos - r->args_off;
}

void picolm_tool_reply_scan(picolm_tool_reply *r, const char *text, size_t len, int final) {
    if (r->state == R_TEXT) scan_text(r, text, len, final);
    else if (r->state == R_ONLY) r->content_len = len;
    if (r->call && r->state != R_END) scan_call(r, text, len);
    if (final && r->call && r->state == R_SCALAR) r->state = R_END, r->done = 1, r->args_len = len - r->args_off;
}
