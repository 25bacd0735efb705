/*
 * Kernel levels: one rule for every backend (FFmpeg's DSP init).
 *
 * A level is the code of one instruction-set level (scalar, sse4, avx2,
 * avx512; neon, dotprod, i8mm; rvv), compiled with that level's flags only, and
 * listed once as a pk_level: the kernels, activation quantizers and vector
 * primitives it improves over the levels below it.  A backend plugin is a
 * chain of levels; at init the table starts empty (the core fills every
 * gap with the reference code) and each level whose extra CPU bits the
 * host has overlays its entries, lowest first:
 *   - a kernel for a new (weight type, activation type) is appended;
 *   - for a known pair, its vec_dot and its gemm (when it has one) replace
 *     the lower level's; a kernel for another activation type replaces the
 *     whole entry (the lower gemm would read other activations);
 *   - an activation quantizer replaces the one of its type;
 *   - each non-NULL primitive replaces the lower one.
 * So every kernel is written once, for the lowest level that has it, and a
 * variant (dotprod, i8mm) is a level with extra CPU bits, chosen here once,
 * never per call.  plugin.c (built without ISA flags) holds the chain:
 *
 *   PK_CHAIN("avx2", &pk_level_scalar, &pk_level_sse4, &pk_level_avx2);
 *   PICOLM_DEFINE_PLUGIN_EX(PICOLM_KIND_BACKEND, "avx2", ..., PK_CPU, 30,
 *                           &pk_tab.vt, pk_init, NULL);
 *
 * PK_CPU is the plugin's cpu_required, passed by the Makefile from the same
 * list as the level's compiler flags (Makefile: ISA_<level>).
 *
 * The second axis is data: the plugin's tuning record (pk_tune, one per
 * plugin: pk_tuning).  The init zeroes it and, after each enabled level's
 * overlay, calls that level's tune hook (PK_LEVEL_TUNED), lowest first, with
 * the host's identity and features (pk_cpu): each level sets the fields its
 * kernels read (a crossover, a tile choice), overwriting a lower level's.
 * Kernels read the record, never the CPU; nothing probes the CPU in a
 * constructor or on a kernel's first call.  The init runs only after the
 * core checked cpu_required, so a hook may run its level's instructions.
 */
#ifndef PICOLM_BACKEND_LEVEL_H
#define PICOLM_BACKEND_LEVEL_H
#include <stdio.h>
#include <string.h>

#include "picolm/plugin.h"

#define PK_HIDDEN __attribute__((visibility("hidden")))

/* The tuning record.  A field holds what differs between hosts (vendor,
   model, the C library); 0 is "not set by any level of this plugin".
   Values measured the same everywhere stay constants next to their kernels. */
enum { PK_EXPF_LIBM = 1, PK_EXPF_VECTOR = 2 };
typedef struct pk_tune {
    /* avx512: the fewest activation columns a gemm takes through the 16-row
       panels; fewer go through the decode row kernels (the same bits) */
    int panel_min_nc_q4_K; /* Q4_K, Q4_K_R */
    int panel_min_nc_q6_K; /* Q6_K */
    int panel_min_nc_r16;  /* Q4_K_R16, Q4_K_R16N */
    /* avx512: the fewest superblocks per row from which decode (one
       column) runs the 4-row kernels on 4 slices; shorter rows go one by
       one, one sequential stream (the same bits) */
    int dec_slices_min_nb_q4_K; /* Q4_K, Q4_K_R */
    int dec_slices_min_nb_q6_K; /* Q6_K */
    /* avx2, avx512: the expf of attn_f16's softmax steps: the level's
       vector expf where it gives this libm's bits (checked at init on a
       sample, x86/expf.h), else libm's, query by query */
    int attn_expf;         /* PK_EXPF_* */
} pk_tune;
extern PK_HIDDEN pk_tune pk_tuning; /* the plugin's (PK_CHAIN) */

/* What a tune hook sees of the host: features, and the identity where the
   core hands it over (0 = unknown, as from a v1 core or a test host) */
