/*
 * Repacked weight layouts: picolm-specific type ids (>= 1024) that store a
 * ggml format in the order a fast kernel wants, written by picolm-quantize
 * and mapped by the loader like any other format (no load-time copy).
 *
 * Q4_K_R (PICOLM_TYPE_Q4_K_R, blocks.h): Q4_K with its 6-bit scales and mins
 * pre-unpacked to one byte each.  One block = one superblock of 256 elements of one row:
 *
 *   fp16 d, fp16 dmin, u8 scale[8], u8 min[8], u8 qs[128]  (148 bytes)
 *
 * qs is Q4_K's nibble order unchanged (qs[32j + l]: element 64j + l in the
 * low nibble, 64j + 32 + l in the high nibble).  The values are exactly
 * Q4_K's: y = d * scale_j * q - dmin * min_j, so converting a Q4_K tensor
 * loses nothing, and dequantize_row equals Q4_K's bit for bit.
 *
 * Why Q4_K_R is per-row: it predates row groups (ABI 0.2); an interleaved
 * group cannot be decoded a row at a time, and the one-row ABI needed that.
 * The pre-unpacked scales remove the scalar 6-bit unpacking from every
 * kernel at the cost of 4 bytes per superblock (+2.8% bytes).  See
 * docs/perf.md.  Q4_K_R16 / Q6_K_R16 (further down) use picolm_format's
 * row_group to interleave 16 rows.
 *
 * The quantizer is Q4_K's reference quantizer (kquants.c, included below so
 * that both are the same code), followed by the unpacking.
 */
#define PICOLM_KQUANTS_NO_PLUGIN /* its code only: one descriptor, note and entry per file */
#include "kquants.c"
#define PICOLM_LEGACY_NO_PLUGIN /* Q5_0's reference code, for Q5_0_R16 */
#include "legacy.c"
#undef W
#undef A

/* One Q4_K superblock -> Q4_K_R (exact). */
static void q4_K_r_from_q4_K(const block_q4_K *s, block_q4_K_r *d) {
    d->d = s->d;
    d->dmin = s->dmin;
    for (int j = 0; j < QK_K / 32; j++) get_scale_min_k4(j, s->scales, &d->sc[j], &d->m[j]);
    memcpy(d->qs, s->qs, sizeof d->qs);
}

/* Q4_K_R -> Q4_K's packed scales (exact: the values are 6-bit) */
static void q4_K_r_to_q4_K(const block_q4_K_r *s, block_q4_K *d) {
    d->d = s->d;
    d->dmin = s->dmin;
    memset(d->scales, 0, sizeof d->scales);
    for (int j = 0; j < QK_K / 32; j++) pack_scale_min_k4(d->scales, j, s->sc[j] & 63, s->m[j] & 63);
    memcpy(d->qs, s->qs, sizeof d->qs);
}

/* superblock i as Q4_K (kquants.c's view, through v->tmp) */
static void q4_K_r_view(const void *x, int64_t i, k4_view *v) {
    q4_K_r_to_q4_K((const block_q4_K_r *)x + i, &v->tmp);
    q4_K_view(&v->tmp, 0, v);
}

static void q4_K_r_dequantize(const void *src, float *y, int64_t n) { k4_dequantize(src, y, n, q4_K_r_view); }

static void q4_K_r_quantize(const float *x, void *dst, int64_t n) {
    block_q4_K_r *y = dst;
    const int64_t nb = n / QK_K;
    for (int64_t i = 0; i < nb; i++) {
        block_q4_K b;
        q4_K_quantize(x + i * QK_K, &b, QK_K);
        q4_K_r_from_q4_K(&b, &y[i]);
    }
}

/* from_base: one Q4_K row (not grouped: src_stride unused) -> Q4_K_R, exact. */
static void q4_K_r_from_base(const void *src, size_t src_stride, void *dst, int64_t n) {
    (void)src_stride;
    const block_q4_K *x = src;
    block_q4_K_r *y = dst;
    for (int64_t i = 0; i < n / QK_K; i++) q4_K_r_from_q4_K(&x[i], &y[i]);
}

