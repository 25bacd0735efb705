/* top_k: PROCESS, keep exactly the k best candidates (ties -> lower id), sorted
   best first.  Quickselect (O(n)) then a heap sort of the k survivors: no
   full-vocabulary sort, no allocation. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "picolm/plugin.h"
#include "sampler_common.h"

static int topk_create(const picolm_sampler_init *init, void **state, char *err, size_t errlen) {
    long k = 40;
    if (param_int(init, "top_k", 0, 1L << 30, &k, err, errlen)) return 1;
    size_t *s = calloc(1, sizeof *s);
    if (!s) { snprintf(err, errlen, "top_k: out of memory"); return 1; }
    *s = (size_t)k;
    *state = s;
    return 0;
}

static void topk_destroy(void *state) { free(state); }

static int topk_apply(void *state, picolm_candidates *c, char *err, size_t errlen) {
    const size_t k = *(const size_t *)state;
    if (!c->size) { snprintf(err, errlen, "top_k: no candidates left"); return 1; }
    if (k == 0 || k >= c->size) return 0; /* 0 = disabled */
    if (!c->sorted) {
        select_best(c->data, c->size, k);
        sort_best_first(c->data, k);
        c->sorted = 1;
    }
    c->size = k;
    c->has_p = 0;
    return 0;
}

static const char *const topk_keys[] = {"top_k", NULL};

static const picolm_sampler_vtable topk_vtable = {
    .struct_size = sizeof(picolm_sampler_vtable),
    .role = PICOLM_SAMPLER_PROCESS,
    .param_keys = topk_keys,
    .create = topk_create,
    .destroy = topk_destroy,
    .apply = topk_apply,
};

static const picolm_plugin topk_desc = {
    .abi_version = PICOLM_ABI_VERSION,
    .struct_size = sizeof(picolm_plugin),
    .kind = PICOLM_KIND_SAMPLER,
    .name = "top_k",
    .version = "1.0",
    .description = "keep the k most likely tokens",
    .vtable = &topk_vtable,
};
PICOLM_PLUGIN_NOTE(PICOLM_KIND_SAMPLER, "top_k", 0);

PICOLM_EXPORT const picolm_plugin *picolm_plugin_v1(void) { return &topk_desc; }
