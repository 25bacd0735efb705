/* Chat templates: see chat_template.h. */
#include "chat_template.h"
#include "jsondoc.h"
#include "util.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static const char *const kind_names[CHAT_N_KINDS] = {
    [CHAT_CHATML] = "chatml",       [CHAT_LLAMA2] = "llama2",
    [CHAT_LLAMA2_SYS] = "llama2-sys", [CHAT_LLAMA2_SYS_BOS] = "llama2-sys-bos",
    [CHAT_LLAMA2_SYS_STRIP] = "llama2-sys-strip", [CHAT_MISTRAL_V7] = "mistral-v7",
    [CHAT_PHI3] = "phi3",           [CHAT_ZEPHYR] = "zephyr",
    [CHAT_GEMMA] = "gemma",         [CHAT_LLAMA3] = "llama3",
    [CHAT_GLMEDGE] = "glmedge",     [CHAT_SMOLLM3] = "smollm3",
};

/* llama.cpp's other built-in names: recognised, not rendered by picolm */
static const char *const other_names[] = {
    "mistral-v1", "mistral-v3", "mistral-v3-tekken", "mistral-v7-tekken", "phi4", "falcon3", "monarch", "orion",
    "openchat", "vicuna", "vicuna-orca", "deepseek", "deepseek2", "deepseek3", "command-r", "chatglm3", "chatglm4",
    "minicpm", "exaone3", "exaone4", "rwkv-world", "granite", "gigachat", "megrez", "yandex", "bailing", "llama4",
    "smolvlm", "hunyuan-moe", "hunyuan-dense", "kimi-k2", NULL};

const char *chat_kind_name(int kind) { return kind >= 0 && kind < CHAT_N_KINDS ? kind_names[kind] : "unknown"; }

int chat_kind_from_name(const char *name) {
    for (int k = 0; k < CHAT_N_KINDS; k++)
        if (!strcasecmp(name, kind_names[k])) return k;
    return -1;
}

/* ---------------- detection (llama.cpp's llm_chat_detect_template) ---------------- */

typedef struct tmpl_text {
    const char *p;
    size_t n;
} tmpl_text;

static int has(tmpl_text t, const char *needle) {
    const size_t l = strlen(needle);
    for (size_t i = 0; i + l <= t.n; i++)
        if (!memcmp(t.p + i, needle, l)) return 1;
    return 0;
}

/* The rules after the mistral/llama2 family that need only "all of these
   substrings", in llama.cpp's order; the branching ones are in chat_detect. */
typedef struct detect_rule {
    const char *name;
    const char *all[3];
} detect_rule;

static const detect_rule rules_tail[] = {
    {"gemma", {"<start_of_turn>"}},
    {"orion", {"'\\n\\nAssistant: ' + eos_token"}},
    {"openchat", {"GPT4 Correct "}},
    {"vicuna-orca", {"USER: ", "ASSISTANT: ", "SYSTEM: "}},
    {"vicuna", {"USER: ", "ASSISTANT: "}},
    {"deepseek", {"### Instruction:", "<|EOT|>"}},
    {"command-r", {"<|START_OF_TURN_TOKEN|>", "<|USER_TOKEN|>"}},
    {"llama3", {"<|start_header_id|>", "<|end_header_id|>"}},
    {"chatglm3", {"[gMASK]sop"}},
    {"minicpm", {"<\xe7\x94\xa8\xe6\x88\xb7>"}}, /* <用户> */
    {"deepseek2", {"'Assistant: ' + message['content'] + eos_token"}},
    {"deepseek3", {"<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>", "<\xef\xbd\x9c" "User\xef\xbd\x9c>",
                   "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"}},
    {"exaone4", {"[|system|]", "[|assistant|]", "[|tool|]"}}, /* exaone4 also needs [|endofturn|]: see below */
    {"exaone3", {"[|system|]", "[|assistant|]", "[|endofturn|]"}},
    {"rwkv-world", {"rwkv-world"}},
    {"rwkv-world", {"{{- 'User: ' + message['content']|trim + '\\n\\n' -}}"}},
    {"granite", {"<|start_of_role|>"}},
    {"gigachat", {"message['role'] + additional_special_tokens[0] + message['content'] + additional_special_tokens[1]"}},
    {"megrez", {"<|role_start|>"}},
    {"yandex", {" \xd0\x90\xd1\x81\xd1\x81\xd0\xb8\xd1\x81\xd1\x82\xd0\xb5\xd0\xbd\xd1\x82:"}}, /* " Ассистент:" */
    {"bailing", {"<role>ASSISTANT</role>", "'HUMAN'"}},
    {"llama4", {"<|header_start|>", "<|header_end|>"}},
    {"dots1", {"<|endofuserprompt|>"}},
    {"hunyuan-moe", {"<|startoftext|>", "<|extra_4|>"}},
    {"hunyuan-dense", {"<\xef\xbd\x9chy_place\xe2\x96\x81holder\xe2\x96\x81no\xe2\x96\x81" "2\xef\xbd\x9c>",
                       "<\xef\xbd\x9chy_place\xe2\x96\x81holder\xe2\x96\x81no\xe2\x96\x81" "3\xef\xbd\x9c>"}},
    {"kimi-k2", {"<|im_assistant|>assistant<|im_middle|>"}},
};