/* Q4_K's scalar reference dot, superblock by superblock (same float order). */
static void q4_K_r_vec_dot(int64_t n, float *s, const void *vx, const void *vy) { k4_vec_dot(n, s, vx, vy, q4_K_r_view); }

/* ======================================================================== */
/* Q4_K_R16 and Q6_K_R16: 16 rows interleaved (layouts in blocks.h)          */
/* ======================================================================== */
/*
 * One block = one superblock (256 columns) of 16 consecutive rows, arranged
 * so that a 64-byte vector holds the same 4 columns of all 16 rows (a 32-bit
 * lane per row: vpdpbusd / sdot).  The values are exactly the base format's,
 * so:
 *   - from_base is a pure permutation (picolm-quantize repacks a Q4_K_M
 *     file losslessly);
 *   - quantize_row is the base reference quantizer followed by from_base,
 *     so the bytes are a repacked llama-quantize result;
 *   - dequantize_row and vec_dot below read each row back through the small
 *     accessors (quant, scale, min of row r, column c) and then follow the
 *     base format's reference code expression by expression: same integer
 *     sums, same float steps in the same order, hence bit-identical results
 *     row by row.  They are written for clarity, not speed: they are the
 *     specification the SIMD kernels are tested against.
 * The accessors spell out the layout once; nothing else indexes the arrays.
 */
#define R16 PICOLM_ROWS_R16

/* --- base layouts, one column at a time ---------------------------------- */

/* Q4_K: qs[32j + l] holds element 64j + l (low nibble), 64j + 32 + l (high). */
static inline int q4k_quant(const block_q4_K *b, int c) {
    const uint8_t byte = b->qs[32 * (c / 64) + c % 32];
    return c % 64 < 32 ? byte & 0xF : byte >> 4;
}

/* Q6_K (unsigned 0..63): per half h of 128, element 128h + 32m + l has its
   low 4 bits in ql[64h + l + 32(m & 1)] (nibble m >> 1) and its high 2 bits
   in qh[32h + l] bits 2m..2m+1. */
static inline int q6k_quant(const block_q6_K *b, int c) {
    const int h = c / 128, m = (c % 128) / 32, l = c % 32;
    const int lo = (b->ql[64 * h + l + 32 * (m & 1)] >> (4 * (m >> 1))) & 0xF;
    const int hi = (b->qh[32 * h + l] >> (2 * m)) & 3;
    return lo | hi << 4;
}

/* --- Q4_K_R16 accessors (row r, column c, sub-block s of 32) ------------- */

/* qs[4s + k][4r + i]: column 32s + 4k + i in the low nibble, +16 in the high. */
static inline uint8_t *q4r16_qbyte(block_q4_K_r16 *b, int r, int c, int *shift) {
    const int s = c / 32, w = c % 32;
    *shift = w < 16 ? 0 : 4;
    return &b->qs[4 * s + (w % 16) / 4][4 * r + w % 4];
}
static inline int q4r16_quant(const block_q4_K_r16 *b, int r, int c) {
    int sh;
    const uint8_t byte = *q4r16_qbyte((block_q4_K_r16 *)b, r, c, &sh); /* sets sh: sequence it first */
    return (byte >> sh) & 0xF;
}
/* (the byte first, then the shift it sets: the two operands of |= are
   unsequenced, and clang evaluated q << sh first) */
static inline void q4r16_set_quant(block_q4_K_r16 *b, int r, int c, int q) {
    int sh;
    uint8_t *p = q4r16_qbyte(b, r, c, &sh);
    *p |= (uint8_t)(q << sh);
}

/* A 6-bit value split as in the scales/mins arrays: low 4 bits in nibble
   s % 2 of lo[s / 2][r], high 2 bits at bits 2(s % 4) of hi[s / 4][r]. */
