/* llama.cpp's quantization policy: see quant_policy.h.  The facts come from
   llama_tensor_get_type and llama_model_quantize_impl in llama-quant.cpp. */
#include "quant_policy.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>


const qp_mix qp_mixes[] = {
    {"F32", QP_FT_ALL_F32, PICOLM_TYPE_F32, "32.0 bpw, no quantization", {{0}}},
    {"F16", QP_FT_F16, PICOLM_TYPE_F16, "16.0 bpw", {{0}}},
    {"BF16", QP_FT_BF16, PICOLM_TYPE_BF16, "16.0 bpw", {{0}}},
    {"Q8_0", QP_FT_Q8_0, PICOLM_TYPE_Q8_0, "8.5 bpw", {{0}}},
    {"Q6_K", QP_FT_Q6_K, PICOLM_TYPE_Q6_K, "6.56 bpw", {{0}}},
    {"Q5_1", QP_FT_Q5_1, PICOLM_TYPE_Q5_1, "6.0 bpw", {{0}}},
    {"Q5_0", QP_FT_Q5_0, PICOLM_TYPE_Q5_0, "5.5 bpw", {{0}}},
    {"Q5_K_M", QP_FT_Q5_K_M, PICOLM_TYPE_Q5_K, "Q5_K, Q6_K for output and half of attn_v/ffn_down", {{0}}},
    {"Q5_K", QP_FT_Q5_K_M, PICOLM_TYPE_Q5_K, "alias of Q5_K_M (as llama-quantize)", {{0}}},
    {"Q5_K_S", QP_FT_Q5_K_S, PICOLM_TYPE_Q5_K, "Q5_K, Q6_K for output", {{0}}},
    {"Q4_1", QP_FT_Q4_1, PICOLM_TYPE_Q4_1, "5.0 bpw", {{0}}},
    {"Q4_0", QP_FT_Q4_0, PICOLM_TYPE_Q4_0, "4.5 bpw", {{0}}},
    {"Q4_K_M", QP_FT_Q4_K_M, PICOLM_TYPE_Q4_K, "Q4_K, Q6_K for output and half of attn_v/ffn_down", {{0}}},
    {"Q4_K", QP_FT_Q4_K_M, PICOLM_TYPE_Q4_K, "alias of Q4_K_M (as llama-quantize)", {{0}}},
    {"Q4_K_S", QP_FT_Q4_K_S, PICOLM_TYPE_Q4_K, "Q4_K, Q5_K for early attn_v/ffn_down", {{0}}},
    /* picolm's own: Q4_K_M's per-tensor rule, Q4_K tensors stored as Q4_K_R
       (same values, scales pre-unpacked for the kernels; needs format-repack) */
    {"Q4_K_M_R", QP_FT_Q4_K_M, PICOLM_TYPE_Q4_K, "Q4_K_M with Q4_K stored as Q4_K_R (picolm only, faster kernels)",
     {{PICOLM_TYPE_Q4_K, PICOLM_TYPE_Q4_K_R}}},
    /* ... and with 16 rows interleaved (Q4_K_R16 / Q6_K_R16: integer GEMM
       tiles for prefill; Q5_0_R16 for the Q5_0 that rows not a multiple of
       256 fall back to, e.g. Qwen2.5's 896); token_embd and odd row counts
       keep Q4_K / Q6_K / Q5_0 */
    {"Q4_K_M_R16", QP_FT_Q4_K_M, PICOLM_TYPE_Q4_K, "Q4_K_M with Q4_K/Q6_K/Q5_0 stored 16 rows interleaved (picolm only, fast prefill)",
     {{PICOLM_TYPE_Q4_K, PICOLM_TYPE_Q4_K_R16}, {PICOLM_TYPE_Q6_K, PICOLM_TYPE_Q6_K_R16}, {PICOLM_TYPE_Q5_0, PICOLM_TYPE_Q5_0_R16}}},
    /* ... and with Q4_K as Q4_K_R16N: the same bytes as Q4_K_R16, a dot
       product of its own (row numerics) that needs no cross-lane sums */
    {"Q4_K_M_R16N", QP_FT_Q4_K_M, PICOLM_TYPE_Q4_K, "Q4_K_M_R16 with Q4_K as Q4_K_R16N (row numerics: faster prefill on avx2)",
     {{PICOLM_TYPE_Q4_K, PICOLM_TYPE_Q4_K_R16N}, {PICOLM_TYPE_Q6_K, PICOLM_TYPE_Q6_K_R16}, {PICOLM_TYPE_Q5_0, PICOLM_TYPE_Q5_0_R16}}},
    {"IQ4_NL", QP_FT_IQ4_NL, PICOLM_TYPE_IQ4_NL, "4.5 bpw non-linear", {{0}}},
    {"IQ4_XS", QP_FT_IQ4_XS, PICOLM_TYPE_IQ4_XS, "4.25 bpw non-linear", {{0}}},
    {"Q3_K_L", QP_FT_Q3_K_L, PICOLM_TYPE_Q3_K, "Q3_K, Q5_K for attn_v/attn_output/ffn_down", {{0}}},
    {"Q3_K_M", QP_FT_Q3_K_M, PICOLM_TYPE_Q3_K, "Q3_K, Q4_K/Q5_K for attn_v/attn_output/ffn_down", {{0}}},
    {"Q3_K", QP_FT_Q3_K_M, PICOLM_TYPE_Q3_K, "alias of Q3_K_M (as llama-quantize)", {{0}}},
    {"Q3_K_S", QP_FT_Q3_K_S, PICOLM_TYPE_Q3_K, "Q3_K, Q6_K for output", {{0}}},
    {"Q2_K", QP_FT_Q2_K, PICOLM_TYPE_Q2_K, "Q2_K, Q3_K/Q4_K for attn_v/attn_output/ffn_down", {{0}}},
    {NULL, 0, 0, NULL, {{0}}},
};

