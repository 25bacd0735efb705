/*
 * picolm --tools / --messages: one reply to a conversation with tools,
 * printed as one line of JSON (a call, or text).  See docs/agents.md.
 */
#ifndef PICOLM_CALLS_H
#define PICOLM_CALLS_H
#include <stddef.h>

#include "config.h"
#include "picolm/picolm.h"

/* 1 when cfg asks for it (--tools or --messages). */
int calls_mode(const picolm_config *cfg);

/* The conversation (--messages, then a user message of prompt[0..len)
   when there is one) with cfg's tools, one reply: a CLI exit status
   (messages on stderr, the reply on stdout). */
int calls_run(picolm_model *m, const picolm_config *cfg, const char *prompt, size_t len, double load_s);
#endif