static inline int r16_get6(const uint8_t lo[][16], const uint8_t hi[][16], int r, int s) {
    return ((lo[s / 2][r] >> (4 * (s % 2))) & 0xF) | ((hi[s / 4][r] >> (2 * (s % 4))) & 3) << 4;
}
static inline void r16_set6(uint8_t lo[][16], uint8_t hi[][16], int r, int s, int v) {
    lo[s / 2][r] |= (uint8_t)((v & 0xF) << (4 * (s % 2)));
    hi[s / 4][r] |= (uint8_t)((v >> 4) << (2 * (s % 4)));
}
static inline int q4r16_scale(const block_q4_K_r16 *b, int r, int s) { return r16_get6(b->scales_l, b->scales_h, r, s); }
static inline int q4r16_min(const block_q4_K_r16 *b, int r, int s) { return r16_get6(b->mins_l, b->mins_h, r, s); }

/* --- Q6_K_R16 accessors -------------------------------------------------- */

/* ql[v][4r + i]: low 4 bits of column 4v + i (low nibble), 128 + 4v + i (high). */
static inline uint8_t *q6r16_lbyte(block_q6_K_r16 *b, int r, int c, int *shift) {
    *shift = c < 128 ? 0 : 4;
    return &b->ql[(c % 128) / 4][4 * r + c % 4];
}
/* qh[u][4r + i]: bits 2k..2k+1 = high 2 bits of column 64k + 4u + i. */
static inline uint8_t *q6r16_hbyte(block_q6_K_r16 *b, int r, int c, int *shift) {
    *shift = 2 * (c / 64);
    return &b->qh[(c % 64) / 4][4 * r + c % 4];
}
static inline int q6r16_quant(const block_q6_K_r16 *b, int r, int c) {
    int sl, sh;
    const uint8_t lb = *q6r16_lbyte((block_q6_K_r16 *)b, r, c, &sl), hb = *q6r16_hbyte((block_q6_K_r16 *)b, r, c, &sh);
    const int lo = (lb >> sl) & 0xF, hi = (hb >> sh) & 3;
    return lo | hi << 4;
}
static inline void q6r16_set_quant(block_q6_K_r16 *b, int r, int c, int q) {
    int sl, sh;
    uint8_t *lo = q6r16_lbyte(b, r, c, &sl), *hi = q6r16_hbyte(b, r, c, &sh);
    *lo |= (uint8_t)((q & 0xF) << sl);
    *hi |= (uint8_t)((q >> 4) << sh);
}

/* --- base superblocks of 16 rows -> one R16 block ------------------------ */

static void q4_K_r16_pack(const block_q4_K *const rows[R16], block_q4_K_r16 *o) {
    memset(o, 0, sizeof *o); /* the setters OR bits in */
    for (int r = 0; r < R16; r++) {
        const block_q4_K *b = rows[r];
        o->d[r] = b->d;
        o->dmin[r] = b->dmin;
        for (int s = 0; s < QK_K / 32; s++) {
            uint8_t sc, m;
            get_scale_min_k4(s, b->scales, &sc, &m);
            r16_set6(o->scales_l, o->scales_h, r, s, sc);
            r16_set6(o->mins_l, o->mins_h, r, s, m);
        }
        for (int c = 0; c < QK_K; c++) q4r16_set_quant(o, r, c, q4k_quant(b, c));
    }
}

static void q6_K_r16_pack(const block_q6_K *const rows[R16], block_q6_K_r16 *o) {
    memset(o, 0, sizeof *o);
    for (int r = 0; r < R16; r++) {
        const block_q6_K *b = rows[r];
        o->d[r] = b->d;
        for (int s = 0; s < QK_K / 16; s++) o->scales[s][r] = b->scales[s];
        for (int c = 0; c < QK_K; c++) q6r16_set_quant(o, r, c, q6k_quant(b, c));
    }
}

/* to_base: one group -> 16 rows of the base type (row r at dst + r * stride),
   the inverse of from_base.  The core runs the base kernels on this when a
   backend has none for the layout, so it works on 32-bit words (4 columns of
   one row) rather than through the per-column accessors. */
static inline uint32_t ld32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline void st32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
#define LO4 0x0F0F0F0Fu

