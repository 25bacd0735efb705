/* NEON backend: scalar + neon levels, the dotprod (SDOT) level where the
   CPU has it and the i8mm (SMMLA) level where it has both (backends/level.h).  Built WITHOUT ISA flags: its init
   only copies pointers. */
#include "../level.h"

PK_CHAIN("neon", &pk_level_scalar, &pk_level_neon, &pk_level_dotprod, &pk_level_i8mm)
PICOLM_DEFINE_PLUGIN_EX(PICOLM_KIND_BACKEND, "neon", "1.0",
                        "AArch64 ASIMD kernels (SDOT when dotprod is present): all formats, gemm tiles, Q8 activation quantizers",
                        PK_CPU, 30, &pk_tab.vt, pk_init, NULL)