typedef struct pk_cpu {
    uint64_t features;
    uint32_t vendor, family, model; /* picolm_host's cpu_vendor, cpu_family, cpu_model */
} pk_cpu;

typedef struct pk_level {
    const char *name;
    uint64_t cpu;                        /* PICOLM_CPU_* bits needed beyond the
                                            plugin's cpu_required (0: none) */
    const picolm_kernel *kernels;
    uint32_t n_kernels;
    const picolm_act_quant *act_quants;
    uint32_t n_act_quants;
    const picolm_backend_vtable *prims;  /* the primitive members only; may be NULL */
    void (*tune)(pk_tune *t, const pk_cpu *cpu); /* may be NULL */
} pk_level;

/* Every level, defined by its directory (adding a level: one line here). */
extern PK_HIDDEN const pk_level pk_level_scalar, pk_level_sse4, pk_level_avx2, pk_level_avx512, pk_level_neon, pk_level_dotprod,
    pk_level_i8mm, pk_level_rvv;

#define PK_COUNT(a) ((uint32_t)(sizeof(a) / sizeof((a)[0])))
/* One level, defined next to its kernels (a level without act quants or
   primitives passes NULL, 0 / NULL); PK_LEVEL_TUNED adds its tune hook. */
#define PK_LEVEL_TUNED(id, name_, cpu_, kernels_, n_kernels_, act_, n_act_, prims_, tune_)                             \
    PK_HIDDEN const pk_level pk_level_##id = {.name = name_, .cpu = cpu_, .kernels = kernels_, .n_kernels = n_kernels_, \
                                              .act_quants = act_, .n_act_quants = n_act_, .prims = prims_, .tune = tune_}
#define PK_LEVEL(id, name_, cpu_, kernels_, n_kernels_, act_, n_act_, prims_) \
    PK_LEVEL_TUNED(id, name_, cpu_, kernels_, n_kernels_, act_, n_act_, prims_, NULL)
/* One kernel row: weight type, activation type, vec_dot, gemm (or NULL). */
#define PK_KERNEL(T, A, vec_dot_, gemm_) {PICOLM_TYPE_##T, PICOLM_TYPE_##A, vec_dot_, gemm_}

#define PK_MAX_KERNELS 64
#define PK_MAX_ACT 8
typedef struct pk_table {
    picolm_backend_vtable vt;
    picolm_kernel kernels[PK_MAX_KERNELS];
    picolm_act_quant act_quants[PK_MAX_ACT];
} pk_table;

static inline int pk_overlay(pk_table *t, const pk_level *l) {
    for (uint32_t i = 0; i < l->n_kernels; i++) {
        const picolm_kernel *k = &l->kernels[i];
        uint32_t j = 0;
        while (j < t->vt.n_kernels && t->kernels[j].type_id != k->type_id) j++;
        if (j == t->vt.n_kernels) {
            if (j == PK_MAX_KERNELS) return -1;
            t->vt.n_kernels++;
            t->kernels[j] = *k;
        } else if (t->kernels[j].vec_dot_type != k->vec_dot_type) {
            t->kernels[j] = *k;
        } else {
            t->kernels[j].vec_dot = k->vec_dot;
            if (k->gemm) t->kernels[j].gemm = k->gemm;
        }
    }
    for (uint32_t i = 0; i < l->n_act_quants; i++) {
        uint32_t j = 0;
        while (j < t->vt.n_act_quants && t->act_quants[j].type_id != l->act_quants[i].type_id) j++;
        if (j == PK_MAX_ACT) return -1;
        if (j == t->vt.n_act_quants) t->vt.n_act_quants++;
        t->act_quants[j] = l->act_quants[i];
    }
    const picolm_backend_vtable *p = l->prims;
    if (p) {
#define PK_PRIM(m) if (p->m) t->vt.m = p->m
        PK_PRIM(rmsnorm); PK_PRIM(dot_f32); PK_PRIM(dot_f32_f16); PK_PRIM(scale_axpy_f16);
        PK_PRIM(swiglu); PK_PRIM(f32_to_f16); PK_PRIM(attn_f16);
#undef PK_PRIM
    }
    return 0;
}