static void q4_K_r16_to_base(const void *src, void *dst, size_t stride, int64_t n) {
    const block_q4_K_r16 *x = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const block_q4_K_r16 *b = &x[i];
        block_q4_K *o[R16];
        for (int r = 0; r < R16; r++) {
            o[r] = (block_q4_K *)((char *)dst + (size_t)r * stride) + i;
            o[r]->d = b->d[r];
            o[r]->dmin = b->dmin[r];
            memset(o[r]->scales, 0, sizeof o[r]->scales);
            for (int s = 0; s < QK_K / 32; s++)
                pack_scale_min_k4(o[r]->scales, s, r16_get6(b->scales_l, b->scales_h, r, s), r16_get6(b->mins_l, b->mins_h, r, s));
        }
        /* Q4_K byte 32j + l: sub-block 2j's column l (low nibble), 2j+1's
           (high).  R16 word qs[4s + k][row r]: sub-block s, columns 4k..4k+3
           (low nibbles) and 16 + 4k.. (high nibbles).  Rows innermost: the
           word operations run on whole 64-byte lines (vectorisable). */
        for (int j = 0; j < QK_K / 64; j++)
            for (int k = 0; k < 4; k++) {
                uint32_t lo[R16], hi[R16];
                for (int r = 0; r < R16; r++) {
                    const uint32_t A = ld32(b->qs[8 * j + k] + 4 * r), B = ld32(b->qs[8 * j + 4 + k] + 4 * r);
                    lo[r] = (A & LO4) | (B & LO4) << 4;
                    hi[r] = (A >> 4 & LO4) | (B & ~LO4);
                }
                for (int r = 0; r < R16; r++) {
                    st32(o[r]->qs + 32 * j + 4 * k, lo[r]);
                    st32(o[r]->qs + 32 * j + 16 + 4 * k, hi[r]);
                }
            }
    }
}

static void q6_K_r16_to_base(const void *src, void *dst, size_t stride, int64_t n) {
    const block_q6_K_r16 *x = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const block_q6_K_r16 *b = &x[i];
        for (int r = 0; r < R16; r++) {
            block_q6_K *o = (block_q6_K *)((char *)dst + (size_t)r * stride) + i;
            o->d = b->d[r];
            for (int s = 0; s < QK_K / 16; s++) o->scales[s] = b->scales[s][r];
            /* Q6_K ql[64h + B]: low 4 bits of column 128h + B (low nibble) and
               128h + 64 + B (high).  R16 word ql[v][row r]: columns 4v.. (low
               nibbles) and 128 + 4v.. (high). */
            for (int v = 0; v < 16; v++) {
                const uint32_t A = ld32(b->ql[v] + 4 * r), B = ld32(b->ql[v + 16] + 4 * r);
                st32(o->ql + 4 * v, (A & LO4) | (B & LO4) << 4);
                st32(o->ql + 64 + 4 * v, (A >> 4 & LO4) | (B & ~LO4));
            }
            /* Q6_K qh[32h + l] bits 2m: high 2 bits of column 128h + 32m + l;
               R16 word qh[u][row r] bits 2k: of column 64k + 4u.. */
            for (int h = 0; h < 2; h++)
                for (int u = 0; u < 8; u++) {
                    uint32_t w = 0;
                    for (int m = 0; m < 4; m++)
                        w |= (ld32(b->qh[8 * (m & 1) + u] + 4 * r) >> (2 * (2 * h + (m >> 1))) & 0x03030303u) << (2 * m);
                    st32(o->qh + 32 * h + 4 * u, w);
                }
        }
    }
}

static void q4_K_r_to_base(const void *src, void *dst, size_t stride, int64_t n) {
    (void)stride;
    const block_q4_K_r *x = src;
    block_q4_K *y = dst;
    for (int64_t i = 0; i < n / QK_K; i++) q4_K_r_to_q4_K(&x[i], &y[i]);
}

/* from_base (16 rows of n elements, row r at src + r * stride -> one
   group) and quantize_row (16 rows of n floats: the base quantizer, one
   superblock of the 16 rows at a time, so no buffer) of a layout, through
   its pack function. */
