/*
 * A request made ready for the scheduler, on the HTTP thread that received
 * it: its settings, the prompt rendered and tokenized, the sampler chain
 * built and fed the prompt.  The step loop then only seats it, so a long
 * prompt (megabytes to tokenize) or an expensive sampler never stalls the
 * sequences being generated.
 */
#ifndef PICOLM_SERVER_PREP_H
#define PICOLM_SERVER_PREP_H
#include "config.h"
#include "job.h"
#include "picolm/picolm.h"

/* What preparing needs: read-only once the server runs. */
typedef struct prep_env {
    picolm_model *m;
    const picolm_config *cfg;   /* defaults for what a request leaves out */
    const char *chat_tmpl;      /* the chat template's name */
    int n_ctx;
    int max_prompt_tokens;      /* 0: the context */
    int kv_positions;           /* what the KV pool holds */
    const picolm_tool_format *tool_fmt; /* how the template writes tool calls */
} prep_env;

typedef struct prepared {
    picolm_config *cfg;         /* the request's settings */
    int32_t *toks;              /* the prompt */
    int n;
    picolm_sampler *smp;        /* fed the prompt */
} prepared;

/* Prepare j (j->prep, j->seed): 0, or -1 with ae filled (a 400 or 500). */
int prep_request(const prep_env *env, job *j, api_error *ae);
/* The scheduler takes j's preparation over (NULL when it has none). */
prepared *prep_take(job *j);
void prep_free(prepared *p);
#endif
