/* SSE4.1 backend: scalar + sse4 levels (backends/level.h).  Built WITHOUT
   -m flags: its init only copies pointers. */
#include "../level.h"

PK_CHAIN("sse4", &pk_level_scalar, &pk_level_sse4)
PICOLM_DEFINE_PLUGIN_EX(PICOLM_KIND_BACKEND, "sse4", "1.0", "x86-64 SSE4.1/SSSE3 kernels for Q4_K, Q6_K, Q8_0, Q4_0", PK_CPU, 20,
                        &pk_tab.vt, pk_init, NULL)
