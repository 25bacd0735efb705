/* Chat: template recognition and formatting, stop strings across token
   boundaries, special tokens in templates, and multi-turn sessions on the
   tiny model (KV reuse equals a full re-evaluation; context exhaustion is
   reported and /reset recovers). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "chat_template.h"
#include "check.h"
#include "cli.h"
#include "ctx.h"
#include "engine.h"
#include "gguf_write.h"
#include "jsondoc.h"
#include "testlib.h"

/* Templates as they appear in real models' tokenizer_config.json (from
   llama.cpp's tests/test-chat-template.cpp), and what llama.cpp detects. */
typedef struct named_tmpl {
    const char *model, *tmpl, *want;
} named_tmpl;
static const named_tmpl DETECT[] = {
    {"OpenHermes-2.5 (ChatML)",
     "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
     "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}", "chatml"},
    {"Mistral-7B-Instruct-v0.2",
     "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
     "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% endif %}{% endfor %}", "llama2"},
    {"FusionNet_34Bx2",
     "{%- if messages[idx]['role'] == 'user' -%}{{- bos_token + '[INST] ' + messages[idx]['content'] + ' [/INST]' -}}"
     "{% elif messages[idx]['role'] == 'system' %}{{- '[INST] <<SYS>>\\n' + messages[idx]['content'] + '\\n<</SYS>>\\n\\n' -}}", "llama2-sys-bos"},
    {"Llama-2-chat",
     "{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + "
     "message['content'] %}{% endif %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}", "llama2-sys-strip"},
    {"gemma-7b-it", "{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}", "gemma"},
    {"Llama-3", "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}", "llama3"},
    {"Phi-3-small", "{{'<|' + message['role'] + '|>' + '\n' + message['content'] + '<|end|>\n' }}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}", "phi3"},
    {"zephyr", "{{ '<|user|>\n' + message['content'] + '<|endoftext|>' }}{{ '<|system|>\n' + message['content'] + '<|endoftext|>' }}", "zephyr"},
    {"Mistral-Large-2411 (v7)", "{{- '[SYSTEM_PROMPT]' + message['content'] + '[/SYSTEM_PROMPT]' }}{{- '[INST]' + message['content'] + '[/INST]' }}", "mistral-v7"},
    /* TinyLlama's has <|user|> and <|assistant|> but no literal </s>: llama.cpp says glmedge */
    {"TinyLlama-1.1B-Chat",
     "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + message['content'] + eos_token }}\n"
     "{% elif message['role'] == 'assistant' %}\n{{ '<|assistant|>\n'  + message['content'] + eos_token }}\n{% endif %}", "glmedge"},
    {"Falcon3", "{{ '<|user|>\n' + message['content'] + '\n' }}{{ '<|assistant|>\n' + message['content'] + '</s>' }}", "falcon3"},
    {"Phi-4", "{{'<|im_start|>' + message['role'] + '<|im_sep|>' + message['content'] + '<|im_end|>'}}", "phi4"},
    {"c4ai-command-r-plus", "{{ '<|START_OF_TURN_TOKEN|><|USER_TOKEN|>' + content.strip() + '<|END_OF_TURN_TOKEN|>' }}", "command-r"},
    {"a bare name", "gemma", "gemma"},
    {"a bare name llama.cpp has", "vicuna-orca", "vicuna-orca"},
    {"no known marker", "{% for m in messages %}{{ m['content'] }}{% endfor %}", NULL},
};

/* llama.cpp's test conversation and its expected renders (test-chat-template.cpp) */
#define MSG(r, c) {.role = r, .content = c, .len = sizeof c - 1}
static const chat_msg LCPP_CONV[] = {
    MSG("system", "You are a helpful assistant"), MSG("user", "Hello"),           MSG("assistant", "Hi there"),
    MSG("user", "Who are you"),                   MSG("assistant", "   I am an assistant   "), MSG("user", "Another question"),
};
static const struct {
    int kind;
    const char *want;
} LCPP_RENDER[] = {
    {CHAT_LLAMA2_SYS_BOS, "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s><s>[INST] Who are you [/INST]"
                          "   I am an assistant   </s><s>[INST] Another question [/INST]"},
    {CHAT_LLAMA2_SYS_STRIP, "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s>[INST] Who are you [/INST]"
                            "I am an assistant</s>[INST] Another question [/INST]"},
    {CHAT_GLMEDGE, "<|system|>\nYou are a helpful assistant<|user|>\nHello<|assistant|>\nHi there<|user|>\nWho are you<|assistant|>\n"
                   "   I am an assistant   <|user|>\nAnother question<|assistant|>"},
    {CHAT_GEMMA, "<start_of_turn>user\nYou are a helpful assistant\n\nHello<end_of_turn>\n<start_of_turn>model\nHi there<end_of_turn>\n"
                 "<start_of_turn>user\nWho are you<end_of_turn>\n<start_of_turn>model\nI am an assistant<end_of_turn>\n"
                 "<start_of_turn>user\nAnother question<end_of_turn>\n<start_of_turn>model\n"},
};

