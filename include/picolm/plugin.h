/*
 * picolm plugin ABI: the one header a plugin author needs.
 *
 * A plugin is a shared object exporting ONE symbol, `picolm_plugin_v1`
 * (PICOLM_ENTRY), a function that returns a pointer to a const
 * `picolm_plugin` descriptor, and carrying the descriptor's facts in an ELF
 * note (PICOLM_PLUGIN_NOTE, at the end of this header).  The core checks the
 * note by reading the file before loading it, so a plugin the CPU cannot run,
 * of another ABI, or shadowed by another is never loaded.  One line,
 * PICOLM_DEFINE_PLUGIN (at the end of this header), writes the descriptor,
 * the note and the entry function.  Keep that line (and any ELF
 * constructor) in a translation unit compiled without -m flags; put ISA
 * kernels elsewhere.
 *
 * Versioning: this is ABI v1 and it is frozen; later picolm versions may
 * only APPEND to it (as SQLite's sqlite3_vfs grows by iVersion):
 *  - members at the END of a struct that carries its size (picolm_host,
 *    picolm_plugin, the *_vtable structs, picolm_sampler_init) or whose
 *    array stride a vtable carries (picolm_format, picolm_kernel,
 *    picolm_act_quant); an appended member is optional, and 0 / NULL must
 *    mean "absent: behave as v1 did";
 *  - new constants (CPU bits, type ids, flags, log levels) and helpers.
 * The core requires every size to cover v1's members (a smaller struct is
 * refused, with the size it needs) and reads an appended member only when
 * the plugin's size covers it, else takes it as 0 / NULL; arrays are stepped
 * by the plugin's own entry size.  An older core reads a newer plugin's
 * larger struct as far as it knows it and ignores the rest, so a plugin
 * reads a host member appended after v1 only after checking
 * host->struct_size.  PICOLM_ABI_VERSION (and PICOLM_ENTRY with it) changes
 * when appending is not enough: a member removed, moved, retyped or given a
 * new meaning, a new member the other side must not ignore, or a function
 * with new arguments.  Cores and plugins of different versions refuse each
 * other from the ELF note, before any code is loaded.
 * Members are marked (required) or (optional, may be NULL).
 *
 * Errors cross the boundary as a return code (0 = ok, non-zero = error) plus
 * a message written into a caller-provided buffer.  Plugins never call
 * exit(), abort() or print to stdout; they may log through the host.
 */
#ifndef PICOLM_PLUGIN_H
#define PICOLM_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PICOLM_ABI_VERSION 1u
#define PICOLM_ENTRY "picolm_plugin_v1"

#if defined(_WIN32)
#define PICOLM_EXPORT __declspec(dllexport)
#else
#define PICOLM_EXPORT __attribute__((visibility("default")))
#endif

/* ------------------------------------------------------------------------ */
/* Tensor type ids: the GGUF / ggml numbering, so files map 1:1.             */
/* Ids >= 1024 are picolm's own layouts (blocks.h: repacked rows).          */
/* ------------------------------------------------------------------------ */
enum picolm_type {
    PICOLM_TYPE_F32 = 0,
    PICOLM_TYPE_F16 = 1,
    PICOLM_TYPE_Q4_0 = 2,
    PICOLM_TYPE_Q4_1 = 3,
    PICOLM_TYPE_Q5_0 = 6,
    PICOLM_TYPE_Q5_1 = 7,
    PICOLM_TYPE_Q8_0 = 8,
    PICOLM_TYPE_Q8_1 = 9,
    PICOLM_TYPE_Q2_K = 10,
    PICOLM_TYPE_Q3_K = 11,
    PICOLM_TYPE_Q4_K = 12,
    PICOLM_TYPE_Q5_K = 13,
    PICOLM_TYPE_Q6_K = 14,
    PICOLM_TYPE_Q8_K = 15,
    PICOLM_TYPE_IQ4_NL = 20,
    PICOLM_TYPE_IQ4_XS = 23,
    PICOLM_TYPE_BF16 = 30,
    /* picolm's own layouts: blocks.h (PICOLM_TYPE_OWN_MIN and up) */
};