static int rule_matches(tmpl_text t, const detect_rule *r) {
    for (int i = 0; i < 3 && r->all[i]; i++)
        if (!has(t, r->all[i])) return 0;
    return 1;
}

const char *chat_detect(const char *tmpl, size_t len) {
    if (!tmpl) return NULL;
    const tmpl_text t = {tmpl, len};
    /* a template that is a built-in name is that template */
    for (int k = 0; k < CHAT_N_KINDS; k++)
        if (strlen(kind_names[k]) == len && !memcmp(tmpl, kind_names[k], len)) return kind_names[k];
    for (const char *const *o = other_names; *o; o++)
        if (strlen(*o) == len && !memcmp(tmpl, *o, len)) return *o;

    /* SmolLM3's own template (its reasoning-mode system block): rendered as
       its Jinja does, where llama.cpp's built-in rules would say chatml */
    if (has(t, "<|im_start|>") && has(t, "Reasoning Mode: "))
        return "smollm3";
    if (has(t, "<|im_start|>"))
        return has(t, "<|im_sep|>") ? "phi4" : has(t, "<end_of_utterance>") ? "smolvlm" : "chatml";
    if ((len >= 7 && !memcmp(tmpl, "mistral", 7)) || has(t, "[INST]")) {
        if (has(t, "[SYSTEM_PROMPT]")) return "mistral-v7";
        if (has(t, "' [INST] ' + system_message") || has(t, "[AVAILABLE_TOOLS]"))
            return has(t, " [INST]") ? "mistral-v1" : has(t, "\"[INST]\"") ? "mistral-v3-tekken" : "mistral-v3";
        if (has(t, "content.strip()")) return "llama2-sys-strip";
        if (has(t, "bos_token + '[INST]")) return "llama2-sys-bos";
        return has(t, "<<SYS>>") ? "llama2-sys" : "llama2";
    }
    if (has(t, "<|assistant|>") && has(t, "<|end|>")) return "phi3";
    if (has(t, "[gMASK]<sop>")) return "chatglm4";
    if (has(t, "<|assistant|>") && has(t, "<|user|>")) return has(t, "</s>") ? "falcon3" : "glmedge";
    if (has(t, "<|{{ item['role'] }}|>") && has(t, "<|begin_of_image|>")) return "glmedge";
    if (has(t, "<|user|>") && has(t, "<|endoftext|>")) return "zephyr";
    if (has(t, "bos_token + message['role']")) return "monarch";
    for (size_t i = 0; i < sizeof rules_tail / sizeof rules_tail[0]; i++) {
        const detect_rule *r = &rules_tail[i];
        /* exaone4 is exaone3's rule plus [|tool|] */
        if (!strcmp(r->name, "exaone4") && !has(t, "[|endofturn|]")) continue;
        if (rule_matches(t, r)) return r->name;
    }
    return NULL;
}

int chat_kind_resolve(const char *name, const gguf_file *f, int *kind, char *note, size_t notelen, char *err, size_t errlen) {
    if (note && notelen) note[0] = '\0';
    if (name && *name && strcasecmp(name, "auto")) {
        *kind = chat_kind_from_name(name);
        if (*kind < 0) return pl_fail(err, errlen, "unknown chat template '%s' (known: auto, " CHAT_KIND_NAMES ")", name);
        return 0;
    }
    gguf_str s;
    if (!f || gguf_get_str(f, "tokenizer.chat_template", &s)) {
        *kind = CHAT_CHATML;
        if (note && notelen) snprintf(note, notelen, "the model has no chat template; using chatml, llama.cpp's default (choose with --chat-template)");
        return 0;
    }
    const char *det = chat_detect(s.ptr, (size_t)s.len);
    *kind = det ? chat_kind_from_name(det) : -1;
    if (*kind >= 0) return 0;
    if (det)
        return pl_fail(err, errlen, "the model's chat template is llama.cpp's '%s', which picolm does not render; "
                                    "pick one with --chat-template NAME (" CHAT_KIND_NAMES ")", det);
    return pl_fail(err, errlen, "the model's chat template is not one picolm recognises; "
                                "pick one with --chat-template NAME (" CHAT_KIND_NAMES ")");
}