static int header_only_gguf(gguf_file *g, char **buf, const char *tmpl, char *err, size_t errlen) {
    gguf_writer *w = picolm_gguf_writer_new();
    picolm_gguf_writer_set_str(w, "tokenizer.chat_template", tmpl);
    FILE *f = tmpfile();
    int ok = w && f && !picolm_gguf_writer_write_header(w, f, err, errlen);
    long sz = f ? ftell(f) : 0;
    *buf = malloc((size_t)sz + 1);
    if (ok && *buf) { rewind(f); ok = fread(*buf, 1, (size_t)sz, f) == (size_t)sz; }
    ok = ok && *buf && !gguf_parse(g, *buf, (size_t)sz, NULL, err, errlen);
    if (f) fclose(f);
    picolm_gguf_writer_free(w);
    return ok ? 0 : -1;
}

static void template_tests(void) {
    for (size_t i = 0; i < sizeof DETECT / sizeof DETECT[0]; i++) {
        const char *got = chat_detect(DETECT[i].tmpl, strlen(DETECT[i].tmpl));
        CHECK(DETECT[i].want ? got && !strcmp(got, DETECT[i].want) : !got, "%s's template is detected as %s (got %s)", DETECT[i].model,
              DETECT[i].want ? DETECT[i].want : "nothing", got ? got : "nothing");
    }
    const char *chatml = DETECT[0].tmpl;
    CHECK(chat_detect(chatml, 11) == NULL, "detection stays within the given length");
    CHECK(chat_kind_from_name("zephyr") == CHAT_ZEPHYR && chat_kind_from_name("ChatML") == CHAT_CHATML &&
              chat_kind_from_name("llama2-sys") == CHAT_LLAMA2_SYS && chat_kind_from_name("mistral-v7") == CHAT_MISTRAL_V7 &&
              chat_kind_from_name("command-r") == -1 && chat_kind_from_name("nope") == -1,
          "template names");
    for (int k = 0; k < CHAT_N_KINDS; k++) {
        const char *nm = chat_kind_name(k);
        const char *d = chat_detect(nm, strlen(nm));
        CHECK(chat_kind_from_name(nm) == k && d && !strcmp(d, nm) && strstr(CHAT_KIND_NAMES, nm), "%s: name, detection and list agree", nm);
    }

    for (size_t i = 0; i < sizeof LCPP_RENDER / sizeof LCPP_RENDER[0]; i++) {
        size_t len = 0;
        char *s = chat_render(LCPP_RENDER[i].kind, LCPP_CONV, 6, 1, &len);
        CHECK(s && len == strlen(LCPP_RENDER[i].want) && !strcmp(s, LCPP_RENDER[i].want), "%s renders llama.cpp's test conversation as it does",
              chat_kind_name(LCPP_RENDER[i].kind));
        free(s);
    }

    char note[256], err[512];
    int kind = -1;
    CHECK(chat_kind_resolve("chatml", NULL, &kind, note, sizeof note, err, sizeof err) == 0 && kind == CHAT_CHATML && !note[0],
          "--chat-template chatml wins over the model");
    CHECK(chat_kind_resolve("auto", NULL, &kind, note, sizeof note, err, sizeof err) == 0 && kind == CHAT_CHATML && strstr(note, "chatml"),
          "auto without a model template falls back to chatml, saying so: %s", note);
    CHECK(chat_kind_resolve("bogus", NULL, &kind, note, sizeof note, err, sizeof err) < 0 && strstr(err, "bogus") && strstr(err, "mistral-v7"),
          "an unknown name is refused with the list: %s", err);

    /* auto from a GGUF's tokenizer.chat_template */
    const char *tmpls[4] = {DETECT[0].tmpl, DETECT[3].tmpl, DETECT[12].tmpl, "{{ messages }}"};
    const int want[4] = {CHAT_CHATML, CHAT_LLAMA2_SYS_STRIP, -1, -1};
    for (int i = 0; i < 4; i++) {
        gguf_file g;
        char *buf = NULL;
        if (header_only_gguf(&g, &buf, tmpls[i], err, sizeof err)) {
            CHECK(0, "write a header-only GGUF (%s)", err);
        } else {
            int r = chat_kind_resolve("auto", &g, &kind, note, sizeof note, err, sizeof err);
            if (want[i] >= 0) CHECK(r == 0 && kind == want[i], "auto reads the model's template: %s", chat_kind_name(want[i]));
            else CHECK(r < 0 && strstr(err, "--chat-template") && strstr(err, "llama3") && (i != 2 || strstr(err, "'command-r'")),
                       "auto refuses a template picolm does not render, naming the choices: %s", err);
            free_gguf(&g);
        }
        free(buf);
    }

    /* conversation files */
    chat_msg m[4];
    char c1[] = "user\nhi\n---\n\nno role";
    CHECK(chat_parse_conversation(c1, strlen(c1), m, 4, err, sizeof err) < 0 && strstr(err, "message 2"), "a message without a role: %s", err);
    char c2[] = "user\n\n\n---\nassistant";
    int n = chat_parse_conversation(c2, strlen(c2), m, 4, err, sizeof err);
    CHECK(n == 2 && !strcmp(m[0].role, "user") && m[0].len == 1 && m[0].content[0] == '\n' && !strcmp(m[1].role, "assistant") && m[1].len == 0,
          "a content keeps its newlines; a role line alone is an empty message (%d)", n);
    char c3[] = "a\n1\n---\nb\n2\n---\nc\n3";
    CHECK(chat_parse_conversation(c3, strlen(c3), m, 2, err, sizeof err) < 0, "more messages than room is an error");
}