/* The fields a plugin's levels set, for the init's log line */
static inline void pk_tune_str(const pk_tune *t, char *s, size_t n) {
    int k = 0;
    s[0] = 0;
    if (t->panel_min_nc_q4_K)
        k += snprintf(s + k, n - k, "; panels from %d columns (Q4_K), %d (Q6_K), %d (R16)", t->panel_min_nc_q4_K, t->panel_min_nc_q6_K,
                      t->panel_min_nc_r16);
    if (t->panel_min_nc_q4_K && k >= 0 && (size_t)k < n)
        k += snprintf(s + k, n - k, "; decode by 4 slices from %d superblocks a row (Q4_K), %d (Q6_K)", t->dec_slices_min_nb_q4_K,
                      t->dec_slices_min_nb_q6_K);
    if (t->attn_expf && k >= 0 && (size_t)k < n)
        snprintf(s + k, n - k, "; attention expf: %s", t->attn_expf == PK_EXPF_VECTOR ? "vector (libm's bits)" : "libm");
}

/* Rebuilds t and pk_tuning from the levels the host can run; logs the choice. */
static inline int pk_build(pk_table *t, const char *plugin, const pk_level *const *levels, int n, const picolm_host *host,
                           char *err, size_t errlen) {
    const picolm_backend_vtable empty = t->vt;
    t->vt = (picolm_backend_vtable){.struct_size = empty.struct_size, .kernel_size = empty.kernel_size,
                                    .kernels = empty.kernels, .act_quant_size = empty.act_quant_size,
                                    .act_quants = empty.act_quants};
    pk_cpu cpu = {.features = host->cpu_features};
    if (PICOLM_HOST_HAS(host, cpu_model)) cpu.vendor = host->cpu_vendor, cpu.family = host->cpu_family, cpu.model = host->cpu_model;
    memset(&pk_tuning, 0, sizeof pk_tuning);
    char used[160] = "", skipped[160] = "";
    for (int i = 0; i < n; i++) {
        const pk_level *l = levels[i];
        const int ok = (host->cpu_features & l->cpu) == l->cpu;
        char *s = ok ? used : skipped;
        const size_t u = strlen(s);
        snprintf(s + u, sizeof used - u, "%s%s", u ? (ok ? "+" : ", ") : "", l->name);
        if (ok && pk_overlay(t, l)) {
            snprintf(err, errlen, "%s: level %s overflows the kernel table", plugin, l->name);
            return -1;
        }
        if (ok && l->tune) l->tune(&pk_tuning, &cpu);
    }
    if (host->log) {
        char msg[512], tune[200];
        pk_tune_str(&pk_tuning, tune, sizeof tune);
        snprintf(msg, sizeof msg, "%s: levels %s%s%s%s%s", plugin, used, skipped[0] ? " (without " : "", skipped,
                 skipped[0] ? ": the CPU lacks it)" : "", tune);
        host->log(PICOLM_LOG_DEBUG, msg);
    }
    return 0;
}

/* The chain of a plugin: its table (pk_tab, whose .vt is the vtable), its
   tuning record (pk_tuning) and its init (pk_init).  The arguments are
   pointers to the levels, lowest first. */
#define PK_CHAIN(plugin, ...)                                                                              \
    PK_HIDDEN pk_tune pk_tuning;                                                                           \
    static pk_table pk_tab = {.vt = {.struct_size = sizeof(picolm_backend_vtable),                         \
                                     .kernel_size = sizeof(picolm_kernel),                                 \
                                     .kernels = pk_tab.kernels,                                            \
                                     .act_quant_size = sizeof(picolm_act_quant),                           \
                                     .act_quants = pk_tab.act_quants}};                                    \
    static int pk_init(const picolm_host *host, char *err, size_t errlen) {                                \
        static const pk_level *const levels[] = {__VA_ARGS__};                                             \
        return pk_build(&pk_tab, plugin, levels, (int)PK_COUNT(levels), host, err, errlen);              \
    }

#endif
