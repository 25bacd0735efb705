/* Effective configuration: defaults < INI (inih) < command line.  See
   config.h.  One table row per key and flag (keys[] below) gives the
   built-in defaults and drives the INI parser, the CLI, --dump-config and
   --help, so they cannot drift apart. */
#include "config.h"
#include "picolm/picolm.h"
#include "tool.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <ini.h>

/* ------------------------------------------------------------------------ */
/* The table: one row per key and per command-line option                    */
/* ------------------------------------------------------------------------ */
enum ktype {
    K_INT,    /* int in [lo, hi] */
    K_U64,    /* unsigned 64-bit */
    K_FLOAT,  /* finite float in [lo, hi] */
    K_BOOL,   /* true/false/yes/no/on/off/1/0 */
    K_TRI,    /* auto or a bool: -1/0/1 */
    K_STR,    /* free text, up to size-1 bytes */
    K_NAME,   /* identifier [A-Za-z0-9_.-]+ */
    K_ENUM,   /* one of enums ("a|b"): int, its position */
    K_SIZE,   /* bytes with K/M/G/T suffix */
    K_STOP,   /* repeatable string */
    K_CHAIN   /* "auto" or name,name,... */
};

enum opt_action {
    A_KEY,     /* set section.key from the value */
    A_TRUE,    /* boolean key = true (or =VALUE) */
    A_FALSE,   /* boolean key = false */
    A_PROMPT, A_PROMPT_FILE, A_CONFIG, A_PARAM, A_LIST, A_DUMP, A_HELP, A_VERSION, A_VERBOSE, A_FIT
};

/* A row is an INI key (section != NULL), a flag (lng != NULL) or both.  A
   row that repeats an earlier row's section and key is another flag for it
   (an alias, or --no-special); the first row of a key is its definition. */
typedef struct keydef {
    const char *section, *key;
    enum ktype type;
    size_t off, size;
    double lo, hi;
    const char *enums;
    const char *def;     /* built-in default, as INI text; NULL = zero / "" */
    const char *help;    /* "" = an alias, not listed in --help */
    const char *lng;     /* flag without "--"; NULL = INI only */
    char shrt;           /* 0 = none */
    const char *metavar; /* NULL = the flag takes no value */
    enum opt_action act;
    int common;          /* shared by every tool that runs a model (config_common_arg) */
} keydef;

#define F(field) offsetof(picolm_config, field), sizeof(((picolm_config *)0)->field)
#define NOKEY(help) NULL, NULL, K_STR, 0, 0, 0, 0, NULL, NULL, help
#define ALIAS(sec, name, help) sec, name, K_STR, 0, 0, 0, 0, NULL, NULL, help
#define OPT(lng, shrt, meta, act) lng, shrt, meta, act, 0
#define SHARED(lng, shrt, meta, act) lng, shrt, meta, act, 1
#define NOFLAG NULL, 0, NULL, A_KEY, 0
static const keydef keys[] = {
    {NOKEY("prompt text (default: read stdin)"), OPT("prompt", 'p', "TEXT", A_PROMPT)},
    {NOKEY("read the prompt from FILE (all of it, as stdin would be)"), OPT("file", 'f', "FILE", A_PROMPT_FILE)},
    {NOKEY("INI file read before the flags (default: $PICOLM_CONFIG)"), SHARED("config", 0, "FILE", A_CONFIG)},
#define ROW(section, key, vtype, ctype, field, dims, lo, hi, enums, def, help, flag) \
    {section, key, vtype, F(field), lo, hi, enums, def, help, flag},
    PICOLM_CONFIG_KEYS(ROW)
#undef ROW
    {ALIAS("generate", "special", "treat special-token text in the prompt as plain text"), OPT("no-special", 0, NULL, A_FALSE)},
    {NOKEY("set any [sampler] key (e.g. one a sampler plugin owns)"), OPT("param", 0, "KEY=VAL", A_PARAM)},
    /* actions */
    {NOKEY("print the memory plan for the model and exit"), OPT("fit", 0, NULL, A_FIT)},
    {NOKEY("list plugin candidates, scores and choices, then exit"), OPT("list-plugins", 0, NULL, A_LIST)},
    {NOKEY("print the effective configuration as INI and exit"), OPT("dump-config", 0, NULL, A_DUMP)},
    {NOKEY("more logging on stderr (repeat for more: -vv)"), SHARED("verbose", 'v', NULL, A_VERBOSE)},
    {NOKEY("print the version and exit"), OPT("version", 0, NULL, A_VERSION)},
    {NOKEY("this help"), OPT("help", 'h', NULL, A_HELP)},
    /* aliases (llama.cpp's spellings) */
    {ALIAS("sampler", "temperature", ""), OPT("temp", 0, "X", A_KEY)},
    {ALIAS("engine", "context", ""), OPT("ctx-size", 0, "N", A_KEY)},
    {ALIAS("generate", "max_tokens", ""), OPT("n-predict", 0, "N", A_KEY)},
};
#undef F
#undef NOKEY
#undef ALIAS
#undef OPT
#undef SHARED
#undef NOFLAG
#define N_KEYS (sizeof keys / sizeof keys[0])
_Static_assert(N_KEYS <= PICOLM_MAX_KEYS, "raise PICOLM_MAX_KEYS");
_Static_assert(PICOLM_KV_F16 == 0 && PICOLM_KV_Q8_0 == 1, "kv_type's enums list the KV types in order");

