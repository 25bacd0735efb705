/* SDOT kernel set: mk/aarch64.mk compiles this file alone with
   -march=armv8.2-a+dotprod; kernels.c calls it only when the CPU reports
   dotprod.  Built without dotprod, it degrades to a second plain copy and
   says so through picolm_neon_dot_built, so the build never breaks. */
#define NEON_PFX neon_dot_
#if defined(__ARM_FEATURE_DOTPROD)
#define NEON_DP 1
#else
#define NEON_DP 0
#endif
#include "neon_impl.h"

NEON_HIDDEN const int picolm_neon_dot_built = NEON_DP;
