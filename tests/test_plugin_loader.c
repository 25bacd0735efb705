/* Plugin loader: every malformed plugin (tests/plugins_src/probe.c built
   once per case) is rejected with its reason, a good one is accepted, and
   no code of a rejected plugin beyond its entry function ran (init and the
   vtable functions write to a marker file, $PICOLM_TEST_MARK). */
#include <stdint.h>
#include <unistd.h>

#include "check.h"
#include "cpu.h"
#include "plugins.h"

static char dir[256], markfile[320];

static void h_log(int level, const char *msg) { (void)level; (void)msg; }
static void *h_alloc(size_t n, size_t a) { (void)a; return calloc(1, n ? n : 1); }
static void h_free(void *p) { free(p); }
static void h_par(int64_t n, picolm_task_fn fn, void *ctx) { if (n > 0) fn(ctx, 0, n, 0); }

static void init_registry(pl_registry *r) {
    memset(r, 0, sizeof *r);
    r->cpu = cpu_probe();
    r->host = (picolm_host){PICOLM_ABI_VERSION, sizeof(picolm_host), r->cpu, h_log, h_alloc, h_free, h_par, 1, PICOLM_HOST_ROW_GROUPS};
}

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

typedef struct { const char *file, *c, *name, *why; } bad_case;

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/picolm-plugin-test-XXXXXX");
    if (!mkdtemp(dir)) { CHECK(0, "mkdtemp"); return 1; }
    snprintf(markfile, sizeof markfile, "%s/marks", dir);
    setenv("PICOLM_TEST_MARK", markfile, 1);

    static const bad_case cases[] = {
        {"abi.so", "ABI", "p_abi", "ABI version 2"},
        {"noentry.so", "NOENTRY", "p_noentry", "no entry symbol 'picolm_plugin_v1'"},
        {"nulldesc.so", "NULLDESC", "p_nulldesc", "returned no descriptor"},
        {"small.so", "SMALL", "p_small", "descriptor too small (16 bytes"},
        {"kind.so", "KIND", "p_kind", "unknown plugin kind 7"},
        {"noname.so", "NONAME", "p_noname", "lacks a name"},
        {"cpu.so", "CPU", "p_cpu", "CPU lacks required feature"},
        {"novtable.so", "NOVTABLE", "p_novtable", "no vtable"},
        {"smallvtable.so", "SMALLVTABLE", "p_smallvt", "sampler vtable too small (4 bytes)"},
        {"nocreate.so", "NOCREATE", "p_nocreate", "lacks create/apply"},
        {"badrole.so", "BADROLE", "p_badrole", "invalid role"},
        {"badformat.so", "BADFORMAT", "p_badformat", "invalid type id"},
        {"badgroup.so", "BADGROUP", "p_badgroup", "format BADGROUP has row_group 3"},
        {"badbackend.so", "BADBACKEND", "p_badbackend", "kernel tables malformed"},
        {"initfail.so", "INITFAIL", "p_initfail", "init failed: probe refuses to start"},
    };
    const int nc = (int)(sizeof cases / sizeof *cases);
    int built = build("good.so", "", "p_good") && build("dup.so", "", "p_good");
    for (int i = 0; i < nc && built; i++) built = build(cases[i].file, cases[i].c, cases[i].name);
    CHECK(built, "built %d probe plugins with ${CC:-cc}", nc + 2);
    if (!built) return 1;
    char p[512];
    snprintf(p, sizeof p, "%s/text.so", dir);
    FILE *f = fopen(p, "w");
    fputs("this is not a shared object\n", f);
    fclose(f);

    pl_registry r;
    init_registry(&r);
    snprintf(p, sizeof p, "%s/good.so", dir);
    int gi = registry_load_file(&r, p);
    CHECK(gi >= 0 && r.items[gi].ok && r.items[gi].handle && !strcmp(r.items[gi].name, "p_good"),
          "good plugin accepted (%s)", gi >= 0 ? r.items[gi].why : "-");
    CHECK(registry_find(&r, PICOLM_KIND_SAMPLER, "p_good") != NULL, "registry_find finds it");
    CHECK(strstr(read_marks(), "p_good:init\n") != NULL, "good plugin's init ran");

    for (int i = 0; i < nc; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, cases[i].file);
        int k = registry_load_file(&r, p);
        CHECK(k >= 0 && !r.items[k].ok && !r.items[k].handle && !r.items[k].desc && strstr(r.items[k].why, cases[i].why),
              "%s rejected: %s", cases[i].file, k >= 0 ? r.items[k].why : "(no entry)");
    }
    snprintf(p, sizeof p, "%s/text.so", dir);
    int k = registry_load_file(&r, p);
    CHECK(k >= 0 && !r.items[k].ok && strstr(r.items[k].why, "cannot load"), "text file x.so rejected: %s",
          k >= 0 ? r.items[k].why : "-");
    snprintf(p, sizeof p, "%s/missing.so", dir);
    k = registry_load_file(&r, p);
    CHECK(k >= 0 && !r.items[k].ok && strstr(r.items[k].why, "cannot load"), "missing file rejected: %s",
          k >= 0 ? r.items[k].why : "-");
    snprintf(p, sizeof p, "%s/dup.so", dir);
    k = registry_load_file(&r, p);
    CHECK(k >= 0 && !r.items[k].ok && strstr(r.items[k].why, "shadowed by") && strstr(r.items[k].why, "good.so"),
          "same kind+name again is shadowed: %s", k >= 0 ? r.items[k].why : "-");
    CHECK(registry_find(&r, PICOLM_KIND_SAMPLER, "p_good") == &r.items[gi], "the first p_good still wins");

    /* only the good plugin's and the failing init's code may have run */
    const char *m = read_marks();
    int stray = 0;
    for (const char *line = m; *line; line = strchr(line, '\n') + 1) {
        if (strncmp(line, "p_good:init\n", 12) && strncmp(line, "p_initfail:init\n", 16)) {
            printf("unexpected code ran: %.*s\n", (int)(strchr(line, '\n') - line), line);
            stray++;
        }
        if (!strchr(line, '\n')) break;
    }
    CHECK(!stray && strstr(m, "p_initfail:init"), "no init/vtable code of a rejected plugin ran (marks: %zu bytes)", strlen(m));
    registry_free(&r);
    CHECK(strstr(read_marks(), "p_good:fini\n") && !strstr(read_marks(), "p_initfail:fini"),
          "registry_free ran fini of the accepted plugin only");

    /* a directory mixing all of them with the real plugins: the real ones still load */
    char e[512] = "";
    pl_registry r2;
    int rc = registry_load(&r2, dir, e, sizeof e);
    int ok = 0, rejected = 0;
    for (int i = 0; i < r2.n; i++) {
        if (!strncmp(r2.items[i].path, dir, strlen(dir))) { ok += r2.items[i].ok; rejected += !r2.items[i].ok; }
    }
    CHECK(ok == 1 && rejected == nc + 2, "directory scan: 1 accepted, %d rejected (got %d, %d)", nc + 2, ok, rejected);
    if (rc == 0) {
        int formats = 0;
        for (int i = 0; i < r2.n; i++) formats += r2.items[i].ok && r2.items[i].kind == PICOLM_KIND_FORMAT;
        CHECK(formats > 0, "real format plugins still load next to broken ones (%d)", formats);
    } else {
        SKIP("no real format plugins next to the test binary: %s", e);
    }
    registry_free(&r2);

    snprintf(p, sizeof p, "rm -rf '%s'", dir);
    if (system(p)) printf("could not remove %s\n", dir);
    return CHECK_DONE();
}
