/* Plugin loader: every malformed plugin (tests/plugins_src/probe.c built
   once per case) is rejected with its reason, a good one is accepted, and
   no code of a rejected plugin ran: a file whose ELF note is refused is never
   loaded (its constructor does not run), and of a loaded one nothing beyond
   the entry function runs before the checks (constructor, init and the
   vtable functions write to a marker file, $PICOLM_TEST_MARK).  The note
   reader survives hostile files (truncations, random byte flips) and reads
   ELF32 as well as ELF64; built-in descriptors go through the same checks. */
#include <elf.h>
#include <stdint.h>
#include <unistd.h>

#include "check.h"
#include "cpu.h"
#include "plugins.h"
#include "sampling.h"
#include "testlib.h"
#include "threadpool.h"

static char dir[256], markfile[320];

/* Build tests/plugins_src/probe.c as DIR/<file> with -DCASE_<c> (c may be ""). */
static int build(const char *file, const char *c, const char *name) {
    const char *cc = getenv("CC");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s -shared -fPIC -Iinclude %s%s -DNAME='\"%s\"' -o %s/%s tests/plugins_src/probe.c",
             cc && cc[0] ? cc : "cc", c[0] ? "-DCASE_" : "", c, name, dir, file);
    int rc = system(cmd);
    if (rc) printf("build failed: %s\n", cmd);
    return rc == 0;
}