/* The shared conversation rendered by all 8 templates, byte for byte as
   llama.cpp's llama_chat_apply_template (with the generation prompt). */
static void reference_tests(const char *shared) {
    static const char *const names[] = {"chatml", "llama2", "llama2-sys", "llama3", "zephyr", "gemma", "phi3", "mistral-v7"};
    char path[1024], err[256];
    snprintf(path, sizeof path, "%s/reference/chat/conversation.txt", shared);
    size_t len;
    char *raw = tl_slurp(path, &len);
    if (!raw) { SKIP("%s absent", path); return; }
    char *text = malloc(len + 1);
    memcpy(text, raw, len);
    text[len] = '\0';
    free(raw);
    chat_msg m[16];
    int n = chat_parse_conversation(text, len, m, 16, err, sizeof err);
    CHECK(n == 4 && !strcmp(m[0].role, "system") && !strcmp(m[3].role, "user"), "the shared conversation has 4 messages (%d)", n);
    for (size_t i = 0; n > 0 && i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/reference/chat/%s.txt", shared, names[i]);
        size_t rl;
        char *ref = tl_slurp(path, &rl);
        size_t ol = 0;
        char *out = chat_render(chat_kind_from_name(names[i]), m, n, 1, &ol);
        size_t at = 0;
        while (ref && out && at < rl && at < ol && ref[at] == out[at]) at++;
        CHECK(ref && out && ol == rl && at == rl, "%s: the render equals llama.cpp's byte for byte (%zu vs %zu bytes, first difference at %zu)",
              names[i], ol, rl, at);
        free(ref);
        free(out);
    }
    free(text);

    /* the Qwen2 vocabulary's template is chatml, in both files that carry it */
    const char *files[2] = {"models/rand-qwen2-q4_0.gguf", "reference/tokenizer/ggml-vocab-qwen2.gguf"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", shared, files[i]);
        gguf_file g;
        if (build_gguf(&g, path, NULL, err, sizeof err)) { CHECK(0, "open %s: %s", path, err); continue; }
        int kind = -1;
        char note[256];
        int r = chat_kind_resolve("auto", &g, &kind, note, sizeof note, err, sizeof err);
        CHECK(r == 0 && kind == CHAT_CHATML && !note[0], "%s: the model's template is detected as chatml", files[i]);
        free_gguf(&g);
    }
}

