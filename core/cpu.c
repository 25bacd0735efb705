/* CPU feature probe (see cpu.h).  No -m flags: only CPUID/xgetbv via the
   <cpuid.h> helpers and inline asm, or the kernel's HWCAPs. */
#include "cpu.h"
#include "picolm/plugin.h"
#include "util.h"

#include <ctype.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define CPU_X86 1
#elif defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#define CPU_ARM64 1
#elif defined(__arm__) && defined(__linux__)
#include <sys/auxv.h>
#define CPU_ARM32 1
#elif defined(__riscv) && __riscv_xlen == 64 && defined(__linux__)
#include <sys/auxv.h>
#define CPU_RISCV64 1
#endif

static const struct {
    uint64_t bit;
    const char *name;
    const char *alias;   /* also accepted by PICOLM_CPU_MASK (cpuinfo spelling) */
} feature_names[] = {
    {PICOLM_CPU_SSE2, "sse2", NULL},
    {PICOLM_CPU_SSE3, "sse3", "pni"},
    {PICOLM_CPU_SSSE3, "ssse3", NULL},
    {PICOLM_CPU_SSE41, "sse4.1", "sse4_1"},
    {PICOLM_CPU_SSE42, "sse4.2", "sse4_2"},
    {PICOLM_CPU_POPCNT, "popcnt", NULL},
    {PICOLM_CPU_AVX, "avx", NULL},
    {PICOLM_CPU_AVX2, "avx2", NULL},
    {PICOLM_CPU_FMA, "fma", NULL},
    {PICOLM_CPU_F16C, "f16c", NULL},
    {PICOLM_CPU_AVXVNNI, "avxvnni", "avx_vnni"},
    {PICOLM_CPU_AVX512F, "avx512f", NULL},
    {PICOLM_CPU_AVX512BW, "avx512bw", NULL},
    {PICOLM_CPU_AVX512VL, "avx512vl", NULL},
    {PICOLM_CPU_AVX512DQ, "avx512dq", NULL},
    {PICOLM_CPU_AVX512VNNI, "avx512vnni", "avx512_vnni"},
    {PICOLM_CPU_AVX512BF16, "avx512bf16", "avx512_bf16"},
    {PICOLM_CPU_NEON, "neon", "asimd"},
    {PICOLM_CPU_ARM_DOTPROD, "dotprod", "asimddp"},
    {PICOLM_CPU_ARM_FP16, "fp16", "asimdhp"},
    {PICOLM_CPU_ARM_I8MM, "i8mm", NULL},
    {PICOLM_CPU_ARM_SVE, "sve", NULL},
    {PICOLM_CPU_RVV, "rvv", "v"},
    {PICOLM_CPU_IMPOSSIBLE, "impossible", NULL},
};
#define N_FEATURES (sizeof feature_names / sizeof feature_names[0])

/* feature -> the one it builds on; masking the prerequisite masks it too */
static const struct { uint64_t f, needs; } deps[] = {
    {PICOLM_CPU_SSE3, PICOLM_CPU_SSE2},
    {PICOLM_CPU_SSSE3, PICOLM_CPU_SSE3},
    {PICOLM_CPU_SSE41, PICOLM_CPU_SSSE3},
    {PICOLM_CPU_SSE42, PICOLM_CPU_SSE41},
    {PICOLM_CPU_AVX, PICOLM_CPU_SSE42},
    {PICOLM_CPU_AVX2, PICOLM_CPU_AVX},
    {PICOLM_CPU_FMA, PICOLM_CPU_AVX},
    {PICOLM_CPU_F16C, PICOLM_CPU_AVX},
    {PICOLM_CPU_AVXVNNI, PICOLM_CPU_AVX2},
    {PICOLM_CPU_AVX512F, PICOLM_CPU_AVX2},
    {PICOLM_CPU_AVX512F, PICOLM_CPU_FMA},
    {PICOLM_CPU_AVX512F, PICOLM_CPU_F16C},
    {PICOLM_CPU_AVX512BW, PICOLM_CPU_AVX512F},
    {PICOLM_CPU_AVX512VL, PICOLM_CPU_AVX512F},
    {PICOLM_CPU_AVX512DQ, PICOLM_CPU_AVX512F},
    {PICOLM_CPU_AVX512VNNI, PICOLM_CPU_AVX512F},
    {PICOLM_CPU_AVX512BF16, PICOLM_CPU_AVX512F},
    {PICOLM_CPU_ARM_DOTPROD, PICOLM_CPU_NEON},
    {PICOLM_CPU_ARM_FP16, PICOLM_CPU_NEON},
    {PICOLM_CPU_ARM_I8MM, PICOLM_CPU_NEON},
    {PICOLM_CPU_ARM_SVE, PICOLM_CPU_NEON},
};