#define R16_CONVERTERS(name, BASE, QK)                                                                    \
    static void name##_r16_from_base(const void *src, size_t stride, void *dst, int64_t n) {            \
        block_##name##_r16 *o = dst;                                                                    \
        for (int64_t i = 0; i < n / QK; i++) {                                                          \
            const BASE *rows[R16];                                                                      \
            for (int r = 0; r < R16; r++) rows[r] = (const BASE *)((const char *)src + (size_t)r * stride) + i; \
            name##_r16_pack(rows, &o[i]);                                                               \
        }                                                                                               \
    }                                                                                                   \
    static void name##_r16_quantize(const float *x, void *dst, int64_t n) {                             \
        block_##name##_r16 *o = dst;                                                                    \
        for (int64_t i = 0; i < n / QK; i++) {                                                          \
            BASE tmp[R16];                                                                              \
            const BASE *rows[R16];                                                                      \
            for (int r = 0; r < R16; r++) {                                                             \
                name##_quantize(x + r * n + i * QK, &tmp[r], QK);                                       \
                rows[r] = &tmp[r];                                                                      \
            }                                                                                           \
            name##_r16_pack(rows, &o[i]);                                                               \
        }                                                                                               \
    }
R16_CONVERTERS(q4_K, block_q4_K, QK_K)
R16_CONVERTERS(q6_K, block_q6_K, QK_K)


/* dequantize_row: one group -> 16 rows of n floats.  Q4_K's
   k4_dequantize_block and Q6_K's loop, reading through the accessors. */
static void q4_K_r16_dequantize(const void *src, float *y, int64_t n) {
    const block_q4_K_r16 *x = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        for (int r = 0; r < R16; r++) {
            float *yr = y + r * n + i * QK_K;
            const float d = h2f(x[i].d[r]);
            const float min = h2f(x[i].dmin[r]);
            for (int s = 0; s < QK_K / 32; s++) {
                const float dj = d * q4r16_scale(&x[i], r, s);
                const float mj = min * q4r16_min(&x[i], r, s);
                for (int l = 0; l < 32; l++) yr[32 * s + l] = dj * (int8_t)q4r16_quant(&x[i], r, 32 * s + l) - mj;
            }
        }
    }
}

static void q6_K_r16_dequantize(const void *src, float *y, int64_t n) {
    const block_q6_K_r16 *x = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        for (int r = 0; r < R16; r++) {
            float *yr = y + r * n + i * QK_K;
            const float d = h2f(x[i].d[r]);
            for (int c = 0; c < QK_K; c++) yr[c] = d * x[i].scales[c / 16][r] * (int8_t)(q6r16_quant(&x[i], r, c) - 32);
        }
    }
}

/* vec_dot: s[r] = dot(row r of the group, y).  Each row keeps its own
   accumulators (sums[r][8], sumf[r]) updated superblock by superblock
   exactly as q4_K_vec_dot / q6_K_vec_dot do for one row, so every row's
   float operations happen in the base order. */
static void q4_K_r16_vec_dot(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q4_K_r16 *x = vx;
    const block_q8_K *y = vy;
    float sums[R16][8] = {{0}};
    float sumf[R16] = {0};
    int8_t aux8[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++) {
        for (int r = 0; r < R16; r++) {
            for (int c = 0; c < QK_K; c++) aux8[c] = (int8_t)q4r16_quant(&x[i], r, c);
            /* k4_dot_block with the scales and mins read from the layout */
            int sumi = 0;
            for (int j = 0; j < QK_K / 16; j++) sumi += y[i].bsums[j] * q4r16_min(&x[i], r, j / 2);
            int sc16[QK_K / 16];
            for (int j = 0; j < QK_K / 16; j++) sc16[j] = q4r16_scale(&x[i], r, j / 2);
            kdot_block(aux8, sc16, x[i].d[r], &y[i], sums[r]);
            const float dmin = h2f(x[i].dmin[r]) * y[i].d;
            sumf[r] -= dmin * sumi;
        }
    }
    for (int r = 0; r < R16; r++) s[r] = ksum8(sums[r], sumf[r]);
}

