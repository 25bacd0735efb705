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

/* A message: role ("system", "user", "assistant"), content, len. */
typedef picolm_chat_msg chat_msg;

/* Render m[0..n) as llama_chat_apply_template(kind, ..., add_ass) does.
   Returns a malloc'd NUL-terminated string (*len its length), or NULL when
   out of memory. */
char *chat_render(int kind, const chat_msg *m, int n, int add_ass, size_t *len);

/* Parse a conversation file (shared/reference/chat/conversation.txt):
   messages separated by "\n---\n", the first line of each is its role and
   every byte after that line is its content.  Fills m (pointing into text,
   which must outlive m) up to cap messages; returns the count, or -1 with a
   message when a message has no role line or there are more than cap. */
int chat_parse_conversation(char *text, size_t len, chat_msg *m, int cap, char *err, size_t errlen);

#endif
