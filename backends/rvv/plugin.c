/* RVV backend descriptor.  Built WITHOUT ISA flags (and by $(CC), not
   clang): the core reads it before checking cpu_required, so no vector
   instruction may run before the CPU is known to have V 1.0. */
#include "picolm/plugin.h"

extern const picolm_backend_vtable picolm_rvv_vtable;

static const picolm_plugin rvv_plugin = {
    .abi_version = PICOLM_ABI_VERSION,
    .struct_size = sizeof(picolm_plugin),
    .kind = PICOLM_KIND_BACKEND,
    .name = "rvv",
    .version = "1.0",
    .description = "RISC-V vector 1.0 kernels (VLEN >= 128): Q8_0, Q4_0, Q4_K, Q6_K",
    .cpu_required = PICOLM_CPU_RVV,
    .priority = 30,
    .vtable = &picolm_rvv_vtable,
};
PICOLM_PLUGIN_NOTE(PICOLM_KIND_BACKEND, "rvv", PICOLM_CPU_RVV);

PICOLM_EXPORT const picolm_plugin *picolm_plugin_v1(void) { return &rvv_plugin; }