/* ------------------------------------------------------------------------ */
/* CPU features, probed once by the core (CPUID + XCR0, or AArch64 HWCAPs). */
/* ------------------------------------------------------------------------ */
#define PICOLM_CPU_SSE2        (1ull << 0)
#define PICOLM_CPU_SSE3        (1ull << 1)
#define PICOLM_CPU_SSSE3       (1ull << 2)
#define PICOLM_CPU_SSE41       (1ull << 3)
#define PICOLM_CPU_SSE42       (1ull << 4)
#define PICOLM_CPU_AVX         (1ull << 5)  /* includes OS support (XCR0) */
#define PICOLM_CPU_AVX2        (1ull << 6)
#define PICOLM_CPU_FMA         (1ull << 7)
#define PICOLM_CPU_F16C        (1ull << 8)
#define PICOLM_CPU_AVX512F     (1ull << 9)  /* includes OS support (XCR0) */
#define PICOLM_CPU_AVX512BW    (1ull << 10)
#define PICOLM_CPU_AVX512VL    (1ull << 11)
#define PICOLM_CPU_AVX512DQ    (1ull << 12)
#define PICOLM_CPU_AVX512VNNI  (1ull << 13)
#define PICOLM_CPU_AVX512BF16  (1ull << 14)
#define PICOLM_CPU_AVXVNNI     (1ull << 15)
#define PICOLM_CPU_POPCNT      (1ull << 16)
#define PICOLM_CPU_NEON        (1ull << 32) /* AArch64 ASIMD; AArch32: NEON + VFPv4 */
#define PICOLM_CPU_ARM_DOTPROD (1ull << 33)
#define PICOLM_CPU_ARM_FP16    (1ull << 34)
#define PICOLM_CPU_ARM_I8MM    (1ull << 35)
#define PICOLM_CPU_ARM_SVE     (1ull << 36)
#define PICOLM_CPU_RVV         (1ull << 48) /* RISC-V V 1.0 (HWCAP 'V') */
/* A bit no CPU has: lets tests build a plugin whose requirement is unmet. */
#define PICOLM_CPU_IMPOSSIBLE  (1ull << 63)

/* CPU vendors (picolm_host.cpu_vendor): x86 from CPUID's vendor string, ARM
   from the MIDR implementer code (0x41 Arm, 0x61 Apple, 0x51 Qualcomm...). */
#define PICOLM_VENDOR_UNKNOWN 0u
#define PICOLM_VENDOR_INTEL   1u  /* GenuineIntel */
#define PICOLM_VENDOR_AMD     2u  /* AuthenticAMD, HygonGenuine */
#define PICOLM_VENDOR_ARM_IMPL(implementer) (0x100u | (uint32_t)(implementer))

/* ------------------------------------------------------------------------ */
/* Host API: what the core hands to every plugin's init.  Plugins never link */
/* against core symbols, so a plugin can also run against a test host.       */
/* ------------------------------------------------------------------------ */
enum picolm_log_level { PICOLM_LOG_ERROR = 0, PICOLM_LOG_WARN = 1, PICOLM_LOG_INFO = 2, PICOLM_LOG_DEBUG = 3 };

typedef void (*picolm_task_fn)(void *ctx, int64_t begin, int64_t end, int thread_id);