/* ---------------- rendering (llama.cpp's llm_chat_apply_template) ---------------- */

/* growable string */
static void sb_str(pl_sbuf *b, const char *s) { pl_sbuf_add(b, s, strlen(s)); }
static void sb_msg(pl_sbuf *b, const chat_msg *m) { pl_sbuf_add(b, m->content, m->len); }

/* C isspace() on both ends, as llama.cpp's trim() */
static void sb_trimmed(pl_sbuf *b, const char *s, size_t n) {
    while (n && isspace((unsigned char)*s)) s++, n--;
    while (n && isspace((unsigned char)s[n - 1])) n--;
    pl_sbuf_add(b, s, n);
}

static int is_role(const chat_msg *m, const char *role) { return !strcmp(m->role, role); }

typedef void (*render_fn)(pl_sbuf *b, const chat_msg *m, int n, int add_ass, int kind);

/* Templates that frame every message alike: pre role mid content post,
   then the assistant's header (gen) as the generation prompt. */
typedef struct frame {
    const char *pre, *mid, *post, *gen;
    int trim; /* content trimmed (llama3) */
} frame;

static const frame frames[CHAT_N_KINDS] = {
    [CHAT_CHATML] = {"<|im_start|>", "\n", "<|im_end|>\n", "<|im_start|>assistant\n", 0},
    [CHAT_PHI3] = {"<|", "|>\n", "<|end|>\n", "<|assistant|>\n", 0},
    [CHAT_ZEPHYR] = {"<|", "|>\n", "<|endoftext|>\n", "<|assistant|>\n", 0},
    [CHAT_LLAMA3] = {"<|start_header_id|>", "<|end_header_id|>\n\n", "<|eot_id|>", "<|start_header_id|>assistant<|end_header_id|>\n\n", 1},
    [CHAT_GLMEDGE] = {"<|", "|>\n", "", "<|assistant|>", 0},
};

static void render_framed(pl_sbuf *b, const chat_msg *m, int n, int add_ass, int kind) {
    const frame *f = &frames[kind];
    for (int i = 0; i < n; i++) {
        sb_str(b, f->pre);
        sb_str(b, m[i].role);
        sb_str(b, f->mid);
        if (f->trim) sb_trimmed(b, m[i].content, m[i].len);
        else sb_msg(b, &m[i]);
        sb_str(b, f->post);
    }
    if (add_ass) sb_str(b, f->gen);
}

/* llama2 and its variants: system prompt inside the first [INST] (with
   <<SYS>> or not), BOS text inside the history, contents trimmed.  No
   generation prompt: the text already ends with [/INST]. */
static void render_llama2(pl_sbuf *b, const chat_msg *m, int n, int add_ass, int kind) {
    (void)add_ass;
    const int sys_tags = kind != CHAT_LLAMA2, bos = kind == CHAT_LLAMA2_SYS_BOS, strip = kind == CHAT_LLAMA2_SYS_STRIP;
    int inside = 1; /* the first [INST] is written up front, without BOS */
    sb_str(b, "[INST] ");
    for (int i = 0; i < n; i++) {
        if (!inside) {
            inside = 1;
            sb_str(b, bos ? "<s>[INST] " : "[INST] ");
        }
        if (is_role(&m[i], "system")) sb_str(b, sys_tags ? "<<SYS>>\n" : "");
        if (strip) sb_trimmed(b, m[i].content, m[i].len);
        else sb_msg(b, &m[i]);
        if (is_role(&m[i], "system")) {
            sb_str(b, sys_tags ? "\n<</SYS>>\n\n" : "\n");
        } else if (is_role(&m[i], "user")) {
            sb_str(b, " [/INST]");
        } else {
            sb_str(b, "</s>");
            inside = 0;
        }
    }
}

static void render_mistral_v7(pl_sbuf *b, const chat_msg *m, int n, int add_ass, int kind) {
    (void)add_ass; (void)kind;
    for (int i = 0; i < n; i++) {
        if (is_role(&m[i], "system")) {
            sb_str(b, "[SYSTEM_PROMPT] ");
            sb_msg(b, &m[i]);
            sb_str(b, "[/SYSTEM_PROMPT]");
        } else if (is_role(&m[i], "user")) {
            sb_str(b, "[INST] ");
            sb_msg(b, &m[i]);
            sb_str(b, "[/INST]");
        } else {
            sb_str(b, " ");
            sb_msg(b, &m[i]);
            sb_str(b, "</s>");
        }
    }
}

