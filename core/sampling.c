/* The sampling chain: see sampling.h. */
#include "sampling.h"
#include "util.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_STAGES 16

const char *const SAMPLING_CORE_KEYS[] = {"chain", NULL};

/* the typed config fields, passed to every plugin as parameters */
static const char *const TYPED_KEYS[] = {"temperature", "top_p", "top_k", "min_p", "repeat_penalty",
                                         "freq_penalty", "presence_penalty", "penalty_last_n"};
#define N_TYPED (sizeof TYPED_KEYS / sizeof TYPED_KEYS[0])

typedef struct stage {
    const picolm_sampler_vtable *vt;
    void *state;
    void (*accept)(void *, int32_t); /* NULL when absent or the vtable is too old */
    void (*reset)(void *);
    char name[64];
    char detail[96];                 /* for sampling_describe */
} stage;

struct sampling {
    int n;
    stage st[MAX_STAGES];
    int32_t n_vocab;
    picolm_token_data *cand; /* n_vocab entries, allocated once */
    int timing;              /* sampling_timing: CPU seconds per step in t[] */
    double t[MAX_STAGES + 1];
};

static int has_key(const char *const *keys, const char *key) {
    for (; keys && *keys; keys++)
        if (!strcmp(*keys, key)) return 1;
    return 0;
}

static const picolm_sampler_vtable *sampler_vt(const pl_plugin *p) {
    return p && p->ok && p->desc && p->kind == PICOLM_KIND_SAMPLER ? p->desc->vtable : NULL;
}

static void list_samplers(const pl_registry *reg, char *buf, size_t n) {
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; i < reg->n && used < n; i++)
        if (sampler_vt(&reg->items[i]))
            used += (size_t)snprintf(buf + used, n - used, "%s%s", used ? ", " : "", reg->items[i].name);
    if (!buf[0]) snprintf(buf, n, "none");
}

int sampling_check_params(const pl_registry *reg, const picolm_config *cfg, char *err, size_t errlen) {
    for (int i = 0; i < cfg->n_params; i++) {
        const picolm_config_param *cp = &cfg->params[i];
        if (has_key(SAMPLING_CORE_KEYS, cp->key)) continue;
        int known = 0;
        for (int k = 0; k < reg->n && !known; k++) {
            const picolm_sampler_vtable *vt = sampler_vt(&reg->items[k]);
            known = vt && has_key(vt->param_keys, cp->key);
        }
        if (known) continue;
        char keys[512];
        size_t used = 0;
        keys[0] = 0;
        for (int k = 0; k < reg->n && used < sizeof keys; k++) {
            const picolm_sampler_vtable *vt = sampler_vt(&reg->items[k]);
            for (const char *const *p = vt ? vt->param_keys : NULL; p && *p && used < sizeof keys; p++)
                used += (size_t)snprintf(keys + used, sizeof keys - used, "%s%s", used ? ", " : "", *p);
        }
        char where[300];
        char avail[512];
        list_samplers(reg, avail, sizeof avail);
        if (!strcmp(avail, "none")) return pl_fail(err, errlen, "no sampler plugin was found (plugin dirs searched: %s), so sampler key '%s' has no "
                                     "sampler to take it", reg->searched[0] ? reg->searched : "none", cp->key);
        if (cp->line > 0) snprintf(where, sizeof where, "%s:%d", cp->file, cp->line);
        else snprintf(where, sizeof where, "%s", cp->file[0] ? cp->file : "built-in default");
        return pl_fail(err, errlen, "%s: unknown sampler key '%s' (known: %s)", where, cp->key, keys[0] ? keys : "none");
    }
    return 0;
}

static int penalties_active(const picolm_config *c) {
    return c->penalty_last_n != 0 && (c->repeat_penalty != 1.0f || c->freq_penalty != 0.0f || c->presence_penalty != 0.0f);
}

/* Split the chain into names (trimmed); "auto" / "" expands. */
static int chain_names(const picolm_config *c, char names[MAX_STAGES][64], char *err, size_t errlen) {
    char buf[sizeof c->sampler_chain];
    snprintf(buf, sizeof buf, "%s", c->sampler_chain);
    int n = 0, has_json = 0, is_auto = 1;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (isspace((unsigned char)*tok)) tok++;
        char *e = tok + strlen(tok);
        while (e > tok && isspace((unsigned char)e[-1])) *--e = 0;
        if (!*tok) continue;
        if (!strcmp(tok, "auto")) continue;
        is_auto = 0;
        if (n == MAX_STAGES - 1) return pl_fail(err, errlen, "sampler chain '%s': too many stages (max %d)", c->sampler_chain, MAX_STAGES - 1);
        snprintf(names[n++], 64, "%s", tok);
        has_json |= !strcmp(tok, "json");
    }
    if (!is_auto) {
        if (c->json_mode && !has_json) { /* --json with a hand-written chain: constrain first */
            memmove(names[1], names[0], (size_t)n * sizeof names[0]);
            snprintf(names[0], 64, "json");
            n++;
        }
        return n;
    }