typedef struct picolm_host {
    uint32_t abi_version;   /* PICOLM_ABI_VERSION of the core */
    uint32_t struct_size;   /* sizeof(picolm_host) in the core */
    uint64_t cpu_features;  /* PICOLM_CPU_* bits of this machine */
    /* (required) log a message (no trailing newline needed) */
    void (*log)(int level, const char *msg);
    /* (required) aligned allocation, zero-filled; align is a power of two */
    void *(*alloc)(size_t size, size_t align);
    /* (required) free memory from alloc (NULL is a no-op) */
    void (*free)(void *ptr);
    /* (required) run fn over [0, n) split across this host's thread pool
       (each engine has its own): host->parallel_for(host, n, fn, ctx).
       Returns when every chunk is done.  May run inline. */
    void (*parallel_for)(const struct picolm_host *host, int64_t n, picolm_task_fn fn, void *ctx);
    int n_threads;          /* threads parallel_for uses */
    void *core_data;        /* the core's own (its thread pool): plugins leave it alone */
    /* ---- appended after v1: read only when PICOLM_HOST_HAS(host, member) ---- */
    /* (0 = unknown) The CPU's identity, from the core's probe: for tuning
       only (a crossover, a tile size); whether an instruction set may run
       is cpu_features' to say, never these. */
    uint32_t cpu_vendor;    /* PICOLM_VENDOR_* */
    uint32_t cpu_family;    /* x86: display family (CPUID 1, base + extended); ARM: MIDR architecture */
    uint32_t cpu_model;     /* x86: display model (with the extended model); ARM: MIDR part number */
} picolm_host;

/* Non-zero when the host struct h (of whichever core loaded the plugin) has
   member m: a member appended after v1 is read only then, else taken as 0. */
#define PICOLM_HOST_HAS(h, m) ((h)->struct_size >= offsetof(picolm_host, m) + sizeof((h)->m))

/* ------------------------------------------------------------------------ */
/* Kernels (shared by formats and backends)                                   */
/* ------------------------------------------------------------------------ */
/* n elements (a multiple of the type's block size) of src -> float */
typedef void (*picolm_to_float_fn)(const void *src, float *dst, int64_t n);
/* n floats -> n elements of a type (n a multiple of its block size) */
typedef void (*picolm_from_float_fn)(const float *src, void *dst, int64_t n);
/* *s = dot(x[0..n), y[0..n)): x is a weight row, y an activation row of the
   kernel's vec_dot_type; n is a multiple of both block sizes */
typedef void (*picolm_vec_dot_fn)(int64_t n, float *s, const void *x, const void *y);
/* Small GEMM tile: for r < nr, c < nc:
     dst[c * dst_stride + r] = dot(row r of w, row c of a)
   w rows are w_stride bytes apart, a rows (activations, already in the
   kernel's vec_dot_type) a_stride bytes apart; dst_stride counts floats. */
typedef void (*picolm_gemm_fn)(int64_t n, int64_t nr, int64_t nc,
                               const void *w, size_t w_stride,
                               const void *a, size_t a_stride,
                               float *dst, size_t dst_stride);

/* ------------------------------------------------------------------------ */
/* FORMAT plugins: a block layout and its portable reference code.           */
/* ------------------------------------------------------------------------ */
#define PICOLM_FMT_WEIGHT     1u  /* may appear as a model tensor type */
#define PICOLM_FMT_ACTIVATION 2u  /* used as an activation (vec_dot) type */

typedef struct picolm_format {
    uint32_t type_id;     /* (required) GGUF type id */
    uint32_t flags;       /* PICOLM_FMT_* */
    const char *name;     /* (required) ggml's name, e.g. "Q4_K" */
    uint32_t block_size;  /* (required) elements per block */
    uint32_t type_size;   /* (required) bytes per block */
    picolm_to_float_fn dequantize_row;   /* (required) */
    picolm_from_float_fn quantize_row;   /* (optional) reference quantizer */
    uint32_t vec_dot_type;               /* activation type of vec_dot */
    picolm_vec_dot_fn vec_dot;           /* (required for WEIGHT types)
                                            portable reference dot product */
    /* (optional; 0 or 1 = plain rows) Row groups: the layout interleaves
       this many consecutive rows (2, 4, 8 or 16) so that a kernel finds the
       same position of every row of the group side by side.  block_size and
       type_size still describe ONE row (a row is n / block_size * type_size
       bytes, so tensor sizes are unchanged), but a group of row_group rows
       is one indivisible run of row_group * row_bytes bytes, and a tensor of
       this type must have a multiple of row_group rows.  For such a format:
         dequantize_row(src, dst, n)  converts a whole group: src is the
             group, dst gets row_group rows of n floats (row-major);
         quantize_row(src, dst, n)    the reverse (row_group rows of n);
         vec_dot(n, s, x, y)          x is a group: s[0..row_group) get the
             dot products of each of its rows with y (formats and backends);
         gemm                         unchanged, with nr a multiple of
             row_group and w at the start of a group. */
    uint32_t row_group;
    /* (optional) Lossless conversion from the layout's base type, for
       layouts that store another format's values in a different order (a
       permutation, nothing requantized): picolm-quantize uses it to repack
       an already-quantized file exactly.  base_type is that format's id
       (e.g. Q4_K for Q4_K_R16); from_base converts max(row_group, 1) rows of
       n elements of base_type, row i at src + i * src_stride, into dst
       (one group, or one row when not grouped). */
    uint32_t base_type;
    void (*from_base)(const void *src, size_t src_stride, void *dst, int64_t n);
    /* (optional) The inverse of from_base: one group (one row when not
       grouped) of n elements -> max(row_group, 1) rows of base_type, row i
       at dst + i * dst_stride.  When the backend has kernels for base_type
       but none for this layout, the core unpacks a group at a time into a
       small per-thread buffer and runs the base kernels there: the same
       values through the same kernels, so the same results, at a cost of
       a conversion per group instead of the reference code.  Make it fast
       (word operations, no per-element loops) since it sits on that path. */
    void (*to_base)(const void *src, void *dst, size_t dst_stride, int64_t n);
} picolm_format;

