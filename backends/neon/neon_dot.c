/* The dotprod level: the SDOT kernel set.  mk/aarch64.mk compiles this file
   alone with -march=armv8.2-a+dotprod; the plugin overlays it only when the
   CPU reports dotprod (backends/level.h).  Built without dotprod, the level
   is empty and says so in its name, so the build never breaks. */
#define NEON_PFX neon_dot_
#if defined(__ARM_FEATURE_DOTPROD)
#define NEON_DP 1
#else
#define NEON_DP 0
#endif
#include "neon_impl.h"

#define ROW(T, A, name) PK_KERNEL(T, A, neon_dot_##name, NULL),
static const picolm_kernel dot_kernels[] = {NEON_KERNEL_LIST(ROW)};
PK_LEVEL(dotprod, NEON_DP ? "dotprod" : "dotprod(not compiled in)", PICOLM_CPU_ARM_DOTPROD, dot_kernels,
         NEON_DP ? PK_COUNT(dot_kernels) : 0, NULL, 0, NULL);
