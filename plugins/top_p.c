/* top_p: PROCESS, nucleus sampling (picoLM's -k flag): keep the smallest set
   of best candidates whose probability mass reaches top_p, sorted best first.
   Only the nucleus gets sorted: chunks of growing size are quickselected from
   the rest and sorted until the mass is reached (O(n) per chunk, chunks
   double), so a peaked distribution costs one linear pass.  No allocation. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "picolm/plugin.h"
#include "sampler_common.h"

static int topp_create(const picolm_sampler_init *init, void **state, char *err, size_t errlen) {
    double p = 0.9;
    const char *v = find_param(init, "top_p");
    if (v) {
        char *end;
        p = strtod(v, &end);
        while (isspace((unsigned char)*end)) end++;
        if (end == v || *end || !(p >= 0 && p <= 1)) { snprintf(err, errlen, "top_p: '%s' is not a number in [0, 1]", v); return 1; }
    }
    double *s = calloc(1, sizeof *s);
    if (!s) { snprintf(err, errlen, "top_p: out of memory"); return 1; }
    *s = p;
    *state = s;
    return 0;
}

static void topp_destroy(void *state) { free(state); }

static int topp_apply(void *state, picolm_candidates *c, char *err, size_t errlen) {
    const double p = *(const double *)state;
    if (!c->size) { snprintf(err, errlen, "top_p: no candidates left"); return 1; }
    if (p >= 1.0) return 0;
    picolm_token_data *d = c->data;
    const size_t n = c->size;
    float max = -INFINITY;
    for (size_t i = 0; i < n; i++)
        if (d[i].logit > max) max = d[i].logit;
    if (!(max > -INFINITY)) return 0;
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += d[i].logit > -INFINITY ? exp((double)d[i].logit - max) : 0.0;
    const double target = p * sum;
    double cum = 0;
    size_t done = 0, chunk = c->sorted ? n : 64;
    while (done < n) {
        size_t end = done + chunk < n ? done + chunk : n;
        if (!c->sorted) {
            select_best(d + done, n - done, end - done);
            sort_best_first(d + done, end - done);
        }
        for (size_t i = done; i < end; i++) {
            cum += d[i].logit > -INFINITY ? exp((double)d[i].logit - max) : 0.0;
            if (cum >= target) {
                c->size = i + 1;
                c->sorted = 1;
                c->has_p = 0;
                return 0;
            }
        }
        done = end;
        chunk *= 2;
    }
    c->sorted = 1; /* rounding kept everything */
    return 0;
}

static const char *const topp_keys[] = {"top_p", NULL};

static const picolm_sampler_vtable topp_vtable = {
    .struct_size = sizeof(picolm_sampler_vtable),
    .role = PICOLM_SAMPLER_PROCESS,
    .param_keys = topp_keys,
    .create = topp_create,
    .destroy = topp_destroy,
    .apply = topp_apply,
};

static const picolm_plugin topp_desc = {
    .abi_version = PICOLM_ABI_VERSION,
    .struct_size = sizeof(picolm_plugin),
    .kind = PICOLM_KIND_SAMPLER,
    .name = "top_p",
    .version = "1.0",
    .description = "nucleus: keep the most likely tokens up to probability mass p (picoLM's -k)",
    .vtable = &topp_vtable,
};
PICOLM_PLUGIN_NOTE(PICOLM_KIND_SAMPLER, "top_p", 0);

PICOLM_EXPORT const picolm_plugin *picolm_plugin_v1(void) { return &topp_desc; }
