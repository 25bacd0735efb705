/*
 * CPU probe: which PICOLM_CPU_* features (include/picolm/plugin.h) this
 * machine AND its OS support.  x86: CPUID leaves 1 and 7 plus XCR0 (xgetbv),
 * so AVX/AVX-512 are only reported when the OS saves the wider registers.
 * AArch64: getauxval(AT_HWCAP / AT_HWCAP2); 32-bit ARM: AT_HWCAP (NEON
 * with VFPv4 counts as "neon"); RISC-V: AT_HWCAP's 'V' bit ("rvv").  Built
 * without -m flags.
 *
 * PICOLM_CPU_MASK removes features from the probed set, to exercise
 * fallbacks: a comma/space separated list of names ("avx512f,avx2"), hex
 * masks ("0x40"), or "all".  Removing a feature also removes everything that
 * implies it (masking avx drops avx2, fma, f16c, avx512*; masking sse4.1 drops
 * sse4.2 and the AVX levels; masking neon drops dotprod, fp16, i8mm, sve),
 * because code compiled for the higher level may use the lower one.
 */
#ifndef PICOLM_CPU_H
#define PICOLM_CPU_H
#include <stddef.h>
#include <stdint.h>

/* Probed features minus PICOLM_CPU_MASK (re-read on every call). */
uint64_t cpu_probe(void);
/* Probed features, ignoring PICOLM_CPU_MASK (probed once, cached). */
uint64_t cpu_probe_raw(void);
/* Parse a PICOLM_CPU_MASK-style string into a bit set.  Returns 0, or -1
   with the offending token named in err (if err != NULL). */
int cpu_parse_mask(const char *s, uint64_t *mask, char *err, size_t errlen);
/* Remove the features in mask and everything that depends on them. */
uint64_t cpu_apply_mask(uint64_t features, uint64_t mask);

/* Name of one PICOLM_CPU_* bit ("avx2", "sse4.1", "dotprod"...), or NULL. */
const char *cpu_feature_name(uint64_t bit);
/* Space-separated names of the bits in f, e.g. "sse2 sse3 ... avx2 fma";
   "none" when f has no known bit.  Always NUL-terminated (truncates). */
void cpu_features_str(uint64_t f, char *buf, size_t n);

/* The CPU's identity, probed once (not masked by PICOLM_CPU_MASK): what a
   backend may tune its kernels by, passed to plugins as picolm_host's
   cpu_vendor, cpu_family and cpu_model (include/picolm/plugin.h).  x86:
   CPUID's vendor string, display family and model; ARM (Linux): the MIDR
   implementer as PICOLM_VENDOR_ARM_IMPL(implementer), the architecture and
   the part number, from /proc/cpuinfo.  0 where unknown. */
typedef struct cpu_id {
    uint32_t vendor, family, model;
} cpu_id;
cpu_id cpu_probe_id(void);
/* "intel", "amd", "arm implementer 0x41", "unknown" (always NUL-terminated) */
void cpu_vendor_str(uint32_t vendor, char *buf, size_t n);

/* CPUs this process may run on (online CPUs within its affinity mask), >= 1. */
int cpu_count_online(void);
/* Human-readable CPU name (x86 brand string, or the ARM part from
   /proc/cpuinfo); "unknown" when none is found. */
void cpu_model_name(char *buf, size_t n);

#endif
