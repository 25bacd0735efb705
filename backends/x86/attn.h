/*
 * attn_f16 (plugin.h) as a template, included once by each x86 level that
 * has it, after defining its vector width explicitly:
 *   ATTN_FN        the function's name
 *   attn_vec, ATTN_W, attn_ld, attn_st, attn_set1, attn_ld16,
 *   attn_round16, attn_fma, attn_mul   the y update's vector type and ops
 *   ATTN_EXPF8     the level's vector expf (avx2/expf.h, avx512/expf.h),
 *                  taken where its tune hook found it equal to libm's
 * nq query heads sharing one KV head, through the model's loop arithmetic
 * bit for bit (same dot chains and horizontal sum as x86_dot_f32_f16, same
 * f16 roundings as x86_scale_axpy_f16, libm's expf values).  Each K and V row is
 * converted once for all the queries, and their y updates are independent
 * chains: the f16 round trips of one query's chain no longer bound the time
 * per position.  The y update is elementwise, so any width gives the same
 * values.  Up to 8 queries' scores, maxima and sums are lanes of one vector:
 * their horizontal sums are done together (x86_hsum8_ps) and their softmax
 * steps with one vector expf, where it is libm's bit for bit (ATTN_G: the
 * tuning record's attn_expf, set by the level's tune hook at init);
 * elsewhere libm's expf per query, one position at a time (ATTN_GL).
 */
#ifndef ATTN_FN
#error "define ATTN_FN and the attn_* vector ops before including x86/attn.h"
#endif
#define ATTN_CAT2(a, b) a##b
#define ATTN_CAT(a, b) ATTN_CAT2(a, b)
#define ATTN_G ATTN_CAT(ATTN_FN, _g)
#define ATTN_GL ATTN_CAT(ATTN_FN, _gl)
#define ATTN_Y ATTN_CAT(ATTN_FN, _y)
/* query j's dot vector against the converted K row (x86_dot_f32_f16's
   chains; 0 past the nq queries) */
AI __m256 ATTN_CAT(ATTN_FN, _dot)(const float *q, size_t q_stride, int j, int nq, const __m256 *kf, const int hd) {
    if (j >= nq) return _mm256_setzero_ps();
    const float *qj = q + (size_t)j * q_stride;
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    _Pragma("GCC unroll 16") for (int i = 0; i < hd / 8; i += 2) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(qj + 8 * i), kf[i], s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(qj + 8 * i + 8), kf[i + 1], s1);
    }
    return _mm256_add_ps(s0, s1);
}
/* attn_softmax_step on 8 lanes, ATTN_EXPF8 for libm's expf */
AI void ATTN_CAT(ATTN_FN, _softmax8)(__m256 sc, __m256 *m, __m256 *sum, float *ws, float *w) {
    const __m256 gt = _mm256_cmp_ps(sc, *m, _CMP_GT_OQ), one = _mm256_set1_ps(1.0f);
    const __m256 e = ATTN_EXPF8(_mm256_blendv_ps(_mm256_sub_ps(sc, *m), _mm256_sub_ps(*m, sc), gt));
    const __m256 vws = _mm256_blendv_ps(one, e, gt), vw = _mm256_blendv_ps(e, one, gt);
    *m = _mm256_blendv_ps(*m, sc, gt);
    *sum = _mm256_add_ps(_mm256_mul_ps(*sum, vws), vw);
    _mm256_storeu_ps(ws, vws);
    _mm256_storeu_ps(w, vw);
}
/* y rows of nqg queries (j0.. of the block's weights), nv vectors each, in
   registers over the block's nb positions: the axpy steps of
   x86_scale_axpy_f16 in position order, V rows from vb (converted) */
AI void ATTN_Y(float *y, size_t y_stride, int j0, const int nqg, const int nv, const float (*ws)[8], const float (*w)[8],
               const float *vb, const int hd, int nb) {
    attn_vec acc[8];
    _Pragma("GCC unroll 8") for (int g = 0; g < nqg; g++)
        _Pragma("GCC unroll 8") for (int i = 0; i < nv; i++) acc[g * nv + i] = attn_ld(y + (size_t)g * y_stride + ATTN_W * i);
    for (int t = 0; t < nb; t++)
        _Pragma("GCC unroll 8") for (int g = 0; g < nqg; g++) {
            const float a = w[t][j0 + g], sc = ws[t][j0 + g];
            const attn_vec va = attn_set1(a);
            if (sc != 1.0f) {
                const attn_vec vs = attn_set1(sc);
                _Pragma("GCC unroll 8") for (int i = 0; i < nv; i++) acc[g * nv + i] = attn_round16(attn_mul(acc[g * nv + i], vs));
            }
            _Pragma("GCC unroll 8") for (int i = 0; i < nv; i++)
                acc[g * nv + i] = attn_round16(attn_fma(va, attn_ld(vb + (size_t)t * hd + ATTN_W * i), acc[g * nv + i]));
        }
    _Pragma("GCC unroll 8") for (int g = 0; g < nqg; g++)
        _Pragma("GCC unroll 8") for (int i = 0; i < nv; i++) attn_st(y + (size_t)g * y_stride + ATTN_W * i, acc[g * nv + i]);
}
/* Positions in blocks of ATTN_B: first each position's scores and softmax
   step (a short chain through the maxima and sums, so that the expf
   latencies overlap), then the y updates, with y in registers across the
   block, 8 vectors at a time (enough independent f16 round trips to fill
   the pipeline).  2 positions measured best: longer blocks keep the scores
   from overlapping with the avx2 level's y updates, bound by the f16
   conversions; 1 reloads y for each. */
