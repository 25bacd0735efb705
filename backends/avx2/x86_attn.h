/*
 * attn_f16 (plugin.h) as a template, included once by each x86 level that
 * has it, after defining its vector width explicitly:
 *   ATTN_FN        the function's name
 *   attn_vec, ATTN_W, attn_ld, attn_st, attn_set1, attn_ld16,
 *   attn_round16, attn_fma, attn_mul   the y update's vector type and ops
 * nq query heads sharing one KV head, through the model's loop arithmetic
 * bit for bit (same dot chains and horizontal sum as x86_dot_f32_f16, same
 * f16 roundings as x86_scale_axpy_f16, libm expf).  Each K and V row is
 * converted once for all the queries, and their y updates are independent
 * chains: the f16 round trips of one query's chain no longer bound the time
 * per position.  The y update is elementwise, so any width gives the same
 * values.
 */
#ifndef ATTN_FN
#error "define ATTN_FN and the attn_* vector ops before including x86_attn.h"
#endif
#define ATTN_CAT2(a, b) a##b
#define ATTN_CAT(a, b) ATTN_CAT2(a, b)
#define ATTN_G ATTN_CAT(ATTN_FN, _g)
AI void ATTN_G(const float *q, size_t q_stride, int nq, const uint16_t *k, const uint16_t *v, size_t kv_stride, int n,
                   const int hd, float scale, float *y, size_t y_stride, float *mx, float *sum) {
    float m_[8], s_[8], sc[8], w_[8], ws_[8];
    for (int j = 0; j < nq; j++) m_[j] = mx[j], s_[j] = sum[j];
    for (int t = 0; t < n; t++) {
        const uint16_t *kr = k + (size_t)t * kv_stride, *vr = v + (size_t)t * kv_stride;
        __m256 kf[16];
        _Pragma("GCC unroll 16") for (int i = 0; i < hd / 8; i++) kf[i] = x86_load_f16(kr, 8 * i);
        for (int j = 0; j < nq; j++) {
            const float *qj = q + (size_t)j * q_stride;
            __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
            _Pragma("GCC unroll 16") for (int i = 0; i < hd / 8; i += 2) {
                s0 = _mm256_fmadd_ps(_mm256_loadu_ps(qj + 8 * i), kf[i], s0);
                s1 = _mm256_fmadd_ps(_mm256_loadu_ps(qj + 8 * i + 8), kf[i + 1], s1);
            }
            sc[j] = x86_hsum_ps(_mm256_add_ps(s0, s1)) * scale;
        }
        /* (libm expf, one per query, as the model's own loop: a vector exp
           changes last bits that greedy near-ties depend on) */
        for (int j = 0; j < nq; j++) attn_softmax_step(sc[j], &m_[j], &s_[j], &ws_[j], &w_[j]);
        attn_vec vf[16];
        _Pragma("GCC unroll 16") for (int i = 0; i < hd / ATTN_W; i++) vf[i] = attn_ld16(vr + ATTN_W * i);
        for (int j = 0; j < nq; j++) {
            float *yj = y + (size_t)j * y_stride;
            const attn_vec va = attn_set1(w_[j]), vs = attn_set1(ws_[j]);
            if (ws_[j] != 1.0f)
                _Pragma("GCC unroll 16") for (int i = 0; i < hd / ATTN_W; i++)
                    attn_st(yj + ATTN_W * i, attn_round16(attn_fma(va, vf[i], attn_round16(attn_mul(attn_ld(yj + ATTN_W * i), vs)))));
            else
                _Pragma("GCC unroll 16") for (int i = 0; i < hd / ATTN_W; i++)
                    attn_st(yj + ATTN_W * i, attn_round16(attn_fma(va, vf[i], attn_ld(yj + ATTN_W * i))));
        }
    }
    for (int j = 0; j < nq; j++) mx[j] = m_[j], sum[j] = s_[j];
}
static void ATTN_FN(const float *q, size_t q_stride, int nq, const uint16_t *k, const uint16_t *v,
                                                  size_t kv_stride, int n, int hd, float scale, float *y, size_t y_stride, float *mx,
                                                  float *sum) {
    for (int j0 = 0; j0 < nq; j0 += 8) {
        const int c = nq - j0 < 8 ? nq - j0 : 8;
        const float *qc = q + (size_t)j0 * q_stride;
        float *yc = y + (size_t)j0 * y_stride;
        if (hd == 64) ATTN_G(qc, q_stride, c, k, v, kv_stride, n, 64, scale, yc, y_stride, mx + j0, sum + j0);
        else if (hd == 128) ATTN_G(qc, q_stride, c, k, v, kv_stride, n, 128, scale, yc, y_stride, mx + j0, sum + j0);
        else /* other head sizes: the two primitives, as the model's own loop */
            for (int j = j0; j < j0 + c; j++)
                for (int t = 0; t < n; t++) {
                    float ws, w;
                    attn_softmax_step(x86_dot_f32_f16(q + (size_t)j * q_stride, k + (size_t)t * kv_stride, hd) * scale, &mx[j],
                                      &sum[j], &ws, &w);
                    x86_scale_axpy_f16(y + (size_t)j * y_stride, ws, w, v + (size_t)t * kv_stride, hd);
                }
    }
}
#undef ATTN_G
