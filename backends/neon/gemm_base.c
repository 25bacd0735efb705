/* Plain ASIMD GEMM tiles (any ARMv8-A, ARMv7 NEON): see gemm_impl.h. */
#define GEMM_PFX neon_gemm_base_
#define NEON_DP 0
#include "gemm_impl.h"
