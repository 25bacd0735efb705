/* The json_schema logit processor (plugins/json_schema.c) through the plugin
   ABI: documents it must accept and refuse byte by byte, schema errors,
   the budget (its minimum against the shortest document, refusal below
   it, random generation under budgets from it up), apply_logits against
   apply, and the tool-call shape (anyOf of {"name": const, "arguments"}).
   Validity against the schemas' meaning is checked by ajv in t_schema.sh. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "gguf.h"
#include "plugins.h"
#include "tokenizer.h"
#include "tvocab.h"

static pl_registry reg;
static const picolm_sampler_vtable *vt;
static picolm_token_data cand[1024];

/* An instance for schema, with another key = value when key is not NULL. */
static void *create_with(const tvocab *t, const char *schema, const char *key, const char *value, char *err, size_t errlen) {
    const picolm_param prm[2] = {{"json_schema", schema}, {key, value}};
    const picolm_sampler_init in = {sizeof in, &reg.host, &t->v, prm, key ? 2 : 1, 0};
    void *st = NULL;
    err[0] = 0;
    return vt->create(&in, &st, err, errlen) ? NULL : st;
}

static void *create(const tvocab *t, const char *schema, char *err, size_t errlen) { return create_with(t, schema, NULL, NULL, err, errlen); }

/* apply over every token (logit 0): the allowed count, ok[] marked; -1 on error */
static int allowed(void *st, const tvocab *t, int32_t n_remaining, uint8_t *ok, char *err, size_t errlen) {
    for (int i = 0; i < t->v.n_vocab; i++) cand[i] = (picolm_token_data){i, 0.0f, 0};
    picolm_candidates c = {cand, (size_t)t->v.n_vocab, 0, 0, -1, n_remaining};
    memset(ok, 0, (size_t)t->v.n_vocab);
    if (vt->apply(st, &c, err, errlen)) return -1;
    for (size_t i = 0; i < c.size; i++) ok[cand[i].id] = 1;
    return (int)c.size;
}

/* Does the plugin let exactly these bytes through (byte tokens), then EOS? */
static int accepts(void *st, const tvocab *bv, const char *s) {
    static uint8_t ok[300];
    char err[256];
    vt->reset(st);
    for (size_t i = 0; s[i]; i++) {
        if (allowed(st, bv, -1, ok, err, sizeof err) < 0 || !ok[3 + (unsigned char)s[i]]) return 0;
        vt->accept(st, 3 + (unsigned char)s[i]);
    }
    return allowed(st, bv, -1, ok, err, sizeof err) > 0 && ok[2];
}

typedef struct doc_case {
    const char *schema;
    const char *valid[8];
    const char *invalid[12];
} doc_case;

#define PERSON "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":12}," \
    "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":120},\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"b\",\"c\"]}," \
    "\"maxItems\":3},\"ok\":{\"type\":\"boolean\"}},\"required\":[\"name\",\"age\"],\"additionalProperties\":false}"
#define TOOLS "{\"anyOf\":[" \
    "{\"type\":\"object\",\"properties\":{\"name\":{\"const\":\"get_weather\"},\"arguments\":{\"type\":\"object\"," \
    "\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"],\"additionalProperties\":false}}," \
    "\"required\":[\"name\",\"arguments\"],\"additionalProperties\":false}," \
    "{\"type\":\"object\",\"properties\":{\"name\":{\"const\":\"get_time\"},\"arguments\":{\"type\":\"object\"," \
    "\"properties\":{\"zone\":{\"enum\":[\"UTC\",\"CET\"]}},\"additionalProperties\":false}}," \
    "\"required\":[\"name\",\"arguments\"],\"additionalProperties\":false}," \
    "{\"type\":\"object\",\"properties\":{\"name\":{\"const\":\"add\"},\"arguments\":{\"type\":\"object\"," \
    "\"properties\":{\"a\":{\"type\":\"number\"},\"b\":{\"type\":\"number\"}},\"required\":[\"a\",\"b\"],\"additionalProperties\":false}}," \
    "\"required\":[\"name\",\"arguments\"],\"additionalProperties\":false}]}"
#define TREE "{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},\"kids\":{\"type\":\"array\"," \
    "\"items\":{\"$ref\":\"#/$defs/node\"}}},\"required\":[\"v\"],\"additionalProperties\":false}},\"$ref\":\"#/$defs/node\"}"