/* The sections are those of the rows, in the order they first appear:
   the i-th one, or NULL past the last. */
static const char *section_at(size_t i) {
    for (size_t k = 0; k < N_KEYS; k++) {
        size_t first = 0;
        while (first < k && !(keys[first].section && keys[k].section && !strcmp(keys[first].section, keys[k].section))) first++;
        if (keys[k].section && first == k && !i--) return keys[k].section;
    }
    return NULL;
}

/* "[engine], [limits], [generate] or [sampler]", for messages */
static const char *section_list(char *buf, size_t n) {
    buf[0] = '\0';
    for (size_t i = 0; section_at(i); i++) {
        const size_t u = strlen(buf);
        snprintf(buf + u, n - u, "%s[%s]", !i ? "" : section_at(i + 1) ? ", " : " or ", section_at(i));
    }
    return buf;
}

/* The row that defines section.key (the first that names it), or NULL. */
static const keydef *find_key(const char *section, const char *key) {
    for (size_t i = 0; i < N_KEYS; i++)
        if (keys[i].section && !strcasecmp(keys[i].section, section) && !strcasecmp(keys[i].key, key)) return &keys[i];
    return NULL;
}

static int is_definition(const keydef *k) { return k->section && find_key(k->section, k->key) == k; }

/* Record where k was set (see picolm_config.key_line). */
static void mark_set(picolm_config *c, const keydef *k, int line) {
    if (k) c->key_line[k - keys] = line;
}

void config_where(const picolm_config *c, const char *section, const char *key, char *buf, size_t n) {
    const keydef *k = find_key(section, key);
    const int line = k ? c->key_line[k - keys] : 0;
    if (line > 0) snprintf(buf, n, "%s:%d", c->config_path, line);
    else snprintf(buf, n, "%s", line < 0 ? "command line" : "built-in default");
}

int config_is_set(const picolm_config *c, const char *section, const char *key) {
    const keydef *k = find_key(section, key);
    return k && c->key_line[k - keys] != 0;
}

