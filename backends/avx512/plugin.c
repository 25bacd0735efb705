/* AVX-512 backend: scalar + sse4 + avx2 + avx512 levels, and the VNNI
   variant level where the CPU has it (backends/level.h).  Built WITHOUT -m
   flags: its init only copies pointers.

   AVX512_VNNI is nevertheless REQUIRED (PK_CPU, from ISA_avx512): the
   avx512 level's file is compiled with -mavx512vnni, and clang then fuses
   madd+add into vpdpwssd even in the non-VNNI functions, which would fault
   on Skylake-X.  Source code cannot undo a command-line -m flag in clang.
   Moving the VNNI kernels to a file of their own with that flag (as
   neon_dot.c) would let the requirement go; the variant level already
   keeps VNNI-less CPUs on the other kernels. */
#include "../level.h"

PK_CHAIN("avx512", &pk_level_scalar, &pk_level_sse4, &pk_level_avx2, &pk_level_avx512, &pk_level_avx512vnni)
PICOLM_DEFINE_PLUGIN_EX(PICOLM_KIND_BACKEND, "avx512", "1.0",
                        "x86-64 AVX-512 F/BW/VL/DQ/VNNI kernels: 512-bit Q4_K/Q6_K/Q8_0 and Q4_K_R16/Q6_K_R16, AVX2 code for the rest",
                        PK_CPU, 41, &pk_tab.vt, pk_init, NULL)