const qp_mix *qp_find_mix(const char *name) {
    for (const qp_mix *m = qp_mixes; m->name; m++)
        if (!strcasecmp(m->name, name)) return m;
    return NULL;
}

int qp_mix_repacked(const qp_mix *m) { return m->store[0].as != 0; }

int qp_mix_has_policy(const qp_mix *m) {
    return m->type != PICOLM_TYPE_F32 && m->type != PICOLM_TYPE_F16 && m->type != PICOLM_TYPE_BF16;
}

void qp_model_init(qp_model *m, const char *arch, int n_layer, int n_head, int n_head_kv, int n_expert) {
    *m = (qp_model){0};
    m->falcon = !strcmp(arch, "falcon");
    m->n_layer = n_layer;
    m->n_gqa = n_head && n_head_kv ? n_head / n_head_kv : 1;
    m->n_expert = n_expert;
    m->is_70b = !strcmp(arch, "llama") && n_layer == 80 && n_head != n_head_kv;
}

void qp_model_count(qp_model *m, const char *name) {
    if (strstr(name, "attn_v.weight") || strstr(name, "attn_qkv.weight") || strstr(name, "attn_kv_b.weight")) m->n_attn_wv++;
    else if (!strcmp(name, "output.weight")) m->has_output = 1;
}

/* More bits for the first and last eighth of the layers and every third one between. */
static int use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

uint32_t qp_block_size(const picolm_runtime *rt, uint32_t t) {
    picolm_type_info ti;
    return picolm_runtime_type(rt, t, &ti) ? 0 : ti.format->block_size;
}

/* A type's name as the messages spell it. */
static const char *type_name(const picolm_runtime *rt, uint32_t t) {
    picolm_type_info ti;
    picolm_runtime_type(rt, t, &ti);
    return ti.name;
}

