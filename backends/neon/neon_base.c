/* Plain ASIMD kernel set (any ARMv8-A CPU): see neon_impl.h. */
#define NEON_PFX neon_base_
#define NEON_DP 0
#include "neon_impl.h"
