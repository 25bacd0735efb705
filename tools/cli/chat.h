/*
 * Chat mode (--chat): chat templates and a multi-turn session that keeps
 * its KV cache across turns, so each turn prefills only what is new.
 *
 * Templates are recognised, not interpreted, exactly as llama.cpp's
 * llama_chat_apply_template does (src/llama-chat.cpp): the model's Jinja
 * tokenizer.chat_template is classified by the same substring rules as
 * llm_chat_detect_template, and each recognised kind has a fixed renderer
 * that gives llama.cpp's bytes.
 */
#ifndef PICOLM_CHAT_H
#define PICOLM_CHAT_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "config.h"
#include "engine.h"
#include "generate.h"
#include "sampling.h"

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
    CHAT_N_KINDS
};

/* The names, comma separated, for messages and --help. */
#define CHAT_KIND_NAMES "chatml, llama2, llama2-sys, llama2-sys-bos, llama2-sys-strip, mistral-v7, phi3, zephyr, gemma, llama3, glmedge"

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

typedef struct chat_msg {
    const char *role;    /* "system", "user", "assistant" */
    const char *content;
    size_t len;
} chat_msg;

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

typedef struct chat_session {
    engine *e;
    picolm_config *cfg;          /* copy of the caller's, plus the template's stop strings */
    int kind;
    llama_ctx c;
    sampling *smp;
    int32_t end_ids[4];          /* tokens that end a reply besides EOS */
    int n_end_ids;
    int32_t *hist;               /* the tokens in the KV cache, in order */
    int n_hist;                  /* == c.n_past */
    chat_msg *msgs;              /* the conversation; contents are malloc'd */
    int n_msgs, cap_msgs;
    int turns;                   /* completed turns since the last reset */
    int last_end;                /* GEN_END_* of the last reply */
    gen_stats st;                /* of the last turn */
} chat_session;

/* 0, or -1 with a message (unknown template, no memory...). */
int chat_open(chat_session *s, engine *e, const picolm_config *cfg, char *err, size_t errlen);
void chat_close(chat_session *s);
/* Forget the conversation (KV cache, messages and sampler history). */
void chat_reset(chat_session *s);

/* One exchange: add the user's message, render the whole conversation,
   prefill what the KV cache does not hold yet, stream the reply to out
   (stop at EOS, the end-of-turn token, a stop string, the budget or a full
   context; s->last_end says which) and add it to the conversation.
   Returns 0; 1 when the conversation does not fit in the context (nothing
   changed, a message in err; with cfg->truncate the oldest turns are
   dropped, then the oldest tokens, instead); -1 on an error. */
int chat_turn(chat_session *s, const char *user, size_t len, FILE *out, char *err, size_t errlen);

/* The interactive loop: a "> " prompt on msg, one line per message from in
   (a line ending in '\' continues on the next), replies on out.  Commands:
   /reset, /exit (or EOF).  Returns 0, or -1 after an error. */
int chat_interactive(chat_session *s, FILE *in, FILE *out, FILE *msg);

#endif
