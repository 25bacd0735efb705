/* SSE4.1 backend descriptor.  Built WITHOUT -m flags (data only). */
#include "picolm/plugin.h"

extern const picolm_backend_vtable picolm_sse4_vtable;

static const picolm_plugin sse4_plugin = {
    .abi_version = PICOLM_ABI_VERSION,
    .struct_size = sizeof(picolm_plugin),
    .kind = PICOLM_KIND_BACKEND,
    .name = "sse4",
    .version = "1.0",
    .description = "x86-64 SSE4.1/SSSE3 kernels for Q4_K, Q6_K, Q8_0, Q4_0",
    .cpu_required = PICOLM_CPU_SSE2 | PICOLM_CPU_SSE3 | PICOLM_CPU_SSSE3 | PICOLM_CPU_SSE41 | PICOLM_CPU_POPCNT,
    .priority = 20,
    .vtable = &picolm_sse4_vtable,
};
PICOLM_PLUGIN_NOTE(PICOLM_KIND_BACKEND, "sse4", PICOLM_CPU_SSE2 | PICOLM_CPU_SSE3 | PICOLM_CPU_SSSE3 | PICOLM_CPU_SSE41 | PICOLM_CPU_POPCNT);
PICOLM_EXPORT const picolm_plugin *picolm_plugin_v1(void) { return &sse4_plugin; }
