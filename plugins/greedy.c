/* greedy: SELECT the most likely candidate (argmax; ties -> lowest id). */
#include <stdio.h>

#include "picolm/plugin.h"

static int greedy_create(const picolm_sampler_init *init, void **state, char *err, size_t errlen) {
    (void)init; (void)err; (void)errlen;
    *state = NULL; /* stateless */
    return 0;
}

static int greedy_apply(void *state, picolm_candidates *c, char *err, size_t errlen) {
    (void)state;
    if (!c->size) { snprintf(err, errlen, "greedy: no candidates left"); return 1; }
    size_t best = 0;
    for (size_t i = 1; i < c->size; i++) {
        const picolm_token_data *a = &c->data[i], *b = &c->data[best];
        if (a->logit > b->logit || (a->logit == b->logit && a->id < b->id)) best = i;
    }
    c->selected = c->data[best].id;
    return 0;
}

PICOLM_DEFINE_SAMPLER("greedy", "1.0", "pick the most likely token (argmax, ties -> lowest id)",
                      PICOLM_SAMPLER_SELECT,
                      .create = greedy_create, .apply = greedy_apply);
