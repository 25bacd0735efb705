/* libFuzzer harness: tool calls in the core.  The input is up to three
   parts split at NUL bytes after a flags byte: an OpenAI messages array,
   a tools array (picolm_chat_from_json, picolm_tools_from_json), and a
   model's reply.  The conversation is rendered for every tool family
   (chat_render_tools), the call's schema built (picolm_tool_schema), and
   the reply read a byte at a time (picolm_tool_reply_scan) as picolm-server
   reads a stream.  Flags: bit 0 the Llama 3 format (else Hermes), bit 1 a
   forced call, bit 2 a call opened in the prompt.  Checked: a refusal has
   a message; a render's length is its own; the schema and the reply's
   JSON line are valid JSON; the shown text never shrinks and every span
   lies inside the reply. */
#include "common.h"
#include "chat_template.h"
#include "jsondoc.h"

static size_t part(const uint8_t **p, size_t *n, char **out) {
    const uint8_t *end = memchr(*p, 0, *n);
    const size_t len = end ? (size_t)(end - *p) : *n;
    *out = malloc(len + 1); /* exact size: ASan sees any over-read */
    memcpy(*out, *p, len);
    (*out)[len] = 0;
    *p += end ? len + 1 : len;
    *n -= end ? len + 1 : len;
    return len;
}

static void valid_json(const char *s, size_t n, const char *what) {
    char err[200];
    jd_value *v = jd_parse(s, n, err, sizeof err);
    FUZZ_ASSERT(v, "%s is not valid JSON (%s): %.200s", what, err, s);
    jd_free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const uint8_t flags = data[0];
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    char *mt, *tt, *reply, err[512];
    const size_t ml = part(&p, &n, &mt), tl = part(&p, &n, &tt), rl = part(&p, &n, &reply);
    picolm_chat_msg *msgs = NULL;
    picolm_tool *tools = NULL;
    err[0] = 0;
    const int nm = picolm_chat_from_json(mt, ml, &msgs, err, sizeof err);
    FUZZ_ASSERT(nm >= 0 || (err[0] && !msgs), "messages refused without a message");
    err[0] = 0;
    int nt = tl ? picolm_tools_from_json(tt, tl, &tools, err, sizeof err) : 0;
    FUZZ_ASSERT(nt >= 0 || (err[0] && !tools), "tools refused without a message");
    if (nt < 0) nt = 0;
    for (int fam = 0; fam < CHAT_N_TOOLS && nm >= 0; fam++) {
        const int kinds[2] = {fam == CHAT_TOOLS_LLAMA3 ? CHAT_LLAMA3 : CHAT_CHATML, CHAT_GEMMA};
        for (int k = 0; k < (fam == CHAT_TOOLS_HERMES ? 2 : 1); k++) {
            const chat_tools_opts o = {tools, nt, 1, (flags >> 2) & 1, "26 Jul 2024"};
            size_t len = 0;
            err[0] = 0;
            char *out = chat_render_tools(kinds[k], fam, msgs, nm, &o, &len, err, sizeof err);
            FUZZ_ASSERT(out || err[0], "render refused without a message");
            if (out) FUZZ_ASSERT(out[len] == 0, "render length");
            free(out);
        }
    }
    const picolm_tool_format *f = chat_tools_format((flags & 1) ? CHAT_TOOLS_LLAMA3 : CHAT_TOOLS_HERMES);
    if (nt > 0) {
        err[0] = 0;
        char *schema = picolm_tool_schema(f, tools, nt, NULL, err, sizeof err);
        FUZZ_ASSERT(schema || err[0], "schema refused without a message");
        if (schema) valid_json(schema, strlen(schema), "the call's schema");
        free(schema);
    }
    picolm_tool_reply r;
    picolm_tool_reply_init(&r, f, (flags >> 1) & 1);
    size_t shown = 0;
    for (size_t i = 0; i <= rl; i++) {
        picolm_tool_reply_scan(&r, reply, i, i == rl);
        FUZZ_ASSERT(r.content_len >= shown && r.content_len <= i, "shown text %zu after %zu, of %zu", r.content_len, shown, i);
        FUZZ_ASSERT(r.name_off + r.name_len <= i && r.args_off + r.args_len <= i, "a span past the reply");
        shown = r.content_len;
    }
    char *line = picolm_tool_reply_json(&r, reply, rl);
    FUZZ_ASSERT(line, "no JSON line");
    valid_json(line, strlen(line), "the reply's JSON line");
    free(line);
    free(msgs), free(tools), free(mt), free(tt), free(reply);
    return 0;
}
