/* NEON backend descriptor.  Built WITHOUT ISA flags: the core reads it
   before checking cpu_required, so it holds data and a flag-setting init. */
#include "picolm/plugin.h"

extern const picolm_backend_vtable picolm_neon_vtable;
extern int picolm_neon_use_dot;
extern const int picolm_neon_dot_built;

/* SDOT kernels only when the CPU (as probed, PICOLM_CPU_MASK applied) has
   dotprod AND neon_dot.c was built with it; otherwise vmull/vpadal. */
static int neon_init(const picolm_host *host, char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    picolm_neon_use_dot = picolm_neon_dot_built && (host->cpu_features & PICOLM_CPU_ARM_DOTPROD) != 0;
    if (host->log)
        host->log(PICOLM_LOG_DEBUG, picolm_neon_use_dot ? "neon: dotprod (SDOT) kernels"
                                                        : "neon: plain ASIMD kernels (no dotprod)");
    return 0;
}

static const picolm_plugin neon_plugin = {
    .abi_version = PICOLM_ABI_VERSION,
    .struct_size = sizeof(picolm_plugin),
    .kind = PICOLM_KIND_BACKEND,
    .name = "neon",
    .version = "1.0",
    .description = "AArch64 ASIMD kernels (SDOT when dotprod is present): all formats, Q8 activation quantizers",
    .cpu_required = PICOLM_CPU_NEON,
    .priority = 30,
    .init = neon_init,
    .vtable = &picolm_neon_vtable,
};
PICOLM_PLUGIN_NOTE(PICOLM_KIND_BACKEND, "neon", PICOLM_CPU_NEON);

PICOLM_EXPORT const picolm_plugin *picolm_plugin_v1(void) { return &neon_plugin; }
