/* RVV backend: scalar + rvv levels (backends/level.h).  Built WITHOUT ISA
   flags (and by $(CC), not clang): the core reads it before checking
   cpu_required, so no vector instruction may run before the CPU is known
   to have V 1.0. */
#include "../level.h"

PK_CHAIN("rvv", &pk_level_scalar, &pk_level_rvv)
PICOLM_DEFINE_PLUGIN_EX(PICOLM_KIND_BACKEND, "rvv", "1.0", "RISC-V vector 1.0 kernels (VLEN >= 128): Q8_0, Q4_0, Q4_K, Q6_K",
                        PK_CPU, 30, &pk_tab.vt, pk_init, NULL)
