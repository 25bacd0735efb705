/* The sampling chain: see sampling.h. */
#include "sampling.h"
#include "util.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_STAGES 16
#define MAX_PARAMS 96

typedef struct stage {
    const picolm_sampler_vtable *vt;
    void *state;
    void (*accept)(void *, int32_t); /* NULL when absent or the vtable is too old */
    void (*reset)(void *);
    /* appended members, NULL when absent or the vtable is too old */
    float (*logit_scale)(const void *);
    int (*apply_logits)(void *, const float *, float, picolm_candidates *, char *, size_t);
    double (*draw)(void *, int);
    int (*apply_select)(void *, const float *, float, double, picolm_candidates *, char *, size_t);
    int32_t (*min_budget)(const void *);
    char name[64];
    char detail[96];                 /* for sampling_describe */
} stage;

struct sampling {
    int n;
    stage st[MAX_STAGES];
    int32_t n_vocab;
    picolm_token_data *cand; /* n_vocab entries, allocated once */
    int timing;              /* sampling_timing: CPU seconds per step in t[] */
    int direct;              /* use logit_scale / apply_logits (sampling_direct) */
    int fused;               /* and draw / apply_select (sampling_fused) */
    double t[MAX_STAGES + 1];
};

static const picolm_sampler_vtable *sampler_vt(const pl_plugin *p) {
    return p && p->ok && p->desc && p->kind == PICOLM_KIND_SAMPLER ? p->desc->vtable : NULL;
}

static const picolm_param_desc *vt_param(const picolm_sampler_vtable *vt, const char *key) {
    for (const picolm_param_desc *d = vt ? vt->params : NULL; d && d->key; d++)
        if (!strcmp(d->key, key)) return d;
    return NULL;
}

const picolm_param_desc *sampling_find_param(const pl_registry *reg, const char *key, const char **sampler) {
    for (int k = 0; k < reg->n; k++) {
        const picolm_param_desc *d = vt_param(sampler_vt(&reg->items[k]), key);
        if (d) {
            if (sampler) *sampler = reg->items[k].name;
            return d;
        }
    }
    return NULL;
}

static void list_samplers(const pl_registry *reg, char *buf, size_t n) {
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; i < reg->n && used < n; i++)
        if (sampler_vt(&reg->items[i]))
            used += (size_t)snprintf(buf + used, n - used, "%s%s", used ? ", " : "", reg->items[i].name);
    if (!buf[0]) snprintf(buf, n, "none");
}

/* A value as its declaration says: 0, or -1 when malformed or out of range
   (text is taken as written: *out = 0). */
static int parse_value(const picolm_param_desc *d, const char *v, double *out) {
    *out = 0;
    if (d->type == PICOLM_PARAM_STRING) return 0;
    char *end;
    const double x = d->type == PICOLM_PARAM_INT ? (double)strtoll(v, &end, 10) : strtod(v, &end);
    while (isspace((unsigned char)*end)) end++;
    if (end == v || *end || !isfinite(x)) return -1;
    /* floats compare as floats: a bound written as 0.01 admits 0.01f */
    if (d->type == PICOLM_PARAM_FLOAT ? (float)x < (float)d->lo || (float)x > (float)d->hi : x < d->lo || x > d->hi) return -1;
    *out = x;
    return 0;
}

int sampling_check_params(const pl_registry *reg, const sampling_param *params, int n, char *err, size_t errlen) {
    for (int i = 0; i < n; i++) {
        const sampling_param *sp = &params[i];
        const picolm_param_desc *d = sampling_find_param(reg, sp->key, NULL);
        double x;
        if (d && !parse_value(d, sp->value, &x)) continue;
        if (d)
            return pl_fail(err, errlen, "%s: sampler key '%s': '%s' is not %s in [%g, %g]", sp->where, sp->key, sp->value,
                           d->type == PICOLM_PARAM_INT ? "an integer" : "a number", d->lo, d->hi);
        char avail[512];
        list_samplers(reg, avail, sizeof avail);
        if (!strcmp(avail, "none"))
            return pl_fail(err, errlen, "no sampler plugin was found (plugin dirs searched: %s), so sampler key '%s' has no "
                                        "sampler to take it", reg->searched[0] ? reg->searched : "none", sp->key);
        char keys[512];
        size_t used = 0;
        keys[0] = 0;
        for (int k = 0; k < reg->n && used < sizeof keys; k++) {
            const picolm_sampler_vtable *vt = sampler_vt(&reg->items[k]);
            for (const picolm_param_desc *p = vt ? vt->params : NULL; p && p->key && used < sizeof keys; p++)
                used += (size_t)snprintf(keys + used, sizeof keys - used, "%s%s", used ? ", " : "", p->key);
        }
        return pl_fail(err, errlen, "%s: unknown sampler key '%s' (known: %s)", sp->where, sp->key, keys[0] ? keys : "none");
    }
    return 0;
}