/* THE definition of Q4_K_R16N's dot product (the kernels must give these
   bits): per row and superblock the exact integer sums
     isum = sum over sub-blocks s of scale_s * sum(q * y)   (|isum| < 2^25)
     msum = sum over s of min_s * (bsums[2s] + bsums[2s + 1])
   then acc = fmaf(d_r * d_y, (float)isum, acc) and
   acc = fmaf(-(dmin_r * d_y), (float)msum, acc), superblock by superblock.
   One float step per row and superblock instead of Q4_K's eight lanes: a
   kernel keeps each row in a lane and never sums across lanes. */
static void q4_K_r16n_vec_dot(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q4_K_r16 *x = vx;
    const block_q8_K *y = vy;
    for (int r = 0; r < R16; r++) {
        float acc = 0.0f;
        for (int64_t i = 0; i < n / QK_K; i++) {
            int32_t isum = 0, msum = 0;
            for (int sb = 0; sb < QK_K / 32; sb++) {
                int32_t dot = 0;
                for (int c = 32 * sb; c < 32 * sb + 32; c++) dot += q4r16_quant(&x[i], r, c) * y[i].qs[c];
                isum += q4r16_scale(&x[i], r, sb) * dot;
                msum += q4r16_min(&x[i], r, sb) * (y[i].bsums[2 * sb] + y[i].bsums[2 * sb + 1]);
            }
            acc = fmaf(h2f(x[i].d[r]) * y[i].d, (float)isum, acc);
            acc = fmaf(-(h2f(x[i].dmin[r]) * y[i].d), (float)msum, acc);
        }
        s[r] = acc;
    }
}

static void q6_K_r16_vec_dot(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q6_K_r16 *x = vx;
    const block_q8_K *y = vy;
    float sums[R16][8] = {{0}};
    int8_t aux8[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++) {
        for (int r = 0; r < R16; r++) {
            for (int c = 0; c < QK_K; c++) aux8[c] = (int8_t)(q6r16_quant(&x[i], r, c) - 32);
            int sc16[QK_K / 16];
            for (int j = 0; j < QK_K / 16; j++) sc16[j] = x[i].scales[j][r];
            kdot_block(aux8, sc16, x[i].d[r], &y[i], sums[r]);
        }
    }
    for (int r = 0; r < R16; r++) s[r] = ksum8(sums[r], 0);
}

/* ======================================================================== */
/* Q5_0_R16: Q5_0 with 16 rows interleaved (layout in blocks.h)              */
/* ======================================================================== */
/*
 * One block = 32 columns of 16 rows (16 x 22 bytes, a permutation of the 16
 * rows' Q5_0 blocks).  A 32-byte half of qs[j] holds the nibbles of groups
 * j and j + 4 (4 columns each) of 8 rows, a 32-bit lane per row; the half of
 * qh holds the 5th bits of all 8 groups of those rows (bit k = group k).
 *
 * Its dot product is not Q5_0's: per row, acc = fmaf(d_r * d_y, isum, acc)
 * block by block (isum exact), so that a kernel can add the 16 rows' integer
 * sums in lanes and spend one float step per block and row; Q5_0's own
 * order (sum += isum * d_x * d_y) differs in the last bits only.
 * q5_0_r16_vec_dot below is that definition.
 */
/* Q5_0: column c = nibble c % 16 of qs (low for c < 16) | bit c of qh << 4 */
static inline int q50_quant(const block_q5_0 *b, int c) {
    return ((b->qs[c % 16] >> (c < 16 ? 0 : 4)) & 0xF) | (int)((load_qh(b->qh) >> c) & 1) << 4;
}
/* qs[(c % 16) / 4][4r + c % 4]: nibble c / 16; qh[4r + c % 4]: bit c / 4 */
static inline int q5r16_quant(const block_q5_0_r16 *b, int r, int c) {
    const int lo = (b->qs[(c % 16) / 4][4 * r + c % 4] >> (c < 16 ? 0 : 4)) & 0xF;
    return lo | ((b->qh[4 * r + c % 4] >> (c / 4)) & 1) << 4;
}
static inline void q5r16_set_quant(block_q5_0_r16 *b, int r, int c, int q) {
    b->qs[(c % 16) / 4][4 * r + c % 4] |= (uint8_t)((q & 0xF) << (c < 16 ? 0 : 4));
    b->qh[4 * r + c % 4] |= (uint8_t)(((q >> 4) & 1) << (c / 4));
}