static const doc_case DOCS[] = {
    {PERSON,
     {"{\"name\":\"x\",\"age\":3}", "{ \"name\" : \"ab\" , \"age\" : 120 , \"ok\" : true }", "{\"name\":\"\",\"age\":0,\"tags\":[],\"ok\":false}",
      "{\"name\":\"\xc3\xa9\\n\\u00e9\",\"age\":7,\"tags\":[\"a\",\"c\"]}", "{\n  \"name\": \"123456789012\",\n  \"age\": 1\n}"},
     {"{}", "{\"age\":3,\"name\":\"x\"}", "{\"name\":\"x\",\"age\":3,\"extra\":1}", "{\"name\":\"x\",\"age\":-1}", "{\"name\":\"x\",\"age\":121}",
      "{\"name\":\"x\",\"age\":1.5}", "{\"name\":\"1234567890123\",\"age\":1}", "{\"name\":\"x\",\"age\":3,\"tags\":[\"d\"]}",
      "{\"name\":\"x\",\"age\":3,\"tags\":[\"a\",\"a\",\"a\",\"a\"]}", "{\"name\":\"x\",\"age\":01}", "{\"name\":\"x\",\"age\":3} ",
      "{\"name\":\"x\",\"age\":3,}"}},
    {"{\"type\":\"number\",\"minimum\":-1.5,\"exclusiveMaximum\":2}",
     {"-1.5", "0", "1.99999", "-0", "1", "-1.25", "0.000001"},
     {"-1.51", "2", "2.0", "1e1", "-", ".5", "-1.5000001", "3", "00", "1.", "+1"}},
    {"{\"type\":\"integer\",\"minimum\":10,\"maximum\":20}",
     {"10", "15", "20"},
     {"9", "21", "1", "100", "10.0", "-15", "0", "2"}},
    {"{\"type\":\"integer\",\"exclusiveMinimum\":-3,\"maximum\":-1}",
     {"-2", "-1"},
     {"-3", "0", "-0", "1"}},
    {"{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}",
     {"\"ab\"", "\"abc\"", "\"\xc3\xa9\xe2\x82\xac\"", "\"\\n\\t\"", "\"\\u00e9x\"", "\"\xf0\x9f\x98\x80\xf0\x9f\x98\x80\""},
     {"\"a\"", "\"abcd\"", "\"\\ud83d\\ude00\"", "\"\x01x\"", "\"\xc3\"", "\"\xc0\x80x\"", "'ab'"}},
    {"{\"enum\":[\"red\",\"green\",1,null,{\"a\":[1,2]}]}",
     {"\"red\"", "\"green\"", "1", "null", "{\"a\":[1,2]}"},
     {"\"blue\"", "2", "{\"a\":[1,2,3]}", "{\"a\": [1,2]}", "\"gree\"", "10", "true"}},
    {"{\"type\":\"string\",\"enum\":[\"x\",1,\"yy\"],\"maxLength\":1}", {"\"x\""}, {"1", "\"yy\""}},
    {"{\"const\":\"x\"}", {"\"x\""}, {"\"y\"", "\"xx\""}},
    /* a value whose exponent is past the exact decimals: no bound to compare */
    {"{\"enum\":[1e200000,\"x\"]}", {"1e200000", "\"x\""}, {"1e20000", "1"}},
    {"{\"anyOf\":[{\"type\":\"string\",\"maxLength\":2},{\"type\":\"integer\",\"minimum\":5},{\"type\":\"null\"}]}",
     {"\"ab\"", "7", "null", "5"},
     {"\"abc\"", "4", "true", "5.5"}},
    {TREE,
     {"{\"v\":1}", "{\"v\":1,\"kids\":[{\"v\":2},{\"v\":3,\"kids\":[]}]}"},
     {"{\"kids\":[]}", "{\"v\":1,\"kids\":[{}]}", "{\"v\":1,\"kids\":[1]}"}},
    /* a reference to a reference, reached again inside its target */
    {"{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/b\"},\"b\":{\"type\":\"object\",\"properties\":{\"x\":{\"$ref\":\"#/$defs/a\"}}}},"
     "\"$ref\":\"#/$defs/a\"}",
     {"{}", "{\"x\":{}}", "{\"x\":{\"x\":{}}}"},
     {"{\"x\":1}", "{\"y\":{}}"}},
    {TOOLS,
     {"{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}", "{\"name\":\"add\",\"arguments\":{\"a\":1,\"b\":-2.5}}",
      "{\"name\":\"get_time\",\"arguments\":{}}", "{\"name\":\"get_time\",\"arguments\":{\"zone\":\"CET\"}}"},
     {"{\"name\":\"get_weather\",\"arguments\":{\"a\":1,\"b\":2}}", "{\"name\":\"other\",\"arguments\":{}}",
      "{\"name\":\"add\",\"arguments\":{\"a\":1}}", "{\"arguments\":{},\"name\":\"get_time\"}", "{\"name\":\"get_time\"}"}},
    {"{}", {"123", "\"s\"", "[1,{\"a\":null}]", "true", "{}"}, {"", "[1,]", "tru"}},
    {"{\"type\":\"object\"}", {"{\"x\":[1]}", "{}", "{ \"a\" : { } }"}, {"[]", "1", "{\"a\"}"}},
    {"{\"type\":[\"string\",\"null\"]}", {"\"a\"", "null"}, {"1", "[]"}},
    {"{\"type\":\"array\",\"maxItems\":2}", {"[1,\"a\"]", "[]", "[{\"x\":[]}]"}, {"[1,2,3]", "{}"}},
    {"{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"minItems\":2,\"maxItems\":3}",
     {"[true,false]", "[ true , true , false ]"},
     {"[true]", "[]", "[true,true,true,true]", "[1,2]"}},
    {"{\"properties\":{\"a\":{},\"b\":{},\"c\":{}},\"required\":[\"c\"]}",
     {"{\"c\":1}", "{\"a\":1,\"c\":2}", "{\"b\":[],\"c\":{}}", "{\"a\":1,\"b\":2,\"c\":3}"},
     {"{\"a\":1}", "{}", "{\"c\":1,\"a\":2}"}},
    {"{\"type\":\"object\",\"required\":[\"id\"]}", {"{\"id\":1}", "{\"id\":\"x\"}"}, {"{}", "{\"other\":1}"}},
    {"true", {"null", "[]"}, {"nul"}},
    {"{\"type\":\"object\",\"properties\":{\"q\\\"\\\\\\u00e9\":{\"type\":\"null\"}},\"required\":[\"q\\\"\\\\\\u00e9\"]}",
     {"{\"q\\\"\\\\\xc3\xa9\":null}"}, {"{\"q\\\"\\\\\\u00e9\":null}"}},
};