#define ADD(s) snprintf(names[n++], 64, "%s", s)
    n = 0;
    if (c->json_mode) ADD("json");
    if (penalties_active(c)) ADD("penalties");
    if (c->temperature <= 0) {
        ADD("greedy");
    } else {
        if (c->top_k > 0) ADD("top_k");
        ADD("temperature");
        if (c->top_p < 1.0f) ADD("top_p");
        if (c->min_p > 0) ADD("min_p");
        ADD("dist");
    }
#undef ADD
    return n;
}

static void stage_detail(stage *s, const picolm_config *c) {
    const char *n = s->name;
    if (!strcmp(n, "top_k")) snprintf(s->detail, sizeof s->detail, "(%d)", c->top_k);
    else if (!strcmp(n, "top_p")) snprintf(s->detail, sizeof s->detail, "(%g)", (double)c->top_p);
    else if (!strcmp(n, "min_p")) snprintf(s->detail, sizeof s->detail, "(%g)", (double)c->min_p);
    else if (!strcmp(n, "temperature")) snprintf(s->detail, sizeof s->detail, "(%g)", (double)c->temperature);
    else if (!strcmp(n, "dist")) snprintf(s->detail, sizeof s->detail, "(seed %llu)", (unsigned long long)c->seed);
    else if (!strcmp(n, "penalties"))
        snprintf(s->detail, sizeof s->detail, "(repeat %g, freq %g, presence %g, last %d)", (double)c->repeat_penalty,
                 (double)c->freq_penalty, (double)c->presence_penalty, c->penalty_last_n);
    else s->detail[0] = 0;
}

int sampling_build(sampling **out, const pl_registry *reg, const picolm_config *cfg,
                   const picolm_vocab *vocab, char *err, size_t errlen) {
    *out = NULL;
    if (!vocab || vocab->n_vocab <= 0) return pl_fail(err, errlen, "sampler: no vocabulary");
    if (sampling_check_params(reg, cfg, err, errlen)) return -1;

    char names[MAX_STAGES][64];
    const int n = chain_names(cfg, names, err, errlen);
    if (n < 0) return -1;
    if (n == 0) return pl_fail(err, errlen, "sampler chain '%s' is empty", cfg->sampler_chain);

    /* Parameters: typed (effective) values first-class, then the foreign keys. */
    char typed[N_TYPED][32];
    snprintf(typed[0], 32, "%.9g", (double)cfg->temperature);
    snprintf(typed[1], 32, "%.9g", (double)cfg->top_p);
    snprintf(typed[2], 32, "%d", cfg->top_k);
    snprintf(typed[3], 32, "%.9g", (double)cfg->min_p);
    snprintf(typed[4], 32, "%.9g", (double)cfg->repeat_penalty);
    snprintf(typed[5], 32, "%.9g", (double)cfg->freq_penalty);
    snprintf(typed[6], 32, "%.9g", (double)cfg->presence_penalty);
    snprintf(typed[7], 32, "%d", cfg->penalty_last_n);
    picolm_param params[N_TYPED + PICOLM_MAX_PARAMS];
    int np = 0;
    for (int i = 0; i < cfg->n_params && i < PICOLM_MAX_PARAMS; i++) {
        int dup = 0;
        for (size_t k = 0; k < N_TYPED; k++) dup |= !strcmp(cfg->params[i].key, TYPED_KEYS[k]);
        if (!dup) params[np++] = (picolm_param){cfg->params[i].key, cfg->params[i].value};
    }
    for (size_t k = 0; k < N_TYPED; k++) params[np++] = (picolm_param){TYPED_KEYS[k], typed[k]};

    sampling *s = calloc(1, sizeof *s);
    if (!s) return pl_fail(err, errlen, "sampler: out of memory");
    s->n_vocab = vocab->n_vocab;
    s->cand = malloc((size_t)vocab->n_vocab * sizeof *s->cand);
    if (!s->cand) { snprintf(err, errlen, "sampler: out of memory"); sampling_free(s); return -1; }

    const picolm_sampler_init init = {
        .struct_size = sizeof(picolm_sampler_init),
        .host = &reg->host,
        .vocab = vocab,
        .params = params,
        .n_params = np,
        .seed = cfg->seed,
    };
    for (int i = 0; i < n; i++) {
        const pl_plugin *p = registry_find(reg, PICOLM_KIND_SAMPLER, names[i]);
        if (!p) {
            char avail[1024];
            list_samplers(reg, avail, sizeof avail);
            const char *why = NULL;
            for (int k = 0; k < reg->n; k++)
                if (reg->items[k].kind == PICOLM_KIND_SAMPLER && !strcmp(reg->items[k].name, names[i]) && reg->items[k].why[0])
                    why = reg->items[k].why;
            if (why)
                snprintf(err, errlen, "sampler '%s' was not loaded (%s); available samplers: %s", names[i], why, avail);
            else if (!strcmp(avail, "none"))
                snprintf(err, errlen, "no sampler plugin was found (plugin dirs searched: %s), so sampler '%s' cannot run",
                         reg->searched[0] ? reg->searched : "none", names[i]);
            else
                snprintf(err, errlen, "unknown sampler '%s' in chain '%s'; available samplers: %s (plugin dirs searched: %s)",
                         names[i], cfg->sampler_chain, avail, reg->searched[0] ? reg->searched : "none");
            sampling_free(s);
            return -1;
        }
        const picolm_sampler_vtable *vt = sampler_vt(p);
        const int last = i == n - 1;
        if (vt->role == PICOLM_SAMPLER_SELECT && !last) {
            snprintf(err, errlen, "sampler chain: '%s' picks the token, so it must be the last stage", names[i]);
            sampling_free(s);
            return -1;
        }
        if (vt->role != PICOLM_SAMPLER_SELECT && last) {
            snprintf(err, errlen, "sampler chain: the last stage '%s' does not pick a token; end the chain with greedy or dist", names[i]);
            sampling_free(s);
            return -1;
        }
        stage *st = &s->st[s->n];
        memcpy(st->name, names[i], sizeof st->name); /* both 64 bytes, NUL-terminated */
        st->vt = vt;
        const size_t fn = sizeof(void (*)(void));
        st->accept = vt->struct_size >= offsetof(picolm_sampler_vtable, accept) + fn ? vt->accept : NULL;
        st->reset = vt->struct_size >= offsetof(picolm_sampler_vtable, reset) + fn ? vt->reset : NULL;
        char e[256] = "";
        if (vt->create(&init, &st->state, e, sizeof e)) {
            snprintf(err, errlen, "sampler '%s': %s", names[i], e[0] ? e : "create failed");
            sampling_free(s);
            return -1;
        }
        stage_detail(st, cfg);
        s->n++;
    }
    *out = s;
    return 0;
}