static int known_section(const char *s) {
    for (size_t i = 0; section_at(i); i++)
        if (!strcasecmp(s, section_at(i))) return 1;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Value parsers: 0 ok, else message in err (no location prefix)             */
/* ------------------------------------------------------------------------ */
static int parse_bool(const char *v, int *out) {
    static const char *t[] = {"true", "yes", "on", "1"}, *f[] = {"false", "no", "off", "0"};
    for (int i = 0; i < 4; i++) {
        if (!strcasecmp(v, t[i])) { *out = 1; return 0; }
        if (!strcasecmp(v, f[i])) { *out = 0; return 0; }
    }
    return -1;
}

static int valid_name(const char *v) {
    if (!*v) return 0;
    for (; *v; v++)
        if (!isalnum((unsigned char)*v) && *v != '_' && *v != '-' && *v != '.') return 0;
    return 1;
}

static int parse_size(const char *v, uint64_t *out) {
    errno = 0;
    char *end;
    if (!isdigit((unsigned char)*v) && *v != '.') return -1;
    double x = strtod(v, &end);
    if (end == v || errno || !isfinite(x) || x < 0) return -1;
    while (*end == ' ') end++;
    double mul = 1;
    switch (toupper((unsigned char)*end)) {
    case 'K': mul = 1024.0; end++; break;
    case 'M': mul = 1024.0 * 1024; end++; break;
    case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
    case 'T': mul = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: break;
    }
    if (mul > 1 && toupper((unsigned char)*end) == 'I') end++;
    if (toupper((unsigned char)*end) == 'B') end++;
    if (*end) return -1;
    /* a whole number exactly: a double would round 2^64-1 up to 2^64 */
    const size_t digits = strspn(v, "0123456789");
    if (digits && (v[digits] == '\0' || strchr(" KkMmGgTtBb", v[digits]))) {
        errno = 0;
        unsigned long long n = strtoull(v, NULL, 10);
        const uint64_t m = (uint64_t)mul;
        if (errno == ERANGE || n > UINT64_MAX / m) return -1;
        *out = (uint64_t)n * m;
        return 0;
    }
    x *= mul;
    if (x >= 18446744073709551616.0) return -1;
    *out = (uint64_t)x;
    return 0;
}

static void format_size(uint64_t b, char *buf, size_t n) {
    static const char suf[] = "TGMK";
    for (int i = 0; i < 4; i++) {
        uint64_t m = 1ull << (10 * (4 - i));
        if (b && b % m == 0) { snprintf(buf, n, "%" PRIu64 "%c", b / m, suf[i]); return; }
    }
    snprintf(buf, n, "%" PRIu64, b);
}

static int parse_chain(const char *v, char *out, size_t size, char *err, size_t errlen) {
    char tmp[512];
    size_t o = 0;
    if (!strcasecmp(v, "auto")) { snprintf(out, size, "auto"); return 0; }
    const char *p = v;
    for (;;) {
        while (*p == ' ' || *p == '\t') p++;
        const char *s = p;
        while (*p && *p != ',') p++;
        const char *e = p;
        while (e > s && (e[-1] == ' ' || e[-1] == '\t')) e--;
        if (e == s) return tool_fail(err, errlen, "'%s': empty name in the sampler chain", v);
        for (const char *q = s; q < e; q++)
            if (!isalnum((unsigned char)*q) && *q != '_' && *q != '-') {
                return tool_fail(err, errlen, "'%s': bad character '%c' in the sampler chain", v, *q);
            }
        if (o + (size_t)(e - s) + 2 > sizeof tmp) break;
        if (o) tmp[o++] = ',';
        memcpy(tmp + o, s, (size_t)(e - s));
        o += (size_t)(e - s);
        if (!*p) break;
        p++;
    }
    tmp[o] = '\0';
    if (o >= size) return tool_fail(err, errlen, "sampler chain too long (max %zu characters)", size - 1);
    memcpy(out, tmp, o + 1);
    return 0;
}

/* Set a typed field from text. stops_reset: first stop of this source
   replaces the list inherited from lower-precedence sources. */
static int set_typed(picolm_config *c, const keydef *k, const char *v, int *stops_reset,
                     char *err, size_t errlen) {
    char *base = (char *)c + k->off;
    char *end;
    switch (k->type) {
    case K_INT: {
        errno = 0;
        long long x = strtoll(v, &end, 10);
        if (!*v || *end || errno == ERANGE) return tool_fail(err, errlen, "%s: '%s' is not an integer", k->key, v);
        if (x < (long long)k->lo || x > (long long)k->hi) {
            return tool_fail(err, errlen, "%s: %lld is out of range [%lld, %lld]", k->key, x, (long long)k->lo, (long long)k->hi);
        }
        *(int *)base = (int)x;
        return 0;
    }
    case K_U64: {
        errno = 0;
        const char *s = v;
        while (*s == ' ') s++;
        unsigned long long x = strtoull(s, &end, 10);
        if (!isdigit((unsigned char)*s) || *end || errno == ERANGE) {
            return tool_fail(err, errlen, "%s: '%s' is not an unsigned integer", k->key, v);
        }
        *(uint64_t *)base = (uint64_t)x;
        return 0;
    }
    case K_FLOAT: {
        errno = 0;
        double x = strtod(v, &end);
        if (!*v || *end || errno == ERANGE || !isfinite(x)) return tool_fail(err, errlen, "%s: '%s' is not a number", k->key, v);
        if (x < k->lo || x > k->hi) return tool_fail(err, errlen, "%s: %g is out of range [%g, %g]", k->key, x, k->lo, k->hi);
        *(float *)base = (float)x;
        return 0;
    }
    case K_BOOL:
        if (parse_bool(v, (int *)base)) return tool_fail(err, errlen, "%s: '%s' is not a boolean (true/false)", k->key, v);
        return 0;
    case K_TRI:
        if (!strcasecmp(v, "auto")) { *(int *)base = -1; return 0; }
        if (parse_bool(v, (int *)base)) return tool_fail(err, errlen, "%s: '%s' is not auto, true or false", k->key, v);
        return 0;
    case K_STR:
        if (strlen(v) >= k->size) return tool_fail(err, errlen, "%s: value too long (max %zu bytes)", k->key, k->size - 1);
        memcpy(base, v, strlen(v) + 1);
        return 0;
    case K_NAME:
        if (!valid_name(v)) return tool_fail(err, errlen, "%s: '%s' is not a valid name (letters, digits, _ - .)", k->key, v);
        if (strlen(v) >= k->size) return tool_fail(err, errlen, "%s: name too long (max %zu)", k->key, k->size - 1);
        memcpy(base, v, strlen(v) + 1);
        return 0;
    case K_ENUM: {
        const char *e = k->enums;
        size_t vl = strlen(v);
        for (int pos = 0; *e; pos++) {
            size_t l = strcspn(e, "|");
            if (l == vl && !strncasecmp(e, v, l)) {
                *(int *)base = pos;
                return 0;
            }
            e += l + (e[l] == '|');
        }
        return tool_fail(err, errlen, "%s: '%s' is not one of %s", k->key, v, k->enums);
    }
    case K_SIZE:
        if (parse_size(v, (uint64_t *)base)) return tool_fail(err, errlen, "%s: '%s' is not a size (e.g. 512M, 1G)", k->key, v);
        return 0;
    case K_STOP:
        if (!*v) return tool_fail(err, errlen, "stop: empty stop string");
        if (strlen(v) >= sizeof c->stops[0]) return tool_fail(err, errlen, "stop: string too long (max %zu bytes)", sizeof c->stops[0] - 1);
        if (stops_reset && !*stops_reset) { c->n_stops = 0; *stops_reset = 1; }
        if (c->n_stops >= PICOLM_MAX_STOPS) return tool_fail(err, errlen, "stop: too many stop strings (max %d)", PICOLM_MAX_STOPS);
        snprintf(c->stops[c->n_stops++], sizeof c->stops[0], "%s", v);
        return 0;
    case K_CHAIN:
        return parse_chain(v, base, k->size, err, errlen);
    }
    return -1;
}

/* ------------------------------------------------------------------------ */
/* [sampler] params                                                          */
/* ------------------------------------------------------------------------ */
static int set_param(picolm_config *c, const char *key, const char *value, const char *file,
                     int line, char *err, size_t errlen) {
    if (!valid_name(key)) return tool_fail(err, errlen, "'%s' is not a valid key name", key);
    const keydef *k = find_key("sampler", key);
    if (k && set_typed(c, k, value, NULL, err, errlen)) return -1;
    if (k && k->type == K_CHAIN) return 0; /* the core's, not the plugins' */
    if (strlen(key) >= sizeof c->params[0].key) return tool_fail(err, errlen, "key '%s' too long", key);
    if (strlen(value) >= sizeof c->params[0].value) {
        return tool_fail(err, errlen, "%s: value too long (max %zu bytes)", key, sizeof c->params[0].value - 1);
    }
    int i;
    for (i = 0; i < c->n_params; i++)
        if (!strcasecmp(c->params[i].key, key)) break;
    if (i == c->n_params) {
        if (c->n_params >= PICOLM_MAX_PARAMS) return tool_fail(err, errlen, "too many [sampler] keys (max %d)", PICOLM_MAX_PARAMS);
        c->n_params++;
    }
    picolm_config_param *p = &c->params[i];
    size_t kl = strlen(key);
    for (size_t j = 0; j <= kl; j++) p->key[j] = (char)tolower((unsigned char)key[j]);
    snprintf(p->value, sizeof p->value, "%s", value);
    snprintf(p->file, sizeof p->file, "%s", file ? file : "");
    p->line = line;
    return 0;
}

int config_set_param(picolm_config *c, const char *key, const char *value,
                     const char *file, int line, char *err, size_t errlen) {
    char msg[512];
    if (set_param(c, key, value, file, line, msg, sizeof msg) == 0) return 0;
    if (file && *file && line > 0) return tool_fail(err, errlen, "%s:%d: [sampler] %s", file, line, msg);
    return tool_fail(err, errlen, "%s", msg);
}

void config_param_where(const picolm_config_param *p, char *buf, size_t n) {
    if (!p->file[0]) snprintf(buf, n, "built-in default");
    else if (p->line > 0) snprintf(buf, n, "%s:%d", p->file, p->line);
    else snprintf(buf, n, "%s", p->file);
}

/* ------------------------------------------------------------------------ */
/* Defaults                                                                  */
/* ------------------------------------------------------------------------ */
void config_defaults(picolm_config *c) {
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < N_KEYS; i++) {
        const keydef *k = &keys[i];
        if (!k->def || !is_definition(k)) continue;
        /* [sampler] keys also go to params[], as the plugins see them */
        if (!strcmp(k->section, "sampler")) set_param(c, k->key, k->def, "", 0, NULL, 0);
        else set_typed(c, k, k->def, NULL, NULL, 0);
    }
}