static const char *esc(const char *s) {
    static char b[4][400];
    static int k;
    char *o = b[k++ & 3], *w = o;
    for (; *s && w < o + 390; s++) {
        const unsigned char c = (unsigned char)*s;
        if (c >= 0x20 && c < 0x7f) *w++ = (char)c;
        else w += snprintf(w, 8, "\\x%02x", c);
    }
    *w = 0;
    return o;
}

static void test_documents(void) {
    tvocab bv;
    byte_vocab(&bv, 300);
    for (size_t i = 0; i < sizeof DOCS / sizeof *DOCS; i++) {
        char err[512];
        void *st = create(&bv, DOCS[i].schema, err, sizeof err);
        CHECK(st != NULL, "schema %zu compiles (%s)", i, err);
        if (!st) continue;
        int bad = 0, n = 0;
        for (int k = 0; k < 8 && DOCS[i].valid[k]; k++, n++)
            if (!accepts(st, &bv, DOCS[i].valid[k])) printf("# schema %zu: refused %s\n", i, esc(DOCS[i].valid[k])), bad++;
        for (int k = 0; k < 12 && DOCS[i].invalid[k]; k++, n++)
            if (accepts(st, &bv, DOCS[i].invalid[k])) printf("# schema %zu: accepted %s\n", i, esc(DOCS[i].invalid[k])), bad++;
        CHECK(!bad, "schema %zu (%.60s...): %d documents accepted or refused as they should be (%d wrong)", i, esc(DOCS[i].schema), n, bad);
        vt->destroy(st);
    }
    tv_free(&bv);
}

typedef struct err_case {
    const char *schema, *want;
} err_case;

static const err_case ERRS[] = {
    {"{\"type\":\"string\",\"pattern\":\"^a\"}", "#: unsupported keyword 'pattern'"},
    {"{\"properties\":{\"x\":{\"format\":\"date\"}}}", "#/properties/x: unsupported keyword 'format'"},
    {"{\"oneOf\":[{},{}]}", "unsupported keyword 'oneOf'"},
    {"{\"allOf\":[{}]}", "unsupported keyword 'allOf'"},
    {"{\"not\":{}}", "unsupported keyword 'not'"},
    {"{\"items\":{\"uniqueItems\":true}}", "#/items: unsupported keyword 'uniqueItems'"},
    {"{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}}", "'additionalProperties' with a schema is unsupported"},
    {"{\"type\":\"array\",\"items\":[{},{}]}", "'items' as an array (a tuple) is unsupported"},
    {"{\"type\":", "not valid JSON: line 1, column 9"},
    {"{\"type\":\"string\",}", "not valid JSON: line 1, column 18"},
    {"{\"a\":1,\n\"a\":2}", "line 2, column 7: duplicate key"},
    {"[1]", "a schema must be an object or a boolean"},
    {"{\"type\":\"strin\"}", "'type' must name"},
    {"{\"$ref\":\"#/$defs/nope\"}", "$ref '#/$defs/nope' does not resolve"},
    {"{\"$ref\":\"http://x/y.json\"}", "does not resolve (only local references"},
    {"{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/b\"},\"b\":{\"$ref\":\"#/$defs/a\"}},\"$ref\":\"#/$defs/a\"}", "refers to itself"},
    {"{\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"x\":{\"$ref\":\"#/$defs/n\"}},\"required\":[\"x\"]}},\"$ref\":\"#/$defs/n\"}",
     "no finite JSON document"},
    {"false", "no finite JSON document"},
    {"{\"type\":\"string\",\"minLength\":3,\"maxLength\":2}", "minLength is above maxLength"},
    {"{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}", "no integer of at most 18 digits"},
    {"{\"type\":\"number\",\"exclusiveMinimum\":1,\"exclusiveMaximum\":1}", "no number of at most 18 digits"},
    {"{\"type\":\"string\",\"enum\":[1,2]}", "no value of 'enum' satisfies the rest of the schema"},
    {"{\"type\":\"object\",\"required\":[\"a\"],\"additionalProperties\":false}", "required property 'a' is not in 'properties'"},
    {"{\"minItems\":-1}", "'minItems' must be a non-negative integer"},
    {"{\"maxLength\":1.5}", "'maxLength' must be a non-negative integer"},
    {"{\"minimum\":\"3\"}", "'minimum' must be a number"},
    {"{\"type\":\"string\",\"$ref\":\"#\"}", "'$ref' alongside 'type' is unsupported"},
    {"{\"type\":\"string\",\"anyOf\":[{}]}", "'anyOf' alongside 'type' is unsupported"},
    {"{\"anyOf\":[]}", "'anyOf' must be a non-empty array"},
    {"{\"properties\":{\"a\":{\"$id\":\"x\"}}}", "#/properties/a: unsupported keyword '$id'"},
    {" ", "not valid JSON: line 1, column 2: unexpected end"},
};

static void test_errors(void) {
    tvocab bv;
    byte_vocab(&bv, 300);
    for (size_t i = 0; i < sizeof ERRS / sizeof *ERRS; i++) {
        char err[512];
        void *st = create(&bv, ERRS[i].schema, err, sizeof err);
        CHECK(!st && strstr(err, ERRS[i].want) && !strncmp(err, "json_schema: ", 13), "refused %s: %s", esc(ERRS[i].schema), err);
        if (st) vt->destroy(st);
    }
    char err[512];
    void *st = create(&bv, "", err, sizeof err);
    CHECK(!st && strstr(err, "no schema"), "no schema given: %s", err);
    /* a vocabulary without a byte the closing needs */
    tvocab nv;
    tv_init(&nv, 300);
    for (int b = 0; b < 256; b++) {
        const char c = (char)b;
        if (c != ':') tv_add(&nv, &c, 1, 6);
    }
    st = create(&nv, PERSON, err, sizeof err);
    CHECK(!st && strstr(err, "no single-byte token for ':'"), "vocabulary without ':' refused for an object schema: %s", err);
    st = create(&nv, "{\"type\":\"array\",\"items\":{\"type\":\"integer\"}}", err, sizeof err);
    CHECK(st != NULL, "... and accepted for an array of integers (%s)", err);
    if (st) vt->destroy(st);
    tv_free(&nv);
    tv_free(&bv);
}

