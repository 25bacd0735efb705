/* A deliberately configurable (and mostly broken) plugin for
   tests/test_plugin_loader.c, built once per case with -DCASE_<NAME>.
   Every piece of its code that the loader must NOT run before its checks
   pass (ELF constructor, init, vtable functions) appends "<name>:<what>" to
   the file named by $PICOLM_TEST_MARK, so the test can see exactly what ran.
   The CASE_NOTE* cases and the descriptor facts of ABI, SMALL, KIND, NONAME
   and CPU are in its ELF note: refused before the file is loaded. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "picolm/plugin.h"

#ifndef NAME
#define NAME "probe"
#endif

static void mark(const char *what) {
    const char *p = getenv("PICOLM_TEST_MARK");
    FILE *f = p ? fopen(p, "a") : NULL;
    if (!f) return;
    fprintf(f, "%s:%s\n", NAME, what);
    fclose(f);
}

/* runs as soon as the file is dlopen'd, before the loader sees the descriptor */
__attribute__((constructor)) static void probe_ctor(void) { mark("constructor"); }

static int probe_init(const picolm_host *host, char *err, size_t errlen) {
    (void)host;
    mark("init");
#ifdef CASE_INITFAIL
    snprintf(err, errlen, "probe refuses to start");
    return 1;
#else
    (void)err; (void)errlen;
    return 0;
#endif
}

static void probe_fini(void) { mark("fini"); }

__attribute__((unused)) static int probe_create(const picolm_sampler_init *init, void **state, char *err, size_t errlen) {
    (void)init; (void)err; (void)errlen;
    mark("create");
    *state = NULL;
    return 0;
}
static int probe_apply(void *state, picolm_candidates *c, char *err, size_t errlen) {
    (void)state; (void)c; (void)err; (void)errlen;
    mark("apply");
    return 0;
}
static int probe_score(uint64_t f) { (void)f; mark("score"); return 0; }
static void probe_deq(const void *s, float *d, int64_t n) { (void)s; (void)d; (void)n; mark("dequantize"); }

__attribute__((unused)) static int probe_neutral(const void *state) {
    (void)state;
    mark("neutral");
    return 1;
}

/* DIRECT: scales by 2 when asked; apply_logits keeps only id 0 (at its
   logit times the scale, "DIRECT:apply_logits <scale>"), so a selector
   after it picks 0 only when apply_logits ran.  NSIZED: the same members
   behind a struct_size that stops at neutral: never to be read. */
__attribute__((unused)) static float probe_scale(const void *state) {
    (void)state;
    mark("logit_scale");
    return 2.0f;
}
__attribute__((unused)) static int probe_apply_logits(void *state, const float *logits, float scale, picolm_candidates *c, char *err,
                                                      size_t errlen) {
    (void)state; (void)err; (void)errlen;
    char what[64];
    snprintf(what, sizeof what, "apply_logits %g", (double)scale);
    mark(what);
    c->data[0] = (picolm_token_data){0, logits[0] * scale, 0.0f};
    c->size = 1;
    c->sorted = 1;
    c->has_p = 0;
    return 0;
}

/* SELECT: apply_select picks id 1 ("SELECT:apply_select <u>"), its
   apply_logits keeps id 0 as DIRECT's; DRAW: a last stage whose apply()
   picks the best candidate and whose draw() gives 0.25 ("DRAW:draw
   <consume>"); SSIZED and DSIZED: the same behind a struct_size that stops
   at apply_logits: never to be read. */
__attribute__((unused)) static int probe_apply_select(void *state, const float *logits, float scale, double u, picolm_candidates *c,
                                                      char *err, size_t errlen) {
    (void)state; (void)logits; (void)scale; (void)err; (void)errlen;
    char what[64];
    snprintf(what, sizeof what, "apply_select %g", u);
    mark(what);
    c->selected = 1;
    return 0;
}
__attribute__((unused)) static double probe_draw(void *state, int consume) {
    (void)state;
    char what[64];
    snprintf(what, sizeof what, "draw %d", consume);
    mark(what);
    return 0.25;
}
__attribute__((unused)) static int probe_pick(void *state, picolm_candidates *c, char *err, size_t errlen) {
    (void)state; (void)err; (void)errlen;
    mark("apply");
    size_t best = 0;
    for (size_t i = 1; i < c->size; i++)
        if (c->data[i].logit > c->data[best].logit) best = i;
    c->selected = c->data[best].id;
    return 0;
}

