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
#include "check.h"
#include "gguf_write.h"

static const char *TINYLLAMA =
    "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + message['content'] + eos_token }}\n"
    "{% elif message['role'] == 'system' %}\n{{ '<|system|>\n' + message['content'] + eos_token }}\n{% elif message['role'] == "
    "'assistant' %}\n{{ '<|assistant|>\n'  + message['content'] + eos_token }}\n{% endif %}\n{% if loop.last and "
    "add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}";
static const char *CHATML =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";
static const char *LLAMA2 =
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}"
    "{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}"
    "{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + "
    "message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}"
    "{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + "
    "content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}";

static void template_tests(void) {
    CHECK(chat_kind_detect(TINYLLAMA, strlen(TINYLLAMA)) == CHAT_ZEPHYR, "TinyLlama's template is zephyr");
    CHECK(chat_kind_detect(CHATML, strlen(CHATML)) == CHAT_CHATML, "a ChatML template is chatml");
    CHECK(chat_kind_detect(LLAMA2, strlen(LLAMA2)) == CHAT_LLAMA2, "Llama-2's template is llama2");
    const char *odd = "{% for m in messages %}<start_of_turn>{{ m['content'] }}<end_of_turn>{% endfor %}";
    CHECK(chat_kind_detect(odd, strlen(odd)) == -1, "an unknown (Gemma-style) template is not recognised");
    CHECK(chat_kind_detect(CHATML, 5) == -1, "detection stays within the given length");
    CHECK(chat_kind_from_name("zephyr") == CHAT_ZEPHYR && chat_kind_from_name("ChatML") == CHAT_CHATML &&
              chat_kind_from_name("llama2") == CHAT_LLAMA2 && chat_kind_from_name("nope") == -1,
          "template names");

    char note[256], err[256];
    int kind = -1;
    CHECK(chat_kind_resolve("chatml", NULL, &kind, note, sizeof note, err, sizeof err) == 0 && kind == CHAT_CHATML && !note[0],
          "--chat-template chatml wins over the model");
    CHECK(chat_kind_resolve("auto", NULL, &kind, note, sizeof note, err, sizeof err) == 0 && kind == CHAT_ZEPHYR && strstr(note, "zephyr"),
          "auto without a model template falls back to zephyr, saying so: %s", note);
    CHECK(chat_kind_resolve("bogus", NULL, &kind, note, sizeof note, err, sizeof err) < 0 && strstr(err, "bogus"),
          "an unknown name is refused: %s", err);

    /* auto from a GGUF's tokenizer.chat_template */
    const char *tmpls[3] = {CHATML, LLAMA2, "{{ messages }}"};
    const int want[3] = {CHAT_CHATML, CHAT_LLAMA2, -1};
    for (int i = 0; i < 3; i++) {
        gguf_writer *w = gguf_writer_new();
        gguf_writer_set_str(w, "tokenizer.chat_template", tmpls[i]);
        FILE *f = tmpfile();
        int ok = w && f && !gguf_writer_write_header(w, f, err, sizeof err);
        long sz = f ? ftell(f) : 0;
        char *buf = malloc((size_t)sz + 1);
        if (ok) { rewind(f); ok = fread(buf, 1, (size_t)sz, f) == (size_t)sz; }
        gguf_file g;
        ok = ok && !gguf_parse(&g, buf, (size_t)sz, NULL, err, sizeof err);
        if (ok) {
            int r = chat_kind_resolve("auto", &g, &kind, note, sizeof note, err, sizeof err);
            if (want[i] >= 0) CHECK(r == 0 && kind == want[i], "auto reads the model's template: %s", chat_kind_name(want[i]));
            else CHECK(r < 0 && strstr(err, "--chat-template"), "auto refuses an unrecognised model template: %s", err);
            gguf_close(&g);
        } else {
            CHECK(0, "write a header-only GGUF (%s)", err);
        }
        free(buf);
        if (f) fclose(f);
        gguf_writer_free(w);
    }

    /* formatting */
    char *s = chat_format_turn(CHAT_ZEPHYR, "<s>", "</s>", "Be kind.", "Hi", 2, 1);
    CHECK(s && !strcmp(s, "<|system|>\nBe kind.</s>\n<|user|>\nHi</s>\n<|assistant|>\n"), "zephyr first turn with a system prompt");
    free(s);
    s = chat_format_turn(CHAT_ZEPHYR, "<s>", "</s>", "Be kind.", "Again", 5, 0);
    CHECK(s && !strcmp(s, "</s>\n<|user|>\nAgain</s>\n<|assistant|>\n"), "zephyr later turn closes the reply, no system prompt");
    free(s);
    s = chat_format_turn(CHAT_CHATML, "<s>", "</s>", "", "Hi", 2, 1);
    CHECK(s && !strcmp(s, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"), "chatml first turn without system");
    free(s);
    s = chat_format_turn(CHAT_CHATML, "<s>", "</s>", "S", "Yo", 2, 0);
    CHECK(s && !strcmp(s, "<|im_end|>\n<|im_start|>user\nYo<|im_end|>\n<|im_start|>assistant\n"), "chatml later turn");
    free(s);
    s = chat_format_turn(CHAT_LLAMA2, "<s>", "</s>", "S", "Hi", 2, 1);
    CHECK(s && !strcmp(s, "[INST] <<SYS>>\nS\n<</SYS>>\n\nHi [/INST]"), "llama2 first turn (BOS from the tokenizer)");
    free(s);
    s = chat_format_turn(CHAT_LLAMA2, "<s>", "</s>", "S", "Yo", 2, 0);
    CHECK(s && !strcmp(s, "</s><s>[INST] Yo [/INST]"), "llama2 later turn");
    free(s);
    s = chat_format_turn(CHAT_ZEPHYR, "<s>", "</s>", NULL, "a\0b", 3, 1);
    CHECK(s && !memcmp(s, "<|user|>\na", 10), "a message is taken by length");
    free(s);
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
    cfg.chat = 1;
    cfg.temperature = 0;
    cfg.max_tokens = 12;
    cfg.context = 256;
    snprintf(cfg.system_prompt, sizeof cfg.system_prompt, "You are Hamlet.");
    chat_session s;
    int r = chat_open(&s, e, &cfg, err, sizeof err);
    CHECK(r == 0 && s.kind == CHAT_ZEPHYR, "session opens with the fallback template (%s)", r ? err : "ok");
    if (r) { free_engine(e); return; }
    CHECK(s.cfg->n_stops >= 2, "the template adds its end-of-turn stop strings (%d)", s.cfg->n_stops);

    char *out = NULL;
    size_t olen = 0;
    FILE *f = open_memstream(&out, &olen);
    r = chat_turn(&s, "ROMEO: speak", 12, f, err, sizeof err);
    fflush(f);
    const int p1 = s.st.n_prompt, past1 = s.c.n_past;
    CHECK(r == 0 && olen > 0, "turn 1 replies (%d prompt tokens, %d generated, %zu bytes)", p1, s.st.n_gen, olen);
    CHECK(s.c.n_past == s.n_hist, "the session tracks the tokens in its KV cache (%d)", s.n_hist);

    /* turn 2 prefills only its own tokens */
    char *t2 = chat_format_turn(s.kind, s.bos, s.eos, cfg.system_prompt, "JULIET: answer", 14, 0);
    int32_t *tk;
    int n2;
    generate_tokenize(e, t2, strlen(t2), 0, 1, &tk, &n2, err, sizeof err);
    free(t2);
    free(tk);
    r = chat_turn(&s, "JULIET: answer", 14, f, err, sizeof err);
    CHECK(r == 0 && s.st.n_prompt == n2, "turn 2 prefills only the new turn's %d tokens (did %d)", n2, s.st.n_prompt);
    CHECK(s.c.n_past > past1 + n2 && s.c.n_past == s.n_hist, "the KV cache grows across turns (%d -> %d)", past1, s.c.n_past);
    fclose(f);
    free(out);

    /* the reused cache equals evaluating the whole conversation at once */
    llama_ctx c;
    const int nv = e->model.hp.n_vocab;
    if (!build_ctx(&c, &e->model, 256, 64, KV_F16, e->pool, err, sizeof err)) {
        r = generate_prefill_plain(&c, s.hist, s.n_hist, err, sizeof err);
        float worst = 0;
        int close = !r && max_abs_diff_ok(c.logits, s.c.logits, nv, 1e-2f, &worst);
        CHECK(close, "multi-turn logits match a one-shot prefill of the conversation (max diff %g)", worst);
        CHECK(!r && argmax(c.logits, nv) == argmax(s.c.logits, nv), "and pick the same next token");
        free_ctx(&c);
    }

    /* special tokens: the template's "</s>" becomes EOS */
    int has_eos = 0;
    for (int i = 0; i < s.n_hist; i++) has_eos |= s.hist[i] == tokenizer_eos(e->tok);
    CHECK(has_eos, "the template's </s> is tokenized as the EOS token");

    /* exhaustion, then /reset */
    f = fopen("/dev/null", "w");
    int full = 0, turns = 0;
    for (; turns < 40 && !full; turns++) {
        r = chat_turn(&s, "Tell me more of the king, and of the queen, and all the court.", 62, f, err, sizeof err);
        if (r < 0) break;
        full = r == 1;
    }
    CHECK(full && strstr(err, "filled the context"), "a full context refuses the next message clearly: %s", err);
    const int before = s.c.n_past;
    r = chat_turn(&s, "x", 1, f, err, sizeof err);
    CHECK(r == 1 && s.c.n_past == before, "a refused message leaves the conversation as it was");
    chat_reset(&s);
    r = chat_turn(&s, "ROMEO: speak", 12, f, err, sizeof err);
    CHECK(r == 0 && s.st.n_prompt == p1, "after a reset the conversation starts over (%d prompt tokens)", s.st.n_prompt);
    fclose(f);
    chat_close(&s);

    /* a message too long for the context */
    cfg.context = 16;
    r = chat_open(&s, e, &cfg, err, sizeof err);
    if (!r) {
        f = fopen("/dev/null", "w");
        r = chat_turn(&s, "ROMEO: but soft, what light through yonder window breaks?", 58, f, err, sizeof err);
        CHECK(r == 1 && strstr(err, "does not fit"), "a first message longer than the context is refused: %s", err);
        fclose(f);
        chat_close(&s);
    }
    free_engine(e);

    /* llama2 on the Llama-2 vocabulary: <s> and </s> are real tokens */
    snprintf(path, sizeof path, "%s/models/rand-spm-q8_0.gguf", shared);
    e = build_engine(&o, err, sizeof err);
    if (!e) { CHECK(0, "rand-spm loads (%s)", err); return; }
    config_defaults(&cfg);
    cfg.chat = 1;
    cfg.temperature = 0;
    cfg.max_tokens = 3;
    snprintf(cfg.chat_template, sizeof cfg.chat_template, "llama2");
    if (!chat_open(&s, e, &cfg, err, sizeof err)) {
        f = fopen("/dev/null", "w");
        chat_turn(&s, "Hello", 5, f, err, sizeof err);
        const int start2 = s.n_hist;
        r = chat_turn(&s, "Again", 5, f, err, sizeof err);
        CHECK(r == 0 && s.hist[0] == tokenizer_bos(e->tok), "llama2: the conversation starts with BOS");
        CHECK(r == 0 && s.hist[start2] == tokenizer_eos(e->tok) && s.hist[start2 + 1] == tokenizer_bos(e->tok),
              "llama2: turn 2 starts with the </s><s> tokens (%d %d)", s.hist[start2], s.hist[start2 + 1]);
        fclose(f);
        chat_close(&s);
    }
    free_engine(e);
}

int main(void) {
    template_tests();
    stop_tests();
    const char *shared = shared_dir("chat sessions");
    if (shared) session_tests(shared);
    return CHECK_DONE();
}