/* Split the chain into names (trimmed, empty ones skipped). */
static int chain_names(const char *chain, char names[MAX_STAGES][64], char *err, size_t errlen) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", chain ? chain : "");
    int n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (isspace((unsigned char)*tok)) tok++;
        char *e = tok + strlen(tok);
        while (e > tok && isspace((unsigned char)e[-1])) *--e = 0;
        if (!*tok) continue;
        if (n == MAX_STAGES - 1) return pl_fail(err, errlen, "sampler chain '%s': too many stages (max %d)", chain, MAX_STAGES - 1);
        snprintf(names[n++], 64, "%s", tok);
    }
    return n;
}

/* The effective value of key: the last setting, else NULL. */
static const char *setting(const picolm_param *p, int n, const char *key) {
    const char *v = NULL;
    for (int i = 0; i < n; i++)
        if (!strcmp(p[i].key, key)) v = p[i].value;
    return v;
}

/* A text value in a description: its size, and its start on one line. */
static size_t text_detail(char *buf, size_t n, const char *v) {
    char head[24];
    size_t k = 0;
    for (const char *p = v; *p && k + 4 < sizeof head; p++)
        if (!isspace((unsigned char)*p) || (k && head[k - 1] != ' ')) head[k++] = isspace((unsigned char)*p) ? ' ' : *p;
    head[k] = 0;
    const size_t len = strlen(v);
    return (size_t)snprintf(buf, n, "%s%s (%zu bytes)", head, k < len ? "..." : "", len);
}

/* "(v)", "(label v, label v)" and "seed N" from the stage's declarations. */
static void stage_detail(stage *s, const picolm_param *p, int np, uint64_t seed) {
    size_t used = 0;
    s->detail[0] = 0;
    for (const picolm_param_desc *d = s->vt->params; d && d->key && used < sizeof s->detail; d++) {
        const char *v = setting(p, np, d->key);
        double x = 0;
        if (parse_value(d, v ? v : d->def, &x)) x = 0;
        used += (size_t)snprintf(s->detail + used, sizeof s->detail - used, "%s%s%s", used ? ", " : "(",
                                 d->label ? d->label : "", d->label ? " " : "");
        if (used >= sizeof s->detail) break;
        if (d->type == PICOLM_PARAM_STRING) used += text_detail(s->detail + used, sizeof s->detail - used, v ? v : d->def);
        else if (d->type == PICOLM_PARAM_INT) used += (size_t)snprintf(s->detail + used, sizeof s->detail - used, "%lld", (long long)x);
        else used += (size_t)snprintf(s->detail + used, sizeof s->detail - used, "%g", (double)(float)x);
    }
    if ((s->vt->flags & PICOLM_SAMPLER_SEEDED) && used < sizeof s->detail)
        used += (size_t)snprintf(s->detail + used, sizeof s->detail - used, "%sseed %llu", used ? ", " : "(", (unsigned long long)seed);
    if (used && used + 1 < sizeof s->detail) snprintf(s->detail + used, sizeof s->detail - used, ")");
}

static int chain_error(const pl_registry *reg, const char *name, const char *chain, char *err, size_t errlen) {
    char avail[1024];
    list_samplers(reg, avail, sizeof avail);
    const char *why = NULL;
    for (int k = 0; k < reg->n; k++)
        if (reg->items[k].kind == PICOLM_KIND_SAMPLER && !strcmp(reg->items[k].name, name) && reg->items[k].why[0])
            why = reg->items[k].why;
    if (why) return pl_fail(err, errlen, "sampler '%s' was not loaded (%s); available samplers: %s", name, why, avail);
    if (!strcmp(avail, "none"))
        return pl_fail(err, errlen, "no sampler plugin was found (plugin dirs searched: %s), so sampler '%s' cannot run",
                       reg->searched[0] ? reg->searched : "none", name);
    return pl_fail(err, errlen, "unknown sampler '%s' in chain '%s'; available samplers: %s (plugin dirs searched: %s)", name,
                   chain, avail, reg->searched[0] ? reg->searched : "none");
}

