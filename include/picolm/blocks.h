/*
 * Block layouts of the GGUF quantized types (the facts of the file format,
 * identical to ggml's).  Shared by the format plugins (reference code) and
 * the backends (fast kernels).  Every struct is packed by construction: only
 * uint8/int8/uint16 members after 2-byte-aligned fields, checked below.
 */
#ifndef PICOLM_BLOCKS_H
#define PICOLM_BLOCKS_H
#include <stdint.h>

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

/* The non-linear 4-bit grid of IQ4_NL / IQ4_XS. */
static const int8_t picolm_kvalues_iq4nl[16] = {
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
};

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
#endif