/* One plain-row table entry with designated initializers, so that a table
   keeps compiling warning-free (-Wextra) as the struct grows at its end. */
#define PICOLM_FORMAT(id, fl, nm, bs, ts, deq, quant, vdt, vdot)                                                   \
    {                                                                                                             \
        .type_id = (id), .flags = (fl), .name = (nm), .block_size = (bs), .type_size = (ts), .dequantize_row = (deq), \
        .quantize_row = (quant), .vec_dot_type = (vdt), .vec_dot = (vdot)                                         \
    }

typedef struct picolm_format_vtable {
    uint32_t struct_size;   /* sizeof(picolm_format_vtable) */
    uint32_t format_size;   /* sizeof(picolm_format): array stride */
    uint32_t n_formats;
    const picolm_format *formats;
} picolm_format_vtable;

/* The vtable of a format plugin whose formats are the array arr. */
#define PICOLM_FORMAT_VTABLE(arr) \
    {sizeof(picolm_format_vtable), sizeof(picolm_format), sizeof(arr) / sizeof((arr)[0]), (arr)}

/* ------------------------------------------------------------------------ */
/* BACKEND plugins: fast kernels for one instruction set.  Anything missing  */
/* falls back to the format plugin's reference code, resolved at startup.    */
/* ------------------------------------------------------------------------ */
typedef struct picolm_kernel {
    uint32_t type_id;       /* weight type */
    uint32_t vec_dot_type;  /* activation type consumed (its quantizer is
                               taken from this backend if it has one, else
                               from the format plugin) */
    picolm_vec_dot_fn vec_dot; /* (required) one row */
    picolm_gemm_fn gemm;       /* (optional) nr rows x nc activations */
} picolm_kernel;

typedef struct picolm_act_quant {
    uint32_t type_id;                 /* activation type produced */
    picolm_from_float_fn quantize_row;
} picolm_act_quant;