#define ATTN_B 2
AI void ATTN_G(const float *q, size_t q_stride, int nq, const uint16_t *k, const uint16_t *v, size_t kv_stride, int n,
                   const int hd, float scale, float *y, size_t y_stride, float *mx, float *sum) {
    float m_[8] = {0}, s_[8] = {0}, w_[ATTN_B][8], ws_[ATTN_B][8];
    float vb[ATTN_B * 128] __attribute__((aligned(64))); /* the block's V rows, converted */
    for (int j = 0; j < nq; j++) m_[j] = mx[j], s_[j] = sum[j];
    __m256 vm = _mm256_loadu_ps(m_), vsum = _mm256_loadu_ps(s_);
    const __m256 vscale = _mm256_set1_ps(scale);
    const int nv = hd / ATTN_W; /* vectors per y row */
    for (int t0 = 0; t0 < n; t0 += ATTN_B) {
        const int nb = n - t0 < ATTN_B ? n - t0 : ATTN_B;
        for (int t = 0; t < nb; t++) {
            const uint16_t *kr = k + (size_t)(t0 + t) * kv_stride, *vr = v + (size_t)(t0 + t) * kv_stride;
            __m256 kf[16];
            _Pragma("GCC unroll 16") for (int i = 0; i < hd / 8; i++) kf[i] = x86_load_f16(kr, 8 * i);
            __m256 u[4];
            _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++)
                u[j] = x86_hsum8_halves(ATTN_CAT(ATTN_FN, _dot)(q, q_stride, j, nq, kf, hd), ATTN_CAT(ATTN_FN, _dot)(q, q_stride, j + 4, nq, kf, hd));
            ATTN_CAT(ATTN_FN, _softmax8)(_mm256_mul_ps(x86_hsum8_ps(u), vscale), &vm, &vsum, ws_[t], w_[t]);
            _Pragma("GCC unroll 16") for (int i = 0; i < nv; i++) attn_st(vb + t * hd + ATTN_W * i, attn_ld16(vr + ATTN_W * i));
        }
        if (nv >= 8) /* one query, 8 vectors of its row at a time */
            for (int j = 0; j < nq; j++)
                for (int i = 0; i < nv; i += 8)
                    ATTN_Y(y + (size_t)j * y_stride + ATTN_W * i, y_stride, j, 1, 8, ws_, w_, vb + ATTN_W * i, hd, nb);
        else { /* 8 / nv queries at a time */
            int j = 0;
            for (; j + 8 / nv <= nq; j += 8 / nv) ATTN_Y(y + (size_t)j * y_stride, y_stride, j, 8 / nv, nv, ws_, w_, vb, hd, nb);
            for (; j < nq; j++) ATTN_Y(y + (size_t)j * y_stride, y_stride, j, 1, nv, ws_, w_, vb, hd, nb);
        }
    }
    _mm256_storeu_ps(m_, vm);
    _mm256_storeu_ps(s_, vsum);
    for (int j = 0; j < nq; j++) mx[j] = m_[j], sum[j] = s_[j];
}
/* Where ATTN_EXPF8 is not libm's expf: one position at a time, libm's expf
   query by query (the template before the vector expf) */
AI void ATTN_GL(const float *q, size_t q_stride, int nq, const uint16_t *k, const uint16_t *v, size_t kv_stride, int n,
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
    /* (another libm, musl or an older glibc, rounds some values otherwise) */
    const int vexp = pk_tuning.attn_expf == PK_EXPF_VECTOR;
    for (int j0 = 0; j0 < nq; j0 += 8) {
        const int c = nq - j0 < 8 ? nq - j0 : 8;
        const float *qc = q + (size_t)j0 * q_stride;
        float *yc = y + (size_t)j0 * y_stride;
        if (hd == 64 && vexp) ATTN_G(qc, q_stride, c, k, v, kv_stride, n, 64, scale, yc, y_stride, mx + j0, sum + j0);
        else if (hd == 128 && vexp) ATTN_G(qc, q_stride, c, k, v, kv_stride, n, 128, scale, yc, y_stride, mx + j0, sum + j0);
        else if (hd == 64) ATTN_GL(qc, q_stride, c, k, v, kv_stride, n, 64, scale, yc, y_stride, mx + j0, sum + j0);
        else if (hd == 128) ATTN_GL(qc, q_stride, c, k, v, kv_stride, n, 128, scale, yc, y_stride, mx + j0, sum + j0);
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
#undef ATTN_GL
#undef ATTN_Y
#undef ATTN_B