const char *cpu_feature_name(uint64_t bit) {
    for (size_t i = 0; i < N_FEATURES; i++)
        if (feature_names[i].bit == bit) return feature_names[i].name;
    return NULL;
}

void cpu_features_str(uint64_t f, char *buf, size_t n) {
    if (!buf || n == 0) return;
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < N_FEATURES; i++) {
        if (!(f & feature_names[i].bit)) continue;
        int w = snprintf(buf + len, n - len, "%s%s", len ? " " : "", feature_names[i].name);
        if (w < 0 || (size_t)w >= n - len) { buf[n - 1] = '\0'; return; }
        len += (size_t)w;
    }
    if (len == 0) snprintf(buf, n, "none");
}

uint64_t cpu_apply_mask(uint64_t features, uint64_t mask) {
    features &= ~mask;
    /* deps form chains, so iterate until nothing changes */
    for (int changed = 1; changed;) {
        changed = 0;
        for (size_t i = 0; i < sizeof deps / sizeof deps[0]; i++)
            if ((features & deps[i].f) && !(features & deps[i].needs)) {
                features &= ~deps[i].f;
                changed = 1;
            }
    }
    return features;
}

int cpu_parse_mask(const char *s, uint64_t *mask, char *err, size_t errlen) {
    uint64_t m = 0;
    *mask = 0;
    if (!s) return 0;
    while (*s) {
        while (*s == ',' || *s == '+' || *s == '|' || isspace((unsigned char)*s)) s++;
        if (!*s) break;
        const char *start = s;
        while (*s && *s != ',' && *s != '+' && *s != '|' && !isspace((unsigned char)*s)) s++;
        size_t len = (size_t)(s - start);
        char tok[64];
        if (len >= sizeof tok) len = sizeof tok - 1;
        memcpy(tok, start, len);
        tok[len] = '\0';

        int found = 0;
        if (!strcasecmp(tok, "all")) { m = ~0ull; found = 1; }
        for (size_t i = 0; i < N_FEATURES && !found; i++)
            if (!strcasecmp(tok, feature_names[i].name) ||
                (feature_names[i].alias && !strcasecmp(tok, feature_names[i].alias))) {
                m |= feature_names[i].bit;
                found = 1;
            }
        if (!found) {
            /* names first, so "f16c" is a name; then hex with or without 0x */
            const char *h = tok;
            if (h[0] == '0' && (h[1] == 'x' || h[1] == 'X')) h += 2;
            char *end;
            if (*h && strlen(h) <= 16) {
                unsigned long long v = strtoull(h, &end, 16);
                if (*end == '\0') { m |= (uint64_t)v; found = 1; }
            }
        }
        if (!found) {
            if (err && errlen) snprintf(err, errlen, "unknown CPU feature '%s'", tok);
            return -1;
        }
    }
    *mask = m;
    return 0;
}

#if CPU_X86
static uint64_t xgetbv0(void) {
    uint32_t eax, edx;
    /* byte encoding of xgetbv: needs no -mxsave and no assembler support */
    __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((uint64_t)edx << 32) | eax;
}