typedef struct picolm_backend_vtable {
    uint32_t struct_size;   /* sizeof(picolm_backend_vtable) */
    uint32_t kernel_size;   /* sizeof(picolm_kernel): array stride */
    uint32_t n_kernels;
    const picolm_kernel *kernels;
    uint32_t act_quant_size; /* sizeof(picolm_act_quant) */
    uint32_t n_act_quants;
    const picolm_act_quant *act_quants;
    /* (optional) score adjustment given the probed features, added to the
       descriptor's priority; e.g. prefer VNNI kernels when present. */
    int (*score)(uint64_t cpu_features);
    /* ---- optional vector primitives; NULL = core's portable version ---- */
    /* o[i] = x[i] * w[i] / sqrt(mean(x^2) + eps) */
    void (*rmsnorm)(float *o, const float *x, const float *w, int n, float eps);
    /* sum a[i]*b[i] */
    float (*dot_f32)(const float *a, const float *b, int n);
    /* sum a[i]*half_to_float(b[i]) : attention scores over an fp16 K cache */
    float (*dot_f32_f16)(const float *a, const uint16_t *b, int n);
    /* online-softmax V update with an f16 accumulator held in floats
       (llama.cpp's flash-attention numerics):
         if scale != 1: y[i] = f16(y[i]*scale);  then y[i] = f16(y[i] + a*half_to_float(v[i]))
       where f16() rounds to the nearest half (ties to even) and back. */
    void (*scale_axpy_f16)(float *y, float scale, float a, const uint16_t *v, int n);
    /* g[i] = silu(g[i]) * u[i] */
    void (*swiglu)(float *g, const float *u, int n);
    /* dst[i] = float_to_half(src[i]) */
    void (*f32_to_f16)(uint16_t *dst, const float *src, int n);
    /* (optional) Attention of nq query heads that share one KV head, over n
       positions of an f16 K/V cache, continuing for each query j an online
       softmax whose state is (mx[j], sum[j], y_j = y + j*y_stride):
         for t = 0 .. n-1, in order:
           s = dot(q_j, k + t*kv_stride) * scale        (q_j = q + j*q_stride, hd elements)
           if s > mx[j]: ws = expf(mx[j] - s), mx[j] = s, w = 1
           else:         ws = 1,               w = expf(s - mx[j])
           sum[j] = sum[j] * ws + w
           scale_axpy_f16(y_j, ws, w, v + t*kv_stride, hd)   (f16 accumulator)
       Strides count floats (q, y) and halfs (k, v).  One call replaces 2
       calls per position and query head, and lets an implementation convert
       each K/V row once for the nq queries.  Results must stay within the
       kernel-test tolerances of that loop; the in-tree versions are
       bit-identical to it over their backend's own primitives (greedy
       reference continuations can hinge on a last-bit near-tie). */
    void (*attn_f16)(const float *q, size_t q_stride, int nq, const uint16_t *k, const uint16_t *v, size_t kv_stride, int n,
                     int hd, float scale, float *y, size_t y_stride, float *mx, float *sum);
} picolm_backend_vtable;

/* ------------------------------------------------------------------------ */
/* SAMPLER plugins: logit processors and token selectors, chained.           */
/* ------------------------------------------------------------------------ */
typedef struct picolm_token_data {
    int32_t id;
    float logit;
    float p;        /* probability, valid when candidates->has_p */
} picolm_token_data;

typedef struct picolm_candidates {
    picolm_token_data *data; /* the processor may reorder and shrink this */
    size_t size;
    int sorted;          /* 1 when data is sorted by logit, descending */
    int has_p;           /* 1 when p holds softmax probabilities */
    int32_t selected;    /* a SELECT sampler sets this to a token id */
    int32_t n_remaining; /* tokens left in the generation budget (-1: none) */
} picolm_candidates;

typedef struct picolm_vocab {
    int32_t n_vocab;
    int32_t bos_id, eos_id;       /* -1 when absent */
    /* decoded bytes of each token (byte tokens already turned into their
       byte, U+2581 into a space); NOT NUL-terminated, see piece_len */
    const char *const *piece;
    const uint32_t *piece_len;
    const int32_t *token_type;    /* GGUF token types (1 normal, 3 control, 6 byte, ...) */
} picolm_vocab;

typedef struct picolm_param {
    const char *key;    /* e.g. "temperature", "top_p" */
    const char *value;  /* as written in the INI or on the command line */
} picolm_param;

typedef struct picolm_sampler_init {
    uint32_t struct_size;
    const picolm_host *host;
    const picolm_vocab *vocab;
    const picolm_param *params; /* every key of the sampler's params table (the
                                   others may follow: ignore them) */
    int n_params;
    uint64_t seed;
} picolm_sampler_init;

#define PICOLM_SAMPLER_PROCESS 1u /* edits logits / removes candidates */
#define PICOLM_SAMPLER_SELECT  2u /* picks candidates->selected */