/* out_stream with stop strings, fed piece by piece */
static void stop_tests(void) {
    picolm_config cfg;
    config_defaults(&cfg);
    cfg.n_stops = 2;
    snprintf(cfg.stops[0], sizeof cfg.stops[0], "\n\nGRUMIO");
    snprintf(cfg.stops[1], sizeof cfg.stops[1], "END");
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    out_stream o;
    out_init(&o, &cfg, f);
    int r1 = out_push(&o, "my lord.\n", 9);
    fflush(f);
    CHECK(r1 == 0 && len == 8 && !memcmp(buf, "my lord.", 8), "a possible stop prefix is held back (\"%.*s\" printed)", (int)len, buf);
    int r2 = out_push(&o, "\nGRU", 4);
    int r3 = out_push(&o, "MIO:", 4);
    out_flush(&o);
    CHECK(r2 == 0 && r3 == 1, "a stop string split over tokens stops the stream");
    CHECK(len == 8 && !memcmp(buf, "my lord.", 8), "the output is cut before the stop string");
    CHECK(out_push(&o, "more", 4) == 1, "nothing more after a stop");
    fclose(f);
    free(buf);

    buf = NULL;
    f = open_memstream(&buf, &len);
    out_init(&o, &cfg, f);
    out_push(&o, "E", 1);
    out_push(&o, "N", 1);
    out_push(&o, "D", 1);
    out_flush(&o);
    CHECK(len == 0 && o.stopped, "a stop string one byte per token: nothing printed");
    fclose(f);
    free(buf);

    buf = NULL;
    f = open_memstream(&buf, &len);
    out_init(&o, &cfg, f);
    out_push(&o, "EN", 2);
    out_push(&o, "X\n", 2);
    out_push(&o, "\nG", 2);
    out_flush(&o);
    CHECK(!o.stopped && len == 6 && !memcmp(buf, "ENX\n\nG", 6), "a prefix that diverges is released intact; the tail at the end is flushed");
    fclose(f);
    free(buf);

    /* UTF-8: a split character is held until complete */
    cfg.n_stops = 0;
    buf = NULL;
    f = open_memstream(&buf, &len);
    out_init(&o, &cfg, f);
    out_push(&o, "\xC3", 1);
    fflush(f);
    size_t mid = len;
    out_push(&o, "\xA9", 1);
    fflush(f);
    CHECK(mid == 0 && len == 2, "a UTF-8 character split over tokens is printed whole");
    out_flush(&o);
    fclose(f);
    free(buf);
}