static uint64_t probe_hw(void) {
    unsigned a, b, c, d;
    uint64_t f = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    if (d & (1u << 26)) f |= PICOLM_CPU_SSE2;
    if (c & (1u << 0)) f |= PICOLM_CPU_SSE3;
    if (c & (1u << 9)) f |= PICOLM_CPU_SSSE3;
    if (c & (1u << 19)) f |= PICOLM_CPU_SSE41;
    if (c & (1u << 20)) f |= PICOLM_CPU_SSE42;
    if (c & (1u << 23)) f |= PICOLM_CPU_POPCNT;

    /* AVX state needs the OS to save XMM+YMM (XCR0 bits 1,2); AVX-512 also
       opmask, ZMM0-15 upper halves and ZMM16-31 (bits 5,6,7). */
    int os_avx = 0, os_avx512 = 0;
    if (c & (1u << 27)) { /* OSXSAVE */
        uint64_t xcr0 = xgetbv0();
        os_avx = (xcr0 & 0x6) == 0x6;
        os_avx512 = os_avx && (xcr0 & 0xe0) == 0xe0;
    }
    if (!os_avx) return f;
    if (c & (1u << 28)) f |= PICOLM_CPU_AVX;
    if (c & (1u << 12)) f |= PICOLM_CPU_FMA;
    if (c & (1u << 29)) f |= PICOLM_CPU_F16C;

    unsigned max_leaf = (unsigned)__get_cpuid_max(0, NULL);
    if (max_leaf < 7) return f;
    unsigned max_sub;
    __cpuid_count(7, 0, max_sub, b, c, d);
    if (b & (1u << 5)) f |= PICOLM_CPU_AVX2;
    if (os_avx512) {
        if (b & (1u << 16)) f |= PICOLM_CPU_AVX512F;
        if (b & (1u << 17)) f |= PICOLM_CPU_AVX512DQ;
        if (b & (1u << 30)) f |= PICOLM_CPU_AVX512BW;
        if (b & (1u << 31)) f |= PICOLM_CPU_AVX512VL;
        if (c & (1u << 11)) f |= PICOLM_CPU_AVX512VNNI;
    }
    if (max_sub >= 1) {
        __cpuid_count(7, 1, a, b, c, d);
        if (a & (1u << 4)) f |= PICOLM_CPU_AVXVNNI;
        if (os_avx512 && (a & (1u << 5))) f |= PICOLM_CPU_AVX512BF16;
    }
    /* drop anything whose base is missing (e.g. AVX2 without AVX bit) */
    return cpu_apply_mask(f, 0);
}
static cpu_id probe_id_hw(void) {
    unsigned a, b, c, d;
    cpu_id id = {0, 0, 0};
    if (!__get_cpuid(0, &a, &b, &c, &d)) return id;
    char v[13];
    memcpy(v, &b, 4), memcpy(v + 4, &d, 4), memcpy(v + 8, &c, 4);
    v[12] = 0;
    id.vendor = !strcmp(v, "GenuineIntel") ? PICOLM_VENDOR_INTEL
              : !strcmp(v, "AuthenticAMD") || !strcmp(v, "HygonGenuine") ? PICOLM_VENDOR_AMD : PICOLM_VENDOR_UNKNOWN;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return id;
    /* the display family and model (Intel SDM, CPUID leaf 1) */
    const unsigned fam = (a >> 8) & 0xf, model = (a >> 4) & 0xf;
    id.family = fam == 0xf ? fam + ((a >> 20) & 0xff) : fam;
    id.model = fam == 0x6 || fam == 0xf ? model | ((a >> 12) & 0xf0) : model;
    return id;
}
#elif CPU_ARM64
#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1ul << 1)
#endif
#ifndef HWCAP_FPHP
#define HWCAP_FPHP (1ul << 9)
#endif
#ifndef HWCAP_ASIMDHP
#define HWCAP_ASIMDHP (1ul << 10)
#endif
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1ul << 20)
#endif
#ifndef HWCAP_SVE
#define HWCAP_SVE (1ul << 22)
#endif
#ifndef HWCAP2_I8MM
#define HWCAP2_I8MM (1ul << 13)
#endif
static uint64_t probe_hw(void) {
    unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    uint64_t f = 0;
    if (hw & HWCAP_ASIMD) f |= PICOLM_CPU_NEON;
    if (hw & HWCAP_ASIMDDP) f |= PICOLM_CPU_ARM_DOTPROD;
    /* fp16 kernels use both scalar and vector half-precision arithmetic */
    if ((hw & HWCAP_FPHP) && (hw & HWCAP_ASIMDHP)) f |= PICOLM_CPU_ARM_FP16;
    if (hw & HWCAP_SVE) f |= PICOLM_CPU_ARM_SVE;
    if (hw2 & HWCAP2_I8MM) f |= PICOLM_CPU_ARM_I8MM;
    return cpu_apply_mask(f, 0);
}
#elif CPU_ARM32
/* Linux arch/arm/include/uapi/asm/hwcap.h (AT_HWCAP of a 32-bit process,
   also on an AArch64 kernel) */