int build_sampling(sampling **out, const pl_registry *reg, const sampling_settings *set, const picolm_vocab *vocab,
                   char *err, size_t errlen) {
    *out = NULL;
    if (!vocab || vocab->n_vocab <= 0) return pl_fail(err, errlen, "sampler: no vocabulary");
    if (set->n_params > MAX_PARAMS / 2) return pl_fail(err, errlen, "sampler: too many parameters (max %d)", MAX_PARAMS / 2);
    if (sampling_check_params(reg, set->params, set->n_params, err, errlen)) return -1;

    char names[MAX_STAGES][64];
    const int n = chain_names(set->chain, names, err, errlen);
    if (n < 0) return -1;
    if (n == 0) return pl_fail(err, errlen, "sampler chain '%s' is empty", set->chain ? set->chain : "");
    const pl_plugin *plug[MAX_STAGES];
    for (int i = 0; i < n; i++)
        if (!(plug[i] = registry_find(reg, PICOLM_KIND_SAMPLER, names[i]))) return chain_error(reg, names[i], set->chain, err, errlen);

    /* The settings, then the declared defaults of the stages' keys not set. */
    picolm_param params[MAX_PARAMS];
    int np = 0;
    for (int i = 0; i < set->n_params; i++) params[np++] = (picolm_param){set->params[i].key, set->params[i].value};
    for (int i = 0; i < n; i++)
        for (const picolm_param_desc *d = sampler_vt(plug[i])->params; d && d->key && np < MAX_PARAMS; d++)
            if (!setting(params, np, d->key)) params[np++] = (picolm_param){d->key, d->def};

    sampling *s = calloc(1, sizeof *s);
    if (!s) return pl_fail(err, errlen, "sampler: out of memory");
    s->n_vocab = vocab->n_vocab;
    s->direct = s->fused = 1;
    s->cand = malloc((size_t)vocab->n_vocab * sizeof *s->cand);
    if (!s->cand) { snprintf(err, errlen, "sampler: out of memory"); free_sampling(s); return -1; }

    const picolm_sampler_init init = {
        .struct_size = sizeof(picolm_sampler_init),
        .host = &reg->host,
        .vocab = vocab,
        .params = params,
        .n_params = np,
        .seed = set->seed,
    };
    for (int i = 0; i < n; i++) {
        const picolm_sampler_vtable *vt = sampler_vt(plug[i]);
        const int last = i == n - 1;
        if (vt->role == PICOLM_SAMPLER_SELECT && !last) {
            snprintf(err, errlen, "sampler chain: '%s' picks the token, so it must be the last stage", names[i]);
            free_sampling(s);
            return -1;
        }
        if (vt->role != PICOLM_SAMPLER_SELECT && last) {
            snprintf(err, errlen, "sampler chain: the last stage '%s' does not pick a token; end the chain with greedy or dist", names[i]);
            free_sampling(s);
            return -1;
        }
        stage *st = &s->st[s->n];
        memcpy(st->name, names[i], sizeof st->name); /* both 64 bytes, NUL-terminated */
        st->vt = vt;
        const size_t fn = sizeof(void (*)(void));
        st->accept = vt->struct_size >= offsetof(picolm_sampler_vtable, accept) + fn ? vt->accept : NULL;
        st->reset = vt->struct_size >= offsetof(picolm_sampler_vtable, reset) + fn ? vt->reset : NULL;
        st->logit_scale = vt->struct_size >= offsetof(picolm_sampler_vtable, logit_scale) + fn ? vt->logit_scale : NULL;
        st->apply_logits = vt->struct_size >= offsetof(picolm_sampler_vtable, apply_logits) + fn ? vt->apply_logits : NULL;
        st->draw = vt->struct_size >= offsetof(picolm_sampler_vtable, draw) + fn ? vt->draw : NULL;
        st->apply_select = vt->struct_size >= offsetof(picolm_sampler_vtable, apply_select) + fn ? vt->apply_select : NULL;
        st->min_budget = vt->struct_size >= offsetof(picolm_sampler_vtable, min_budget) + fn ? vt->min_budget : NULL;
        char e[256] = "";
        if (vt->create(&init, &st->state, e, sizeof e)) {
            snprintf(err, errlen, "sampler '%s': %s", names[i], e[0] ? e : "create failed");
            free_sampling(s);
            return -1;
        }
        /* a stage its settings make a no-op is left out (and out of the description) */
        int (*neutral)(const void *) = vt->struct_size >= offsetof(picolm_sampler_vtable, neutral) + fn ? vt->neutral : NULL;
        if (!last && neutral && neutral(st->state)) {
            if (vt->destroy) vt->destroy(st->state);
            st->state = NULL;
            continue;
        }
        stage_detail(st, params, np, set->seed);
        s->n++;
    }
    *out = s;
    return 0;
}

