/*
 * Repacked weight layouts: picolm-specific type ids (>= 1024) that store a
 * ggml format in the order a fast kernel wants, written by picolm-quantize
 * and mapped by the loader like any other format (no load-time copy).
 *
 * Q4_K_R (id 1012): Q4_K with its 6-bit scales and mins pre-unpacked to one
 * byte each.  One block = one superblock of 256 elements of one row:
 *
 *   fp16 d, fp16 dmin, u8 scale[8], u8 min[8], u8 qs[128]  (148 bytes)
 *
 * qs is Q4_K's nibble order unchanged (qs[32j + l]: element 64j + l in the
 * low nibble, 64j + 32 + l in the high nibble).  The values are exactly
 * Q4_K's: y = d * scale_j * q - dmin * min_j, so converting a Q4_K tensor
 * loses nothing, and dequantize_row equals Q4_K's bit for bit.
 *
 * Why per-row and not 16 rows interleaved: the ABI's row arithmetic (row r
 * at r * row_bytes, dequantize_row / vec_dot of ONE row without its
 * neighbours, token_embd row lookups) must hold for every format.  An
 * interleaved group cannot be decoded a row at a time.  The pre-unpacked
 * scales remove the scalar 6-bit unpacking from every kernel (decode row
 * kernels and the prefill packer) at the cost of 4 bytes per superblock
 * (+2.8% bytes).  See docs/perf.md.
 *
 * The quantizer is Q4_K's reference quantizer (kquants.c, included below so
 * that both are the same code), followed by the unpacking.
 */
#define picolm_plugin_v1 repack_kquants_entry_unused /* kquants.c's entry: not exported under our name */
#include "kquants.c"
#undef picolm_plugin_v1

#define PICOLM_TYPE_Q4_K_R 1012u

typedef struct {
    picolm_half d, dmin;
    uint8_t sc[QK_K / 32], m[QK_K / 32];
    uint8_t qs[QK_K / 2];
} block_q4_K_r;
PICOLM_BLOCK_ASSERT(block_q4_K_r, 148);

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

static void q4_K_r_dequantize(const void *src, float *y, int64_t n) {
    const block_q4_K_r *x = src;
    const int64_t nb = n / QK_K;
    for (int64_t i = 0; i < nb; i++, y += QK_K) {
        block_q4_K b;
        q4_K_r_to_q4_K(&x[i], &b);
        q4_K_dequantize(&b, y, QK_K);
    }
}

static void q4_K_r_quantize(const float *x, void *dst, int64_t n) {
    block_q4_K_r *y = dst;
    const int64_t nb = n / QK_K;
    for (int64_t i = 0; i < nb; i++) {
        block_q4_K b;
        q4_K_quantize(x + i * QK_K, &b, QK_K);
        q4_K_r_from_q4_K(&b, &y[i]);
    }
}

/* Q4_K's scalar reference dot, superblock by superblock (same float order). */
static void q4_K_r_vec_dot(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q4_K_r *x = vx;
    const block_q8_K *y = vy;
    const int64_t nb = n / QK_K;
    int8_t aux8[QK_K];
    float sums[8] = {0};
    float sumf = 0;
    for (int64_t i = 0; i < nb; ++i) {
        block_q4_K b;
        q4_K_r_to_q4_K(&x[i], &b);
        q4_K_expand(&b, aux8);
        sumf -= k4_dot_block(aux8, b.scales, b.d, b.dmin, &y[i], sums);
    }
    *s = ksum8(sums, sumf);
}

static const picolm_format repack_formats[] = {
    { PICOLM_TYPE_Q4_K_R, PICOLM_FMT_WEIGHT, "Q4_K_R", QK_K, sizeof(block_q4_K_r),
      q4_K_r_dequantize, q4_K_r_quantize, PICOLM_TYPE_Q8_K, q4_K_r_vec_dot },
};

static const picolm_format_vtable repack_vtable = {
    sizeof(picolm_format_vtable), sizeof(picolm_format),
    sizeof repack_formats / sizeof repack_formats[0], repack_formats,
};

static const picolm_plugin repack_plugin = {
    .abi_version = PICOLM_ABI_VERSION,
    .struct_size = sizeof(picolm_plugin),
    .kind = PICOLM_KIND_FORMAT,
    .name = "repack",
    .version = "1.0",
    .description = "Repacked layouts (picolm type ids >= 1024): Q4_K_R = Q4_K with pre-unpacked 8-bit scales/mins",
    .vtable = &repack_vtable,
};

PICOLM_EXPORT const picolm_plugin *picolm_plugin_v1(void) { return &repack_plugin; }
