/*
 * Chat mode (--chat): a multi-turn session that keeps its KV cache across
 * turns, so each turn prefills only what is new.  The templates are the
 * library's (picolm_chat_render).
 */
#ifndef PICOLM_CHAT_H
#define PICOLM_CHAT_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "config.h"
#include "generate.h"
#include "picolm/picolm.h"

typedef struct chat_session {
    picolm_model *m;
    picolm_config *cfg;          /* copy of the caller's, plus the template's stop strings */
    const char *tmpl;            /* the template's name (picolm_chat_template) */
    picolm_context *c;
    picolm_sampler *smp;
    int32_t end_ids[4];          /* tokens that end a reply besides EOS */
    int n_end_ids;
    int32_t *hist;               /* the tokens in the KV cache, in order */
    int n_hist;                  /* == picolm_n_past(c) */
    picolm_chat_msg *msgs;       /* the conversation; contents are malloc'd */
    int n_msgs, cap_msgs;
    int turns;                   /* completed turns since the last reset */
    int last_end;                /* GEN_END_* of the last reply */
    gen_stats st;                /* of the last turn */
} chat_session;

/* 0, or -1 with a message (unknown template, no memory...). */
int chat_session_open(chat_session *s, picolm_model *m, const picolm_config *cfg, char *err, size_t errlen);
void chat_session_close(chat_session *s);
/* Forget the conversation (KV cache, messages and sampler history). */
void chat_session_reset(chat_session *s);

/* One exchange: add the user's message, render the whole conversation,
   prefill what the KV cache does not hold yet, stream the reply to out
   (stop at EOS, the end-of-turn token, a stop string, the budget or a full
   context; s->last_end says which) and add it to the conversation.
   Returns 0; 1 when the conversation does not fit in the context (nothing
   changed, a message in err; with cfg->truncate the oldest turns are
   dropped, then the oldest tokens, instead); -1 on an error. */
int chat_session_turn(chat_session *s, const char *user, size_t len, FILE *out, char *err, size_t errlen);

/* The interactive loop: a "> " prompt on msg, one line per message from in
   (a line ending in '\' continues on the next), replies on out.  Commands:
   /reset, /exit (or EOF).  Returns 0, or -1 after an error. */
int chat_session_interactive(chat_session *s, FILE *in, FILE *out, FILE *msg);

#endif
