/* AVX-512 backend: scalar + sse4 + avx2 + avx512 levels (backends/level.h).
   Built WITHOUT -m flags: its init copies pointers and calls the levels'
   tune hooks, after the core checked cpu_required.  The avx512 level's
   kernels all use VNNI, so the plugin requires it (PK_CPU, from ISA_avx512);
   without it the avx2 plugin runs. */
#include "../level.h"

PK_CHAIN("avx512", &pk_level_scalar, &pk_level_sse4, &pk_level_avx2, &pk_level_avx512)
PICOLM_DEFINE_PLUGIN_EX(PICOLM_KIND_BACKEND, "avx512", "1.0",
                        "x86-64 AVX-512 F/BW/VL/DQ/VNNI kernels: Q4_K/Q6_K/Q8_0/Q5_0, their 16-row repacks and 16-row prefill panels, AVX2 code for the rest",
                        PK_CPU, 41, &pk_tab.vt, pk_init, NULL)