__attribute__((unused)) static const picolm_sampler_vtable sampler_vt = {
#ifdef CASE_SMALLVTABLE
    .struct_size = 4,
#elif defined(CASE_V1SAMPLER)
    /* v1's size: the core must not read the member appended after it */
    .struct_size = offsetof(picolm_sampler_vtable, neutral),
#elif defined(CASE_NSIZED)
    /* sized as before logit_scale / apply_logits were appended */
    .struct_size = offsetof(picolm_sampler_vtable, logit_scale),
#elif defined(CASE_SSIZED) || defined(CASE_DSIZED)
    /* sized as before draw / apply_select were appended */
    .struct_size = offsetof(picolm_sampler_vtable, draw),
#else
    .struct_size = sizeof(picolm_sampler_vtable),
#endif
#ifdef CASE_BADROLE
    .role = 9,
#elif defined(CASE_DRAW) || defined(CASE_DSIZED)
    .role = PICOLM_SAMPLER_SELECT,
#else
    .role = PICOLM_SAMPLER_PROCESS,
#endif
#ifndef CASE_NOCREATE
    .create = probe_create,
#endif
#if defined(CASE_DRAW) || defined(CASE_DSIZED)
    .apply = probe_pick,
    .draw = probe_draw,
#else
    .apply = probe_apply,
#endif
#if defined(CASE_V1SAMPLER) || defined(CASE_NEUTRAL)
    .neutral = probe_neutral,
#endif
#if defined(CASE_DIRECT) || defined(CASE_NSIZED)
    .logit_scale = probe_scale,
    .apply_logits = probe_apply_logits,
#endif
#if defined(CASE_SELECT) || defined(CASE_SSIZED)
    .apply_logits = probe_apply_logits,
    .apply_select = probe_apply_select,
#endif
};

#ifdef CASE_BADGROUP
/* a format interleaving 3 rows: groups must be powers of two up to 16 */
static const picolm_format bad_formats[1] = {{.type_id = 1500, .name = "BADGROUP", .block_size = 1, .type_size = 4,
                                              .dequantize_row = probe_deq, .row_group = 3}};
#else
/* a format table whose one entry has an out-of-range type id */
static const picolm_format bad_formats[1] = {{.type_id = 5000, .name = "BAD", .block_size = 1, .type_size = 4,
                                              .dequantize_row = probe_deq}};
#endif
/* SMALL*: sizes that stop short of v1's last member, as a plugin built
   against a header from before some members were folded into v1 */
#ifdef CASE_SMALLFORMAT
#define FORMAT_SIZE offsetof(picolm_format, row_group)
#else
#define FORMAT_SIZE sizeof(picolm_format)
#endif
__attribute__((unused)) static const picolm_format_vtable format_vt = {sizeof(picolm_format_vtable), FORMAT_SIZE, 1, bad_formats};
#ifdef CASE_SMALLBACKEND
#define BACKEND_SIZE offsetof(picolm_backend_vtable, attn_f16)
#else
#define BACKEND_SIZE sizeof(picolm_backend_vtable)
#endif
#ifdef CASE_SMALLKERNEL
#define KERNEL_SIZE offsetof(picolm_kernel, gemm)
#else
#define KERNEL_SIZE sizeof(picolm_kernel)
#endif
#ifdef CASE_WIDE
/* as built against a later header that appended members: every struct is
   wider than v1's; the core must step the table by the plugin's stride and
   ignore what it does not know */
typedef struct { picolm_format f; uint64_t appended[2]; } wide_format;
static const wide_format wide_formats[2] = {
    {{.type_id = 1500, .name = "WIDE0", .block_size = 1, .type_size = 4, .dequantize_row = probe_deq}, {~0ull, ~0ull}},
    {{.type_id = 1501, .name = "WIDE1", .block_size = 1, .type_size = 4, .dequantize_row = probe_deq}, {~0ull, ~0ull}},
};
static const struct { picolm_format_vtable v; uint64_t appended; } wide_vt = {
    {sizeof wide_vt, sizeof(wide_format), 2, &wide_formats[0].f}, ~0ull};
