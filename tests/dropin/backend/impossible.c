/*
 * A backend no CPU can run: it requires PICOLM_CPU_IMPOSSIBLE, a bit no
 * probe ever sets.  The loader must reject it before running any of its code
 * (init below would say so), and `--backend impossible` must be a clear
 * error, never a silent fallback.
 */
#include "picolm/plugin.h"

static int impossible_init(const picolm_host *host, char *err, size_t errlen) {
    (void)host;
    /* never reached: the CPU check comes first */
    if (errlen) err[0] = 0;
    return 1;
}

static void never(int64_t n, float *s, const void *x, const void *y) {
    (void)n; (void)x; (void)y;
    *s = 0;
}

static const picolm_kernel impossible_kernels[] = {
    {.type_id = PICOLM_TYPE_Q8_0, .vec_dot_type = PICOLM_TYPE_Q8_0, .vec_dot = never, .gemm = NULL},
};

static const picolm_backend_vtable impossible_vtable = {
    .struct_size = sizeof(picolm_backend_vtable),
    .kernel_size = sizeof(picolm_kernel),
    .n_kernels = 1,
    .kernels = impossible_kernels,
    .act_quant_size = sizeof(picolm_act_quant),
};

/* priority 1000: would win `auto` if the CPU check did not reject it */
PICOLM_DEFINE_PLUGIN_EX(PICOLM_KIND_BACKEND, "impossible", "0.1", "requires a CPU feature no CPU has", PICOLM_CPU_IMPOSSIBLE, 1000,
                        &impossible_vtable, impossible_init, NULL);