/* A parameter a sampler takes: the front ends list these in --help and
   --dump-config, and the core checks every [sampler] value against them
   before create() (so create() sees only well-formed values in range). */
enum picolm_param_type {
    PICOLM_PARAM_INT = 1,
    PICOLM_PARAM_FLOAT = 2,
    /* appended after v1: any text, handed over as written (lo and hi
       unused); e.g. a grammar.  Keep its def short ("" = none). */
    PICOLM_PARAM_STRING = 3
};
typedef struct picolm_param_desc {
    const char *key;     /* [sampler] key, e.g. "top_k"; NULL ends the table */
    uint32_t type;       /* enum picolm_param_type */
    const char *def;     /* the default, as an INI would write it */
    double lo, hi;       /* inclusive range */
    const char *label;   /* name in the chain description ("repeat 1.1");
                            NULL: the value alone ("top_k(40)") */
    const char *help;    /* one line for --help */
} picolm_param_desc;

/* picolm_sampler_vtable.flags */
#define PICOLM_SAMPLER_SEEDED 1u  /* draws from init->seed (shown in the chain description) */

typedef struct picolm_sampler_vtable {
    uint32_t struct_size;  /* sizeof(picolm_sampler_vtable) */
    uint32_t role;         /* PICOLM_SAMPLER_PROCESS or _SELECT */
    uint32_t flags;        /* PICOLM_SAMPLER_* flags */
    /* (optional) the parameters it understands, ended by a NULL key; create()
       gets each of them: the value set in [sampler] or on the command line,
       else def */
    const picolm_param_desc *params;
    /* (required) make an instance */
    int (*create)(const picolm_sampler_init *init, void **state, char *err, size_t errlen);
    /* (optional) */
    void (*destroy)(void *state);
    /* (required) process or select; non-zero return = error (message in err) */
    int (*apply)(void *state, picolm_candidates *cand, char *err, size_t errlen);
    /* (optional) told every token that enters the context, prompt included */
    void (*accept)(void *state, int32_t token);
    /* (optional) forget history (new conversation) */
    void (*reset)(void *state);
    /* ---- appended after v1 (read only when struct_size covers it) ---- */
    /* (optional) non-zero when this instance, as configured, leaves every
       candidate list exactly as it found it (top_k 0, top_p 1, penalties
       of 1 and 0, ...): the chain then leaves the stage out, so a chain
       that names every stage costs only the active ones.  Never asked of
       the last (SELECT) stage. */
    int (*neutral)(const void *state);
    /* ---- appended after neutral (read only when struct_size covers it) ---- */
    /* (optional) s != 0 when the next apply() would do exactly
       `logit *= s` (one float multiply) to every candidate and nothing else
       (no reorder, no removal, has_p cleared); else 0.  The core may then
       skip apply() and fold the same multiply into the list it builds or
       into the next stage's apply_logits(): the same float product, so the
       same bits.  Asked before each token; only of the first stage. */
    float (*logit_scale)(const void *state);
    /* (optional) apply() on the full list {id i, logit logits[i] * scale,
       p 0} for i < cand->size, in id order, unsorted, has_p 0, without the
       core building that list: read logits (cand->size of them, the model's
       output; scale 1 when nothing was folded) and write into cand->data
       (room for cand->size entries) exactly the list apply() would have
       left, setting size, sorted and has_p (and selected for a SELECT
       stage).  The same candidates in the same order, so the same tokens.
       Asked only of the first stage that runs. */
    int (*apply_logits)(void *state, const float *logits, float scale, picolm_candidates *cand, char *err, size_t errlen);
    /* ---- appended after apply_logits (read only when struct_size covers it) ---- */
    /* (optional, SELECT stages) the uniform u in [0, 1) that the next
       apply() would draw; consume != 0 also advances the state exactly as
       that apply() would (an apply() that fails draws nothing: the core
       peeks, runs the fused step, and consumes only when it succeeded).
       Offering it promises that apply() selects by the softmax rule below
       with that u.  Asked only of the last stage, when the stage before
       it offers apply_select. */
    double (*draw)(void *state, int consume);
    /* (optional, PROCESS stages) apply_logits() followed by the softmax
       rule with uniform u: set cand->selected to the token that rule would
       pick from the list apply_logits() would have left (the rest of cand
       is then unspecified).  Asked only of the first stage that runs, when
       it is the next to last and the last offers draw.  Returns 0, 1 on
       its own failure, or 2 when the rule failed (reported as the last
       stage's failure, with the message that stage's apply() would give). */
    int (*apply_select)(void *state, const float *logits, float scale, double u, picolm_candidates *cand, char *err, size_t errlen);
    /* ---- appended after apply_select (read only when struct_size covers it) ---- */
    /* (optional, PROCESS stages) the fewest tokens, n_remaining at the first
       apply() of a generation, with which this instance as configured can
       produce a complete output (a grammar that closes its document within
       the budget), or 0 when any budget will do.  Front ends refuse a
       smaller budget before generating. */
    int32_t (*min_budget)(const void *state);
} picolm_sampler_vtable;

