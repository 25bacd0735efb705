/*
 * llama.cpp's quantization policy, in one place for picolm-quantize and the
 * model synthesiser: its file types ("mixes": Q4_K_M, ...) with their
 * LLAMA_FTYPE_* numbers and default tensor type, the per-tensor type rule
 * (llama_tensor_get_type in llama-quant.cpp, including the fallbacks for rows
 * that are not a whole number of blocks), which tensors it quantizes at all,
 * and the general.file_type number of a pure type.
 */
#ifndef PICOLM_QUANT_POLICY_H
#define PICOLM_QUANT_POLICY_H
#include <stddef.h>
#include <stdint.h>

#include "picolm/blocks.h" /* picolm's own type ids (PICOLM_TYPE_Q4_K_R ...) */
#include "picolm/picolm.h"

/* llama.cpp's LLAMA_FTYPE_* numbers for the types and mixes offered. */
enum {
    QP_FT_ALL_F32 = 0, QP_FT_F16 = 1, QP_FT_Q4_0 = 2, QP_FT_Q4_1 = 3, QP_FT_Q8_0 = 7, QP_FT_Q5_0 = 8, QP_FT_Q5_1 = 9,
    QP_FT_Q2_K = 10, QP_FT_Q3_K_S = 11, QP_FT_Q3_K_M = 12, QP_FT_Q3_K_L = 13, QP_FT_Q4_K_S = 14, QP_FT_Q4_K_M = 15,
    QP_FT_Q5_K_S = 16, QP_FT_Q5_K_M = 17, QP_FT_Q6_K = 18, QP_FT_IQ4_NL = 25, QP_FT_IQ4_XS = 30, QP_FT_BF16 = 32,
    QP_FT_CUSTOM = -1 /* a plugin type llama.cpp has no file type for */
};

/* picolm's repacked mixes store some of the rule's types in another layout
   of the same values: tensors the rule puts in `base` are written as `as`.
   A grouped `as` (row_group > 1) applies only to matrices whose row count is
   a multiple of the group and never to token_embd.weight (read one row at a
   time); those keep `base`. */
typedef struct qp_store {
    uint32_t base, as;   /* as == 0: unused entry */
} qp_store;
#define QP_MAX_STORE 3

typedef struct qp_mix {
    const char *name;
    int ftype;           /* QP_FT_* */
    uint32_t type;       /* default tensor type */
    const char *what;    /* one line for --help */
    qp_store store[QP_MAX_STORE]; /* repacked mixes (Q4_K_M_R, ...); else zero */
} qp_mix;


/* Whether m stores some types repacked (picolm only: no llama.cpp file type). */
int qp_mix_repacked(const qp_mix *m);

/* llama-quantize's types and mixes, in its --help order; name NULL ends it. */
extern const qp_mix qp_mixes[];

/* The mix of that name (case-insensitive), or NULL. */
const qp_mix *qp_find_mix(const char *name);

/* Whether the per-tensor rule applies: not for F32/F16/BF16 defaults. */
int qp_mix_has_policy(const qp_mix *m);

/* Model facts the rule needs. */
typedef struct qp_model {
    int falcon, is_70b, n_expert, n_gqa, n_layer;
    int n_attn_wv;       /* attn_v / attn_qkv / attn_kv_b tensors */
    int has_output;      /* output.weight exists (else token_embd is tied) */
} qp_model;

/* From the architecture name and hyper-parameters (no head_count_kv: pass n_head).
   Then call qp_model_count for every tensor name of the model. */
void qp_model_init(qp_model *m, const char *arch, int n_layer, int n_head, int n_head_kv, int n_expert);
void qp_model_count(qp_model *m, const char *tensor_name);

/* Per-layer counters the rule advances; zero them before the first tensor
   and visit tensors in llama.cpp's order (layer, then name). */
typedef struct qp_counters {
    int i_attn_wv, i_ffn_down, i_ffn_gate, i_ffn_up;
} qp_counters;

/* The type of matrix `name` (row length nx, ny rows per matrix: ne[1])
   under mix m, given the format plugins of rt (block sizes, row groups).  When the chosen type does not fit the row,
   llama.cpp's fallback is taken and *fallback_from (may be NULL) gets the
   type it replaced, else UINT32_MAX.  Returns UINT32_MAX with a message in
   err when no loaded plugin provides a needed type or no fallback exists. */
uint32_t qp_tensor_type(const qp_mix *m, const char *name, int64_t nx, int64_t ny, const qp_model *mf, qp_counters *c,
                        const picolm_runtime *rt, uint32_t *fallback_from, char *err, size_t errlen);

/* The type a tensor the rule puts in t is stored in under m: m's repacked
   layout of t when it has one and it applies (a grouped layout needs ny, the
   rows per matrix, to be a multiple of its row_group, and never applies to
   token_embd.weight), else t.  UINT32_MAX with a message when the layout
   is not loaded.  qp_tensor_type already applies it. */
uint32_t qp_store_as(const qp_mix *m, uint32_t t, const char *name, int64_t ny, const picolm_runtime *rt, char *err, size_t errlen);

/* Elements per block of type t under rt's format plugins (0: none describes it). */
uint32_t qp_block_size(const picolm_runtime *rt, uint32_t t);

/* Whether llama-quantize quantizes a tensor at all (not 1-D, not norms, ...). */
int qp_quantizable(const char *name, uint32_t n_dims);

/* llama.cpp's general.file_type for a file all in one type ("mostly T"), or -1. */
int qp_pure_ftype(uint32_t type);

#endif