/* Schemas as large as a request body may carry compile in time that grows
   like their size (a server builds one per request): 50000 properties
   (half required), an enum of 50000 values, an anyOf of 5000 tool calls,
   a chain of 200 definitions; 300 is refused (the C stack). */
static char *big_schema(int kind) {
    const size_t cap = 8u << 20;
    char *b = malloc(cap);
    size_t n = 0;
#define PUT(...) (n += (size_t)snprintf(b + n, cap - n, __VA_ARGS__))
    if (kind == 0) {
        PUT("{\"type\":\"object\",\"properties\":{");
        for (int i = 0; i < 50000; i++) PUT("%s\"p%d\":{\"type\":\"%s\"}", i ? "," : "", i, i % 3 ? "integer" : "string");
        PUT("},\"required\":[");
        for (int i = 0; i < 50000; i += 2) PUT("%s\"p%d\"", i ? "," : "", i);
        PUT("],\"description\":\"");
        for (int i = 0; i < 200000; i++) PUT("x");
        PUT("\"}");
    } else if (kind == 1) {
        PUT("{\"enum\":[");
        for (int i = 0; i < 50000; i++) PUT("%s\"v%d\"", i ? "," : "", i * 7919 % 50000);
        PUT("]}");
    } else if (kind == 2) {
        PUT("{\"anyOf\":[");
        for (int i = 0; i < 5000; i++)
            PUT("%s{\"type\":\"object\",\"properties\":{\"name\":{\"const\":\"f%d\"},\"arguments\":{\"type\":\"object\"}},"
                "\"required\":[\"name\",\"arguments\"]}", i ? "," : "", i);
        PUT("]}");
    } else {
        const int len = kind == 3 ? 200 : 300;
        PUT("{\"$defs\":{");
        for (int i = 0; i < len; i++) PUT("\"d%d\":{\"type\":\"object\",\"properties\":{\"n\":{\"$ref\":\"#/$defs/d%d\"}}},", i, i + 1);
        PUT("\"d%d\":{\"type\":\"null\"}},\"$ref\":\"#/$defs/d0\"}", len);
    }
#undef PUT
    return b;
}

static void test_large(void) {
    tvocab bv;
    byte_vocab(&bv, 300);
    static const char *const what[] = {"50000 properties", "an enum of 50000", "an anyOf of 5000 tool calls", "200 chained $defs"};
    for (int k = 0; k < 5; k++) {
        char *schema = big_schema(k), err[512];
        const clock_t t0 = clock();
        void *st = create(&bv, schema, err, sizeof err);
        const double s = (double)(clock() - t0) / CLOCKS_PER_SEC;
        if (k < 4) CHECK(st && s < 10, "%s (%zu KB): compiled in %.2f s of CPU (%s)", what[k], strlen(schema) >> 10, s, err);
        else CHECK(!st && strstr(err, "nested more than 256 deep"), "300 chained $defs: refused: %s", err);
        if (st) vt->destroy(st);
        free(schema);
    }
    tv_free(&bv);
}

/* Fragments for multi-byte tokens, with the keys of the schemas below. */
static const char *FRAGS[] = {
    "{", "}", "[", "]", "\"", ":", ",", " ", "\n", "0", "1", "7", "-", ".", "\\", "u", "e", "x", "a", "b", "\xc3\xa9", "\xe2\x82",
    "\xac", "{\"", "\"}", "\":", "\": ", ", \"", "\",", "\"]", "[{", "}]", "]}", "}}", "{}", "[]", "true", "false", "null", "12",
    "3.14", "-0.5", "name", "\"name\"", "\"name\":\"", "age", "\"age\":", "tags", "ok", "\"a\"", "\"b\",", "city", "Paris",
    "arguments", "\"arguments\":{", "get_weather", "get_time", "add", "\":\"", "\",\"", "hello world", "\\n", "\\u00e9", "zone",
    "UTC", "\"CET\"", "99", "100", "120", "v", "kids", "\"kids\":[", "  ", "\t",
};

static const char *GEN_SCHEMAS[] = {
    PERSON, TOOLS, TREE,
    "{\"type\":\"array\",\"items\":{\"type\":\"number\",\"minimum\":-2.5,\"maximum\":99.75},\"minItems\":3}",
    "{\"type\":\"string\",\"minLength\":5,\"maxLength\":9}",
    "{\"anyOf\":[{\"type\":\"string\",\"maxLength\":2},{\"type\":\"integer\",\"minimum\":100},{\"type\":\"null\"},{\"type\":\"object\"}]}",
    "{}",
    "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"minLength\":2},\"minItems\":2}},\"required\":[\"a\"]}",
};

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void) { return rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17; }