uint32_t qp_tensor_type(const qp_mix *m, const char *name, int64_t nx, int64_t ny, const qp_model *q, qp_counters *c,
                        const picolm_runtime *rt, uint32_t *fallback_from, char *err, size_t errlen) {
    const int ft = m->ftype;
    uint32_t t = m->type;
    if (fallback_from) *fallback_from = UINT32_MAX;
    if (!strcmp(name, "output.weight") || (!q->has_output && !strcmp(name, "token_embd.weight"))) {
        const uint32_t bs = qp_block_size(rt, t);
        if (q->falcon || !bs || nx % bs) t = PICOLM_TYPE_Q8_0;
        else if (t != PICOLM_TYPE_Q8_0) t = PICOLM_TYPE_Q6_K;
    } else if (!strcmp(name, "token_embd.weight")) {
        /* only the IQ1/IQ2/IQ3 and ternary mixes change it; none is offered */
    } else if (strstr(name, "attn_v.weight")) {
        if (ft == QP_FT_Q2_K) t = q->n_gqa >= 4 ? PICOLM_TYPE_Q4_K : PICOLM_TYPE_Q3_K;
        else if (ft == QP_FT_Q3_K_M) t = c->i_attn_wv < 2 ? PICOLM_TYPE_Q5_K : PICOLM_TYPE_Q4_K;
        else if (ft == QP_FT_Q3_K_L) t = PICOLM_TYPE_Q5_K;
        else if ((ft == QP_FT_IQ4_NL || ft == QP_FT_IQ4_XS) && q->n_gqa >= 4) t = PICOLM_TYPE_Q5_K;
        else if ((ft == QP_FT_Q4_K_M || ft == QP_FT_Q5_K_M) && use_more_bits(c->i_attn_wv, q->n_attn_wv)) t = PICOLM_TYPE_Q6_K;
        else if (ft == QP_FT_Q4_K_S && c->i_attn_wv < 4) t = PICOLM_TYPE_Q5_K;
        /* 70B: 8 query heads share each attn_v, so more bits cost little */
        if (q->is_70b && (t == PICOLM_TYPE_Q3_K || t == PICOLM_TYPE_Q4_K)) t = PICOLM_TYPE_Q5_K;
        if (q->n_expert == 8) t = PICOLM_TYPE_Q8_0;
        c->i_attn_wv++;
    } else if (strstr(name, "attn_k.weight")) {
        if (q->n_expert == 8) t = PICOLM_TYPE_Q8_0;
    } else if (strstr(name, "ffn_down")) {
        const int i = c->i_ffn_down, n = q->n_layer;
        if (ft == QP_FT_Q2_K) t = PICOLM_TYPE_Q3_K;
        else if (ft == QP_FT_Q3_K_M)
            t = i < n / 16 ? PICOLM_TYPE_Q5_K : !q->falcon || use_more_bits(i, n) ? PICOLM_TYPE_Q4_K : PICOLM_TYPE_Q3_K;
        else if (ft == QP_FT_Q3_K_L) t = q->falcon ? PICOLM_TYPE_Q4_K : PICOLM_TYPE_Q5_K;
        else if (ft == QP_FT_Q4_K_M) {
            if (q->falcon) t = i < n / 16 ? PICOLM_TYPE_Q6_K : use_more_bits(i, n) ? PICOLM_TYPE_Q5_K : PICOLM_TYPE_Q4_K;
            else if (use_more_bits(i, n)) t = PICOLM_TYPE_Q6_K;
        } else if (i < n / 8 && (ft == QP_FT_IQ4_NL || ft == QP_FT_IQ4_XS)) t = PICOLM_TYPE_Q5_K; /* no imatrix */
        else if (ft == QP_FT_Q5_K_M && use_more_bits(i, n)) t = PICOLM_TYPE_Q6_K;
        else if (ft == QP_FT_Q4_K_S && !q->falcon && i < n / 8) t = PICOLM_TYPE_Q5_K;
        c->i_ffn_down++;
    } else if (strstr(name, "attn_output.weight")) {
        if (!q->falcon) {
            if (q->n_expert == 8) {
                if (ft == QP_FT_Q2_K || ft == QP_FT_Q3_K_S || ft == QP_FT_Q3_K_M || ft == QP_FT_IQ4_NL || ft == QP_FT_Q4_K_S ||
                    ft == QP_FT_Q4_K_M || ft == QP_FT_IQ4_XS)
                    t = PICOLM_TYPE_Q5_K;
            } else if (ft == QP_FT_Q2_K) t = PICOLM_TYPE_Q3_K;
            else if (ft == QP_FT_Q3_K_M) t = PICOLM_TYPE_Q4_K;
            else if (ft == QP_FT_Q3_K_L) t = PICOLM_TYPE_Q5_K;
        } else if (ft == QP_FT_Q3_K_L) t = PICOLM_TYPE_Q4_K;
    } else if (strstr(name, "attn_qkv.weight")) {
        if (ft == QP_FT_Q3_K_M || ft == QP_FT_Q3_K_L) t = PICOLM_TYPE_Q4_K;
        else if (ft == QP_FT_Q4_K_M) t = PICOLM_TYPE_Q5_K;
        else if (ft == QP_FT_Q5_K_M) t = PICOLM_TYPE_Q6_K;
    } else if (strstr(name, "ffn_gate")) {
        c->i_ffn_gate++;
    } else if (strstr(name, "ffn_up")) {
        c->i_ffn_up++;
    }
    /* Rows that are not a whole number of blocks: llama.cpp's fallbacks. */
    uint32_t bs = qp_block_size(rt, t);
    if (!bs) {
        snprintf(err, errlen, "tensor '%s' needs type %s, which no loaded format plugin provides", name, type_name(rt, t));
        return UINT32_MAX;
    }
    if (nx % bs) {
        const uint32_t from = t;
        switch (t) {
        case PICOLM_TYPE_Q2_K: case PICOLM_TYPE_Q3_K: case PICOLM_TYPE_IQ4_XS: t = PICOLM_TYPE_IQ4_NL; break;
        case PICOLM_TYPE_Q4_K: t = PICOLM_TYPE_Q5_0; break;
        case PICOLM_TYPE_Q5_K: t = PICOLM_TYPE_Q5_1; break;
        case PICOLM_TYPE_Q6_K: t = PICOLM_TYPE_Q8_0; break;
        default:
            snprintf(err, errlen, "tensor '%s': row length %lld is not a multiple of %s's block size %u", name, (long long)nx,
                     type_name(rt, t), bs);
            return UINT32_MAX;
        }
        bs = qp_block_size(rt, t);
        if (!bs || nx % bs) t = PICOLM_TYPE_F16;
        if (fallback_from) *fallback_from = from;
    }
    return qp_store_as(m, t, name, ny, rt, err, errlen);
}