/* gemma has no system role: the (trimmed) system text opens the next user turn */
static void render_gemma(pl_sbuf *b, const chat_msg *m, int n, int add_ass, int kind) {
    (void)kind;
    pl_sbuf sys = {0};
    for (int i = 0; i < n; i++) {
        if (is_role(&m[i], "system")) {
            sb_trimmed(&sys, m[i].content, m[i].len);
            continue;
        }
        const int model = is_role(&m[i], "assistant");
        sb_str(b, "<start_of_turn>");
        sb_str(b, model ? "model" : m[i].role);
        sb_str(b, "\n");
        if (sys.n && !model) {
            pl_sbuf_add(b, sys.p, sys.n);
            sb_str(b, "\n\n");
            sys.n = 0;
        }
        sb_trimmed(b, m[i].content, m[i].len);
        sb_str(b, "<end_of_turn>\n");
    }
    if (sys.oom) b->oom = 1;
    free(sys.p);
    if (add_ass) sb_str(b, "<start_of_turn>model\n");
}

/* SmolLM3: a system block with metadata and the reasoning mode (/think
   unless the system message says /no_think), the system message's text
   (without those switches) or a default; in /no_think mode every
   assistant turn starts with an empty think block. */
static void render_smollm3(pl_sbuf *b, const chat_msg *m, int n, int add_ass, int kind) {
    (void)kind;
    int think = 1;
    pl_sbuf custom = {0};
    if (n && is_role(&m[0], "system")) {
        const char *c = m[0].content;
        size_t l = m[0].len;
        const tmpl_text t = {c, l};
        think = has(t, "/no_think") ? 0 : 1;
        /* the text without "/no_think", then without "/think", right-trimmed */
        pl_sbuf a = {0};
        for (size_t i = 0; i < l;) {
            if (i + 9 <= l && !memcmp(c + i, "/no_think", 9)) i += 9;
            else pl_sbuf_add(&a, c + i++, 1);
        }
        for (size_t i = 0; i < a.n;) {
            if (i + 6 <= a.n && !memcmp(a.p + i, "/think", 6)) i += 6;
            else pl_sbuf_add(&custom, a.p + i++, 1);
        }
        while (custom.n && isspace((unsigned char)custom.p[custom.n - 1])) custom.n--;
        if (a.oom) b->oom = 1;
        free(a.p);
    }
    sb_str(b, "<|im_start|>system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\nReasoning Mode: ");
    sb_str(b, think ? "/think" : "/no_think");
    sb_str(b, "\n\n## Custom Instructions\n\n");
    if (custom.n) pl_sbuf_add(b, custom.p, custom.n), sb_str(b, "\n\n");
    else if (think)
        sb_str(b, "You are a helpful AI assistant named SmolLM, trained by Hugging Face. Your role as an assistant involves thoroughly "
                  "exploring questions through a systematic thinking process before providing the final precise and accurate solutions. "
                  "This requires engaging in a comprehensive cycle of analysis, summarizing, exploration, reassessment, reflection, "
                  "backtracking, and iteration to develop well-considered thinking process. Please structure your response into two main "
                  "sections: Thought and Solution using the specified format: <think> Thought section </think> Solution section. In the "
                  "Thought section, detail your reasoning process in steps. Each step should include detailed considerations such as "
                  "analysing questions, summarizing relevant findings, brainstorming new ideas, verifying the accuracy of the current "
                  "steps, refining any errors, and revisiting previous steps. In the Solution section, based on various attempts, "
                  "explorations, and reflections from the Thought section, systematically present the final solution that you deem "
                  "correct. The Solution section should be logical, accurate, and concise and detail necessary steps needed to reach the "
                  "conclusion.\n\n");
    else sb_str(b, "You are a helpful AI assistant named SmolLM, trained by Hugging Face.\n\n");
    if (custom.oom) b->oom = 1;
    free(custom.p);
    sb_str(b, "<|im_end|>\n");
    const char *open_ass = think ? "<|im_start|>assistant\n" : "<|im_start|>assistant\n<think>\n\n</think>\n";
    for (int i = 0; i < n; i++) {
        if (is_role(&m[i], "user") || is_role(&m[i], "tool")) {
            sb_str(b, "<|im_start|>user\n");
            sb_msg(b, &m[i]);
        } else if (is_role(&m[i], "assistant")) {
            const char *c = m[i].content;
            size_t l = m[i].len;
            while (l && *c == '\n') c++, l--; /* lstrip("\n") */
            sb_str(b, open_ass);
            pl_sbuf_add(b, c, l);
        } else {
            continue; /* system messages: only the first counts, above */
        }
        sb_str(b, "<|im_end|>\n");
    }
    if (add_ass) sb_str(b, open_ass);
}