static void test_budget(void) {
    tvocab bv, fv;
    byte_vocab(&bv, 300);
    byte_vocab(&fv, 600);
    for (size_t i = 0; i < sizeof FRAGS / sizeof *FRAGS; i++) tv_add(&fv, FRAGS[i], (uint32_t)strlen(FRAGS[i]), 1);
    static uint8_t ok[600];
    char err[512];
    /* the minimum on single bytes is the shortest document's length */
    static const struct { const char *schema, *shortest; } MIN[] = {
        {PERSON, "{\"name\":\"\",\"age\":0}"}, {TOOLS, "{\"name\":\"get_time\",\"arguments\":{}}"}, {TREE, "{\"v\":0}"},
        {"{\"type\":\"number\",\"minimum\":1234.5}", "1235"}, {"{\"type\":\"number\",\"minimum\":0.125,\"maximum\":0.13}", "0.13"},
        {"{\"type\":\"string\",\"minLength\":4}", "\"xxxx\""}, {"{\"type\":\"array\",\"minItems\":3}", "[0,0,0]"},
        {"{\"enum\":[\"long one\",[1,2],-7]}", "-7"}, {"{}", "0"}, {"{\"type\":\"object\"}", "{}"},
    };
    for (size_t i = 0; i < sizeof MIN / sizeof *MIN; i++) {
        void *st = create(&bv, MIN[i].schema, err, sizeof err);
        if (!st) { CHECK(0, "create %s: %s", esc(MIN[i].schema), err); continue; }
        const int want = (int)strlen(MIN[i].shortest), got = vt->min_budget(st);
        const int below = allowed(st, &bv, want - 1, ok, err, sizeof err);
        CHECK(got == want && below < 0 && strstr(err, "at least") && accepts(st, &bv, MIN[i].shortest),
              "min budget of %s: %d (the shortest document %s has %d bytes); one less is refused: %s", esc(MIN[i].schema), got,
              esc(MIN[i].shortest), want, err);
        vt->destroy(st);
    }
    /* random generation with multi-byte tokens, budgets from the minimum up:
       every output complete, the same bytes accepted by a fresh instance */
    int runs = 0, bad = 0, errors = 0, by_eos = 0;
    for (size_t si = 0; si < sizeof GEN_SCHEMAS / sizeof *GEN_SCHEMAS; si++) {
        void *st = create(&fv, GEN_SCHEMAS[si], err, sizeof err), *chk = create(&bv, GEN_SCHEMAS[si], err, sizeof err);
        if (!st || !chk) { CHECK(0, "create generation schema %zu: %s", si, err); continue; }
        const int min = vt->min_budget(st);
        for (int extra = 0; extra < 40; extra += 1 + extra / 4)
            for (int seed = 0; seed < 25; seed++) {
                const int N = min + extra;
                char out[8192];
                size_t n = 0;
                int eos = 0;
                vt->accept(st, 3 + 'P'); /* a prompt token: a new document */
                for (int k = 0; k < N && !eos; k++) {
                    const int cnt = allowed(st, &fv, N - k, ok, err, sizeof err);
                    if (cnt <= 0) { if (errors++ < 3) printf("# schema %zu budget %d step %d: %s\n", si, N, k, err); break; }
                    int pick = (int)(rnd() % (uint64_t)cnt), tok = -1;
                    for (int t = 0; t < fv.v.n_vocab && tok < 0; t++)
                        if (ok[t] && pick-- == 0) tok = t;
                    vt->accept(st, tok);
                    if (tok == 2) eos = 1;
                    else memcpy(out + n, fv.piece[tok], fv.len[tok]), n += fv.len[tok];
                }
                out[n] = 0;
                runs++;
                by_eos += eos;
                if (!accepts(chk, &bv, out)) {
                    if (bad++ < 3) printf("# schema %zu budget %d: incomplete or invalid: %s\n", si, N, esc(out));
                }
            }
        vt->destroy(st);
        vt->destroy(chk);
    }
    CHECK(runs && !bad && !errors, "%d random generations (8 schemas, budgets from the minimum up): every output complete (%d ended by EOS, %d invalid, %d errors)",
          runs, by_eos, bad, errors);
    tv_free(&fv);
    tv_free(&bv);
}

/* Random generations over a model's real vocabulary (byte-level BPE or
   SentencePiece pieces: multi-byte tokens across the structure, digits in
   threes, partial UTF-8): every output complete, and the same bytes
   accepted one at a time; the tool call among the schemas. */
static void test_real_vocab(const char *shared, const char *model) {
    char path[4096], err[512];
    snprintf(path, sizeof path, "%s/models/%s", shared, model);
    gguf_file f;
    tokenizer *tok = NULL;
    if (build_gguf(&f, path, NULL, err, sizeof err)) { SKIP("%s: %s", model, err); return; }
    const int rc = build_tokenizer(&tok, &f, err, sizeof err);
    free_gguf(&f);
    if (rc) { CHECK(0, "%s: tokenizer: %s", model, err); return; }
    const picolm_vocab *v = tokenizer_vocab(tok);
    const tvocab real = {*v, v->n_vocab, v->n_vocab, NULL, NULL, NULL};
    tvocab bv;
    byte_vocab(&bv, 300);
    picolm_token_data *all = malloc((size_t)v->n_vocab * sizeof *all);
    int runs = 0, bad = 0, errors = 0, multi = 0;
    for (size_t si = 0; si < sizeof GEN_SCHEMAS / sizeof *GEN_SCHEMAS; si++) {
        void *st = create(&real, GEN_SCHEMAS[si], err, sizeof err), *chk = create(&bv, GEN_SCHEMAS[si], err, sizeof err);
        if (!st || !chk) { CHECK(0, "%s: create schema %zu: %s", model, si, err); continue; }
        const int min = vt->min_budget(st);
        for (int g = 0; g < 6; g++) {
            const int N = min + (g < 2 ? 0 : g * g);
            char out[8192];
            size_t n = 0;
            int k = 0;
            vt->reset(st);
            for (; k < N; k++) {
                for (int i = 0; i < v->n_vocab; i++) all[i] = (picolm_token_data){i, 0.0f, 0};
                picolm_candidates c = {all, (size_t)v->n_vocab, 0, 0, -1, N - k};
                if (vt->apply(st, &c, err, sizeof err)) { if (errors++ < 3) printf("# %s schema %zu budget %d: %s\n", model, si, N, err); break; }
                const int32_t t = c.data[rnd() % c.size].id;
                vt->accept(st, t);
                if (t == v->eos_id) break;
                multi += v->piece_len[t] > 1;
                if (n + v->piece_len[t] < sizeof out) memcpy(out + n, v->piece[t], v->piece_len[t]), n += v->piece_len[t];
            }
            out[n] = 0;
            runs++;
            if (!accepts(chk, &bv, out) && bad++ < 3) printf("# %s schema %zu budget %d: incomplete or invalid: %s\n", model, si, N, esc(out));
        }
        vt->destroy(st);
        vt->destroy(chk);
    }
    CHECK(!bad && !errors && multi, "%s (%d tokens): %d random generations of %zu schemas, budgets from the minimum up: all complete (%d multi-byte tokens chosen)",
          model, v->n_vocab, runs, sizeof GEN_SCHEMAS / sizeof *GEN_SCHEMAS, multi);
    free(all);
    tv_free(&bv);
    free_tokenizer(tok);
}

