/*
 * An out-of-tree backend plugin: the smallest useful one.  It overrides ONE
 * kernel -- Q8_0 weights x Q8_0 activations -- with plain C and four
 * independent accumulators (so the compiler can keep four blocks in flight),
 * and leaves everything else to the core: every other weight type keeps the
 * format plugins' reference vec_dot, the Q8_0 activation quantizer comes from
 * the Q8_0 format plugin (no act_quants here), and the primitives (rmsnorm,
 * attention dots, ...) stay the core's portable versions (all NULL here).
 *
 * Build it on its own, with nothing but picolm's public headers:
 *   cc -std=c11 -O2 -shared -fPIC -I include mybackend.c -o backend-mybackend.so
 * then put the .so in a plugin directory (--plugin-dir, plugin_dir in the INI,
 * $PICOLM_PLUGIN_DIR, or $PREFIX/lib/picolm) and run with --backend mybackend.
 * Its priority (5) is below the stock backends' (scalar is 10), so `auto`
 * never picks it over them.
 */
#include "picolm/plugin.h"
#include "picolm/blocks.h"
#include "picolm/fp16.h"

/* *s = sum over blocks of d_x * d_y * sum(qx * qy); n is a multiple of 32. */
static void my_vec_dot_q8_0_q8_0(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q8_0 *x = vx, *y = vy;
    const int64_t nb = n / QK8_0;
    float acc[4] = {0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 4 <= nb; i += 4)
        for (int k = 0; k < 4; k++) {
            int32_t sumi = 0;
            for (int j = 0; j < QK8_0; j++) sumi += (int32_t)x[i + k].qs[j] * (int32_t)y[i + k].qs[j];
            acc[k] += (float)sumi * (picolm_half_to_float(x[i + k].d) * picolm_half_to_float(y[i + k].d));
        }
    for (; i < nb; i++) {
        int32_t sumi = 0;
        for (int j = 0; j < QK8_0; j++) sumi += (int32_t)x[i].qs[j] * (int32_t)y[i].qs[j];
        acc[0] += (float)sumi * (picolm_half_to_float(x[i].d) * picolm_half_to_float(y[i].d));
    }
    *s = (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

static const picolm_kernel my_kernels[] = {
    {.type_id = PICOLM_TYPE_Q8_0, .vec_dot_type = PICOLM_TYPE_Q8_0, .vec_dot = my_vec_dot_q8_0_q8_0, .gemm = NULL},
};

static const picolm_backend_vtable my_vtable = {
    .struct_size = sizeof(picolm_backend_vtable),
    .kernel_size = sizeof(picolm_kernel),
    .n_kernels = sizeof my_kernels / sizeof *my_kernels,
    .kernels = my_kernels,
    .act_quant_size = sizeof(picolm_act_quant),
    .n_act_quants = 0, /* Q8_0 activations: the format plugin's quantizer */
    .act_quants = NULL,
    /* score and every primitive: NULL (the core's portable versions) */
};

/* plain C: any CPU (0); priority 5: below the stock backends, so never
   chosen by auto over them */
PICOLM_DEFINE_PLUGIN(PICOLM_KIND_BACKEND, "mybackend", "0.1", "out-of-tree example: plain-C Q8_0 x Q8_0 vec_dot, 4 accumulators",
                     0, 5, &my_vtable);