static const render_fn renderers[CHAT_N_KINDS] = {
    [CHAT_CHATML] = render_framed,         [CHAT_LLAMA2] = render_llama2,
    [CHAT_LLAMA2_SYS] = render_llama2,     [CHAT_LLAMA2_SYS_BOS] = render_llama2,
    [CHAT_LLAMA2_SYS_STRIP] = render_llama2, [CHAT_MISTRAL_V7] = render_mistral_v7,
    [CHAT_PHI3] = render_framed,           [CHAT_ZEPHYR] = render_framed,
    [CHAT_GEMMA] = render_gemma,           [CHAT_LLAMA3] = render_framed,
    [CHAT_GLMEDGE] = render_framed,        [CHAT_SMOLLM3] = render_smollm3,
};

char *chat_render(int kind, const chat_msg *m, int n, int add_ass, size_t *len) {
    if (kind < 0 || kind >= CHAT_N_KINDS) return NULL;
    pl_sbuf b = {0};
    pl_sbuf_add(&b, "", 0);
    renderers[kind](&b, m, n, add_ass, kind);
    if (b.oom) { free(b.p); return NULL; }
    if (len) *len = b.n;
    return b.p;
}

/* ---------------- tool calls (the families' Jinja templates) ---------------- */

static const picolm_tool_format tool_formats[CHAT_N_TOOLS] = {
    [CHAT_TOOLS_HERMES] = {"hermes", "<tool_call>", "<tool_call>\n", "arguments"},
    [CHAT_TOOLS_QWEN25] = {"qwen2.5", "<tool_call>", "<tool_call>\n", "arguments"},
    [CHAT_TOOLS_QWEN3] = {"qwen3", "<tool_call>", "<tool_call>\n", "arguments"},
    [CHAT_TOOLS_LLAMA3] = {"llama3", "", "", "parameters"},
};

const picolm_tool_format *chat_tools_format(int family) {
    return family >= 0 && family < CHAT_N_TOOLS ? &tool_formats[family] : &tool_formats[CHAT_TOOLS_HERMES];
}

int chat_tools_resolve(int kind, const gguf_file *f) {
    if (kind == CHAT_LLAMA3) return CHAT_TOOLS_LLAMA3;
    gguf_str s;
    if (kind != CHAT_CHATML || !f || gguf_get_str(f, "tokenizer.chat_template", &s)) return CHAT_TOOLS_HERMES;
    const tmpl_text t = {s.ptr, (size_t)s.len};
    if (!has(t, "<tool_call>")) return CHAT_TOOLS_HERMES;
    if (has(t, "You are Qwen, created by Alibaba Cloud")) return CHAT_TOOLS_QWEN25;
    if (has(t, "last_query_index") && has(t, "</think>")) return CHAT_TOOLS_QWEN3;
    return CHAT_TOOLS_HERMES;
}

/* The strings a rendering makes, freed together. */
typedef struct keep {
    char **p;
    int n, cap, oom;
} keep;

static const char *kept(keep *k, pl_sbuf *b) {
    if (b->oom || (k->n == k->cap && !(k->cap = k->cap ? 2 * k->cap : 16,
                                          k->p = realloc(k->p, (size_t)k->cap * sizeof *k->p)))) {
        k->oom = 1;
        free(b->p);
        return "";
    }
    pl_sbuf_add(b, "", 0);
    return k->p[k->n++] = b->p;
}

static void keep_free(keep *k) {
    for (int i = 0; i < k->n; i++) free(k->p[i]);
    free(k->p);
}

/* JSON text re-written as the templates' tojson writes it. */
static int put_tojson(pl_sbuf *b, const char *json, int indent, const char *what, char *err, size_t errlen) {
    char why[200];
    jd_value *v = jd_parse(json, strlen(json), why, sizeof why);
    if (!v) return pl_fail(err, errlen, "%s: not valid JSON: %s", what, why);
    jd_write(b, v, indent, 0);
    jd_free(v);
    return 0;
}

int chat_tool_name_ok(const char *s) {
    size_t n = 0;
    for (; s && s[n]; n++)
        if (!isalnum((unsigned char)s[n]) && s[n] != '_' && s[n] != '-') return 0;
    return n >= 1 && n <= 64;
}