/* Stage i's failure (rc, its message e) in err, or a list it grew. */
static int stage_done(sampling *s, int i, int rc, const char *e, const picolm_candidates *c, char *err, size_t errlen) {
    if (rc) return pl_fail(err, errlen, "sampler '%s': %s", s->st[i].name, e[0] ? e : "failed");
    if (c->size > (size_t)s->n_vocab) return pl_fail(err, errlen, "sampler '%s' grew the candidate list", s->st[i].name);
    return 0;
}

/* When timing: the CPU time since *t0 to t[slot] (0: the candidate list, 1 + i: stage i). */
static void lap(sampling *s, int slot, double *t0) {
    if (!s->timing) return;
    const double t1 = pl_thread_now();
    s->t[slot] += t1 - *t0;
    *t0 = t1;
}

int sampling_sample(sampling *s, const float *logits, int32_t n_remaining, int32_t *token,
                    char *err, size_t errlen) {
    double t0 = s->timing ? pl_thread_now() : 0;
    picolm_candidates c = {s->cand, (size_t)s->n_vocab, 0, 0, -1, n_remaining};
    /* A first stage that only scales is folded into the list (or into the
       next stage's apply_logits); the first stage that runs may read the
       logits itself instead of the list (picolm_sampler_vtable). */
    int i = 0;
    float scale = 1.0f;
    if (s->direct && s->n > 1 && s->st[0].logit_scale) {
        const float k = s->st[0].logit_scale(s->st[0].state);
        if (k != 0) scale = k, i = 1;
    }
    char e[256] = "";
    stage *sel = &s->st[s->n - 1];
    if (s->direct && s->fused && i == s->n - 2 && s->st[i].apply_select && sel->draw) {
        /* the last two stages as one: the draw known before the list is */
        lap(s, 0, &t0);
        const int rc = s->st[i].apply_select(s->st[i].state, logits, scale, sel->draw(sel->state, 0), &c, e, sizeof e);
        if (stage_done(s, rc == 2 ? s->n - 1 : i, rc, e, &c, err, errlen)) return -1;
        sel->draw(sel->state, 1);
        lap(s, 1 + i, &t0);
        i = s->n;
    } else if (s->direct && s->st[i].apply_logits) {
        lap(s, 0, &t0);
        if (stage_done(s, i, s->st[i].apply_logits(s->st[i].state, logits, scale, &c, e, sizeof e), e, &c, err, errlen)) return -1;
        lap(s, 1 + i, &t0);
        i++;
    } else if (scale != 1.0f) {
        for (int32_t j = 0; j < s->n_vocab; j++) s->cand[j] = (picolm_token_data){j, logits[j] * scale, 0.0f};
    } else {
        for (int32_t j = 0; j < s->n_vocab; j++) s->cand[j] = (picolm_token_data){j, logits[j], 0.0f};
    }
    lap(s, 0, &t0);
    for (; i < s->n; i++) {
        e[0] = 0;
        if (stage_done(s, i, s->st[i].vt->apply(s->st[i].state, &c, e, sizeof e), e, &c, err, errlen)) return -1;
        lap(s, 1 + i, &t0);
    }
    if (c.selected < 0 || c.selected >= s->n_vocab) {
        return pl_fail(err, errlen, "sampler '%s' selected no valid token (%d)", s->st[s->n - 1].name, (int)c.selected);
    }
    *token = c.selected;
    return 0;
}

void sampling_direct(sampling *s, int on) { s->direct = on; }
void sampling_fused(sampling *s, int on) { s->fused = on; }

void sampling_timing(sampling *s, int on) {
    s->timing = on;
    memset(s->t, 0, sizeof s->t);
}

double sampling_stage_seconds(const sampling *s, int i) { return i >= -1 && i < s->n ? s->t[i + 1] : 0; }

int32_t sampling_min_budget(const sampling *s, char *stage, size_t n) {
    int32_t most = 0;
    if (n) stage[0] = 0;
    for (int i = 0; i < s->n; i++) {
        const int32_t m = s->st[i].min_budget ? s->st[i].min_budget(s->st[i].state) : 0;
        if (m > most) {
            most = m;
            if (n) snprintf(stage, n, "%s", s->st[i].name);
        }
    }
    return most;
}

void sampling_accept(sampling *s, int32_t token) {
    for (int i = 0; i < s->n; i++)
        if (s->st[i].accept) s->st[i].accept(s->st[i].state, token);
}

void sampling_reset(sampling *s) {
    for (int i = 0; i < s->n; i++)
        if (s->st[i].reset) s->st[i].reset(s->st[i].state);
}

void free_sampling(sampling *s) {
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