/* The softmax rule that draw() promises, over a list d[0..n): max = the
   largest logit (d[0].logit when sorted and not NaN); e_i =
   expf(d[i].logit - max) in float (0 for -inf and NaN); S = the e_i summed
   in list order in double; r = u * S in double; the pick is the first i
   with e_i > 0 whose running double sum of e_0..e_i exceeds r, else
   (rounding left r at S) the last i with e_i > 0.  No candidate, or S = 0,
   is an error. */

/* ------------------------------------------------------------------------ */
/* The descriptor                                                             */
/* ------------------------------------------------------------------------ */
enum picolm_plugin_kind {
    PICOLM_KIND_FORMAT = 1,
    PICOLM_KIND_BACKEND = 2,
    PICOLM_KIND_SAMPLER = 3
};

typedef struct picolm_plugin {
    uint32_t abi_version;   /* (required) PICOLM_ABI_VERSION */
    uint32_t struct_size;   /* (required) sizeof(picolm_plugin) */
    uint32_t kind;          /* (required) enum picolm_plugin_kind */
    const char *name;       /* (required) unique per kind, e.g. "avx2" */
    const char *version;    /* (required) e.g. "1.0" */
    const char *description;/* (optional) */
    uint64_t cpu_required;  /* PICOLM_CPU_* bits that must all be present */
    int32_t priority;       /* backends: base score (higher wins) */
    /* (optional) called once after the checks pass; non-zero = reject */
    int (*init)(const picolm_host *host, char *err, size_t errlen);
    /* (optional) called before dlclose */
    void (*fini)(void);
    /* (required) picolm_format_vtable / picolm_backend_vtable /
       picolm_sampler_vtable according to kind */
    const void *vtable;
} picolm_plugin;

typedef const picolm_plugin *(*picolm_entry_fn)(void);

/* ------------------------------------------------------------------------ */
/* The plugin note: the descriptor's facts, readable WITHOUT loading the     */
/* file.  The core reads it from the ELF file with plain reads (program      */
/* headers, PT_NOTE), checks it (ABI, kind, descriptor size, name, CPU       */
/* features, shadowing) and only then dlopen()s the file, so that no code of */
/* a plugin it refuses runs (not even ELF constructors); after loading, the  */
/* descriptor must agree with the note.  A file without a valid note is not  */
/* loaded.  Every plugin states it once, next to its descriptor:             */
/*                                                                           */
/*   PICOLM_PLUGIN_NOTE(PICOLM_KIND_BACKEND, "avx2", PICOLM_CPU_AVX2 | ...); */
/*                                                                           */
/* with the same kind, name and cpu_required as the descriptor.  The layout  */
/* is all 32-bit words and bytes, so it is the same in ELF32 and ELF64.      */
/* ------------------------------------------------------------------------ */
#define PICOLM_NOTE_NAME     "picolm"    /* ELF note owner name */
#define PICOLM_NOTE_TYPE     0x31504c50u /* "PLP1" */
#define PICOLM_NOTE_NAME_MAX 64