#endif
/* a backend table claiming 3 kernels with no array */
__attribute__((unused)) static const picolm_backend_vtable backend_vt = {.struct_size = BACKEND_SIZE, .kernel_size = KERNEL_SIZE,
                                                                         .n_kernels = 3, .score = probe_score};

#if defined(CASE_KIND)
#define KIND 7
#elif defined(CASE_BADFORMAT) || defined(CASE_BADGROUP) || defined(CASE_SMALLFORMAT) || defined(CASE_WIDE)
#define KIND PICOLM_KIND_FORMAT
#elif defined(CASE_BADBACKEND) || defined(CASE_SMALLBACKEND) || defined(CASE_SMALLKERNEL)
#define KIND PICOLM_KIND_BACKEND
#else
#define KIND PICOLM_KIND_SAMPLER
#endif

#ifdef CASE_ABI
#define ABI (PICOLM_ABI_VERSION + 1)
#else
#define ABI PICOLM_ABI_VERSION
#endif
#if defined(CASE_SMALL)
#define SIZE 16
#elif defined(CASE_WIDE)
#define SIZE (sizeof(picolm_plugin) + 8) /* what the core reads of it is v1's */
#else
#define SIZE sizeof(picolm_plugin)
#endif
#ifdef CASE_CPU
#define CPU PICOLM_CPU_IMPOSSIBLE
#else
#define CPU 0ull
#endif

__attribute__((unused)) static const picolm_plugin desc = {
    .abi_version = ABI,
    .struct_size = SIZE,
    .kind = KIND,
#ifndef CASE_NONAME
    .name = NAME,
#endif
    .version = "0.1",
    .description = "test probe",
    .cpu_required = CPU,
    .init = probe_init,
    .fini = probe_fini,
#if defined(CASE_NOVTABLE)
    .vtable = NULL,
#elif defined(CASE_WIDE)
    .vtable = &wide_vt.v,
#elif defined(CASE_BADFORMAT) || defined(CASE_BADGROUP) || defined(CASE_SMALLFORMAT)
    .vtable = &format_vt,
#elif defined(CASE_BADBACKEND) || defined(CASE_SMALLBACKEND) || defined(CASE_SMALLKERNEL)
    .vtable = &backend_vt,
#else
    .vtable = &sampler_vt,
#endif
};

#ifndef CASE_NOENTRY
PICOLM_EXPORT const picolm_plugin *picolm_plugin_v1(void) {
#ifdef CASE_NULLDESC
    return NULL;
#else
    return &desc;
#endif
}
#else
/* exports something, just not the entry point */
PICOLM_EXPORT const picolm_plugin *picolm_plugin_v0(void) { return &desc; }
#endif

/* The note: the macro for a well-formed plugin, built by hand for the cases
   that break it. */
#if defined(CASE_ABI) || defined(CASE_SMALL) || defined(CASE_KIND) || defined(CASE_NONAME) || defined(CASE_CPU) || \
    defined(CASE_NOTETRUNC) || defined(CASE_MISMATCH) || defined(CASE_WIDE)
#ifdef CASE_NOTETRUNC
#define NOTE_DESCSZ 12 /* the record ends after kind and desc_size */
#else
#define NOTE_DESCSZ sizeof(picolm_note)
#endif
#if defined(CASE_NONAME)
#define NOTE_NAME ""
#elif defined(CASE_MISMATCH)
#define NOTE_NAME "p_other" /* the descriptor says NAME */
#else
#define NOTE_NAME NAME
#endif
__attribute__((section(".note.picolm"), aligned(4), used)) static const picolm_elf_note note = {
    sizeof PICOLM_NOTE_NAME, NOTE_DESCSZ, PICOLM_NOTE_TYPE, PICOLM_NOTE_NAME,
    {ABI, KIND, SIZE, (uint32_t)CPU, (uint32_t)(CPU >> 32), NOTE_NAME}};
#elif !defined(CASE_NONOTE)
PICOLM_PLUGIN_NOTE(KIND, NAME, 0);
#endif
#ifdef CASE_TWONOTES
__attribute__((section(".note.picolm"), aligned(4), used)) static const picolm_elf_note note2 = {
    sizeof PICOLM_NOTE_NAME, sizeof(picolm_note), PICOLM_NOTE_TYPE, PICOLM_NOTE_NAME,
    {PICOLM_ABI_VERSION, KIND, sizeof(picolm_plugin), 0, 0, "p_second"}};
#endif
