/*
 * Block layouts of the GGUF quantized types (the facts of the file format,
 * identical to ggml's).  Shared by the format plugins (reference code) and
 * the backends (fast kernels).  Every struct is packed by construction: only
 * uint8/int8/uint16 members after 2-byte-aligned fields, checked below.
 */
#ifndef PICOLM_BLOCKS_H
#define PICOLM_BLOCKS_H
#include <stdint.h>
#include <string.h>

typedef uint16_t picolm_half;

#define QK4_0 32
typedef struct { picolm_half d; uint8_t qs[QK4_0 / 2]; } block_q4_0;
#define QK4_1 32
typedef struct { picolm_half d, m; uint8_t qs[QK4_1 / 2]; } block_q4_1;
#define QK5_0 32
typedef struct { picolm_half d; uint8_t qh[4]; uint8_t qs[QK5_0 / 2]; } block_q5_0;
#define QK5_1 32
typedef struct { picolm_half d, m; uint8_t qh[4]; uint8_t qs[QK5_1 / 2]; } block_q5_1;
#define QK8_0 32
typedef struct { picolm_half d; int8_t qs[QK8_0]; } block_q8_0;
#define QK8_1 32
typedef struct { picolm_half d, s; int8_t qs[QK8_1]; } block_q8_1; /* s = d * sum(qs) */

#define QK_K 256
#define K_SCALE_SIZE 12
typedef struct { uint8_t scales[QK_K / 16]; uint8_t qs[QK_K / 4]; picolm_half d, dmin; } block_q2_K;
typedef struct { uint8_t hmask[QK_K / 8]; uint8_t qs[QK_K / 4]; uint8_t scales[12]; picolm_half d; } block_q3_K;
typedef struct { picolm_half d, dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qs[QK_K / 2]; } block_q4_K;
typedef struct { picolm_half d, dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qh[QK_K / 8]; uint8_t qs[QK_K / 2]; } block_q5_K;
typedef struct { uint8_t ql[QK_K / 2]; uint8_t qh[QK_K / 4]; int8_t scales[QK_K / 16]; picolm_half d; } block_q6_K;
typedef struct { float d; int8_t qs[QK_K]; int16_t bsums[QK_K / 16]; } block_q8_K;

#define QK4_NL 32
typedef struct { picolm_half d; uint8_t qs[QK4_NL / 2]; } block_iq4_nl;
typedef struct { picolm_half d; uint16_t scales_h; uint8_t scales_l[QK_K / 64]; uint8_t qs[QK_K / 2]; } block_iq4_xs;

/* ---- picolm's own layouts (formats/repack.c) ------------------------------
 * Their type ids live here, in the range GGUF leaves free for them
 * (>= PICOLM_TYPE_OWN_MIN): 1024 + the base type for per-row layouts,
 * 1100 + the base type for the 16-row interleaved ones, 1200 + the base
 * type for an interleaved layout whose dot product has row numerics
 * (Q4_K_R16N). */
#define PICOLM_TYPE_OWN_MIN  1024u
#define PICOLM_TYPE_Q4_K_R   1036u /* 1024 + Q4_K */
#define PICOLM_TYPE_Q5_0_R16 1106u /* 1100 + Q5_0 */
#define PICOLM_TYPE_Q4_K_R16 1112u /* 1100 + Q4_K */
#define PICOLM_TYPE_Q6_K_R16 1114u /* 1100 + Q6_K */
#define PICOLM_TYPE_Q4_K_R16N 1212u /* 1200 + Q4_K: Q4_K_R16 bytes, row numerics */

/* Q4_K_R (one row, 148-byte blocks): Q4_K with the 6-bit scales and mins
 * pre-unpacked to one byte each, sc[j] / m[j] of sub-block j; qs is Q4_K's
 * nibble order unchanged.  Same values as Q4_K (exact conversion). */
typedef struct { picolm_half d, dmin; uint8_t sc[QK_K / 32], m[QK_K / 32]; uint8_t qs[QK_K / 2]; } block_q4_K_r;

