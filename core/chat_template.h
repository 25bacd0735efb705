/*
 * Chat templates.  They are recognised, not interpreted, exactly as
 * llama.cpp's llama_chat_apply_template does (src/llama-chat.cpp): the
 * model's Jinja tokenizer.chat_template is classified by the same substring
 * rules as llm_chat_detect_template, and each recognised kind has a fixed
 * renderer that gives llama.cpp's bytes.  One more kind, smollm3, is
 * SmolLM3's Jinja template as llama-server renders it (llama.cpp's built-in
 * rules would take it for chatml and drop its system block).
 */
#ifndef PICOLM_CHAT_TEMPLATE_H
#define PICOLM_CHAT_TEMPLATE_H
#include <stddef.h>
#include <stdint.h>

#include "gguf.h"
#include "picolm/picolm.h"

/* The templates picolm renders, named as llama.cpp names them. */
enum chat_kind {
    CHAT_CHATML = 0,
    CHAT_LLAMA2,
    CHAT_LLAMA2_SYS,
    CHAT_LLAMA2_SYS_BOS,
    CHAT_LLAMA2_SYS_STRIP,
    CHAT_MISTRAL_V7,
    CHAT_PHI3,
    CHAT_ZEPHYR,
    CHAT_GEMMA,
    CHAT_LLAMA3,
    CHAT_GLMEDGE,
    CHAT_SMOLLM3,
    CHAT_N_KINDS
};

/* The names, comma separated, for messages and --help. */
#define CHAT_KIND_NAMES "chatml, llama2, llama2-sys, llama2-sys-bos, llama2-sys-strip, mistral-v7, phi3, zephyr, gemma, llama3, glmedge, smollm3"

const char *chat_kind_name(int kind);
/* A name as --chat-template takes it -> kind; -1 unknown. */
int chat_kind_from_name(const char *name);
/* llama.cpp's llm_chat_detect_template: the name of the built-in template a
   Jinja template (or a template name) maps to, possibly one picolm does not
   render (e.g. "command-r"); NULL when llama.cpp recognises nothing. */
const char *chat_detect(const char *tmpl, size_t len);

/* The template for name ("auto" or a kind name) and the model's metadata:
   auto takes the model's tokenizer.chat_template, and chatml (llama.cpp's
   default) when the model has none, with a note in note ("" otherwise).  A
   model template picolm does not render, or an unknown name, is an error
   (-1 with a message in err that lists the names). */
int chat_kind_resolve(const char *name, const gguf_file *f, int *kind, char *note, size_t notelen, char *err, size_t errlen);

/* A message: role ("system", "user", "assistant", "tool"), content, len,
   and an assistant's tool calls or a tool result's call id. */
typedef picolm_chat_msg chat_msg;

/* Render m[0..n) as llama_chat_apply_template(kind, ..., add_ass) does.
   Returns a malloc'd NUL-terminated string (*len its length), or NULL when
   out of memory. */
char *chat_render(int kind, const chat_msg *m, int n, int add_ass, size_t *len);

/* ---- tool calls ----
   With tools (or tool calls and results in the messages) a conversation is
   rendered as the model family's Jinja template renders it through
   llama-server (common's Jinja path), since llama.cpp's built-in
   templates know no tools.  The families: */
enum chat_tools {
    CHAT_TOOLS_HERMES = 0, /* Hermes-style: the tools in <tools></tools> at the end of the system
                              message, calls as <tool_call>{json}</tool_call>, results as
                              <tool_response> user turns (Qwen3's layout without its reasoning
                              blocks), inside any template's own frame */
    CHAT_TOOLS_QWEN25,     /* Qwen2.5's template: Hermes-style, its default system message */
    CHAT_TOOLS_QWEN3,      /* Qwen3's template: Hermes-style, its <think> blocks */
    CHAT_TOOLS_LLAMA3,     /* Llama 3.1-3.3: bare JSON calls {"name", "parameters"}, the tools
                              in the first user message, results as ipython turns */
    CHAT_N_TOOLS
};
/* The family for a template kind and the model's Jinja template (f may be
   NULL): llama3 for the llama3 kind; Qwen2.5's or Qwen3's when the model's
   template is theirs; else Hermes-style. */
int chat_tools_resolve(int kind, const gguf_file *f);
/* 1 when s is a function name OpenAI takes: 1 to 64 of [A-Za-z0-9_-]. */
int chat_tool_name_ok(const char *s);
/* How the family writes a call (name, trigger, opening, arguments key). */
const picolm_tool_format *chat_tools_format(int family);

typedef struct chat_tools_opts {
    const picolm_tool *tools;
    int n_tools;
    int add_ass;            /* open the assistant's turn */
    int open_call;          /* ... and a call in it (format's call_open): a forced call */
    const char *date;       /* the date Llama 3.x templates print (strftime's "%d %b %Y"); NULL: today */
} chat_tools_opts;

/* Render m[0..n) with tools (any may be absent) for template kind and
   tools family: a malloc'd string (*len its length), or NULL with a message
   (arguments that are not JSON, a shape the family's template refuses). */
char *chat_render_tools(int kind, int family, const chat_msg *m, int n, const chat_tools_opts *o, size_t *len,
                        char *err, size_t errlen);

/* Parse a conversation file (shared/reference/chat/conversation.txt):
   messages separated by "\n---\n", the first line of each is its role and
   every byte after that line is its content.  Fills m (pointing into text,
   which must outlive m) up to cap messages; returns the count, or -1 with a
   message when a message has no role line or there are more than cap. */
int chat_parse_conversation(char *text, size_t len, chat_msg *m, int cap, char *err, size_t errlen);

#endif
