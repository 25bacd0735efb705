/* SDOT GEMM tiles: mk/aarch64.mk (mk/cross.mk on armhf) compiles this file
   with dotprod, as neon_dot.c, whose level (used only when the CPU reports
   dotprod) holds them.  Built without dotprod, it is a second plain copy. */
#define GEMM_PFX neon_gemm_dot_
#if defined(__ARM_FEATURE_DOTPROD)
#define NEON_DP 1
#else
#define NEON_DP 0
#endif
#include "gemm_impl.h"