/* ------------------------------------------------------------------------ */
/* INI                                                                       */
/* ------------------------------------------------------------------------ */
typedef struct ini_ctx {
    picolm_config *c;
    const char *path;
    FILE *f;
    char *buf;          /* getline buffer */
    size_t cap;
    int lineno;         /* line the reader handed to inih last */
    char *stash;        /* value of an over-long line, see ini_reader */
    int stash_line;
    int stops_reset;
    int err_line;       /* first error found by us (0 = none) */
    char err[768];
} ini_ctx;

#define LONG_MARK "\x01"

static void ini_error(ini_ctx *x, int line, const char *fmt, ...) {
    if (x->err_line) return; /* keep the first */
    char msg[640];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    x->err_line = line;
    snprintf(x->err, sizeof x->err, "%s:%d: %s", x->path, line, msg);
}

/* inih's inline comment rule: ';' preceded by whitespace */
static void strip_value(char *v) {
    int was_space = 0;
    for (char *s = v; *s; s++) {
        if (was_space && *s == ';') { *s = '\0'; break; }
        was_space = isspace((unsigned char)*s);
    }
    char *s = v;
    while (isspace((unsigned char)*s)) s++;
    size_t l = strlen(s);
    while (l && isspace((unsigned char)s[l - 1])) l--;
    memmove(v, s, l);
    v[l] = '\0';
}

/* fgets-style reader for ini_parse_stream.  It counts lines (the handler has
   no line number in this inih build), checks section names where they are
   written, drops indentation (so an indented key is never taken as a
   multi-line continuation), and passes lines longer than inih's fixed
   buffer (num) as "key=\x01" with the real value stashed. */
static char *cfg_reader(char *str, int num, void *stream) {
    ini_ctx *x = stream;
    ssize_t len = getline(&x->buf, &x->cap, x->f);
    if (len < 0) return NULL;
    x->lineno++;
    char *s = x->buf;
    if (x->lineno == 1 && (unsigned char)s[0] == 0xEF && (unsigned char)s[1] == 0xBB && (unsigned char)s[2] == 0xBF) s += 3;
    while (*s == ' ' || *s == '\t') s++;
    size_t l = strlen(s);
    while (l && (s[l - 1] == '\n' || s[l - 1] == '\r')) s[--l] = '\0';

    if (*s == '[') {
        char *e = strchr(s, ']');
        if (e) {
            char name[128], list[128];
            size_t nl = (size_t)(e - s - 1);
            if (nl >= sizeof name) nl = sizeof name - 1;
            memcpy(name, s + 1, nl);
            name[nl] = '\0';
            strip_value(name);
            if (!known_section(name))
                ini_error(x, x->lineno, "unknown section [%s] (expected %s)", name, section_list(list, sizeof list));
        }
    }
    if (l + 3 > (size_t)num) {
        if (*s == ';' || *s == '#' || *s == '\0') { snprintf(str, (size_t)num, "\n"); return str; }
        size_t kl = strcspn(s, "=:");
        if (!s[kl] || *s == '[' || kl + 4 > (size_t)num) {
            ini_error(x, x->lineno, "line too long");
            snprintf(str, (size_t)num, "\n");
            return str;
        }
        free(x->stash);
        x->stash = strdup(s + kl + 1);
        if (!x->stash) { ini_error(x, x->lineno, "out of memory"); snprintf(str, (size_t)num, "\n"); return str; }
        strip_value(x->stash);
        x->stash_line = x->lineno;
        snprintf(str, (size_t)num, "%.*s=" LONG_MARK "\n", (int)kl, s);
        return str;
    }
    snprintf(str, (size_t)num, "%s\n", s);
    return str;
}

