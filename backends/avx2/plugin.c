/* AVX2 backend descriptor.  Built WITHOUT -m flags: the core reads it before
   checking cpu_required, so it must hold data only. */
#include "picolm/plugin.h"

extern const picolm_backend_vtable picolm_avx2_vtable;

static const picolm_plugin avx2_plugin = {
    .abi_version = PICOLM_ABI_VERSION,
    .struct_size = sizeof(picolm_plugin),
    .kind = PICOLM_KIND_BACKEND,
    .name = "avx2",
    .version = "1.0",
    .description = "x86-64 AVX2/FMA/F16C kernels: all formats, gemm tiles, Q8 activation quantizers",
    .cpu_required = PICOLM_CPU_AVX | PICOLM_CPU_AVX2 | PICOLM_CPU_FMA | PICOLM_CPU_F16C,
    .priority = 30,
    .vtable = &picolm_avx2_vtable,
};
PICOLM_PLUGIN_NOTE(PICOLM_KIND_BACKEND, "avx2", PICOLM_CPU_AVX | PICOLM_CPU_AVX2 | PICOLM_CPU_FMA | PICOLM_CPU_F16C);

PICOLM_EXPORT const picolm_plugin *picolm_plugin_v1(void) { return &avx2_plugin; }