static char *read_marks(void) {
    static char buf[4096];
    buf[0] = 0;
    FILE *f = fopen(markfile, "r");
    if (!f) return buf;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

/* loaded: the note passes, so the file is dlopen'd and its constructor runs */
typedef struct { const char *file, *c, *name, *why; int loaded; } bad_case;

static int write_bytes(const char *path, const void *b, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(b, 1, n, f);
    return fclose(f) || w != n ? -1 : 0;
}

/* A hostile file must never crash the note reader, and whatever it accepts
   is a valid note: truncated at every length up to past the notes, and
   random byte flips in the headers and the note segment. */
static void test_hostile_notes(const char *good) {
    size_t n;
    unsigned char *orig = tl_slurp(good, &n), *b = orig ? malloc(n) : NULL;
    if (!b) { CHECK(0, "read %s", good); free(orig); return; }
    char path[400], why[256];
    snprintf(path, sizeof path, "%s/hostile.so", dir);
    picolm_note note;
    /* the picolm note record's end: everything the reader needs lies before it */
    const uint32_t head[3] = {sizeof PICOLM_NOTE_NAME, sizeof(picolm_note), PICOLM_NOTE_TYPE};
    const unsigned char *at = memmem(orig, n, head, sizeof head);
    const size_t region = at ? (size_t)(at - orig) + sizeof(picolm_elf_note) : n;
    CHECK(at != NULL, "good.so has its picolm note at offset %zu", at ? (size_t)(at - orig) : 0);
    int accepted = 0, refused = 0, bad_accept = 0;
    for (size_t len = 0; len <= region; len++) {
        if (write_bytes(path, orig, len)) break;
        int rc = registry_read_note(path, &note, why, sizeof why);
        if (rc) refused++;
        if ((rc == 0) != (len == region)) bad_accept++;
    }
    CHECK(bad_accept == 0 && refused == (int)region, "cut at each of the first %zu bytes: all refused, the whole note accepted", region);
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    refused = 0;
    for (int it = 0; it < 3000; it++) {
        memcpy(b, orig, n);
        int flips = 1 + it % 4;
        for (int k = 0; k < flips; k++) {
            rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
            b[rng % region] = (unsigned char)(rng >> 32);
        }
        if (write_bytes(path, b, n)) break;
        if (registry_read_note(path, &note, why, sizeof why) == 0) {
            accepted++;
            const char *e = memchr(note.name, 0, sizeof note.name);
            if (note.abi_version != PICOLM_ABI_VERSION || note.kind < 1 || note.kind > 3 || !e || e == note.name) bad_accept++;
        } else {
            refused++;
        }
    }
    CHECK(bad_accept == 0 && accepted + refused == 3000,
          "3000 copies with random bytes changed: no crash, %d accepted (each a valid note), %d refused", accepted, refused);
    free(b);
    free(orig);
}

/* A minimal ELF32 little-endian shared object for 32-bit ARM carrying one
   note: the reader decodes it (a 64-bit host then refuses the machine). */
static void test_elf32(void) {
    unsigned char f[52 + 32 + sizeof(picolm_elf_note)];
    memset(f, 0, sizeof f);
    memcpy(f, ELFMAG, SELFMAG);
    f[EI_CLASS] = ELFCLASS32;
    f[EI_DATA] = ELFDATA2LSB;
    f[EI_VERSION] = EV_CURRENT;
    Elf32_Ehdr eh;
    memcpy(&eh, f, sizeof eh);
    eh.e_type = ET_DYN;
    eh.e_machine = EM_ARM;
    eh.e_version = EV_CURRENT;
    eh.e_phoff = 52;
    eh.e_ehsize = 52;
    eh.e_phentsize = 32;
    eh.e_phnum = 1;
    Elf32_Phdr ph = {.p_type = PT_NOTE, .p_offset = 84, .p_filesz = sizeof(picolm_elf_note), .p_memsz = sizeof(picolm_elf_note), .p_align = 4};
    picolm_elf_note nt = {sizeof PICOLM_NOTE_NAME, sizeof(picolm_note), PICOLM_NOTE_TYPE, PICOLM_NOTE_NAME,
                          {PICOLM_ABI_VERSION, PICOLM_KIND_BACKEND, 64, (uint32_t)PICOLM_CPU_NEON, (uint32_t)(PICOLM_CPU_NEON >> 32), "neon32"}};
    memcpy(f, &eh, sizeof eh); /* (this test assumes a little-endian host, as the loader does) */
    memcpy(f + 52, &ph, sizeof ph);
    memcpy(f + 84, &nt, sizeof nt);
    char path[400], why[256];
    snprintf(path, sizeof path, "%s/elf32.so", dir);
    picolm_note note;
    memset(&note, 0, sizeof note);
    int rc = write_bytes(path, f, sizeof f) ? 0 : registry_read_note(path, &note, why, sizeof why);
    const int host32 = sizeof(void *) == 4;
    CHECK(!strcmp(note.name, "neon32") && note.kind == PICOLM_KIND_BACKEND && note.desc_size == 64 &&
              ((uint64_t)note.cpu_required_hi << 32 | note.cpu_required_lo) == PICOLM_CPU_NEON &&
              (host32 || (rc && strstr(why, "built for ARM (32-bit)"))),
          "hand-made ELF32 (ARM) note decoded: %s kind %u, %s", note.name, note.kind, rc ? why : "accepted");
    /* the same with the note segment cut short: refused, no crash */
    ph.p_filesz = 40;
    memcpy(f + 52, &ph, sizeof ph);
    rc = write_bytes(path, f, sizeof f) ? 0 : registry_read_note(path, &note, why, sizeof why);
    CHECK(rc && strstr(why, "malformed ELF note"), "ELF32 note past its segment refused: %s", why);
}

/* Real cross-built probes (when the cross compilers are installed): the
   note of an armhf (ELF32) and a riscv64 (ELF64) plugin is read. */
static void test_cross(void) {
    static const struct { const char *cc, *arch; } x[] = {{"arm-linux-gnueabihf-gcc", "ARM (32-bit)"}, {"riscv64-linux-gnu-gcc", "RISC-V (64-bit)"},
                                                          {"aarch64-linux-gnu-gcc", "AArch64 (64-bit)"}};
    for (size_t i = 0; i < sizeof x / sizeof *x; i++) {
        char cmd[1024], path[400], why[256];
        snprintf(path, sizeof path, "%s/cross%zu.so", dir, i);
        snprintf(cmd, sizeof cmd, "%s -shared -fPIC -Iinclude -DNAME='\"p_cross\"' -o %s tests/plugins_src/probe.c 2>/dev/null", x[i].cc, path);
        if (system(cmd)) { SKIP("%s not installed: no %s plugin note read", x[i].cc, x[i].arch); continue; }
        picolm_note note;
        memset(&note, 0, sizeof note);
        int rc = registry_read_note(path, &note, why, sizeof why);
        char want[64];
        snprintf(want, sizeof want, "built for %s", x[i].arch);
        CHECK(!strcmp(note.name, "p_cross") && note.kind == PICOLM_KIND_SAMPLER && (rc == 0 || strstr(why, want)),
              "%s plugin's note read: %s, %s", x[i].arch, note.name, rc ? why : "accepted (this machine)");
        if (rc) { /* listed as a sampler built for another machine, not as a non-plugin file */
            pl_registry r;
            build_registry(&r);
            int k = registry_load_file(&r, path);
            CHECK(k >= 0 && !r.items[k].ok && !r.items[k].skipped && r.items[k].kind == PICOLM_KIND_SAMPLER &&
                      !strcmp(r.items[k].name, "p_cross") && !r.items[k].handle && strstr(r.items[k].why, want),
                  "the %s plugin is rejected as sampler p_cross (%s), not loaded", x[i].arch, k >= 0 ? r.items[k].why : "-");
            free_registry(&r);
        }
    }
}

/* Built-in descriptors (static builds) pass through the same checks. */
static int bi_create(const picolm_sampler_init *init, void **state, char *err, size_t errlen) {
    (void)init; (void)err; (void)errlen; *state = NULL; return 0;
}
static int bi_apply(void *state, picolm_candidates *c, char *err, size_t errlen) {
    (void)state; (void)c; (void)err; (void)errlen; return 0;
}
static const picolm_sampler_vtable bi_vt = {.struct_size = sizeof(picolm_sampler_vtable), .role = PICOLM_SAMPLER_PROCESS,
                                            .create = bi_create, .apply = bi_apply};

static void test_builtin(pl_registry *r) {
    /* static: the registry keeps the descriptor of an accepted plugin until
       free_registry (a real plugin's is a const static too) */
    static picolm_plugin d = {.abi_version = PICOLM_ABI_VERSION, .struct_size = sizeof(picolm_plugin), .kind = PICOLM_KIND_SAMPLER,
                       .name = "p_builtin", .version = "1.0", .vtable = &bi_vt};
    int k = registry_add_builtin(r, &d, "test");
    CHECK(k >= 0 && r->items[k].ok && registry_find(r, PICOLM_KIND_SAMPLER, "p_builtin") == &r->items[k] &&
              !strcmp(r->items[k].path, "(built in: test)"),
          "a built-in descriptor is accepted: %s", k >= 0 ? r->items[k].path : "-");
    picolm_plugin bad = d;
    bad.abi_version = PICOLM_ABI_VERSION + 1;
    bad.name = "p_builtin_abi";
    k = registry_add_builtin(r, &bad, "abi");
    CHECK(k >= 0 && !r->items[k].ok && strstr(r->items[k].why, "ABI version 2"), "built-in of another ABI rejected: %s", k >= 0 ? r->items[k].why : "-");
    bad = d;
    bad.name = "p_builtin_cpu";
    bad.cpu_required = PICOLM_CPU_IMPOSSIBLE;
    k = registry_add_builtin(r, &bad, "cpu");
    CHECK(k >= 0 && !r->items[k].ok && strstr(r->items[k].why, "CPU lacks"), "built-in the CPU cannot run rejected: %s", k >= 0 ? r->items[k].why : "-");
    bad = d;
    bad.vtable = NULL;
    bad.name = "p_builtin_novt";
    k = registry_add_builtin(r, &bad, "novt");
    CHECK(k >= 0 && !r->items[k].ok && strstr(r->items[k].why, "no vtable"), "built-in without a vtable rejected: %s", k >= 0 ? r->items[k].why : "-");
    k = registry_add_builtin(r, &d, "again");
    CHECK(k >= 0 && !r->items[k].ok && r->items[k].shadowed && strstr(r->items[k].why, "(built in: test)"),
          "a second built-in of the same name is shadowed %s", k >= 0 ? r->items[k].why : "-");
}

/* Each registry's host reaches its own pool (host.core_data), so two
   engines in one process never share one: chunk i of n runs on thread i. */
typedef struct { int max_id, calls; int64_t covered; } pfor_seen;
static void pfor_record(void *ctx, int64_t begin, int64_t end, int id) {
    pfor_seen *s = ctx;
    __atomic_fetch_add(&s->calls, 1, __ATOMIC_SEQ_CST);
    __atomic_fetch_add(&s->covered, end - begin, __ATOMIC_SEQ_CST);
    for (int m = __atomic_load_n(&s->max_id, __ATOMIC_SEQ_CST); id > m;)
        if (__atomic_compare_exchange_n(&s->max_id, &m, id, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) break;
}

static void test_host_pools(void) {
    pl_registry a, b;
    build_registry(&a);
    build_registry(&b);
    /* the host hands the plugins the probed identity, and says it has it */
    const cpu_id id = cpu_probe_id();
    CHECK(PICOLM_HOST_HAS(&a.host, cpu_model) && a.host.cpu_vendor == id.vendor && a.host.cpu_family == id.family &&
              a.host.cpu_model == id.model,
          "host: CPU identity (vendor %u, family %u, model %u) as probed", a.host.cpu_vendor, a.host.cpu_family, a.host.cpu_model);
    picolm_host v1 = a.host;
    v1.struct_size = (uint32_t)offsetof(picolm_host, cpu_vendor); /* a v1 core's host */
    CHECK(!PICOLM_HOST_HAS(&v1, cpu_vendor) && PICOLM_HOST_HAS(&v1, core_data), "PICOLM_HOST_HAS: a v1 host lacks the identity");
    pfor_seen s = {0, 0, 0};
    a.host.parallel_for(&a.host, 5, pfor_record, &s);
    CHECK(a.host.n_threads == 1 && s.calls == 1 && s.covered == 5 && s.max_id == 0, "no pool: parallel_for runs inline (%d calls)", s.calls);
    threadpool *p2 = build_threadpool(2), *p3 = build_threadpool(3);
    registry_set_pool(&a, p2);
    registry_set_pool(&b, p3); /* set last: a global pool would now serve a too */
    s = (pfor_seen){0, 0, 0};
    a.host.parallel_for(&a.host, 3, pfor_record, &s);
    CHECK(a.host.n_threads == 2 && s.max_id == 1 && s.covered == 3, "registry a: its own 2-thread pool (threads 0..%d, n_threads %d)", s.max_id,
          a.host.n_threads);
    s = (pfor_seen){0, 0, 0};
    b.host.parallel_for(&b.host, 3, pfor_record, &s);
    CHECK(b.host.n_threads == 3 && s.max_id == 2 && s.covered == 3, "registry b: its own 3-thread pool (threads 0..%d, n_threads %d)", s.max_id,
          b.host.n_threads);
    registry_set_pool(&a, NULL);
    registry_set_pool(&b, NULL);
    free_threadpool(p2);
    free_threadpool(p3);
    free_registry(&a);
    free_registry(&b);
}

/* picolm_sampler_vtable.neutral, appended after v1: read only when the
   plugin's struct_size covers it; a neutral stage is left out of the chain. */
static void test_appended_neutral(const pl_registry *r) {
    static const char *const pieces[] = {"a", "b"};
    static const uint32_t lens[] = {1, 1};
    const picolm_vocab vocab = {.n_vocab = 2, .bos_id = -1, .eos_id = -1, .piece = pieces, .piece_len = lens};
    char err[512] = "";
    sampling *s = NULL;
    sampling_settings set = {.chain = "p_v1,greedy"};
    int rc = build_sampling(&s, r, &set, &vocab, err, sizeof err);
    CHECK(!rc && sampling_n_stages(s) == 2 && !strstr(read_marks(), "p_v1:neutral"),
          "a v1-sized sampler vtable: the appended neutral() is not read, the stage stays (%s)", err);
    free_sampling(s);
    s = NULL;
    set.chain = "p_neutral,greedy";
    rc = build_sampling(&s, r, &set, &vocab, err, sizeof err);
    CHECK(!rc && sampling_n_stages(s) == 1 && strstr(read_marks(), "p_neutral:neutral"),
          "a sampler whose neutral() says so is left out of the chain (%s)", err);
    free_sampling(s);
}

/* logit_scale and apply_logits, appended after neutral: a vtable sized
   before them is never asked for them (its apply() runs); one that has
   them is folded (first stage) and read from the logits (the next). */
static void test_appended_direct(const pl_registry *r) {
    static const char *const pieces[] = {"a", "b"};
    static const uint32_t lens[] = {1, 1};
    const picolm_vocab vocab = {.n_vocab = 2, .bos_id = -1, .eos_id = -1, .piece = pieces, .piece_len = lens};
    const float logits[2] = {1.0f, 3.0f};
    char err[512] = "";
    FILE *f = fopen(markfile, "w"); /* only this test's marks from here */
    if (f) fclose(f);
    sampling *s = NULL;
    int32_t tok = -1;
    sampling_settings set = {.chain = "p_nsized,p_nsized,greedy"};
    int rc = build_sampling(&s, r, &set, &vocab, err, sizeof err) || sampling_sample(s, logits, -1, &tok, err, sizeof err);
    const char *m = read_marks();
    CHECK(!rc && tok == 1 && !strstr(m, "p_nsized:logit_scale") && !strstr(m, "p_nsized:apply_logits") && strstr(m, "p_nsized:apply"),
          "a sampler vtable sized before logit_scale: neither appended member is read, apply() runs (token %d, %s)", (int)tok, err);
    free_sampling(s);
    s = NULL;
    tok = -1;
    set.chain = "p_direct,p_direct,greedy";
    rc = build_sampling(&s, r, &set, &vocab, err, sizeof err) || sampling_sample(s, logits, -1, &tok, err, sizeof err);
    m = read_marks();
    CHECK(!rc && tok == 0 && strstr(m, "p_direct:logit_scale") && strstr(m, "p_direct:apply_logits 2") && !strstr(m, "p_direct:apply\n"),
          "a sampler with them: the first stage's scale is folded into the second's apply_logits, no apply() (token %d, %s)", (int)tok, err);
    sampling_direct(s, 0);
    tok = -1;
    rc = sampling_sample(s, logits, -1, &tok, err, sizeof err);
    m = read_marks();
    CHECK(!rc && tok == 1 && strstr(m, "p_direct:apply\n"), "and with the direct path off, apply() runs instead (token %d, %s)", (int)tok, err);
    free_sampling(s);
}

/* draw and apply_select, appended after apply_logits: the last two stages
   run as one only when both are sized to have them (the draw peeked, then
   consumed); otherwise, or with the fused step off, apply_logits and the
   last stage's apply() run. */
static void test_appended_fused(const pl_registry *r) {
    static const char *const pieces[] = {"a", "b"};
    static const uint32_t lens[] = {1, 1};
    const picolm_vocab vocab = {.n_vocab = 2, .bos_id = -1, .eos_id = -1, .piece = pieces, .piece_len = lens};
    const float logits[2] = {1.0f, 3.0f};
    static const struct { const char *chain; int fused; } cases[] = {
        {"p_select,p_draw", 1}, {"p_ssized,p_draw", 0}, {"p_select,p_dsized", 0},
    };
    for (int i = 0; i < 3; i++) {
        for (int off = 0; off < 2; off++) {
            char err[512] = "";
            FILE *f = fopen(markfile, "w"); /* only this case's marks */
            if (f) fclose(f);
            sampling *s = NULL;
            int32_t tok = -1;
            sampling_settings set = {.chain = cases[i].chain};
            int rc = build_sampling(&s, r, &set, &vocab, err, sizeof err);
            if (!rc && off) sampling_fused(s, 0);
            rc = rc || sampling_sample(s, logits, -1, &tok, err, sizeof err);
            const char *m = read_marks();
            if (cases[i].fused && !off)
                CHECK(!rc && tok == 1 && strstr(m, "p_select:apply_select 0.25") && strstr(m, "draw 0\n") && strstr(m, "draw 1\n") &&
                          !strstr(m, ":apply\n") && !strstr(m, "apply_logits"),
                      "%s: one fused step (the draw peeked, then consumed), no apply() (token %d, %s)", cases[i].chain, (int)tok, err);
            else
                CHECK(!rc && tok == 0 && !strstr(m, "apply_select") && !strstr(m, ":draw") && strstr(m, "apply_logits 1") && strstr(m, ":apply\n"),
                      "%s%s: apply_logits, then the last stage's apply(); draw and apply_select unread (token %d, %s)", cases[i].chain,
                      off ? ", fused off" : "", (int)tok, err);
            free_sampling(s);
        }
    }
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/picolm-plugin-test-XXXXXX");
    if (!mkdtemp(dir)) { CHECK(0, "mkdtemp"); return 1; }
    snprintf(markfile, sizeof markfile, "%s/marks", dir);
    setenv("PICOLM_TEST_MARK", markfile, 1);

    test_host_pools();
    static const bad_case cases[] = {
        /* refused from the note, never loaded */
        {"abi.so", "ABI", "p_abi", "ABI version 2", 0},
        {"small.so", "SMALL", "p_small", "descriptor too small (16 bytes", 0},
        {"kind.so", "KIND", "p_kind", "unknown plugin kind 7", 0},
        {"noname.so", "NONAME", "p_noname", "lacks a name", 0},
        {"cpu.so", "CPU", "p_cpu", "CPU lacks required feature", 0},
        {"nonote.so", "NONOTE", "p_nonote", "no picolm note", 0},
        {"notetrunc.so", "NOTETRUNC", "p_notetrunc", "picolm note truncated (12 bytes", 0},
        {"twonotes.so", "TWONOTES", "p_twonotes", "2 picolm notes", 0},
        /* the note passes: loaded, then refused from the descriptor before init */
        {"noentry.so", "NOENTRY", "p_noentry", "no entry symbol 'picolm_plugin_v1'", 1},
        {"nulldesc.so", "NULLDESC", "p_nulldesc", "returned no descriptor", 1},
        {"mismatch.so", "MISMATCH", "p_mismatch", "disagrees with the note", 1},
        {"novtable.so", "NOVTABLE", "p_novtable", "no vtable", 1},
        {"smallvtable.so", "SMALLVTABLE", "p_smallvt", "sampler vtable too small (4 bytes, ABI v1 needs", 1},
        {"smallformat.so", "SMALLFORMAT", "p_smallformat", "format table entry too small", 1},
        {"smallbackend.so", "SMALLBACKEND", "p_smallbackend", "backend vtable too small", 1},
        {"smallkernel.so", "SMALLKERNEL", "p_smallkernel", "kernel table entry too small", 1},
        {"nocreate.so", "NOCREATE", "p_nocreate", "lacks create/apply", 1},
        {"badrole.so", "BADROLE", "p_badrole", "invalid role", 1},
        {"badformat.so", "BADFORMAT", "p_badformat", "invalid type id", 1},
        {"badgroup.so", "BADGROUP", "p_badgroup", "format BADGROUP has row_group 3", 1},
        {"badbackend.so", "BADBACKEND", "p_badbackend", "kernel tables malformed", 1},
        {"initfail.so", "INITFAIL", "p_initfail", "init failed: probe refuses to start", 1},
    };
    const int nc = (int)(sizeof cases / sizeof *cases);
    int built = build("good.so", "", "p_good") && build("dup.so", "", "p_good") && build("wide.so", "WIDE", "p_wide") &&
                build("v1sampler.so", "V1SAMPLER", "p_v1") && build("neutral.so", "NEUTRAL", "p_neutral") &&
                build("nsized.so", "NSIZED", "p_nsized") && build("direct.so", "DIRECT", "p_direct") &&
                build("select.so", "SELECT", "p_select") && build("draw.so", "DRAW", "p_draw") && build("ssized.so", "SSIZED", "p_ssized") &&
                build("dsized.so", "DSIZED", "p_dsized");
    for (int i = 0; i < nc && built; i++) built = build(cases[i].file, cases[i].c, cases[i].name);
    CHECK(built, "built %d probe plugins with ${CC:-cc}", nc + 11);
    if (!built) return 1;
    char p[512];
    snprintf(p, sizeof p, "%s/text.so", dir);
    FILE *f = fopen(p, "w");
    fputs("this is not a shared object\n", f);
    fclose(f);
    /* a copy of a real library (libm, mapped into this process) named like a plugin */
    char lib[512] = "", line[1024];
    FILE *maps = fopen("/proc/self/maps", "r");
    while (maps && fgets(line, sizeof line, maps))
        if (strstr(line, "/libm.so") || (!lib[0] && strstr(line, "/libc.so"))) {
            char *sl = strchr(line, '/');
            sl[strcspn(sl, "\n")] = 0;
            snprintf(lib, sizeof lib, "%s", sl);
        }
    if (maps) fclose(maps);
    snprintf(p, sizeof p, "cp '%s' '%s/libcopy.so'", lib, dir);
    CHECK(lib[0] && system(p) == 0, "copied a real library (%s) into the plugin directory as libcopy.so", lib);

    pl_registry r;
    build_registry(&r);
    snprintf(p, sizeof p, "%s/good.so", dir);
    int gi = registry_load_file(&r, p);
    CHECK(gi >= 0 && r.items[gi].ok && r.items[gi].handle && !strcmp(r.items[gi].name, "p_good"),
          "good plugin accepted (%s)", gi >= 0 ? r.items[gi].why : "-");
    CHECK(registry_find(&r, PICOLM_KIND_SAMPLER, "p_good") != NULL, "registry_find finds it");
    CHECK(strstr(read_marks(), "p_good:init\n") != NULL, "good plugin's init ran");
    /* a plugin built against a later (appended) header: larger sizes are fine */
    snprintf(p, sizeof p, "%s/wide.so", dir);
    int wi = registry_load_file(&r, p);
    CHECK(wi >= 0 && r.items[wi].ok, "a plugin with wider structs than v1 is accepted (%s)", wi >= 0 ? r.items[wi].why : "-");
    CHECK(!strcmp(registry_type_name(&r, 1500), "WIDE0") && !strcmp(registry_type_name(&r, 1501), "WIDE1"),
          "its format table is stepped by its own entry size: %s, %s", registry_type_name(&r, 1500), registry_type_name(&r, 1501));

    for (int i = 0; i < nc; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, cases[i].file);
        int k = registry_load_file(&r, p);
        CHECK(k >= 0 && !r.items[k].ok && !r.items[k].handle && !r.items[k].desc && strstr(r.items[k].why, cases[i].why),
              "%s rejected: %s", cases[i].file, k >= 0 ? r.items[k].why : "(no entry)");
        char ctor[96];
        snprintf(ctor, sizeof ctor, "%s:constructor\n", cases[i].name);
        if (!cases[i].loaded)
            CHECK(!strstr(read_marks(), ctor), "%s was not loaded: its constructor did not run", cases[i].file);
    }
    static const struct { const char *file, *why; } skipped[] = {
        {"text.so", "not an ELF file"}, {"libcopy.so", "no picolm note"}, {"missing.so", "cannot open"}};
    for (size_t i = 0; i < sizeof skipped / sizeof *skipped; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, skipped[i].file);
        int k = registry_load_file(&r, p);
        CHECK(k >= 0 && !r.items[k].ok && r.items[k].skipped && !r.items[k].kind && strstr(r.items[k].why, skipped[i].why),
              "%s skipped: %s", skipped[i].file, k >= 0 ? r.items[k].why : "-");
    }
    snprintf(p, sizeof p, "%s/dup.so", dir);
    int k = registry_load_file(&r, p);
    CHECK(k >= 0 && !r.items[k].ok && r.items[k].shadowed && !strncmp(r.items[k].why, "by ", 3) && strstr(r.items[k].why, "good.so"),
          "same kind+name again is shadowed %s", k >= 0 ? r.items[k].why : "-");
    CHECK(registry_find(&r, PICOLM_KIND_SAMPLER, "p_good") == &r.items[gi], "the first p_good still wins");
    const char *m0 = read_marks(), *c1 = strstr(m0, "p_good:constructor\n");
    CHECK(c1 && !strstr(c1 + 1, "p_good:constructor\n"), "the shadowed copy was not loaded (one p_good constructor ran)");
    char out[8192] = "";
    FILE *mem = fmemopen(out, sizeof out - 1, "w");
    registry_print(&r, NULL, mem);
    fclose(mem);
    CHECK(strstr(out, "shadowed by ") && strstr(out, "p_good") && strstr(out, "skipped (no picolm note this picolm can use):") && strstr(out, "libcopy.so"),
          "--list-plugins says shadowed (by which file) and lists the skipped files with why");

    /* only the accepted plugins' code, the failing init and the constructors of
       loaded (descriptor-checked) plugins may have run */
    const char *m = read_marks();
    int stray = 0;
    for (const char *line = m; *line; line = strchr(line, '\n') + 1) {
        int allowed = !strncmp(line, "p_good:init\n", 12) || !strncmp(line, "p_good:constructor\n", 19) ||
                      !strncmp(line, "p_wide:init\n", 12) || !strncmp(line, "p_wide:constructor\n", 19) ||
                      !strncmp(line, "p_initfail:init\n", 16);
        for (int i = 0; i < nc && !allowed; i++) {
            size_t l = strlen(cases[i].name);
            allowed = cases[i].loaded && !strncmp(line, cases[i].name, l) && !strncmp(line + l, ":constructor\n", 13);
        }
        if (!allowed) {
            printf("unexpected code ran: %.*s\n", (int)(strchr(line, '\n') - line), line);
            stray++;
        }
        if (!strchr(line, '\n')) break;
    }
    CHECK(!stray && strstr(m, "p_initfail:init"), "no code of a refused plugin ran beyond its checks (marks: %zu bytes)", strlen(m));
    test_builtin(&r);
    free_registry(&r);
    CHECK(strstr(read_marks(), "p_good:fini\n") && !strstr(read_marks(), "p_initfail:fini"),
          "free_registry ran fini of the accepted plugin only");

    /* a directory mixing all of them with the real plugins: the real ones still load */
    char e[512] = "";
    pl_registry r2;
    int rc = registry_load(&r2, dir, e, sizeof e);
    int ok = 0, rejected = 0;
    for (int i = 0; i < r2.n; i++) {
        if (!strncmp(r2.items[i].path, dir, strlen(dir))) { ok += r2.items[i].ok; rejected += !r2.items[i].ok; }
    }
    CHECK(ok == 10 && rejected == nc + 3, "directory scan: 10 accepted (good, wide, v1, neutral, nsized, direct, select, draw, ssized, dsized), %d refused (got %d, %d)", nc + 3,
          ok, rejected);
    test_appended_neutral(&r2);
    test_appended_direct(&r2);
    test_appended_fused(&r2);
    if (rc == 0) {
        int formats = 0;
        for (int i = 0; i < r2.n; i++) formats += r2.items[i].ok && r2.items[i].kind == PICOLM_KIND_FORMAT;
        CHECK(formats > 0, "real format plugins still load next to broken ones (%d)", formats);
    } else {
        SKIP("no real format plugins next to the test binary: %s", e);
    }
    free_registry(&r2);

    snprintf(p, sizeof p, "%s/good.so", dir);
    test_hostile_notes(p);
    test_elf32();
    test_cross();

    snprintf(p, sizeof p, "rm -rf '%s'", dir);
    if (system(p)) printf("could not remove %s\n", dir);
    return CHECK_DONE();
}