static int hexval(int ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    ch = tolower(ch);
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    return -1;
}

/* "..." with C escapes -> raw bytes; unquoted values are taken verbatim */
static int unquote(const char *v, char *out, size_t n, char *err, size_t errlen) {
    size_t l = strlen(v);
    if (v[0] != '"') {
        if (l >= n) return tool_fail(err, errlen, "value too long");
        memcpy(out, v, l + 1);
        return 0;
    }
    if (l < 2 || v[l - 1] != '"') return tool_fail(err, errlen, "unterminated quoted string (\" ;\" starts a comment even inside quotes: write \\x3b)");
    size_t o = 0;
    for (size_t i = 1; i < l - 1; i++) {
        char ch = v[i];
        if (ch == '\\') {
            if (i + 1 >= l - 1) return tool_fail(err, errlen, "backslash at the end of a quoted string");
            char e = v[++i];
            switch (e) {
            case 'n': ch = '\n'; break;
            case 't': ch = '\t'; break;
            case 'r': ch = '\r'; break;
            case '\\': ch = '\\'; break;
            case '"': ch = '"'; break;
            case 'x': {
                int h1 = i + 1 < l - 1 ? hexval(v[i + 1]) : -1, h2 = i + 2 < l - 1 ? hexval(v[i + 2]) : -1;
                if (h1 < 0 || h2 < 0 || (h1 == 0 && h2 == 0)) return tool_fail(err, errlen, "bad \\x escape (two hex digits, not 00)");
                ch = (char)(h1 * 16 + h2);
                i += 2;
                break;
            }
            default: return tool_fail(err, errlen, "unknown escape '\\%c' (use \\n \\t \\r \\\\ \\\" \\xHH)", e);
            }
        } else if (ch == '"') {
            return tool_fail(err, errlen, "unescaped '\"' inside a quoted string");
        }
        if (o + 1 >= n) return tool_fail(err, errlen, "value too long");
        out[o++] = ch;
    }
    out[o] = '\0';
    return 0;
}

static int cfg_handler(void *user, const char *section, const char *name, const char *value) {
    ini_ctx *x = user;
    const int line = x->lineno;
    char list[128];
    if (!*section) { ini_error(x, line, "'%s' is outside a section (put it under %s)", name, section_list(list, sizeof list)); return 0; }
    if (!known_section(section)) return 1; /* reported at the [section] line */
    if (!strcmp(value, LONG_MARK) && x->stash && x->stash_line == line) value = x->stash;

    char v[8192], msg[640];
    if (unquote(value, v, sizeof v, msg, sizeof msg)) { ini_error(x, line, "%s: %s", name, msg); return 0; }
    if (!strcasecmp(section, "sampler")) {
        if (set_param(x->c, name, v, x->path, line, msg, sizeof msg)) {
            ini_error(x, line, "[sampler] %s", msg);
            return 0;
        }
        mark_set(x->c, find_key("sampler", name), line);
        return 1;
    }
    const keydef *k = find_key(section, name);
    if (!k) {
        ini_error(x, line, "unknown key '%s' in [%s]", name, section);
        return 0;
    }
    if (set_typed(x->c, k, v, &x->stops_reset, msg, sizeof msg)) {
        ini_error(x, line, "[%s] %s", k->section, msg);
        return 0;
    }
    mark_set(x->c, k, line);
    return 1;
}

