/* AVX2 backend: scalar + sse4 + avx2 levels (backends/level.h), nothing
   above AVX2.  Built WITHOUT -m flags: its init copies pointers and calls
   the avx2 level's tune hook, after the core checked cpu_required. */
#include "../level.h"

PK_CHAIN("avx2", &pk_level_scalar, &pk_level_sse4, &pk_level_avx2)
PICOLM_DEFINE_PLUGIN_EX(PICOLM_KIND_BACKEND, "avx2", "1.0",
                        "x86-64 AVX2/FMA/F16C kernels: all formats, gemm tiles, Q8 activation quantizers", PK_CPU, 30,
                        &pk_tab.vt, pk_init, NULL)
