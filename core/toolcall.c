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

void picolm_tool_error(const picolm_tool *tools, int n, const char *only, const char *msg, char *out, size_t outlen) {
    /* the call's schema is {"anyOf": [per tool]} (or one tool's): its paths
       start #/anyOf/K/properties/KEY (or #/properties/KEY) */
    const char *at = strstr(msg, "#/"), *rest = NULL;
    int k = -1;
    if (at && !strncmp(at, "#/anyOf/", 8)) k = atoi(at + 8), rest = strchr(at + 8, '/');
    else if (at) {
        rest = at + 1;
        for (int t = 0; t < n && k < 0; t++)
            if (n == 1 || (only && !strcmp(tools[t].name, only))) k = t;
    }
    static const char *const keys[] = {"/properties/arguments", "/properties/parameters"};
    for (int i = 0; i < 2 && rest && k >= 0 && k < n; i++)
        if (!strncmp(rest, keys[i], strlen(keys[i]))) {
            snprintf(out, outlen, "tools[%d] (%s): parameters: #%s", k, tools[k].name, rest + strlen(keys[i]));
            return;
        }
    snprintf(out, outlen, "%s", msg);
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

/* ---- OpenAI JSON in, one line of JSON out ---- */

/* Structs and their strings in one allocation: a counting pass, then a
   filling pass over the same calls. */
typedef struct pack {
    char *base;   /* NULL: counting */
    size_t used;
} pack;

static void *pk_take(pack *pk, size_t n) {
    n = (n + 15) & ~(size_t)15;
    void *p = pk->base ? pk->base + pk->used : NULL;
    pk->used += n;
    return p;
}

static const char *pk_str(pack *pk, const char *s, size_t n) {
    char *p = pk_take(pk, n + 1);
    if (p) memcpy(p, s, n), p[n] = 0;
    return p;
}

/* A JSON value as compact text in the pack. */
static const char *pk_json(pack *pk, const jd_value *v) {
    pl_sbuf b = {0};
    jd_write(&b, v, -1, 1);
    const char *s = b.oom ? NULL : pk_str(pk, b.p ? b.p : "", b.n);
    free(b.p);
    return s;
}

static const char *str_of(const jd_value *v) { return v && v->type == JD_STR ? v->s : NULL; }

static int fill_tools(pack *pk, const jd_value *root, void *out, char *err, size_t errlen) {
    picolm_tool *t = pk_take(pk, root->n * sizeof *t);
    for (size_t i = 0; i < root->n; i++) {
        const jd_value *fn = jd_get(&root->items[i], "function"), *type = jd_get(&root->items[i], "type");
        const jd_value *name = jd_get(fn, "name"), *desc = jd_get(fn, "description"), *par = jd_get(fn, "parameters");
        if (!str_of(type) || strcmp(type->s, "function") || !fn || fn->type != JD_OBJ)
            return pl_fail(err, errlen, "tools[%zu]: not {\"type\": \"function\", \"function\": {...}}", i);
        if (!str_of(name) || !chat_tool_name_ok(name->s))
            return pl_fail(err, errlen, "tools[%zu]: the function needs a name of 1 to 64 of [A-Za-z0-9_-]", i);
        if (desc && desc->type != JD_STR && desc->type != JD_NULL) return pl_fail(err, errlen, "tools[%zu] (%s): the description is not a string", i, name->s);
        if (par && par->type != JD_OBJ && par->type != JD_NULL) return pl_fail(err, errlen, "tools[%zu] (%s): the parameters are not a JSON Schema object", i, name->s);
        const char *n = pk_str(pk, name->s, name->len), *d = str_of(desc) ? pk_str(pk, desc->s, desc->len) : NULL;
        const char *p = par && par->type == JD_OBJ ? pk_json(pk, par) : NULL;
        if (t) t[i] = (picolm_tool){n, d, p};
        for (size_t k = 0; k < i; k++)
            if (!strcmp(jd_get(jd_get(&root->items[k], "function"), "name")->s, name->s)) return pl_fail(err, errlen, "two tools are named '%s'", name->s);
    }
    *(picolm_tool **)out = t;
    return 0;
}

/* Run fill twice: count, then allocate and fill. */
typedef int (*fill_fn)(pack *pk, const jd_value *root, void *out, char *err, size_t errlen);

static int packed(const char *json, size_t len, const char *what, fill_fn fill, void *out, char *err, size_t errlen) {
    char why[200];
    jd_value *root = jd_parse(json, len, why, sizeof why);
    if (!root) return pl_fail(err, errlen, "%s: not valid JSON: %s", what, why);
    int rc = root->type == JD_ARR ? 0 : pl_fail(err, errlen, "%s: not a JSON array", what);
    pack pk = {NULL, 0};
    if (!rc) rc = fill(&pk, root, out, err, errlen);
    if (!rc && !(pk.base = calloc(1, pk.used ? pk.used : 1))) rc = pl_fail(err, errlen, "out of memory");
    if (!rc) pk.used = 0, rc = fill(&pk, root, out, err, errlen);
    if (rc) free(pk.base);
    const int n = rc ? -1 : (int)root->n;
    jd_free(root);
    return n;
}

int picolm_tools_from_json(const char *json, size_t len, picolm_tool **tools, char *err, size_t errlen) {
    return packed(json, len, "tools", fill_tools, tools, err, errlen);
}

/* A message's content (a string, null, or text parts) into *out. */
static int content_of(pack *pk, const jd_value *c, const char **out, size_t *len, size_t i, char *err, size_t errlen) {
    pl_sbuf b = {0};
    if (c && c->type == JD_ARR) {
        for (size_t k = 0; k < c->n; k++) {
            const jd_value *type = jd_get(&c->items[k], "type"), *text = jd_get(&c->items[k], "text");
            if (!str_of(type) || strcmp(type->s, "text") || !str_of(text)) {
                free(b.p);
                return pl_fail(err, errlen, "messages[%zu]: only text content parts are supported", i);
            }
            pl_sbuf_add(&b, text->s, text->len);
        }
    } else if (c && c->type != JD_NULL && c->type != JD_STR) {
        return pl_fail(err, errlen, "messages[%zu]: the content is not a string or text parts", i);
    }
    const char *s = c && c->type == JD_STR ? c->s : b.p ? b.p : "";
    *len = c && c->type == JD_STR ? c->len : b.n;
    *out = pk_str(pk, s, *len);
    free(b.p);
    return b.oom ? pl_fail(err, errlen, "out of memory") : 0;
}

static int fill_msgs(pack *pk, const jd_value *root, void *out, char *err, size_t errlen) {
    picolm_chat_msg *m = pk_take(pk, root->n * sizeof *m);
    for (size_t i = 0; i < root->n; i++) {
        const jd_value *mv = &root->items[i], *role = jd_get(mv, "role"), *calls = jd_get(mv, "tool_calls"), *id = jd_get(mv, "tool_call_id");
        if (mv->type != JD_OBJ || !str_of(role)) return pl_fail(err, errlen, "messages[%zu]: no role", i);
        const char *r = !strcmp(role->s, "developer") ? "system" : role->s;
        if (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant") && strcmp(r, "tool"))
            return pl_fail(err, errlen, "messages[%zu]: unsupported role '%.40s' (system, developer, user, assistant, tool)", i, role->s);
        size_t clen = 0;
        const char *content = NULL;
        if (content_of(pk, jd_get(mv, "content"), &content, &clen, i, err, errlen)) return -1;
        const size_t nc = calls && calls->type == JD_ARR ? calls->n : 0;
        if (calls && calls->type != JD_ARR && calls->type != JD_NULL) return pl_fail(err, errlen, "messages[%zu]: tool_calls is not an array", i);
        if (nc && strcmp(r, "assistant")) return pl_fail(err, errlen, "messages[%zu]: only assistant messages have tool_calls", i);
        picolm_tool_call *tc = nc ? pk_take(pk, nc * sizeof *tc) : NULL;
        for (size_t k = 0; k < nc; k++) {
            const jd_value *c = &calls->items[k], *fn = jd_get(c, "function"), *name = jd_get(fn, "name"), *args = jd_get(fn, "arguments");
            if (!str_of(name)) return pl_fail(err, errlen, "messages[%zu].tool_calls[%zu]: no function name", i, k);
            const char *a = !args || args->type == JD_NULL ? NULL : args->type == JD_STR ? pk_str(pk, args->s, args->len) : pk_json(pk, args);
            const char *cid = str_of(jd_get(c, "id")) ? pk_str(pk, jd_get(c, "id")->s, jd_get(c, "id")->len) : NULL;
            if (tc) tc[k] = (picolm_tool_call){cid, pk_str(pk, name->s, name->len), a};
            else pk_str(pk, name->s, name->len);
        }
        const char *tid = str_of(id) ? pk_str(pk, id->s, id->len) : NULL;
        if (m) m[i] = (picolm_chat_msg){pk_str(pk, r, strlen(r)), content, clen, tc, (int)nc, tid};
        else pk_str(pk, r, strlen(r));
    }
    *(picolm_chat_msg **)out = m;
    return 0;
}

int picolm_chat_from_json(const char *json, size_t len, picolm_chat_msg **msgs, char *err, size_t errlen) {
    return packed(json, len, "messages", fill_msgs, msgs, err, errlen);
}

char *picolm_tool_reply_json(const picolm_tool_reply *r, const char *text, size_t len) {
    pl_sbuf b = {0};
    jd_value *args = NULL;
    char why[8];
    const int call = r->call && r->done && !r->error && (args = jd_parse(text + r->args_off, r->args_len, why, sizeof why));
    pl_sbuf_add(&b, "{", 1);
    if (!call || r->content_len) {
        add(&b, "\"content\":");
        jd_write_text(&b, text, call ? r->content_len : len);
    }
    if (call) {
        add(&b, r->content_len ? ",\"name\":" : "\"name\":");
        jd_write_text(&b, text + r->name_off, r->name_len);
        add(&b, ",\"arguments\":");
        jd_write(&b, args, -1, 1);
    }
    add(&b, "}");
    pl_sbuf_add(&b, "", 0);
    jd_free(args);
    if (b.oom) { free(b.p); return NULL; }
    return b.p;
}