uint32_t qp_store_as(const qp_mix *m, uint32_t t, const char *name, int64_t ny, const picolm_runtime *rt, char *err, size_t errlen) {
    for (int k = 0; k < QP_MAX_STORE && m->store[k].as; k++) {
        const uint32_t as = m->store[k].as;
        if (t != m->store[k].base) continue;
        picolm_type_info pt;
        if (picolm_runtime_type(rt, as, &pt) || pt.format->block_size != qp_block_size(rt, t)) {
            snprintf(err, errlen, "tensor '%s' needs type %u (mix %s: %s repacked), which no loaded format plugin provides "
                     "with %s's block size", name, as, m->name, type_name(rt, t), type_name(rt, t));
            return UINT32_MAX;
        }
        /* a group of rows is indivisible: whole groups only, and never the
           embeddings, which the loader reads one row at a time */
        if (pt.row_group > 1 && (ny % pt.row_group || !strcmp(name, "token_embd.weight"))) return t;
        return as;
    }
    return t;
}

int qp_quantizable(const char *n, uint32_t n_dims) {
    const size_t l = strlen(n);
    if (l < 6 || strcmp(n + l - 6, "weight")) return 0;
    if (n_dims < 2) return 0;
    static const char *skip[] = {"_norm.weight", "ffn_gate_inp.weight", "ssm_conv1d.weight", "shortconv.conv.weight", "attn_rel_b.weight"};
    for (size_t i = 0; i < sizeof skip / sizeof *skip; i++)
        if (strstr(n, skip[i])) return 0;
    if (!strcmp(n, "position_embd.weight") || !strcmp(n, "token_types.weight")) return 0;
    return 1;
}

int qp_pure_ftype(uint32_t t) {
    switch (t) {
    case PICOLM_TYPE_F32: return QP_FT_ALL_F32;
    case PICOLM_TYPE_F16: return QP_FT_F16;
    case PICOLM_TYPE_Q4_0: return QP_FT_Q4_0;
    case PICOLM_TYPE_Q4_1: return QP_FT_Q4_1;
    case PICOLM_TYPE_Q8_0: return QP_FT_Q8_0;
    case PICOLM_TYPE_Q5_0: return QP_FT_Q5_0;
    case PICOLM_TYPE_Q5_1: return QP_FT_Q5_1;
    case PICOLM_TYPE_Q2_K: return QP_FT_Q2_K;
    case PICOLM_TYPE_Q3_K: return QP_FT_Q3_K_S;
    case PICOLM_TYPE_Q4_K: return QP_FT_Q4_K_S;
    case PICOLM_TYPE_Q5_K: return QP_FT_Q5_K_S;
    case PICOLM_TYPE_Q6_K: return QP_FT_Q6_K;
    case PICOLM_TYPE_IQ4_NL: return QP_FT_IQ4_NL;
    case PICOLM_TYPE_IQ4_XS: return QP_FT_IQ4_XS;
    case PICOLM_TYPE_BF16: return QP_FT_BF16;
    default: return -1;
    }
}