/* apply_logits: the list apply() leaves over the full list, same order. */
static void test_apply_logits(void) {
    tvocab fv;
    byte_vocab(&fv, 600);
    for (size_t i = 0; i < sizeof FRAGS / sizeof *FRAGS; i++) tv_add(&fv, FRAGS[i], (uint32_t)strlen(FRAGS[i]), 1);
    char err[512];
    void *a = create(&fv, TOOLS, err, sizeof err), *b = create(&fv, TOOLS, err, sizeof err);
    if (!a || !b) { CHECK(0, "create: %s", err); return; }
    static float logits[600];
    static picolm_token_data other[600];
    int same = 1, steps = 0;
    const char *path[] = {"{\"", "name", "\":\"", "add", "\",\"", "arguments", "\":", "{\"", "a", "\":", "1", "2", ",", "\"", "b",
                          "\":", "-0.5", "}", "}"};
    for (size_t k = 0; k <= sizeof path / sizeof *path && same; k++, steps++) {
        for (int i = 0; i < fv.v.n_vocab; i++) logits[i] = (float)(rnd() % 1000) / 100.0f, cand[i] = (picolm_token_data){i, logits[i] * 0.5f, 0};
        picolm_candidates ca = {cand, (size_t)fv.v.n_vocab, 0, 0, -1, 40}, cb = {other, (size_t)fv.v.n_vocab, 0, 0, -1, 40};
        same &= !vt->apply(a, &ca, err, sizeof err) && !vt->apply_logits(b, logits, 0.5f, &cb, err, sizeof err) && ca.size == cb.size &&
                ca.sorted == cb.sorted && !memcmp(cand, other, ca.size * sizeof *cand);
        if (k == sizeof path / sizeof *path) same &= ca.size == 1 && cand[0].id == 2; /* complete: EOS only */
        int tok = -1;
        for (int i = 0; k < sizeof path / sizeof *path && i < fv.v.n_vocab; i++)
            if (fv.len[i] == strlen(path[k]) && !memcmp(fv.piece[i], path[k], fv.len[i])) tok = i;
        if (tok >= 0) vt->accept(a, tok), vt->accept(b, tok);
    }
    CHECK(same, "apply_logits == apply over %d steps of a tool call, EOS alone at the end (%s)", steps, err);
    vt->destroy(a);
    vt->destroy(b);
    tv_free(&fv);
}

/* prompt tokens restart the document; a complete one allows only EOS */
static void test_turns(void) {
    tvocab bv;
    byte_vocab(&bv, 300);
    char err[512];
    static uint8_t ok[300];
    void *st = create(&bv, "{\"type\":\"array\",\"items\":{\"type\":\"integer\"}}", err, sizeof err);
    if (!st) { CHECK(0, "create: %s", err); return; }
    allowed(st, &bv, -1, ok, err, sizeof err);
    vt->accept(st, 3 + '[');
    vt->accept(st, 3 + 'x'); /* the next turn's prompt */
    allowed(st, &bv, -1, ok, err, sizeof err);
    CHECK(ok[3 + '['] && !ok[3 + '1'] && !ok[2], "a prompt token restarts the document");
    vt->reset(st);
    for (const char *p = "[1]"; *p; p++) allowed(st, &bv, -1, ok, err, sizeof err), vt->accept(st, 3 + (unsigned char)*p);
    const int n = allowed(st, &bv, -1, ok, err, sizeof err);
    CHECK(n == 1 && ok[2], "complete document: EOS is the only choice (%d allowed)", n);
    vt->destroy(st);
    /* a top-level number may end or go on */
    st = create(&bv, "{\"type\":\"integer\",\"maximum\":500}", err, sizeof err);
    vt->reset(st);
    allowed(st, &bv, -1, ok, err, sizeof err);
    vt->accept(st, 3 + '5');
    allowed(st, &bv, -1, ok, err, sizeof err);
    CHECK(ok[2] && ok[3 + '9'] && ok[3 + '0'] && !ok[3 + '.'], "after \"5\" (integer <= 500): EOS or another digit");
    vt->accept(st, 3 + '0');
    allowed(st, &bv, -1, ok, err, sizeof err);
    CHECK(ok[2] && ok[3 + '0'] && !ok[3 + '1'], "after \"50\": EOS or \"500\", not \"501\"");
    /* EOS chosen but not accepted (as the CLI stops), then the next prompt */
    vt->accept(st, 3 + '\n');
    const int fresh = allowed(st, &bv, -1, ok, err, sizeof err);
    CHECK(fresh > 0 && ok[3 + '1'] && ok[3 + '-'] && !ok[2], "a token that cannot follow \"50\" after EOS was allowed starts a new document (%s)", err);
    vt->destroy(st);
    tv_free(&bv);
}