/* ---- picolm's row-interleaved layouts (row_group 16) ----
 * One block = one superblock (256 columns; Q5_0_R16: one block of 32) of
 * 16 consecutive rows, stored so that a 64-byte vector holds the same 4 columns of all 16 rows: byte
 * 4r + i of a vector belongs to row r (a 32-bit lane per row, the shape of
 * vpdpbusd / sdot).  The values are exactly those of the base format: a
 * conversion is a permutation, nothing is requantized.  "Group" below means
 * 4 consecutive columns: group g = columns 4g .. 4g+3 of the superblock.
 *
 * Q4_K_R16 (PICOLM_TYPE_Q4_K_R16; 16 x 144 bytes, like Q4_K):
 *   d[r], dmin[r]          the rows' superblock scales (fp16)
 *   scales_l[j][r]         low 4 bits of the 6-bit scale of sub-block 2j
 *                          (low nibble) and 2j+1 (high nibble) of row r
 *   mins_l[j][r]           the same for the 6-bit mins
 *   scales_h[j][r]         high 2 bits of the scales of sub-blocks 4j..4j+3
 *                          of row r, sub-block 4j+k at bits 2k..2k+1
 *   mins_h[j][r]           the same for the mins
 *   qs[v][4r + i]          v = 4s + k (sub-block s = columns 32s..32s+31,
 *                          k = 0..3): low nibble = quant of column
 *                          32s + 4k + i, high nibble = column 32s + 16 + 4k + i
 *   value = d * scale_s * q - dmin * min_s (Q4_K's formula)
 *
 * Q6_K_R16 (PICOLM_TYPE_Q6_K_R16; 16 x 210 bytes, like Q6_K):
 *   d[r]                   fp16 superblock scale
 *   scales[s][r]           int8 scale of sub-block s (columns 16s..16s+15)
 *   ql[v][4r + i]          v = 0..31: low nibble = low 4 bits of the quant
 *                          of column 4v + i (group v), high nibble = of
 *                          column 128 + 4v + i (group v + 32)
 *   qh[u][4r + i]          u = 0..15: bits 2k..2k+1 = high 2 bits of the
 *                          quant of column 64k + 4u + i (group u + 16k)
 *   q = low4 | high2 << 4 (0..63); value = d * scale_s * (q - 32)
 *
 * Q5_0_R16 (PICOLM_TYPE_Q5_0_R16; 16 x 22 bytes per 32 columns, like Q5_0):
 *   d[r]                   fp16 block scale of row r
 *   qs[j][4r + i]          j = 0..3: low nibble = low 4 bits of the quant of
 *                          column 4j + i (group j), high nibble = of column
 *                          16 + 4j + i (group j + 4): byte 4j + i of row r's
 *                          Q5_0 qs
 *   qh[4r + i]             bit k (0..7) = 5th bit of the quant of column
 *                          4k + i (group k)
 *   u = low4 | bit << 4 (0..31); value = d * (u - 16) (Q5_0's).  Its dot
 *   product has numerics of its own (formats/repack.c, q5_0_r16_vec_dot):
 *   per row, acc = fmaf(d_r * d_y, (float)isum, acc) block by block, isum
 *   the block's exact integer dot product.
 *
 * Q4_K_R16N (PICOLM_TYPE_Q4_K_R16N): Q4_K_R16's bytes and values, with the
 *   dot product of its own (formats/repack.c, q4_K_r16n_vec_dot): per row
 *   and superblock the exact integer sums isum = sum_s scale_s * (q . y)_s
 *   and msum = sum_s min_s * (bsums of s), then
 *   acc = fmaf(d_r * d_y, isum, acc); acc = fmaf(-(dmin_r * d_y), msum, acc).
 */
#define PICOLM_ROWS_R16 16
typedef struct {
    picolm_half d[16], dmin[16];
    uint8_t scales_l[4][16], mins_l[4][16];
    uint8_t scales_h[2][16], mins_h[2][16];
    uint8_t qs[32][64];
} block_q4_K_r16;
typedef struct {
    picolm_half d[16];
    int8_t scales[16][16];
    uint8_t ql[32][64];
    uint8_t qh[16][64];
} block_q6_K_r16;
typedef struct {
    picolm_half d[16];
    uint8_t qs[4][64];
    uint8_t qh[64];
} block_q5_0_r16;

/* The non-linear 4-bit grid of IQ4_NL / IQ4_XS. */
static const int8_t picolm_kvalues_iq4nl[16] = {
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
};

/* Q4_K/Q5_K: the 12 packed bytes of 6-bit scales and mins -> utmp as bytes:
   0..7 = the 8 scales, 8..15 = the 8 mins (ggml's word shuffle; per index
   equal to its get_scale_min_k4).  Little-endian hosts, as every target. */
static inline void picolm_k4_scales(const uint8_t packed[K_SCALE_SIZE], uint32_t utmp[4]) {
    const uint32_t kmask1 = 0x3f3f3f3f, kmask2 = 0x0f0f0f0f, kmask3 = 0x03030303;
    memcpy(utmp, packed, K_SCALE_SIZE);
    utmp[3] = ((utmp[2] >> 4) & kmask2) | (((utmp[1] >> 6) & kmask3) << 4);
    const uint32_t uaux = utmp[1] & kmask1;
    utmp[1] = (utmp[2] & kmask2) | (((utmp[0] >> 6) & kmask3) << 4);
    utmp[2] = uaux;
    utmp[0] &= kmask1;
}
/* Q3_K: the 12 packed bytes -> aux as 16 bytes, the 6-bit scales (0..63,
   before the -32 offset) */
static inline void picolm_q3_K_scales(const uint8_t packed[12], uint32_t aux[4]) {
    const uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
    memcpy(aux, packed, 12);
    const uint32_t tmp = aux[2];
    aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
    aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
    aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
    aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
}

#define PICOLM_BLOCK_ASSERT(t, n) _Static_assert(sizeof(t) == (n), #t " size")
PICOLM_BLOCK_ASSERT(block_q4_0, 18);
PICOLM_BLOCK_ASSERT(block_q4_1, 20);
PICOLM_BLOCK_ASSERT(block_q5_0, 22);
PICOLM_BLOCK_ASSERT(block_q5_1, 24);
PICOLM_BLOCK_ASSERT(block_q8_0, 34);
PICOLM_BLOCK_ASSERT(block_q8_1, 36);
PICOLM_BLOCK_ASSERT(block_q2_K, 84);
PICOLM_BLOCK_ASSERT(block_q3_K, 110);
PICOLM_BLOCK_ASSERT(block_q4_K, 144);
PICOLM_BLOCK_ASSERT(block_q5_K, 176);
PICOLM_BLOCK_ASSERT(block_q6_K, 210);
PICOLM_BLOCK_ASSERT(block_q8_K, 292);
PICOLM_BLOCK_ASSERT(block_iq4_nl, 18);
PICOLM_BLOCK_ASSERT(block_iq4_xs, 136);
PICOLM_BLOCK_ASSERT(block_q4_K_r, 148);
PICOLM_BLOCK_ASSERT(block_q4_K_r16, 16 * 144);
PICOLM_BLOCK_ASSERT(block_q6_K_r16, 16 * 210);
PICOLM_BLOCK_ASSERT(block_q5_0_r16, 16 * 22);
#endif