#define A32_HWCAP_NEON (1ul << 12)
#define A32_HWCAP_VFPv4 (1ul << 16)
#define A32_HWCAP_FPHP (1ul << 22)
#define A32_HWCAP_ASIMDHP (1ul << 23)
#define A32_HWCAP_ASIMDDP (1ul << 24)
#define A32_HWCAP_I8MM (1ul << 27)
static uint64_t probe_hw(void) {
    unsigned long hw = getauxval(AT_HWCAP);
    uint64_t f = 0;
    /* "neon" is the level the NEON backend is built for: Advanced SIMD
       with VFPv4's fused multiply-add and f16 conversions (Cortex-A7 and
       later; every ARMv8 core in AArch32 state).  A Cortex-A8/A9 has NEON
       without VFPv4 and runs the scalar backend. */
    if ((hw & A32_HWCAP_NEON) && (hw & A32_HWCAP_VFPv4)) f |= PICOLM_CPU_NEON;
    if (hw & A32_HWCAP_ASIMDDP) f |= PICOLM_CPU_ARM_DOTPROD;
    if ((hw & A32_HWCAP_FPHP) && (hw & A32_HWCAP_ASIMDHP)) f |= PICOLM_CPU_ARM_FP16;
    if (hw & A32_HWCAP_I8MM) f |= PICOLM_CPU_ARM_I8MM;
    return cpu_apply_mask(f, 0);
}
#elif CPU_RISCV64
/* AT_HWCAP holds one bit per single-letter extension ('A' = bit 0).
   Mainline Linux sets 'V' (since 6.5, where it saves the vector state) for
   the ratified vector extension 1.0 only: the pre-1.0 vector unit of
   T-Head's C906/C910 (LicheeRV Nano, LicheePi 4A) is xtheadvector or not
   reported, so there the rvv backend is not chosen and scalar runs. */
static uint64_t probe_hw(void) {
    unsigned long hw = getauxval(AT_HWCAP);
    uint64_t f = 0;
    if (hw & (1ul << ('V' - 'A'))) f |= PICOLM_CPU_RVV;
    return f;
}
#else
static uint64_t probe_hw(void) { return 0; }
#endif

#if !CPU_X86
static void cpuinfo_read(char *name, size_t n, unsigned *impl, unsigned *part, unsigned *arch);
/* ARM: MIDR fields as /proc/cpuinfo shows them (under qemu-user: the host's
   file, whose x86 lines give no ids, so unknown) */
static cpu_id probe_id_hw(void) {
    unsigned impl = 0, part = 0, arch = 0;
    cpuinfo_read(NULL, 0, &impl, &part, &arch);
    cpu_id id = {impl ? PICOLM_VENDOR_ARM_IMPL(impl) : PICOLM_VENDOR_UNKNOWN, impl ? arch : 0, impl ? part : 0};
    return id;
}
#endif

void cpu_vendor_str(uint32_t vendor, char *buf, size_t n) {
    if (!buf || n == 0) return;
    if (vendor == PICOLM_VENDOR_INTEL) snprintf(buf, n, "intel");
    else if (vendor == PICOLM_VENDOR_AMD) snprintf(buf, n, "amd");
    else if ((vendor & ~0xffu) == PICOLM_VENDOR_ARM_IMPL(0)) snprintf(buf, n, "arm implementer 0x%02x", vendor & 0xffu);
    else snprintf(buf, n, "unknown");
}

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static uint64_t probed;
static cpu_id probed_id;
static void probe_init(void) {
    probed = probe_hw();
    probed_id = probe_id_hw();
}

cpu_id cpu_probe_id(void) {
    pthread_once(&probe_once, probe_init);
    return probed_id;
}

uint64_t cpu_probe_raw(void) {
    pthread_once(&probe_once, probe_init);
    return probed;
}

uint64_t cpu_probe(void) {
    uint64_t f = cpu_probe_raw();
    const char *env = getenv("PICOLM_CPU_MASK");
    if (env && *env) {
        uint64_t m;
        char err[128];
        if (cpu_parse_mask(env, &m, err, sizeof err) != 0) {
            /* said, not silent: a typo here would quietly test nothing */
            pl_log(PICOLM_LOG_WARN, "PICOLM_CPU_MASK: %s (ignored)", err);
            return f;
        }
        f = cpu_apply_mask(f, m);
    }
    return f;
}

