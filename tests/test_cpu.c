/* CPU probe: agrees with the kernel's /proc/cpuinfo flags; PICOLM_CPU_MASK
   removes features (and their dependents); names and strings. */
#include "check.h"
#include "cpu.h"
#include "picolm/plugin.h"

#include <stdint.h>

/* " flag " present in the first flags/Features line of /proc/cpuinfo?
   returns -1 when the file or line is missing */
static char cpuinfo_flags[8192];
/* the architecture's own key: under qemu-user /proc/cpuinfo is the host's */
#if defined(__aarch64__)
#define CPUINFO_KEY "Features"
#else
#define CPUINFO_KEY "flags"
#endif
static int load_cpuinfo(void) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return -1;
    char line[8192];
    int ok = -1;
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, CPUINFO_KEY, strlen(CPUINFO_KEY))) {
            char *c = strchr(line, ':');
            if (!c) continue;
            snprintf(cpuinfo_flags, sizeof cpuinfo_flags, " %s", c + 1);
            size_t l = strlen(cpuinfo_flags);
            while (l && (cpuinfo_flags[l - 1] == '\n' || cpuinfo_flags[l - 1] == ' ')) cpuinfo_flags[--l] = 0;
            strcat(cpuinfo_flags, " ");
            ok = 0;
            break;
        }
    }
    fclose(f);
    return ok;
}
/* unused where an architecture has no cross-check (riscv64, armhf) */
__attribute__((unused)) static int has_flag(const char *name) {
    char pat[64];
    snprintf(pat, sizeof pat, " %s ", name);
    return strstr(cpuinfo_flags, pat) != NULL;
}

/* the value of the first "key : value" line of /proc/cpuinfo (number:
   strtoul base 0, else the string into str); -1 when absent */
__attribute__((unused)) static long cpuinfo_value(const char *key, char *str, size_t n) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return -1;
    char line[1024];
    long v = -1;
    while (v < 0 && fgets(line, sizeof line, f)) {
        char *c = strchr(line, ':');
        if (!c || strncmp(line, key, strlen(key)) || strspn(line + strlen(key), " \t") != (size_t)(c - line) - strlen(key)) continue;
        c += 1 + strspn(c + 1, " \t");
        c[strcspn(c, "\n")] = 0;
        if (str) snprintf(str, n, "%s", c);
        v = str ? 0 : (long)strtoul(c, NULL, 0);
    }
    fclose(f);
    return v;
}

/* cpu_probe_id <=> the kernel's view: vendor_id / cpu family / model (x86),
   CPU implementer / architecture / part (ARM) */
static void test_identity(void) {
    const cpu_id id = cpu_probe_id();
    char vs[64];
    cpu_vendor_str(id.vendor, vs, sizeof vs);
    printf("info: cpu identity %s, family %u, model %u\n", vs, id.family, id.model);
#if defined(__x86_64__) || defined(__i386__)
    char v[64];
    if (cpuinfo_value("vendor_id", v, sizeof v) < 0) {
        SKIP("/proc/cpuinfo has no vendor_id: cannot cross-check the identity");
        return;
    }
    const uint32_t want = !strcmp(v, "GenuineIntel") ? PICOLM_VENDOR_INTEL
                        : !strcmp(v, "AuthenticAMD") || !strcmp(v, "HygonGenuine") ? PICOLM_VENDOR_AMD : PICOLM_VENDOR_UNKNOWN;
    CHECK(id.vendor == want, "vendor %s: probe %u, want %u", v, id.vendor, want);
    CHECK((long)id.family == cpuinfo_value("cpu family", NULL, 0), "family: probe %u, /proc/cpuinfo %ld", id.family,
          cpuinfo_value("cpu family", NULL, 0));
    CHECK((long)id.model == cpuinfo_value("model", NULL, 0), "model: probe %u, /proc/cpuinfo %ld", id.model, cpuinfo_value("model", NULL, 0));
#elif defined(__aarch64__) || defined(__arm__)
    const long impl = cpuinfo_value("CPU implementer", NULL, 0);
    if (impl < 0) {
        SKIP("/proc/cpuinfo has no CPU implementer (qemu-user shows the host's): cannot cross-check the identity");
        return;
    }
    CHECK(id.vendor == PICOLM_VENDOR_ARM_IMPL(impl), "vendor: probe 0x%x, implementer 0x%lx", id.vendor, impl);
    CHECK((long)id.model == cpuinfo_value("CPU part", NULL, 0), "part: probe 0x%x", id.model);
    CHECK((long)id.family == cpuinfo_value("CPU architecture", NULL, 0), "architecture: probe %u", id.family);
#else
    SKIP("no identity cross-check for this architecture");
#endif
    cpu_vendor_str(PICOLM_VENDOR_ARM_IMPL(0x41), vs, sizeof vs);
    CHECK(!strcmp(vs, "arm implementer 0x41"), "vendor name: %s", vs);
}