/* {"type": "function", "function": {"name", "description", "parameters"}}
   as llama-server hands a tool to the template (a missing description is
   "", missing parameters {}). */
static int put_tool(pl_sbuf *b, const picolm_tool *t, int indent, char *err, size_t errlen) {
    if (!chat_tool_name_ok(t->name))
        return pl_fail(err, errlen, "tool name '%.80s' is not 1 to 64 of [A-Za-z0-9_-]", t->name ? t->name : "");
    pl_sbuf j = {0};
    sb_str(&j, "{\"type\":\"function\",\"function\":{\"name\":\"");
    sb_str(&j, t->name);
    sb_str(&j, "\",\"description\":");
    jd_write_string(&j, t->description ? t->description : "", t->description ? strlen(t->description) : 0);
    sb_str(&j, ",\"parameters\":");
    sb_str(&j, t->parameters && *t->parameters ? t->parameters : "{}");
    sb_str(&j, "}}");
    pl_sbuf_add(&j, "", 0);
    char what[120];
    snprintf(what, sizeof what, "the parameters of tool '%s'", t->name);
    const int rc = j.oom ? pl_fail(err, errlen, "out of memory") : put_tojson(b, j.p, indent, what, err, errlen);
    free(j.p);
    return rc;
}

/* {"name": "NAME", "KEY": ARGS} as the templates write a past call. */
static int put_call(pl_sbuf *b, const picolm_tool_call *c, const char *key, int i, char *err, size_t errlen) {
    char what[120];
    if (!c->name || !*c->name) return pl_fail(err, errlen, "messages[%d]: a tool call without a name", i);
    snprintf(what, sizeof what, "messages[%d]: the arguments of the call to '%.40s'", i, c->name);
    sb_str(b, "{\"name\": \"");
    sb_str(b, c->name);
    sb_str(b, "\", \"");
    sb_str(b, key);
    sb_str(b, "\": ");
    if (put_tojson(b, c->arguments && *c->arguments ? c->arguments : "{}", -1, what, err, errlen)) return -1;
    sb_str(b, "}");
    return 0;
}

static int starts(const char *s, size_t n, const char *p) { return n >= strlen(p) && !memcmp(s, p, strlen(p)); }
static int ends(const char *s, size_t n, const char *p) { return n >= strlen(p) && !memcmp(s + n - strlen(p), p, strlen(p)); }

/* The last occurrence of needle in s[0..n) (or NULL). */
static const char *last_of(const char *s, size_t n, const char *needle) {
    const size_t l = strlen(needle);
    for (size_t i = n >= l ? n - l + 1 : 0; i-- > 0;)
        if (!memcmp(s + i, needle, l)) return s + i;
    return NULL;
}

static const char *first_of(const char *s, size_t n, const char *needle) {
    const size_t l = strlen(needle);
    for (size_t i = 0; i + l <= n; i++)
        if (!memcmp(s + i, needle, l)) return s + i;
    return NULL;
}

/* Qwen3's assistant content: a </think> in it splits off the reasoning,
   which is shown (in a fresh <think> block) only after the last user
   query, and always in the last message. */
static void qwen3_content(pl_sbuf *b, const chat_msg *m, int shown, int last, size_t *content_len) {
    const char *c = m->content, *end = c + m->len;
    const char *close = first_of(c, m->len, "</think>");
    if (!close) { /* no reasoning */
        if (shown && last) sb_str(b, "<think>\n\n</think>\n\n");
        pl_sbuf_add(b, c, m->len);
        *content_len = m->len;
        return;
    }
    const char *rest = last_of(c, m->len, "</think>") + 8;
    while (rest < end && *rest == '\n') rest++;                       /* .split('</think>')[-1].lstrip('\n') */
    const char *r0 = c, *r1 = close;
    while (r1 > r0 && r1[-1] == '\n') r1--;                          /* .split('</think>')[0].rstrip('\n') */
    const char *open = last_of(r0, (size_t)(r1 - r0), "<think>");
    if (open) r0 = open + 7;                                         /* .split('<think>')[-1] */
    while (r0 < r1 && *r0 == '\n') r0++;                             /* .lstrip('\n') (then .strip('\n') is a no-op) */
    *content_len = (size_t)(end - rest);
    if (shown && (last || r1 > r0)) {
        sb_str(b, "<think>\n");
        pl_sbuf_add(b, r0, (size_t)(r1 - r0));
        sb_str(b, "\n</think>\n\n");
    }
    pl_sbuf_add(b, rest, (size_t)(end - rest));
}