int config_load_ini(picolm_config *c, const char *path, char *err, size_t errlen) {
    ini_ctx x;
    memset(&x, 0, sizeof x);
    x.c = c;
    x.path = path;
    x.f = fopen(path, "r");
    if (!x.f) return tool_fail(err, errlen, "%s: cannot open config file: %s", path, strerror(errno));
    int r = ini_parse_stream(cfg_reader, &x, cfg_handler, &x);
    fclose(x.f);
    free(x.buf);
    free(x.stash);
    if (r > 0 && (!x.err_line || r < x.err_line)) {
        return tool_fail(err, errlen, "%s:%d: syntax error (expected [section], key = value, or a ; comment)", path, r);
    }
    if (x.err_line) return tool_fail(err, errlen, "%s", x.err);
    if (r != 0) return tool_fail(err, errlen, "%s: cannot parse (error %d)", path, r);
    snprintf(c->config_path, sizeof c->config_path, "%s", path);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Command line                                                              */
/* ------------------------------------------------------------------------ */
/* Identify argv[*i]: returns the option (or NULL: positional / unknown in
   *unknown), and its value (advancing *i when the value is the next arg). */
typedef struct {
    const keydef *o;
    const char *value; /* NULL when the option has none */
    int unknown, missing, positional, end_of_opts;
    int repeat;        /* -vv: the flag given this many times */
    char name[64];     /* as the user spelled it, for messages */
} parsed_arg;

static parsed_arg next_arg(int argc, char **argv, int *i, int opts_done) {
    parsed_arg r;
    memset(&r, 0, sizeof r);
    r.repeat = 1;
    const char *a = argv[*i];
    if (opts_done || a[0] != '-' || a[1] == '\0') { r.positional = 1; return r; }
    if (!strcmp(a, "--")) { r.end_of_opts = 1; return r; }
    const char *attached = NULL;
    if (a[1] == '-') {
        const char *nm = a + 2, *eq = strchr(nm, '=');
        size_t nl = eq ? (size_t)(eq - nm) : strlen(nm);
        snprintf(r.name, sizeof r.name, "--%.*s", (int)nl, nm);
        for (size_t k = 0; k < N_KEYS; k++)
            if (keys[k].lng && strlen(keys[k].lng) == nl && !strncmp(keys[k].lng, nm, nl)) { r.o = &keys[k]; break; }
        if (eq) attached = eq + 1;
    } else {
        snprintf(r.name, sizeof r.name, "-%c", a[1]);
        for (size_t k = 0; k < N_KEYS; k++)
            if (keys[k].shrt && keys[k].shrt == a[1]) { r.o = &keys[k]; break; }
        if (a[2]) attached = a + 2 + (a[2] == '='); /* -n5 or -n=5 */
        if (r.o && !r.o->metavar && a[2]) {
            /* -vv counts twice; -vx is not a thing */
            if (r.o->act == A_VERBOSE && strspn(a + 1, "v") == strlen(a + 1)) r.repeat = (int)strlen(a + 1), attached = NULL;
            else r.o = NULL;
        }
    }
    if (!r.o) { r.unknown = 1; return r; }
    if (r.o->metavar) {
        if (attached) r.value = attached;
        else if (*i + 1 < argc) r.value = argv[++*i];
        else r.missing = 1;
    } else {
        r.value = attached; /* --json=false is allowed for booleans */
    }
    return r;
}

const char *config_find_ini(int argc, char **argv) {
    const char *found = NULL;
    int done = 0;
    for (int i = 1; i < argc; i++) {
        parsed_arg p = next_arg(argc, argv, &i, done);
        if (p.end_of_opts) done = 1;
        if (p.o && p.o->act == A_CONFIG && p.value) found = p.value;
    }
    if (found) return found;
    const char *env = getenv("PICOLM_CONFIG");
    return env && *env ? env : NULL;
}

/* Apply one parsed option (the single place both picolm and the tools do
   it).  0 ok, else -1 with a message in err. */
static int apply_opt(picolm_config *c, const parsed_arg *p, int *stops_reset, char *err, size_t errlen) {
    char msg[640];
    const keydef *o = p->o;
    if (p->missing) return tool_fail(err, errlen, "option %s needs a value (%s)", p->name, o->metavar);
    if (p->value && !o->metavar && o->act != A_TRUE) return tool_fail(err, errlen, "option %s takes no value", p->name);
    switch (o->act) {
    case A_KEY:
    case A_TRUE:
    case A_FALSE: {
        const char *v = o->act == A_KEY ? p->value : o->act == A_FALSE ? "false" : p->value ? p->value : "true";
        const keydef *k = find_key(o->section, o->key);
        if (!strcmp(o->section, "sampler")) {
            if (set_param(c, o->key, v, "command line", 0, msg, sizeof msg)) return tool_fail(err, errlen, "option %s: %s", p->name, msg);
        } else if (set_typed(c, k, v, stops_reset, msg, sizeof msg)) {
            return tool_fail(err, errlen, "option %s: %s", p->name, msg);
        }
        mark_set(c, k, -1);
        /* --system and --chat-template only mean something in chat mode:
           they ask for it (their INI keys do not, so an INI can hold defaults) */
        if (!strcmp(o->key, "system") || !strcmp(o->key, "chat_template")) c->chat = 1;
        break;
    }
    case A_PARAM: {
        const char *eq = strchr(p->value, '=');
        char key[64];
        if (!eq || eq == p->value || (size_t)(eq - p->value) >= sizeof key) return tool_fail(err, errlen, "option %s: expected KEY=VALUE, got '%s'", p->name, p->value);
        snprintf(key, sizeof key, "%.*s", (int)(eq - p->value), p->value);
        if (set_param(c, key, eq + 1, "command line", 0, msg, sizeof msg)) return tool_fail(err, errlen, "option %s: %s", p->name, msg);
        mark_set(c, find_key("sampler", key), -1);
        break;
    }
    case A_PROMPT: c->prompt = p->value; break;
    case A_PROMPT_FILE:
        if (!*p->value) return tool_fail(err, errlen, "option %s: empty file name", p->name);
        c->prompt_file = p->value;
        break;
    case A_CONFIG: if (!*p->value) return tool_fail(err, errlen, "option %s: empty file name", p->name); break; /* read by config_find_ini */
    case A_LIST: c->list_plugins = 1; break;
    case A_DUMP: c->dump_config = 1; break;
    case A_HELP: c->show_help = 1; break;
    case A_VERSION: c->show_version = 1; break;
    case A_VERBOSE: c->verbose += p->repeat; break;
    case A_FIT: c->fit = 1; break;
    }
    return 0;
}

int config_parse_args(picolm_config *c, int argc, char **argv, char *err, size_t errlen) {
    int done = 0, stops_reset = 0;
    for (int i = 1; i < argc; i++) {
        parsed_arg p = next_arg(argc, argv, &i, done);
        if (p.end_of_opts) { done = 1; continue; }
        if (p.positional) {
            if (c->model_path) return tool_fail(err, errlen, "unexpected argument '%s' (the model is already '%s')", argv[i], c->model_path);
            c->model_path = argv[i];
            continue;
        }
        if (p.unknown) return tool_fail(err, errlen, "unknown option '%s' (see --help)", argv[i]);
        if (apply_opt(c, &p, &stops_reset, err, errlen)) return -1;
    }
    if (c->prompt && c->prompt_file) return tool_fail(err, errlen, "-p and -f both give the prompt: use one");
    return 0;
}

int config_tool_init(picolm_config *c, int argc, char **argv, char *err, size_t errlen) {
    config_defaults(c);
    c->context = 0; /* a tool's window or token file may use the whole context */
    const char *ini = config_find_ini(argc, argv);
    return ini ? config_load_ini(c, ini, err, errlen) : 0;
}

int config_common_arg(picolm_config *c, int argc, char **argv, int *i, char *err, size_t errlen) {
    int j = *i;
    parsed_arg p = next_arg(argc, argv, &j, 0);
    if (!p.o || !p.o->common) return 0;
    *i = j;
    return apply_opt(c, &p, NULL, err, errlen) ? -1 : 1;
}

/* ------------------------------------------------------------------------ */
/* Dump and usage                                                            */
/* ------------------------------------------------------------------------ */
/* Write v so that the INI reader gives v back: plain when safe, else quoted
   with escapes (';' as \x3b: inih cuts "value ;comment" even inside quotes). */
static void put_value(FILE *f, const char *v) {
    size_t l = strlen(v);
    int quote = l == 0 || isspace((unsigned char)v[0]) || isspace((unsigned char)v[l - 1]) || v[0] == '"';
    for (const char *s = v; *s && !quote; s++)
        if (*s == ';' || (unsigned char)*s < 0x20 || *s == 0x7f) quote = 1;
    if (!quote) { fputs(v, f); return; }
    fputc('"', f);
    for (const unsigned char *s = (const unsigned char *)v; *s; s++) {
        switch (*s) {
        case '\n': fputs("\\n", f); break;
        case '\t': fputs("\\t", f); break;
        case '\r': fputs("\\r", f); break;
        case '\\': fputs("\\\\", f); break;
        case '"': fputs("\\\"", f); break;
        default:
            if (*s == ';' || *s < 0x20 || *s == 0x7f) fprintf(f, "\\x%02x", *s);
            else fputc(*s, f);
        }
    }
    fputc('"', f);
}

static void value_str(const picolm_config *c, const keydef *k, char *buf, size_t n) {
    const char *base = (const char *)c + k->off;
    switch (k->type) {
    case K_INT: snprintf(buf, n, "%d", *(const int *)base); break;
    case K_U64: snprintf(buf, n, "%" PRIu64, *(const uint64_t *)base); break;
    case K_FLOAT: { /* shortest text that reads back as the same float */
        float x = *(const float *)base;
        snprintf(buf, n, "%g", x);
        if (strtof(buf, NULL) != x) snprintf(buf, n, "%.9g", x);
        break;
    }
    case K_BOOL: snprintf(buf, n, "%s", *(const int *)base ? "true" : "false"); break;
    case K_TRI: { int v = *(const int *)base; snprintf(buf, n, "%s", v < 0 ? "auto" : v ? "true" : "false"); break; }
    case K_SIZE: format_size(*(const uint64_t *)base, buf, n); break;
    case K_ENUM: { /* the alternative at the stored position */
        const char *e = k->enums;
        for (int pos = *(const int *)base; pos > 0 && strchr(e, '|'); pos--) e = strchr(e, '|') + 1;
        snprintf(buf, n, "%.*s", (int)strcspn(e, "|"), e);
        break;
    }
    case K_STR: case K_NAME: case K_CHAIN: snprintf(buf, n, "%s", base); break;
    case K_STOP: buf[0] = '\0'; break;
    }
}

void config_dump(const picolm_config *c, void *FILE_stream) {
    FILE *f = FILE_stream;
    char v[8192];
    fprintf(f, "; picolm effective configuration (--dump-config)\n");
    if (c->config_path[0]) fprintf(f, "; read from %s\n", c->config_path);
    for (size_t s = 0; section_at(s); s++) {
        const char *sec = section_at(s);
        fprintf(f, "\n[%s]\n", sec);
        for (size_t i = 0; i < N_KEYS; i++) {
            const keydef *k = &keys[i];
            if (!is_definition(k) || strcmp(k->section, sec)) continue;
            if (k->type == K_STOP) {
                if (!c->n_stops) fprintf(f, "; stop = (none)\n");
                for (int n = 0; n < c->n_stops; n++) {
                    fprintf(f, "stop = ");
                    put_value(f, c->stops[n]);
                    fputc('\n', f);
                }
                continue;
            }
            if (!strcmp(sec, "sampler") && k->type != K_CHAIN) continue; /* from params[] below */
            value_str(c, k, v, sizeof v);
            fprintf(f, "%s = ", k->key);
            put_value(f, v);
            fputc('\n', f);
        }
    }
    for (int i = 0; i < c->n_params; i++) {
        fprintf(f, "%s = ", c->params[i].key);
        put_value(f, c->params[i].value);
        fputc('\n', f);
    }
}

static int o_is_alias(const keydef *o) { return !o->help[0]; }

/* One option's --help lines: flags and help, then its default and INI key. */
static void print_opt(FILE *f, const keydef *o, const picolm_config *d) {
    char v[512], left[64];
    const keydef *k = o->section ? find_key(o->section, o->key) : NULL;
    if (o->shrt) snprintf(left, sizeof left, "-%c, --%s%s%s", o->shrt, o->lng, o->metavar ? " " : "", o->metavar ? o->metavar : "");
    else snprintf(left, sizeof left, "    --%s%s%s", o->lng, o->metavar ? " " : "", o->metavar ? o->metavar : "");
    fprintf(f, "  %-26s %s\n", left, o->help ? o->help : k ? k->help : "");
    if (!k) return;
    if (k->type == K_STOP) {
        fprintf(f, "  %-26s (default none; INI [%s] %s, repeatable)\n", "", k->section, k->key);
    } else if (o->act == A_KEY) {
        value_str(d, k, v, sizeof v);
        fprintf(f, "  %-26s (default %s; INI [%s] %s)\n", "", v[0] ? v : "\"\"", k->section, k->key);
    } else {
        fprintf(f, "  %-26s (default %s; INI [%s] %s)\n", "",
                k->type == K_TRI ? "auto" : *(const int *)((const char *)d + k->off) ? "on" : "off",
                k->section, k->key);
    }
}

void config_usage(const char *argv0, void *FILE_stream) {
    FILE *f = FILE_stream;
    picolm_config d;
    config_defaults(&d);
    fprintf(f,
            "usage: %s MODEL.gguf [-p PROMPT | -f FILE] [-n N] [-t TEMP] [-k TOP_P] [-s SEED] [-c CTX] [-j THREADS]\n"
            "       [--json | --json-schema FILE] [--cache FILE] [options]\n"
            "Generates text from a GGUF model of these architectures (docs/architectures.md):\n  ",
            argv0 ? argv0 : "picolm");
    for (int i = 0; picolm_arch_name(i); i++) fprintf(f, "%s%s", i ? ", " : "", picolm_arch_name(i));
    fprintf(f, ".\n"
            "Settings come from the built-in defaults, then an INI file (--config FILE, else\n"
            "$PICOLM_CONFIG), then these flags.  \"--flag value\" and \"--flag=value\" are both\n"
            "accepted.\n\n");
    for (size_t i = 0; i < N_KEYS; i++)
        if (keys[i].lng && !o_is_alias(&keys[i])) print_opt(f, &keys[i], &d);
    fprintf(f,
            "\nDefaults: threads 0 = every online CPU; context 2048 (never more than the\n"
            "model's); temperature 0 = greedy.  Any [sampler] key can also be set with\n"
            "--param KEY=VALUE; sampler plugins own keys beyond the ones above.\n"
            "Environment: PICOLM_CONFIG (INI file), PICOLM_PLUGIN_DIR (plugin directories,\n"
            "':'-separated, searched after --plugin-dir), PICOLM_CPU_MASK (remove CPU features,\n"
            "e.g. avx512f,avx2; an unknown name is an error), PICOLM_SPIN_US (thread-pool\n"
            "spin before sleeping, default 100).\n"
            "INI values may be double-quoted with C escapes (\\n \\t \\\\ \\\" \\xHH); an\n"
            "unquoted ' ;' starts a comment.  See conf/*.ini for commented examples.\n"
            "Exit status: 0 success, 1 runtime failure (model, files, memory, output),\n"
            "2 usage error (a flag, INI value or name that is wrong).\n");
}

void config_common_usage(void *FILE_stream) {
    picolm_config d;
    config_defaults(&d);
    d.context = 0; /* as config_tool_init */
    for (size_t i = 0; i < N_KEYS; i++)
        if (keys[i].common) print_opt(FILE_stream, &keys[i], &d);
}

/* ------------------------------------------------------------------------ */
/* The numeric keys, for the boundary tests                                  */
/* ------------------------------------------------------------------------ */
int config_numeric_key_at(size_t i, config_numeric_key *out) {
    for (size_t k = 0; k < N_KEYS; k++) {
        const keydef *d = &keys[k];
        if (!is_definition(d)) continue;
        if (d->type != K_INT && d->type != K_FLOAT && d->type != K_U64 && d->type != K_SIZE) continue;
        if (i--) continue;
        memset(out, 0, sizeof *out);
        out->section = d->section;
        out->key = d->key;
        out->kind = d->type == K_INT ? CONFIG_NUM_INT : d->type == K_FLOAT ? CONFIG_NUM_FLOAT
                  : d->type == K_U64 ? CONFIG_NUM_U64 : CONFIG_NUM_SIZE;
        out->lo = d->type == K_INT || d->type == K_FLOAT ? d->lo : 0;
        out->hi = d->type == K_INT || d->type == K_FLOAT ? d->hi : 18446744073709551615.0;
        out->off = d->off;
        out->flag = d->act == A_KEY ? d->lng : NULL;
        return 1;
    }
    return 0;
}

int config_parse_size(const char *v, uint64_t *out) { return parse_size(v, out); }