typedef struct picolm_note {
    uint32_t abi_version;      /* PICOLM_ABI_VERSION */
    uint32_t kind;             /* enum picolm_plugin_kind */
    uint32_t desc_size;        /* sizeof(picolm_plugin) */
    uint32_t cpu_required_lo;  /* cpu_required, low and high 32 bits */
    uint32_t cpu_required_hi;
    char name[PICOLM_NOTE_NAME_MAX]; /* the descriptor's name, NUL-terminated */
} picolm_note;

/* One ELF note record: header, owner name padded to 4 bytes, descriptor. */
typedef struct picolm_elf_note {
    uint32_t namesz, descsz, type;
    char owner[8];
    picolm_note desc;
} picolm_elf_note;

#define PICOLM_PLUGIN_NOTE(kind_, name_, cpu_required_)                                                          \
    __attribute__((section(".note.picolm"), aligned(4), used)) static const picolm_elf_note picolm_plugin_note = { \
        sizeof PICOLM_NOTE_NAME, sizeof(picolm_note), PICOLM_NOTE_TYPE, PICOLM_NOTE_NAME,                        \
        {PICOLM_ABI_VERSION, (kind_), sizeof(picolm_plugin), (uint32_t)(uint64_t)(cpu_required_),                 \
         (uint32_t)((uint64_t)(cpu_required_) >> 32), name_}}

/* ------------------------------------------------------------------------ */
/* One line per plugin (as SQLite's SQLITE_EXTENSION_INIT1/2): the          */
/* descriptor, its ELF note and the entry symbol, from one set of facts, so  */
/* the note can never disagree with the descriptor.                          */
/*                                                                           */
/*   PICOLM_DEFINE_PLUGIN(PICOLM_KIND_FORMAT, "legacy", "1.0",               */
/*                        "Q4_0 ... (reference code)", 0, 0, &legacy_vtable);*/
/*                                                                           */
/* PICOLM_DEFINE_PLUGIN_EX adds the optional init and fini hooks.            */
/* ------------------------------------------------------------------------ */
#define PICOLM_DEFINE_PLUGIN_EX(kind_, name_, version_, description_, cpu_required_, priority_, vtable_, init_, fini_) \
    static const picolm_plugin picolm_plugin_descriptor = {                                                       \
        .abi_version = PICOLM_ABI_VERSION,                                                                        \
        .struct_size = sizeof(picolm_plugin),                                                                     \
        .kind = (kind_),                                                                                          \
        .name = name_,                                                                                            \
        .version = version_,                                                                                      \
        .description = description_,                                                                              \
        .cpu_required = (cpu_required_),                                                                          \
        .priority = (priority_),                                                                                  \
        .init = init_,                                                                                            \
        .fini = fini_,                                                                                            \
        .vtable = (vtable_),                                                                                      \
    };                                                                                                            \
    PICOLM_PLUGIN_NOTE((kind_), name_, (cpu_required_));                                                          \
    PICOLM_EXPORT const picolm_plugin *picolm_plugin_v1(void) { return &picolm_plugin_descriptor; }
#define PICOLM_DEFINE_PLUGIN(kind_, name_, version_, description_, cpu_required_, priority_, vtable_) \
    PICOLM_DEFINE_PLUGIN_EX(kind_, name_, version_, description_, cpu_required_, priority_, vtable_, NULL, NULL)

/* A sampler plugin in one statement: its vtable (struct_size and the role
   filled in, the members given as designated initializers: .create = ...,
   .apply = ...) and its descriptor. */
#define PICOLM_DEFINE_SAMPLER(name_, version_, description_, role_, ...)                                   \
    static const picolm_sampler_vtable picolm_sampler_vtable_ = {.struct_size = sizeof(picolm_sampler_vtable), \
                                                                 .role = (role_), __VA_ARGS__};           \
    PICOLM_DEFINE_PLUGIN(PICOLM_KIND_SAMPLER, name_, version_, description_, 0, 0, &picolm_sampler_vtable_)

#ifdef __cplusplus
}
#endif
#endif /* PICOLM_PLUGIN_H */