/* Lazy documents: free text, then the document after a trigger
   (json_schema_trigger: a Hermes tool call's "<tool_call>"), or the whole
   output only when its first token starts one (json_schema_optional). */
static int tok_of(const tvocab *t, const char *s) {
    for (int i = 3; i < t->n; i++)
        if (t->len[i] == strlen(s) && !memcmp(t->piece[i], s, t->len[i])) return i;
    return -1;
}

static void test_lazy(void) {
    tvocab fv, bv;
    byte_vocab(&bv, 300);
    byte_vocab(&fv, 700);
    for (size_t i = 0; i < sizeof FRAGS / sizeof *FRAGS; i++) tv_add(&fv, FRAGS[i], (uint32_t)strlen(FRAGS[i]), 1);
    static const char *const TRIG_TOKS[] = {"<tool_call>", "<tool", "_call>", "_call>\n", "_call>{\"", "_call>x", "Hello", " world", "<", "{\"a\":"};
    for (size_t i = 0; i < sizeof TRIG_TOKS / sizeof *TRIG_TOKS; i++) tv_add(&fv, TRIG_TOKS[i], (uint32_t)strlen(TRIG_TOKS[i]), 1);
    const int T_FULL = tok_of(&fv, "<tool_call>"), T_OPEN = tok_of(&fv, "<tool"), T_CLOSE = tok_of(&fv, "_call>"),
              T_NL = tok_of(&fv, "_call>\n"), T_DOC = tok_of(&fv, "_call>{\""), T_BAD = tok_of(&fv, "_call>x"), T_HELLO = tok_of(&fv, "Hello");
    static uint8_t ok[700];
    char err[512];
    void *st = create_with(&fv, TOOLS, "json_schema_trigger", "<tool_call>", err, sizeof err);
    void *doc = create(&fv, TOOLS, err, sizeof err);
    if (!st || !doc) { CHECK(0, "create with a trigger: %s", err); return; }
    const int dmin = vt->min_budget(doc), tmin = vt->min_budget(st);
    CHECK(tmin == dmin + 1, "min budget with the trigger '<tool_call>' (one token): %d = 1 + the document's %d", tmin, dmin);
    vt->accept(st, 3 + 'P'); /* prompt */
    int n = allowed(st, &fv, 5, ok, err, sizeof err);
    CHECK(n == fv.v.n_vocab - 1 && ok[2] && ok[T_HELLO] && !ok[T_FULL] && ok[T_OPEN],
          "free text under a budget too small for a call: every token but the trigger (%d of %d; trigger %d, EOS %d)", n, fv.v.n_vocab, ok[T_FULL], ok[2]);
    allowed(st, &fv, dmin, ok, err, sizeof err);
    const int at_min_minus = ok[T_FULL];
    allowed(st, &fv, dmin + 1, ok, err, sizeof err);
    CHECK(!at_min_minus && ok[T_FULL], "the trigger token is allowed with %d tokens left (a document after it), not with %d", dmin + 1, dmin);
    vt->accept(st, T_HELLO);
    allowed(st, &fv, -1, ok, err, sizeof err);
    vt->accept(st, T_OPEN); /* "<tool": part of the trigger */
    allowed(st, &fv, -1, ok, err, sizeof err);
    CHECK(ok[T_CLOSE] && ok[T_NL] && ok[T_DOC] && !ok[T_BAD] && ok[3 + 'z'],
          "after \"Hello<tool\": \"_call>\", \"_call>\\n\" and \"_call>{\\\"\" complete the trigger, \"_call>x\" (not a document) may not, other text may");
    vt->accept(st, T_DOC);
    n = allowed(st, &fv, -1, ok, err, sizeof err);
    CHECK(n > 0 && ok[tok_of(&fv, "name")] && !ok[T_HELLO] && !ok[2], "the document goes on from the token's rest ({\"): \"name\" next, no text, no EOS (%d allowed)", n);
    /* random generations: text, then after the first trigger a complete document */
    int runs = 0, calls = 0, bad = 0, errors = 0, early = 0;
    for (int N = 1; N < 90; N += 1 + N / 8)
        for (int seed = 0; seed < 30; seed++) {
            char out[8192];
            size_t len = 0;
            vt->reset(st);
            vt->accept(st, 3 + 'P');
            for (int k = 0; k < N; k++) {
                const int cnt = allowed(st, &fv, N - k, ok, err, sizeof err);
                if (cnt <= 0) { if (errors++ < 3) printf("# lazy budget %d step %d: %s\n", N, k, err); break; }
                int tok = -1;
                const uint64_t r = rnd() % 10;
                if (r < 2 && ok[T_FULL]) tok = T_FULL;
                else if (r < 3 && ok[T_OPEN]) tok = T_OPEN;
                else if (r < 5 && ok[T_CLOSE]) tok = T_CLOSE;
                for (int pick = (int)(rnd() % (uint64_t)cnt), t = 0; tok < 0 && t < fv.v.n_vocab; t++)
                    if (ok[t] && pick-- == 0) tok = t;
                vt->accept(st, tok);
                if (tok == 2) break;
                memcpy(out + len, fv.piece[tok], fv.len[tok]), len += fv.len[tok];
            }
            out[len] = 0;
            runs++;
            const char *at = strstr(out, "<tool_call>");
            if (!at) continue;
            calls++;
            early += N < tmin;
            if (!accepts(doc, &bv, at + 11) && bad++ < 3) printf("# lazy budget %d: not a complete document after the trigger: %s\n", N, esc(out));
        }
    void *chk = create(&bv, TOOLS, err, sizeof err);
    vt->destroy(doc);
    doc = chk;
    CHECK(runs && calls > runs / 4 && !bad && !errors && !early,
          "%d random generations with the trigger, budgets 1..89: %d made a call, each a complete document, none under the minimum %d (%d bad, %d errors, %d early)",
          runs, calls, tmin, bad, errors, early);
    /* apply_logits == apply in free text and in the document */
    void *b = create_with(&fv, TOOLS, "json_schema_trigger", "<tool_call>", err, sizeof err);
    static float logits[700];
    static picolm_token_data other[700];
    int same = 1;
    const int path[] = {T_HELLO, T_OPEN, T_CLOSE, tok_of(&fv, "{\""), tok_of(&fv, "name")};
    vt->reset(st), vt->reset(b);
    for (size_t k = 0; k <= sizeof path / sizeof *path && same; k++) {
        for (int i = 0; i < fv.v.n_vocab; i++) logits[i] = (float)(rnd() % 1000) / 100.0f, cand[i] = (picolm_token_data){i, logits[i], 0};
        picolm_candidates ca = {cand, (size_t)fv.v.n_vocab, 0, 0, -1, dmin + 2}, cb = {other, (size_t)fv.v.n_vocab, 0, 0, -1, dmin + 2};
        same &= !vt->apply(st, &ca, err, sizeof err) && !vt->apply_logits(b, logits, 1.0f, &cb, err, sizeof err) && ca.size == cb.size &&
                !memcmp(cand, other, ca.size * sizeof *cand);
        if (k < sizeof path / sizeof *path) vt->accept(st, path[k]), vt->accept(b, path[k]);
    }
    CHECK(same, "apply_logits == apply through free text, the trigger in two tokens and the document (%s)", err);
    vt->destroy(b);
    vt->destroy(st);

    /* json_schema_optional: the first token decides */
    st = create_with(&fv, TOOLS, "json_schema_optional", "1", err, sizeof err);
    if (!st) { CHECK(0, "create optional: %s", err); return; }
    vt->accept(st, 3 + 'P');
    allowed(st, &fv, -1, ok, err, sizeof err);
    CHECK(vt->min_budget(st) == dmin && ok[tok_of(&fv, "{\"")] && ok[3 + '{'] && !ok[tok_of(&fv, "{\"a\":")] && ok[T_HELLO] && ok[3 + '\n'] && ok[2],
          "optional: the first token may start the document ({\", not {\"a\":) or be text (Hello, a newline, EOS); min budget %d", vt->min_budget(st));
    allowed(st, &fv, dmin - 1, ok, err, sizeof err);
    CHECK(!ok[tok_of(&fv, "{\"")] && !ok[3 + '{'] && ok[T_HELLO], "optional, too few tokens for a document: text only");
    vt->accept(st, T_HELLO);
    n = allowed(st, &fv, -1, ok, err, sizeof err);
    CHECK(n == fv.v.n_vocab && ok[tok_of(&fv, "{\"a\":")], "optional, after text: every token (%d)", n);
    vt->reset(st);
    allowed(st, &fv, -1, ok, err, sizeof err);
    vt->accept(st, tok_of(&fv, "{\""));
    allowed(st, &fv, -1, ok, err, sizeof err);
    CHECK(ok[tok_of(&fv, "name")] && !ok[T_HELLO] && !ok[2], "optional, after {\": the document");
    vt->destroy(st);

    st = create_with(&fv, TOOLS, "json_schema_trigger", "0123456789012345678901234567890123456789012345678901234567890123456789", err, sizeof err);
    CHECK(!st && strstr(err, "at most 64"), "a trigger over 64 bytes is refused: %s", err);
    const picolm_param both[3] = {{"json_schema", TOOLS}, {"json_schema_trigger", "<tool_call>"}, {"json_schema_optional", "1"}};
    const picolm_sampler_init in = {sizeof in, &reg.host, &fv.v, both, 3, 0};
    st = NULL;
    CHECK(vt->create(&in, &st, err, sizeof err) && strstr(err, "exclude"), "trigger and optional together are refused: %s", err);
    vt->destroy(doc);
    tv_free(&fv);
    tv_free(&bv);
}

int main(void) {
    build_registry(&reg);
    char path[1024];
    snprintf(path, sizeof path, "%s/plugins/sampler-json_schema.so", build_dir());
    const int idx = registry_load_file(&reg, path);
    const pl_plugin *p = registry_find(&reg, PICOLM_KIND_SAMPLER, "json_schema");
    CHECK(p != NULL, "load %s (%s)", path, idx >= 0 ? reg.items[idx].why : "?");
    if (!p) return 1;
    vt = p->desc->vtable;
    test_documents();
    test_errors();
    test_budget();
    test_apply_logits();
    test_turns();
    test_lazy();
    test_large();
    const char *shared = shared_dir("test_schema: real vocabularies");
    if (shared) {
        test_real_vocab(shared, "rand-qwen2-q4_0.gguf");
        test_real_vocab(shared, "rand-llama3-q4_k_m.gguf");
        test_real_vocab(shared, "tiny-shakespeare-q8_0.gguf");
    }
    free_registry(&reg);
    return CHECK_DONE();
}