static double thread_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static int run_stage(sampling *s, int i, picolm_candidates *c, char *err, size_t errlen) {
    char e[256] = "";
    if (s->st[i].vt->apply(s->st[i].state, c, e, sizeof e))
        return pl_fail(err, errlen, "sampler '%s': %s", s->st[i].name, e[0] ? e : "failed");
    if (c->size > (size_t)s->n_vocab) return pl_fail(err, errlen, "sampler '%s' grew the candidate list", s->st[i].name);
    return 0;
}

int sampling_sample(sampling *s, const float *logits, int32_t n_remaining, int32_t *token,
                    char *err, size_t errlen) {
    double t0 = s->timing ? thread_seconds() : 0;
    for (int32_t i = 0; i < s->n_vocab; i++) s->cand[i] = (picolm_token_data){i, logits[i], 0.0f};
    picolm_candidates c = {s->cand, (size_t)s->n_vocab, 0, 0, -1, n_remaining};
    for (int i = 0; i < s->n; i++) {
        if (s->timing) { /* t[0]: the candidate list, t[1 + i]: stage i */
            const double t1 = thread_seconds();
            s->t[i] += t1 - t0;
            t0 = t1;
        }
        if (run_stage(s, i, &c, err, errlen)) return -1;
    }
    if (s->timing) s->t[s->n] += thread_seconds() - t0;
    if (c.selected < 0 || c.selected >= s->n_vocab) {
        return pl_fail(err, errlen, "sampler '%s' selected no valid token (%d)", s->st[s->n - 1].name, (int)c.selected);
    }
    *token = c.selected;
    return 0;
}

void sampling_timing(sampling *s, int on) {
    s->timing = on;
    memset(s->t, 0, sizeof s->t);
}

double sampling_stage_seconds(const sampling *s, int i) { return i >= -1 && i < s->n ? s->t[i + 1] : 0; }

void sampling_accept(sampling *s, int32_t token) {
    for (int i = 0; i < s->n; i++)
        if (s->st[i].accept) s->st[i].accept(s->st[i].state, token);
}

void sampling_reset(sampling *s) {
    for (int i = 0; i < s->n; i++)
        if (s->st[i].reset) s->st[i].reset(s->st[i].state);
}

void sampling_free(sampling *s) {
    if (!s) return;
    for (int i = 0; i < s->n; i++)
        if (s->st[i].vt->destroy) s->st[i].vt->destroy(s->st[i].state);
    free(s->cand);
    free(s);
}

void sampling_describe(const sampling *s, char *buf, size_t n) {
    size_t used = 0;
    if (!n) return;
    buf[0] = 0;
    for (int i = 0; i < s->n && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s%s", i ? " -> " : "", s->st[i].name, s->st[i].detail);
}

int sampling_n_stages(const sampling *s) { return s->n; }
const char *sampling_stage_name(const sampling *s, int i) { return i >= 0 && i < s->n ? s->st[i].name : NULL; }