static int is_tool_result(const chat_msg *m) { return !strcmp(m->role, "tool") || !strcmp(m->role, "ipython"); }

static const char QWEN_SYSTEM[] = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";
static const char HERMES_TOOLS_HEAD[] =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
static const char HERMES_TOOLS_TAIL[] =
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>";

/* Hermes-style: the messages rewritten (tools into the system message,
   calls into the assistant's text, results into user turns), then the
   template kind's own renderer. */
static int render_hermes(pl_sbuf *out, int kind, int family, const chat_msg *m, int n, const chat_tools_opts *o,
                         char *err, size_t errlen) {
    chat_msg *w = calloc((size_t)n + 1, sizeof *w);
    keep k = {0};
    int nw = 0, i = 0, rc = 0;
    if (!w) return pl_fail(err, errlen, "out of memory");
    const int has_sys = n > 0 && !strcmp(m[0].role, "system");
    if (o->n_tools) {
        pl_sbuf b = {0};
        if (has_sys) pl_sbuf_add(&b, m[0].content, m[0].len), sb_str(&b, "\n\n");
        else if (family == CHAT_TOOLS_QWEN25) sb_str(&b, QWEN_SYSTEM), sb_str(&b, "\n\n");
        sb_str(&b, HERMES_TOOLS_HEAD);
        for (int t = 0; t < o->n_tools && !rc; t++) sb_str(&b, "\n"), rc = put_tool(&b, &o->tools[t], -1, err, errlen);
        sb_str(&b, HERMES_TOOLS_TAIL);
        const char *s = kept(&k, &b);
        w[nw++] = (chat_msg){"system", s, strlen(s), NULL, 0, NULL};
        i = has_sys;
    } else if (family == CHAT_TOOLS_QWEN25 && !has_sys) {
        w[nw++] = (chat_msg){"system", QWEN_SYSTEM, sizeof QWEN_SYSTEM - 1, NULL, 0, NULL};
    }
    /* Qwen3: the last user message that is not a tool result */
    int last_query = n - 1;
    for (int j = n - 1; j >= 0; j--)
        if (!strcmp(m[j].role, "user") && !(starts(m[j].content, m[j].len, "<tool_response>") && ends(m[j].content, m[j].len, "</tool_response>"))) {
            last_query = j;
            break;
        }
    for (; i < n && !rc; i++) {
        pl_sbuf b = {0};
        if (is_tool_result(&m[i])) { /* a run of results: one user turn */
            for (int first = 1; i < n && is_tool_result(&m[i]); i++, first = 0) {
                sb_str(&b, first ? "<tool_response>\n" : "\n<tool_response>\n");
                pl_sbuf_add(&b, m[i].content, m[i].len);
                sb_str(&b, "\n</tool_response>");
            }
            i--;
            const char *s = kept(&k, &b);
            w[nw++] = (chat_msg){"user", s, strlen(s), NULL, 0, NULL};
        } else if (!strcmp(m[i].role, "assistant") && (m[i].n_tool_calls || family == CHAT_TOOLS_QWEN3)) {
            size_t content_len = m[i].len;
            if (family == CHAT_TOOLS_QWEN3) qwen3_content(&b, &m[i], i > last_query, i == n - 1, &content_len);
            else pl_sbuf_add(&b, m[i].content, m[i].len);
            for (int c = 0; c < m[i].n_tool_calls && !rc; c++) {
                if (c || content_len) sb_str(&b, "\n");
                sb_str(&b, "<tool_call>\n");
                rc = put_call(&b, &m[i].tool_calls[c], "arguments", i, err, errlen);
                sb_str(&b, "\n</tool_call>");
            }
            const char *s = kept(&k, &b);
            w[nw++] = (chat_msg){"assistant", s, strlen(s), NULL, 0, NULL};
        } else {
            w[nw++] = m[i];
        }
    }
    if (!rc && k.oom) rc = pl_fail(err, errlen, "out of memory");
    if (!rc) renderers[kind](out, w, nw, o->add_ass, kind);
    keep_free(&k);
    free(w);
    return rc;
}

static void today(char *buf, size_t n) {
    const time_t now = time(NULL);
    struct tm tm;
    if (!localtime_r(&now, &tm) || !strftime(buf, n, "%d %b %Y", &tm)) snprintf(buf, n, "26 Jul 2024");
}