static void q5_0_r16_pack(const block_q5_0 *const rows[R16], block_q5_0_r16 *o) {
    memset(o, 0, sizeof *o);
    for (int r = 0; r < R16; r++) {
        o->d[r] = rows[r]->d;
        for (int c = 0; c < QK5_0; c++) q5r16_set_quant(o, r, c, q50_quant(rows[r], c));
    }
}
R16_CONVERTERS(q5_0, block_q5_0, QK5_0)

/* Row r's Q5_0 qs is the 4 words qs[j][4r..]; its qh bit 4k + i is bit k of
   byte i of the word qh[4r..]: gather bit k of the 4 bytes into a nibble
   (the multiply moves byte i's bit 0 to bit 24 + i; no two partial products
   share a bit, so nothing carries). */
static void q5_0_r16_to_base(const void *src, void *dst, size_t stride, int64_t n) {
    const block_q5_0_r16 *x = src;
    for (int64_t i = 0; i < n / QK5_0; i++) {
        const block_q5_0_r16 *b = &x[i];
        for (int r = 0; r < R16; r++) {
            block_q5_0 *o = (block_q5_0 *)((char *)dst + (size_t)r * stride) + i;
            o->d = b->d[r];
            for (int j = 0; j < 4; j++) st32(o->qs + 4 * j, ld32(b->qs[j] + 4 * r));
            const uint32_t w = ld32(b->qh + 4 * r);
            uint32_t qh = 0;
            for (int k = 0; k < 8; k++) qh |= (((w >> k) & 0x01010101u) * 0x01020408u >> 24) << (4 * k);
            st32(o->qh, qh);
        }
    }
}

/* Q5_0's dequantize expression, row by row */
static void q5_0_r16_dequantize(const void *src, float *y, int64_t n) {
    const block_q5_0_r16 *x = src;
    for (int64_t i = 0; i < n / QK5_0; i++)
        for (int r = 0; r < R16; r++) {
            const float d = h2f(x[i].d[r]);
            for (int c = 0; c < QK5_0; c++) y[r * n + i * QK5_0 + c] = (q5r16_quant(&x[i], r, c) - 16) * d;
        }
}

/* THE definition of Q5_0_R16's dot product (the kernels must give these
   bits): per row, block by block, acc = fmaf(d_r * d_y, isum, acc) with
   d_r * d_y one float multiply and isum the exact sum of the 32 products
   (|isum| <= 32 * 16 * 128: exact as a float). */
static void q5_0_r16_vec_dot(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q5_0_r16 *x = vx;
    const block_q8_0 *y = vy;
    for (int r = 0; r < R16; r++) {
        float acc = 0.0f;
        for (int64_t i = 0; i < n / QK5_0; i++) {
            int isum = 0;
            for (int c = 0; c < QK5_0; c++) isum += (q5r16_quant(&x[i], r, c) - 16) * y[i].qs[c];
            acc = fmaf(h2f(x[i].d[r]) * h2f(y[i].d), (float)isum, acc);
        }
        s[r] = acc;
    }
}

