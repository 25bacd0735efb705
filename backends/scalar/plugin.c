/* Scalar backend: the scalar level alone (portable C, no ISA flags), the
   backend of last resort, so it must run on any CPU. */
#include "../level.h"

PK_CHAIN("scalar", &pk_level_scalar)
PICOLM_DEFINE_PLUGIN_EX(PICOLM_KIND_BACKEND, "scalar", "1.0",
                        "portable C primitives; weight kernels fall back to the format plugins' reference code", PK_CPU,
                        10, &pk_tab.vt, pk_init, NULL)
