/* Chat templates: see chat_template.h. */
#include "chat_template.h"
#include "util.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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
        m[n].role = text + pos;
        m[n].content = nl < end ? text + nl + 1 : text + nl;
        m[n].len = nl < end ? end - nl - 1 : 0;
        n++;
        if (last) return n;
        text[end] = '\0';
        pos = end + sl;
    }
}