static const picolm_format repack_formats[] = {
    { .type_id = PICOLM_TYPE_Q4_K_R, .flags = PICOLM_FMT_WEIGHT, .name = "Q4_K_R", .block_size = QK_K,
      .type_size = sizeof(block_q4_K_r), .dequantize_row = q4_K_r_dequantize, .quantize_row = q4_K_r_quantize,
      .vec_dot_type = PICOLM_TYPE_Q8_K, .vec_dot = q4_K_r_vec_dot,
      .base_type = PICOLM_TYPE_Q4_K, .from_base = q4_K_r_from_base, .to_base = q4_K_r_to_base },
    /* grouped: type_size is per row (a group of 16 rows is 16 x that) */
    { .type_id = PICOLM_TYPE_Q4_K_R16, .flags = PICOLM_FMT_WEIGHT, .name = "Q4_K_R16", .block_size = QK_K,
      .type_size = sizeof(block_q4_K_r16) / R16, .dequantize_row = q4_K_r16_dequantize, .quantize_row = q4_K_r16_quantize,
      .vec_dot_type = PICOLM_TYPE_Q8_K, .vec_dot = q4_K_r16_vec_dot, .row_group = R16,
      .base_type = PICOLM_TYPE_Q4_K, .from_base = q4_K_r16_from_base, .to_base = q4_K_r16_to_base },
    /* the same bytes and values as Q4_K_R16, its own dot product */
    { .type_id = PICOLM_TYPE_Q4_K_R16N, .flags = PICOLM_FMT_WEIGHT, .name = "Q4_K_R16N", .block_size = QK_K,
      .type_size = sizeof(block_q4_K_r16) / R16, .dequantize_row = q4_K_r16_dequantize, .quantize_row = q4_K_r16_quantize,
      .vec_dot_type = PICOLM_TYPE_Q8_K, .vec_dot = q4_K_r16n_vec_dot, .row_group = R16,
      .base_type = PICOLM_TYPE_Q4_K, .from_base = q4_K_r16_from_base, .to_base = q4_K_r16_to_base },
    { .type_id = PICOLM_TYPE_Q6_K_R16, .flags = PICOLM_FMT_WEIGHT, .name = "Q6_K_R16", .block_size = QK_K,
      .type_size = sizeof(block_q6_K_r16) / R16, .dequantize_row = q6_K_r16_dequantize, .quantize_row = q6_K_r16_quantize,
      .vec_dot_type = PICOLM_TYPE_Q8_K, .vec_dot = q6_K_r16_vec_dot, .row_group = R16,
      .base_type = PICOLM_TYPE_Q6_K, .from_base = q6_K_r16_from_base, .to_base = q6_K_r16_to_base },
    { .type_id = PICOLM_TYPE_Q5_0_R16, .flags = PICOLM_FMT_WEIGHT, .name = "Q5_0_R16", .block_size = QK5_0,
      .type_size = sizeof(block_q5_0_r16) / R16, .dequantize_row = q5_0_r16_dequantize, .quantize_row = q5_0_r16_quantize,
      .vec_dot_type = PICOLM_TYPE_Q8_0, .vec_dot = q5_0_r16_vec_dot, .row_group = R16,
      .base_type = PICOLM_TYPE_Q5_0, .from_base = q5_0_r16_from_base, .to_base = q5_0_r16_to_base },
};
_Static_assert(sizeof(block_q4_K_r16) / PICOLM_ROWS_R16 == sizeof(block_q4_K), "Q4_K_R16 row bytes = Q4_K's");
_Static_assert(sizeof(block_q6_K_r16) / PICOLM_ROWS_R16 == sizeof(block_q6_K), "Q6_K_R16 row bytes = Q6_K's");
_Static_assert(sizeof(block_q5_0_r16) / PICOLM_ROWS_R16 == sizeof(block_q5_0), "Q5_0_R16 row bytes = Q5_0's");

static const picolm_format_vtable repack_vtable = PICOLM_FORMAT_VTABLE(repack_formats);
PICOLM_DEFINE_PLUGIN(PICOLM_KIND_FORMAT, "repack", "1.0",
                     "Repacked layouts (picolm type ids >= 1024): Q4_K_R = Q4_K with pre-unpacked 8-bit scales/mins; "
                     "Q4_K_R16/Q6_K_R16/Q5_0_R16 = Q4_K/Q6_K/Q5_0 with 16 rows interleaved; "
                     "Q4_K_R16N = Q4_K_R16 with row numerics",
                     0, 0, &repack_vtable);
