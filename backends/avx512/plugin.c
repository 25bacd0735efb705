/* AVX-512 backend descriptor.  Built WITHOUT -m flags: the core reads it
   before checking cpu_required, so it holds data plus an init that only
   stores function pointers (the VNNI choice).

   AVX512_VNNI is REQUIRED, although non-VNNI kernels exist: the Makefile
   compiles every kernel file of this backend with -mavx512vnni, and clang
   then fuses madd+add into vpdpwssd even in the non-VNNI functions (seen in
   objdump), which would fault on Skylake-X.  Source code cannot undo a
   command-line -m flag in clang.  If ISA_avx512 ever drops -mavx512vnni (with
   target("avx512vnni") on the *_vnni functions), this requirement can go and
   init's selection keeps VNNI-less CPUs safe. */
#include "picolm/plugin.h"

extern const picolm_backend_vtable picolm_avx512_vtable;
void avx512_select(uint64_t cpu_features);

static int avx512_init(const picolm_host *host, char *err, size_t errlen) {
    (void)err; (void)errlen;
    avx512_select(host->cpu_features);
    return 0;
}

/* VNNI kernels make this backend a little more attractive */
__attribute__((visibility("hidden"))) int avx512_score(uint64_t cpu_features);
int avx512_score(uint64_t cpu_features) { return (cpu_features & PICOLM_CPU_AVX512VNNI) ? 1 : 0; }

static const picolm_plugin avx512_plugin = {
    .abi_version = PICOLM_ABI_VERSION,
    .struct_size = sizeof(picolm_plugin),
    .kind = PICOLM_KIND_BACKEND,
    .name = "avx512",
    .version = "1.0",
    .description = "x86-64 AVX-512 F/BW/VL/DQ/VNNI kernels: 512-bit Q4_K/Q6_K/Q8_0 and Q4_K_R16/Q6_K_R16, AVX2 code for the rest",
    .cpu_required = PICOLM_CPU_AVX | PICOLM_CPU_AVX2 | PICOLM_CPU_FMA | PICOLM_CPU_F16C | PICOLM_CPU_AVX512F |
                    PICOLM_CPU_AVX512BW | PICOLM_CPU_AVX512VL | PICOLM_CPU_AVX512DQ | PICOLM_CPU_AVX512VNNI,
    .priority = 40,
    .init = avx512_init,
    .vtable = &picolm_avx512_vtable,
};
PICOLM_PLUGIN_NOTE(PICOLM_KIND_BACKEND, "avx512", PICOLM_CPU_AVX | PICOLM_CPU_AVX2 | PICOLM_CPU_FMA | PICOLM_CPU_F16C | PICOLM_CPU_AVX512F | PICOLM_CPU_AVX512BW | PICOLM_CPU_AVX512VL | PICOLM_CPU_AVX512DQ | PICOLM_CPU_AVX512VNNI);

PICOLM_EXPORT const picolm_plugin *picolm_plugin_v1(void) { return &avx512_plugin; }