int cpu_count_online(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
#ifdef CPU_COUNT
    /* containers and taskset restrict us further than "online" */
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int a = CPU_COUNT(&set);
        if (a > 0 && (n <= 0 || a < n)) n = a;
    }
#endif
    return n > 0 ? (int)n : 1;
}

static void trim_copy(char *dst, size_t n, const char *src) {
    while (isspace((unsigned char)*src)) src++;
    size_t len = strlen(src);
    while (len && isspace((unsigned char)src[len - 1])) len--;
    if (len >= n) len = n - 1;
    memcpy(dst, src, len);
    dst[len] = '\0';
}

#if CPU_ARM64 || CPU_ARM32
static const char *arm_part_name(unsigned impl, unsigned part) {
    static const struct { unsigned impl, part; const char *name; } parts[] = {
        {0x41, 0xd03, "Cortex-A53"}, {0x41, 0xd04, "Cortex-A35"},
        {0x41, 0xd05, "Cortex-A55"}, {0x41, 0xd07, "Cortex-A57"},
        {0x41, 0xd08, "Cortex-A72"}, {0x41, 0xd09, "Cortex-A73"},
        {0x41, 0xd0a, "Cortex-A75"}, {0x41, 0xd0b, "Cortex-A76"},
        {0x41, 0xd0c, "Neoverse-N1"}, {0x41, 0xd0d, "Cortex-A77"},
        {0x41, 0xd40, "Neoverse-V1"}, {0x41, 0xd41, "Cortex-A78"},
        {0x41, 0xd46, "Cortex-A510"}, {0x41, 0xd47, "Cortex-A710"},
        {0x41, 0xd49, "Neoverse-N2"}, {0x41, 0xd4f, "Neoverse-V2"},
        {0x41, 0xd8b, "Cortex-A720"}, {0x61, 0x022, "Apple M1"},
    };
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (parts[i].impl == impl && parts[i].part == part) return parts[i].name;
    return NULL;
}
#endif

/* /proc/cpuinfo: the first "model name" / "Model" into name (when n > 0),
   and the first ARM "CPU implementer", "CPU part", "CPU architecture" */
static void cpuinfo_read(char *name, size_t n, unsigned *impl, unsigned *part, unsigned *arch) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (!colon) continue;
        *colon = '\0';
        char key[64];
        trim_copy(key, sizeof key, line);
        unsigned *id = !strcmp(key, "CPU implementer") ? impl : !strcmp(key, "CPU part") ? part : !strcmp(key, "CPU architecture") ? arch : NULL;
        if (n && !name[0] && (!strcmp(key, "model name") || !strcmp(key, "Model"))) trim_copy(name, n, colon + 1);
        else if (id && !*id) *id = (unsigned)strtoul(colon + 1, NULL, 0);
    }
    fclose(f);
}

void cpu_model_name(char *buf, size_t n) {
    if (!buf || n == 0) return;
    buf[0] = '\0';
#if CPU_X86
    unsigned r[12];
    if ((unsigned)__get_cpuid_max(0x80000000u, NULL) >= 0x80000004u) {
        for (unsigned i = 0; i < 3; i++)
            __get_cpuid(0x80000002u + i, &r[4 * i], &r[4 * i + 1], &r[4 * i + 2], &r[4 * i + 3]);
        char brand[49];
        memcpy(brand, r, 48);
        brand[48] = '\0';
        trim_copy(buf, n, brand);
        if (buf[0]) return;
    }
#endif
    unsigned impl = 0, part = 0, arch = 0;
    cpuinfo_read(buf, n, &impl, &part, &arch);
#if CPU_ARM64 || CPU_ARM32
    const char *pn = arm_part_name(impl, part);
    if (pn) {
        /* "Model" on a Pi names the board; prefer the core name */
        char board[256];
        trim_copy(board, sizeof board, buf);
        if (board[0]) snprintf(buf, n, "%s (%s)", pn, board);
        else snprintf(buf, n, "%s", pn);
    } else if (!buf[0] && (impl || part)) {
        snprintf(buf, n, "ARM implementer 0x%02x part 0x%03x", impl, part);
    }
#endif
    if (!buf[0]) snprintf(buf, n, "unknown");
}
