/*
 * Chat mode (--chat): chat templates and a multi-turn session that keeps
 * its KV cache across turns, so each turn prefills only its own tokens.
 *
 * Templates are recognised, not interpreted: the model's Jinja
 * tokenizer.chat_template is matched by distinctive substrings
 * ("<|im_start|>" ChatML, "<|user|>" Zephyr/TinyLlama, "[INST]" Llama-2).
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

enum chat_kind { CHAT_ZEPHYR = 0, CHAT_CHATML, CHAT_LLAMA2, CHAT_N_KINDS };

const char *chat_kind_name(int kind);
/* "zephyr" / "chatml" / "llama2" (a few aliases too) -> kind; -1 unknown. */
int chat_kind_from_name(const char *name);
/* A Jinja template's kind by its distinctive substrings; -1 unknown. */
int chat_kind_detect(const char *tmpl, size_t len);

/* The template for name ("auto" or a kind name) and the model's metadata:
   auto takes the model's tokenizer.chat_template, and zephyr when the model
   has none (a note in note, "" otherwise).  An unrecognised model template
   or an unknown name is an error (-1 with a message in err). */
int chat_kind_resolve(const char *name, const gguf_file *f, int *kind, char *note, size_t notelen, char *err, size_t errlen);

/* Text of one turn to append to the conversation, ending with the
   assistant's header.  first: the conversation starts here (system prompt,
   if any; BOS is the tokenizer's business); otherwise the text first closes
   the previous reply.  bos/eos: the vocabulary's texts of those tokens.
   Returns a malloc'd NUL-terminated string (NULL when out of memory). */
char *chat_format_turn(int kind, const char *bos, const char *eos, const char *system, const char *user, size_t ulen, int first);

typedef struct chat_session {
    engine *e;
    picolm_config *cfg;          /* copy of the caller's, plus the template's stop strings */
    int kind;
    llama_ctx c;
    sampling *smp;
    char bos[64], eos[64];
    int32_t end_ids[4];          /* tokens that end a reply besides EOS */
    int n_end_ids;
    int32_t *hist;               /* the tokens in the KV cache, in order */
    int n_hist;                  /* == c.n_past */
    int turns;                   /* completed turns since the last reset */
    int last_end;                /* GEN_END_* of the last reply */
    gen_stats st;                /* of the last turn */
} chat_session;

/* 0, or -1 with a message (unknown template, no memory...). */
int chat_open(chat_session *s, engine *e, const picolm_config *cfg, char *err, size_t errlen);
void chat_close(chat_session *s);
/* Forget the conversation (KV cache and sampler history). */
void chat_reset(chat_session *s);

/* One exchange: format and prefill the user's message, stream the reply to
   out (stop at EOS, the end-of-turn token, a stop string, the budget or a
   full context; s->last_end says which).  Returns 0; 1 when the message
   does not fit in the room left in the context (nothing changed, a message
   in err); -1 on an error. */
int chat_turn(chat_session *s, const char *user, size_t len, FILE *out, char *err, size_t errlen);

/* The interactive loop: a "> " prompt on msg, one line per message from in
   (a line ending in '\' continues on the next), replies on out.  Commands:
   /reset, /exit (or EOF).  Returns 0, or -1 after an error. */
int chat_interactive(chat_session *s, FILE *in, FILE *out, FILE *msg);

#endif