/* Llama 3.1-3.3's template (llama-server strips its leading BOS text). */
static int render_llama3_tools(pl_sbuf *b, const chat_msg *m, int n, const chat_tools_opts *o, char *err, size_t errlen) {
    char date[64];
    if (o->date) snprintf(date, sizeof date, "%s", o->date);
    else today(date, sizeof date);
    int i = 0;
    sb_str(b, "<|start_header_id|>system<|end_header_id|>\n\n");
    if (o->n_tools) sb_str(b, "Environment: ipython\n");
    sb_str(b, "Cutting Knowledge Date: December 2023\nToday Date: ");
    sb_str(b, date);
    sb_str(b, "\n\n");
    if (n && !strcmp(m[0].role, "system")) sb_trimmed(b, m[0].content, m[0].len), i = 1;
    sb_str(b, "<|eot_id|>");
    if (o->n_tools) { /* the tools go into the first user message */
        if (i >= n) return pl_fail(err, errlen, "the llama3 tool format puts the tools into the first user message, and there is none");
        sb_str(b, "<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, please respond with a JSON for a "
                  "function call with its proper arguments that best answers the given prompt.\n\nRespond in the format "
                  "{\"name\": function name, \"parameters\": dictionary of argument name and its value}.Do not use variables.\n\n");
        for (int t = 0; t < o->n_tools; t++) {
            if (put_tool(b, &o->tools[t], 4, err, errlen)) return -1;
            sb_str(b, "\n\n");
        }
        sb_trimmed(b, m[i].content, m[i].len);
        sb_str(b, "<|eot_id|>");
        i++;
    }
    for (; i < n; i++) {
        if (is_tool_result(&m[i])) { /* a string result is written as a JSON string */
            sb_str(b, "<|start_header_id|>ipython<|end_header_id|>\n\n");
            jd_write_string(b, m[i].content, m[i].len);
        } else if (m[i].n_tool_calls) {
            if (m[i].n_tool_calls != 1) return pl_fail(err, errlen, "messages[%d]: the llama3 tool format takes one tool call per message (%d given)", i, m[i].n_tool_calls);
            sb_str(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
            if (put_call(b, &m[i].tool_calls[0], "parameters", i, err, errlen)) return -1;
        } else {
            sb_str(b, "<|start_header_id|>");
            sb_str(b, m[i].role);
            sb_str(b, "<|end_header_id|>\n\n");
            sb_trimmed(b, m[i].content, m[i].len);
        }
        sb_str(b, "<|eot_id|>");
    }
    if (o->add_ass) sb_str(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
    return 0;
}

char *chat_render_tools(int kind, int family, const chat_msg *m, int n, const chat_tools_opts *o, size_t *len,
                        char *err, size_t errlen) {
    if (kind < 0 || kind >= CHAT_N_KINDS || family < 0 || family >= CHAT_N_TOOLS) {
        pl_fail(err, errlen, "unknown chat template or tool format");
        return NULL;
    }
    pl_sbuf b = {0};
    pl_sbuf_add(&b, "", 0);
    const int rc = family == CHAT_TOOLS_LLAMA3 ? render_llama3_tools(&b, m, n, o, err, errlen)
                                               : render_hermes(&b, kind, family, m, n, o, err, errlen);
    if (!rc && o->add_ass && o->open_call) sb_str(&b, tool_formats[family].call_open);
    if (!rc && b.oom) pl_fail(err, errlen, "out of memory");
    if (rc || b.oom) {
        free(b.p);
        return NULL;
    }
    if (len) *len = b.n;
    return b.p;
}

int chat_parse_conversation(char *text, size_t len, chat_msg *m, int cap, char *err, size_t errlen) {
    static const char SEP[] = "\n---\n";
    const size_t sl = sizeof SEP - 1;
    int n = 0;
    size_t pos = 0;
    for (;;) {
        /* this message runs to the next separator or the end */
        size_t end = pos;
        while (end < len && !(end + sl <= len && !memcmp(text + end, SEP, sl))) end++;
        size_t nl = pos;
        while (nl < end && text[nl] != '\n') nl++;
        if (nl == pos) return pl_fail(err, errlen, "message %d has no role (its first line is empty)", n + 1);
        if (n == cap) return pl_fail(err, errlen, "more than %d messages", cap);
        const int last = end == len;
        text[nl] = '\0'; /* the role's line end, or the separator's first byte */
        memset(&m[n], 0, sizeof m[n]);
        m[n].role = text + pos;
        m[n].content = nl < end ? text + nl + 1 : text + nl;
        m[n].len = nl < end ? end - nl - 1 : 0;
        n++;
        if (last) return n;
        text[end] = '\0';
        pos = end + sl;
    }
}