int main(void) {
    unsetenv("PICOLM_CPU_MASK");
    uint64_t raw = cpu_probe_raw();
    uint64_t f = cpu_probe();
    char s[512];
    cpu_features_str(f, s, sizeof s);
    char model[256];
    cpu_model_name(model, sizeof model);
    printf("info: cpu \"%s\", %d online, features: %s\n", model, cpu_count_online(), s);

    CHECK(f == raw, "no mask: cpu_probe == cpu_probe_raw");
    CHECK(!(raw & PICOLM_CPU_IMPOSSIBLE), "IMPOSSIBLE bit never probed");
    CHECK(model[0] != 0, "cpu_model_name non-empty (%s)", model);
    CHECK(cpu_count_online() >= 1, "cpu_count_online >= 1");

    /* probe <=> kernel's view (Linux hides AVX when XSAVE is off, like us) */
    static const struct { uint64_t bit; const char *flag; } x86[] = {
        {PICOLM_CPU_SSE2, "sse2"}, {PICOLM_CPU_SSE3, "pni"}, {PICOLM_CPU_SSSE3, "ssse3"},
        {PICOLM_CPU_SSE41, "sse4_1"}, {PICOLM_CPU_SSE42, "sse4_2"}, {PICOLM_CPU_POPCNT, "popcnt"},
        {PICOLM_CPU_AVX, "avx"}, {PICOLM_CPU_AVX2, "avx2"}, {PICOLM_CPU_FMA, "fma"},
        {PICOLM_CPU_F16C, "f16c"}, {PICOLM_CPU_AVX512F, "avx512f"}, {PICOLM_CPU_AVX512BW, "avx512bw"},
        {PICOLM_CPU_AVX512VL, "avx512vl"}, {PICOLM_CPU_AVX512DQ, "avx512dq"},
        {PICOLM_CPU_AVX512VNNI, "avx512_vnni"}, {PICOLM_CPU_AVX512BF16, "avx512_bf16"},
        {PICOLM_CPU_AVXVNNI, "avx_vnni"},
    };
    static const struct { uint64_t bit; const char *flag; } arm[] = {
        {PICOLM_CPU_NEON, "asimd"}, {PICOLM_CPU_ARM_DOTPROD, "asimddp"},
        {PICOLM_CPU_ARM_FP16, "asimdhp"}, {PICOLM_CPU_ARM_I8MM, "i8mm"}, {PICOLM_CPU_ARM_SVE, "sve"},
    };
    if (load_cpuinfo() != 0) {
        SKIP("/proc/cpuinfo has no '" CPUINFO_KEY "' line (qemu-user shows the host's): cannot cross-check the probe");
    } else {
#if defined(__x86_64__) || defined(__i386__)
        for (size_t i = 0; i < sizeof x86 / sizeof x86[0]; i++) {
            int p = (raw & x86[i].bit) != 0, k = has_flag(x86[i].flag);
            CHECK(p == k, "x86 %s: probe %d, /proc/cpuinfo %d", x86[i].flag, p, k);
        }
        CHECK(raw & PICOLM_CPU_SSE2, "x86-64 always has sse2");
        CHECK(!(raw & PICOLM_CPU_NEON), "no ARM bits on x86");
#elif defined(__aarch64__)
        for (size_t i = 0; i < sizeof arm / sizeof arm[0]; i++) {
            int p = (raw & arm[i].bit) != 0, k = has_flag(arm[i].flag);
            if (arm[i].bit == PICOLM_CPU_ARM_FP16) k = k && has_flag("fphp");
            CHECK(p == k, "arm %s: probe %d, /proc/cpuinfo %d", arm[i].flag, p, k);
        }
        CHECK(!(raw & PICOLM_CPU_SSE2), "no x86 bits on ARM");
#else
        SKIP("no cross-check for this architecture");
#endif
        (void)x86; (void)arm;
    }

    test_identity();

    /* names */
    CHECK(!strcmp(cpu_feature_name(PICOLM_CPU_AVX2), "avx2"), "name avx2");
    CHECK(!strcmp(cpu_feature_name(PICOLM_CPU_SSE41), "sse4.1"), "name sse4.1");
    CHECK(!strcmp(cpu_feature_name(PICOLM_CPU_ARM_DOTPROD), "dotprod"), "name dotprod");
    CHECK(cpu_feature_name(1ull << 40) == NULL, "unknown bit has no name");
    cpu_features_str(PICOLM_CPU_SSE2 | PICOLM_CPU_AVX2 | PICOLM_CPU_FMA, s, sizeof s);
    CHECK(!strcmp(s, "sse2 avx2 fma"), "features_str order: '%s'", s);
    cpu_features_str(0, s, sizeof s);
    CHECK(!strcmp(s, "none"), "features_str(0) = '%s'", s);
    char tiny[8];
    cpu_features_str(PICOLM_CPU_SSE2 | PICOLM_CPU_SSE3 | PICOLM_CPU_SSSE3, tiny, sizeof tiny);
    CHECK(strlen(tiny) < sizeof tiny, "features_str truncates safely ('%s')", tiny);

    /* mask parsing */
    uint64_t m;
    char err[128];
    CHECK(cpu_parse_mask("avx512f,avx512bw", &m, err, sizeof err) == 0 &&
          m == (PICOLM_CPU_AVX512F | PICOLM_CPU_AVX512BW), "parse names");
    CHECK(cpu_parse_mask("0x40", &m, err, sizeof err) == 0 && m == PICOLM_CPU_AVX2, "parse hex");
    CHECK(cpu_parse_mask("f16c", &m, err, sizeof err) == 0 && m == PICOLM_CPU_F16C, "f16c is a name, not hex");
    CHECK(cpu_parse_mask("SSE4_1 avx", &m, err, sizeof err) == 0 &&
          m == (PICOLM_CPU_SSE41 | PICOLM_CPU_AVX), "aliases, case, spaces");
    CHECK(cpu_parse_mask("avx3", &m, err, sizeof err) != 0 && strstr(err, "avx3"), "bad name rejected: %s", err);

    /* dependency closure */
    uint64_t all_x86 = PICOLM_CPU_SSE2 | PICOLM_CPU_SSE3 | PICOLM_CPU_SSSE3 | PICOLM_CPU_SSE41 |
                       PICOLM_CPU_SSE42 | PICOLM_CPU_AVX | PICOLM_CPU_AVX2 | PICOLM_CPU_FMA |
                       PICOLM_CPU_F16C | PICOLM_CPU_AVX512F | PICOLM_CPU_AVX512BW | PICOLM_CPU_POPCNT;
    uint64_t r = cpu_apply_mask(all_x86, PICOLM_CPU_AVX);
    CHECK(r == (PICOLM_CPU_SSE2 | PICOLM_CPU_SSE3 | PICOLM_CPU_SSSE3 | PICOLM_CPU_SSE41 |
                PICOLM_CPU_SSE42 | PICOLM_CPU_POPCNT), "masking avx drops avx2/fma/f16c/avx512");
    r = cpu_apply_mask(all_x86, PICOLM_CPU_AVX512F);
    CHECK((r & PICOLM_CPU_AVX2) && !(r & (PICOLM_CPU_AVX512F | PICOLM_CPU_AVX512BW)),
          "masking avx512f keeps avx2, drops avx512bw");

    /* env mask through cpu_probe */
    setenv("PICOLM_CPU_MASK", "avx512f,avx512bw", 1);
    f = cpu_probe();
    CHECK(!(f & (PICOLM_CPU_AVX512F | PICOLM_CPU_AVX512BW | PICOLM_CPU_AVX512VL)),
          "PICOLM_CPU_MASK=avx512f,avx512bw removes avx512");
    CHECK((f & PICOLM_CPU_AVX2) == (raw & PICOLM_CPU_AVX2), "... and keeps avx2 as probed");
    setenv("PICOLM_CPU_MASK", "0x40", 1);
    f = cpu_probe();
    CHECK(!(f & PICOLM_CPU_AVX2) && (f & PICOLM_CPU_SSE2) == (raw & PICOLM_CPU_SSE2),
          "PICOLM_CPU_MASK=0x40 removes avx2 only-ish");
    setenv("PICOLM_CPU_MASK", "neon", 1);
    f = cpu_probe();
    CHECK(!(f & (PICOLM_CPU_NEON | PICOLM_CPU_ARM_DOTPROD | PICOLM_CPU_ARM_FP16 | PICOLM_CPU_ARM_I8MM | PICOLM_CPU_ARM_SVE)) &&
          (f & PICOLM_CPU_SSE2) == (raw & PICOLM_CPU_SSE2), "PICOLM_CPU_MASK=neon drops every ARM extension");
    setenv("PICOLM_CPU_MASK", "dotprod", 1);
    f = cpu_probe();
    CHECK(!(f & PICOLM_CPU_ARM_DOTPROD) && (f & PICOLM_CPU_NEON) == (raw & PICOLM_CPU_NEON),
          "PICOLM_CPU_MASK=dotprod keeps neon as probed");
    setenv("PICOLM_CPU_MASK", "all", 1);
    CHECK(cpu_probe() == 0, "PICOLM_CPU_MASK=all -> no features");
    setenv("PICOLM_CPU_MASK", "bogus", 1);
    CHECK(cpu_probe() == raw, "bad PICOLM_CPU_MASK is ignored (with a warning)");
    unsetenv("PICOLM_CPU_MASK");
    CHECK(cpu_probe() == raw, "mask unset again");
    return CHECK_DONE();
}