static int max_abs_diff_ok(const float *a, const float *b, int n, float tol, float *worst) {
    *worst = 0;
    for (int i = 0; i < n; i++) {
        float d = fabsf(a[i] - b[i]);
        if (!(d <= *worst)) *worst = d;
    }
    return *worst <= tol;
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

static void session_tests(const char *shared) {
    char path[1024], err[1024];
    snprintf(path, sizeof path, "%s/models/tiny-shakespeare-q8_0.gguf", shared);
    engine_opts o = {.model_path = path, .threads = 2, .tokenizer = 1};
    engine *e = build_engine(&o, err, sizeof err);
    CHECK(e != NULL, "tiny model loads (%s)", e ? "ok" : err);
    if (!e) return;
    picolm_config cfg;
    config_defaults(&cfg);
    /* the front end's session runs on the library's model, the checks on the engine's */
    cfg.threads = 2;
    int rc;
    picolm_model *pm = cli_load_model(&cfg, "test_chat", path, 1, &rc);
    CHECK(pm != NULL, "the library loads it too");
    if (!pm) { free_engine(e); return; }
    cfg.chat = 1;
    cfg.temperature = 0;
    cfg.max_tokens = 12;
    cfg.context = 256;
    snprintf(cfg.system_prompt, sizeof cfg.system_prompt, "You are Hamlet.");
    chat_session s;
    int r = chat_session_open(&s, pm, &cfg, err, sizeof err);
    CHECK(r == 0 && !strcmp(s.tmpl, "chatml"), "session opens with the fallback template, chatml (%s)", r ? err : "ok");
    if (r) { cli_free_model(pm); free_engine(e); return; }
    CHECK(s.cfg->n_stops >= 2, "the template adds its end-of-turn stop strings (%d)", s.cfg->n_stops);
    CHECK(s.n_msgs == 1 && !strcmp(s.msgs[0].role, "system"), "the conversation starts with the system prompt");

    char *out = NULL;
    size_t olen = 0;
    FILE *f = open_memstream(&out, &olen);
    r = chat_session_turn(&s, "ROMEO: speak", 12, f, err, sizeof err);
    fflush(f);
    const int p1 = s.st.n_prompt, past1 = picolm_n_past(s.c);
    CHECK(r == 0 && olen > 0, "turn 1 replies (%d prompt tokens, %d generated, %zu bytes)", p1, s.st.n_gen, olen);
    CHECK(picolm_n_past(s.c) == s.n_hist, "the session tracks the tokens in its KV cache (%d)", s.n_hist);
    CHECK(s.n_msgs == 3 && !strcmp(s.msgs[2].role, "assistant") && s.msgs[2].len == olen && !memcmp(s.msgs[2].content, out, olen),
          "the printed reply becomes the assistant message");

    /* turn 2: the whole conversation is rendered, only what the cache lacks is prefilled */
    r = chat_session_turn(&s, "JULIET: answer", 14, f, err, sizeof err);
    size_t tl;
    char *t2 = chat_render(chat_kind_from_name(s.tmpl), s.msgs, 4, 1, &tl);
    int32_t *tk = NULL;
    int n2 = 0;
    generate_tokenize(pm, t2, tl, tokenizer_add_bos(e->tok), 1, &tk, &n2, err, sizeof err);
    free(t2);
    CHECK(r == 0 && tk && n2 <= s.n_hist && !memcmp(s.hist, tk, (size_t)n2 * sizeof *tk),
          "turn 2: the KV cache holds the rendered conversation's %d tokens, then the reply", n2);
    free(tk);
    CHECK(r == 0 && s.st.n_prompt > 0 && s.st.n_prompt <= n2 - p1, "turn 2 prefills %d tokens, not the whole conversation's %d", s.st.n_prompt, n2);
    CHECK(picolm_n_past(s.c) > past1 && picolm_n_past(s.c) == s.n_hist, "the KV cache grows across turns (%d -> %d)", past1,
          picolm_n_past(s.c));
    fclose(f);
    free(out);

    /* the reused cache equals evaluating the whole conversation at once */
    llama_ctx c;
    const int nv = e->model.hp.n_vocab;
    if (!build_ctx(&c, &e->model, 256, 64, KV_F16, e->pool, err, sizeof err)) {
        r = ctx_prefill(&c, s.hist, s.n_hist, err, sizeof err);
        float worst = 0;
        int close = !r && max_abs_diff_ok(c.logits, picolm_logits(s.c), nv, 1e-2f, &worst);
        CHECK(close, "multi-turn logits match a one-shot prefill of the conversation (max diff %g)", worst);
        CHECK(!r && argmax(c.logits, nv) == argmax(picolm_logits(s.c), nv), "and pick the same next token");
        free_ctx(&c);
    }

    /* exhaustion, then /reset */
    f = fopen("/dev/null", "w");
    int full = 0, turns = 0;
    for (; turns < 40 && !full; turns++) {
        r = chat_session_turn(&s, "Tell me more of the king, and of the queen, and all the court.", 62, f, err, sizeof err);
        if (r < 0) break;
        full = r == 1;
    }
    CHECK(full && strstr(err, "filled the context"), "a full context refuses the next message clearly: %s", err);
    const int before = picolm_n_past(s.c), msgs = s.n_msgs;
    r = chat_session_turn(&s, "Tell me more of the king, and of the queen, and all the court.", 62, f, err, sizeof err);
    CHECK(r == 1 && picolm_n_past(s.c) == before && s.n_msgs == msgs, "a refused message leaves the conversation as it was");
    chat_session_reset(&s);
    r = chat_session_turn(&s, "ROMEO: speak", 12, f, err, sizeof err);
    CHECK(r == 0 && s.st.n_prompt == p1, "after a reset the conversation starts over (%d prompt tokens)", s.st.n_prompt);

    /* --truncate: the oldest exchanges make room */
    s.cfg->truncate = 1;
    int ok = 1, most = 0;
    for (int i = 0; i < 12 && ok; i++) {
        ok = chat_session_turn(&s, "Tell me more of the king, and of the queen, and all the court.", 62, f, err, sizeof err) == 0;
        most = s.n_msgs > most ? s.n_msgs : most;
    }
    CHECK(ok && !strcmp(s.msgs[0].role, "system") && most < 24 && picolm_n_past(s.c) <= picolm_n_ctx(s.c),
          "with --truncate a long conversation keeps going: the oldest turns are dropped, the system prompt stays (%d messages at most)", most);
    s.cfg->truncate = 0;
    fclose(f);
    chat_session_close(&s);

    /* a message too long for the context */
    cfg.context = 16;
    r = chat_session_open(&s, pm, &cfg, err, sizeof err);
    if (!r) {
        f = fopen("/dev/null", "w");
        r = chat_session_turn(&s, "ROMEO: but soft, what light through yonder window breaks?", 58, f, err, sizeof err);
        CHECK(r == 1 && strstr(err, "does not fit"), "a first message longer than the context is refused: %s", err);
        fclose(f);
        chat_session_close(&s);
    }
    cli_free_model(pm);
    free_engine(e);

    /* llama2 on the Llama-2 vocabulary: <s> and </s> are real tokens */
    snprintf(path, sizeof path, "%s/models/rand-spm-q8_0.gguf", shared);
    e = build_engine(&o, err, sizeof err);
    if (!e) { CHECK(0, "rand-spm loads (%s)", err); return; }
    config_defaults(&cfg);
    cfg.threads = 2;
    if (!(pm = cli_load_model(&cfg, "test_chat", path, 1, &rc))) { CHECK(0, "the library loads rand-spm"); free_engine(e); return; }
    cfg.chat = 1;
    cfg.temperature = 0;
    cfg.max_tokens = 3;
    snprintf(cfg.chat_template, sizeof cfg.chat_template, "llama2-sys-bos");
    if (!chat_session_open(&s, pm, &cfg, err, sizeof err)) {
        f = fopen("/dev/null", "w");
        chat_session_turn(&s, "Hello", 5, f, err, sizeof err);
        r = chat_session_turn(&s, "Again", 5, f, err, sizeof err);
        int eos_bos = 0;
        for (int i = 1; i < s.n_hist; i++) eos_bos |= s.hist[i - 1] == tokenizer_eos(e->tok) && s.hist[i] == tokenizer_bos(e->tok);
        CHECK(r == 0 && s.hist[0] == tokenizer_bos(e->tok), "llama2-sys-bos: the conversation starts with BOS");
        CHECK(r == 0 && eos_bos, "llama2-sys-bos: the template's </s><s> between turns are the EOS and BOS tokens");
        fclose(f);
        chat_session_close(&s);
    }
    cli_free_model(pm);
    free_engine(e);
}

/* ---- tools: renders byte for byte llama-server's (tests/data/tools) ---- */

#define TOOLS_DIR "tests/data/tools"

/* An OpenAI request (messages, tools) as picolm's structures; the strings
   point into req.  Returns the message count (-1: not such a request). */
typedef struct tool_req {
    jd_value *req;
    chat_msg m[16];
    picolm_tool_call calls[16][4];
    picolm_tool tools[8];
    int n, n_tools;
    char *params[8]; /* the parameters as JSON text */
} tool_req;

static const char *str_of(const jd_value *v) { return v && v->type == JD_STR ? v->s : NULL; }

static int load_req(tool_req *r, const char *path) {
    size_t n;
    char *text = tl_slurp(path, &n), err[200];
    memset(r, 0, sizeof *r);
    r->req = text ? jd_parse(text, n, err, sizeof err) : NULL;
    free(text);
    const jd_value *msgs = jd_get(r->req, "messages"), *tools = jd_get(r->req, "tools");
    if (!msgs || msgs->type != JD_ARR || msgs->n > 16) return -1;
    for (size_t i = 0; i < msgs->n; i++) {
        const jd_value *mv = &msgs->items[i], *c = jd_get(mv, "content"), *tc = jd_get(mv, "tool_calls");
        chat_msg *m = &r->m[r->n++];
        m->role = str_of(jd_get(mv, "role"));
        m->content = str_of(c) ? c->s : "";
        m->len = str_of(c) ? c->len : 0;
        m->tool_call_id = str_of(jd_get(mv, "tool_call_id"));
        for (size_t k = 0; tc && k < tc->n && k < 4; k++) {
            const jd_value *fn = jd_get(&tc->items[k], "function");
            r->calls[i][k] = (picolm_tool_call){str_of(jd_get(&tc->items[k], "id")), str_of(jd_get(fn, "name")), str_of(jd_get(fn, "arguments"))};
            m->tool_calls = r->calls[i];
            m->n_tool_calls = (int)k + 1;
        }
    }
    for (size_t t = 0; tools && t < tools->n && t < 8; t++) {
        const jd_value *fn = jd_get(&tools->items[t], "function"), *pv = jd_get(fn, "parameters");
        pl_sbuf b = {0};
        if (pv) jd_write(&b, pv, -1, 1), pl_sbuf_add(&b, "", 0);
        r->params[t] = b.p;
        r->tools[r->n_tools++] = (picolm_tool){str_of(jd_get(fn, "name")), str_of(jd_get(fn, "description")), b.p};
    }
    return r->n;
}

static void free_req(tool_req *r) {
    for (int t = 0; t < r->n_tools; t++) free(r->params[t]);
    jd_free(r->req);
}

/* Render req for (kind, family) and compare with the oracle's file. */
static void compare_render(const char *req, const char *fam, int kind, int family, const char *date, const char *ref_fam) {
    char path[512], err[256];
    tool_req r;
    snprintf(path, sizeof path, TOOLS_DIR "/%s.json", req);
    if (load_req(&r, path) < 0) { CHECK(0, "%s: cannot read the request", path); free_req(&r); return; }
    const chat_tools_opts o = {r.tools, r.n_tools, 1, 0, date};
    size_t len = 0, rn = 0;
    char *got = chat_render_tools(kind, family, r.m, r.n, &o, &len, err, sizeof err);
    snprintf(path, sizeof path, TOOLS_DIR "/%s.%s.refused", ref_fam, req);
    FILE *refused = fopen(path, "r");
    if (refused) {
        fclose(refused);
        CHECK(!got && err[0], "%s %s: refused as llama.cpp refuses it (%s)", fam, req, err);
    } else {
        snprintf(path, sizeof path, TOOLS_DIR "/%s.%s.txt", ref_fam, req);
        char *want = tl_slurp(path, &rn);
        size_t at = 0;
        while (got && want && at < len && at < rn && got[at] == want[at]) at++;
        CHECK(got && want && len == rn && at == len, "%s %s: byte for byte llama-server's render with the %s template (%zu bytes; first difference at %zu%s%s)",
              fam, req, ref_fam, rn, at, got ? "" : ": ", got ? "" : err);
        if (got && want && at < len) printf("#   picolm: ...%.60s\n#   oracle: ...%.60s\n", got + at, want + at);
        free(want);
    }
    free(got);
    free_req(&r);
}

static void tool_render_tests(void) {
    static const char *const REQS[] = {"first", "nosys", "round", "long", "parallel", "think1", "think2", "think3", "midsys", "odd", "notools"};
    for (size_t i = 0; i < sizeof REQS / sizeof *REQS; i++) {
        compare_render(REQS[i], "qwen2.5", CHAT_CHATML, CHAT_TOOLS_QWEN25, NULL, "qwen2.5");
        compare_render(REQS[i], "qwen3", CHAT_CHATML, CHAT_TOOLS_QWEN3, NULL, "qwen3");
        compare_render(REQS[i], "llama3", CHAT_LLAMA3, CHAT_TOOLS_LLAMA3, "26 Jul 2024", "llama3.1");
        compare_render(REQS[i], "llama3", CHAT_LLAMA3, CHAT_TOOLS_LLAMA3, "03 Feb 2025", "llama3.2");
        /* Hermes-style on chatml is Qwen3's layout where no reasoning is involved */
        if (strncmp(REQS[i], "think", 5) && strcmp(REQS[i], "midsys")) compare_render(REQS[i], "hermes", CHAT_CHATML, CHAT_TOOLS_HERMES, NULL, "qwen3");
    }
    /* the family from the model's own template */
    static const struct { const char *file; int kind, want; } FAM[] = {
        {"Qwen-Qwen2.5-7B-Instruct.jinja", CHAT_CHATML, CHAT_TOOLS_QWEN25},
        {"Qwen-Qwen3-0.6B.jinja", CHAT_CHATML, CHAT_TOOLS_QWEN3},
        {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", CHAT_CHATML, CHAT_TOOLS_HERMES},
        {"meta-llama-Llama-3.1-8B-Instruct.jinja", CHAT_LLAMA3, CHAT_TOOLS_LLAMA3},
        {"meta-llama-Llama-3.2-3B-Instruct.jinja", CHAT_LLAMA3, CHAT_TOOLS_LLAMA3},
    };
    for (size_t i = 0; i < sizeof FAM / sizeof *FAM; i++) {
        char path[512], err[256], *buf = NULL;
        size_t n;
        snprintf(path, sizeof path, TOOLS_DIR "/templates/%s", FAM[i].file);
        char *t = tl_slurp(path, &n), *z = t ? realloc(t, n + 1) : NULL;
        gguf_file g;
        if (z) z[n] = 0;
        int kind = -1, fam = -1;
        if (z && !header_only_gguf(&g, &buf, z, err, sizeof err)) {
            chat_kind_resolve("auto", &g, &kind, NULL, 0, err, sizeof err);
            fam = chat_tools_resolve(kind, &g);
            free_gguf(&g);
        }
        CHECK(kind == FAM[i].kind && fam == FAM[i].want, "%s: template %s, tool format %s", FAM[i].file, chat_kind_name(kind),
              fam >= 0 ? chat_tools_format(fam)->name : "?");
        free(buf);
        free(z ? z : t);
    }
    CHECK(chat_tools_resolve(CHAT_CHATML, NULL) == CHAT_TOOLS_HERMES && chat_tools_resolve(CHAT_GEMMA, NULL) == CHAT_TOOLS_HERMES,
          "no model template (or another kind): Hermes-style");
    /* bad input */
    const picolm_tool bad_name = {"get weather", NULL, NULL}, bad_params = {"f", NULL, "{\"type\": \"object\","};
    const picolm_tool_call bad_args = {NULL, "f", "{\"a\": 1"};
    const chat_msg conv[2] = {{.role = "user", .content = "hi", .len = 2}, {.role = "assistant", .content = "", .tool_calls = &bad_args, .n_tool_calls = 1}};
    char err[256];
    for (int fam = 0; fam < CHAT_N_TOOLS; fam++) {
        const int kind = fam == CHAT_TOOLS_LLAMA3 ? CHAT_LLAMA3 : CHAT_CHATML;
        const chat_tools_opts on = {&bad_name, 1, 1, 0, NULL}, op = {&bad_params, 1, 1, 0, NULL}, none = {NULL, 0, 1, 0, NULL};
        char *a = chat_render_tools(kind, fam, conv, 1, &on, NULL, err, sizeof err);
        const int name_refused = !a && strstr(err, "get weather");
        char *b = chat_render_tools(kind, fam, conv, 1, &op, NULL, err, sizeof err);
        const int params_refused = !b && strstr(err, "parameters of tool 'f': not valid JSON");
        char *c = chat_render_tools(kind, fam, conv, 2, &none, NULL, err, sizeof err);
        CHECK(name_refused && params_refused && !c && strstr(err, "messages[1]"), "%s: a bad tool name, parameters or call arguments are refused (%s)",
              chat_tools_format(fam)->name, err);
        free(a), free(b), free(c);
    }
    /* a forced call: the prompt opens it */
    const chat_tools_opts forced = {&bad_params, 0, 1, 1, NULL};
    size_t len;
    char *f = chat_render_tools(CHAT_CHATML, CHAT_TOOLS_QWEN25, conv, 1, &forced, &len, err, sizeof err);
    const char *tail = "<|im_start|>assistant\n<tool_call>\n";
    CHECK(f && len > strlen(tail) && !strcmp(f + len - strlen(tail), tail), "a forced call: the prompt ends with <tool_call>\\n (%s)", f ? f + (len > 40 ? len - 40 : 0) : err);
    free(f);
}

int main(void) {
    template_tests();
    tool_render_tests();
    stop_tests();
    const char *shared = shared_dir("chat sessions");
    if (shared) reference_tests(shared);
    if (shared) session_tests(shared);
    return CHECK_DONE();
}
