/*
 * The stock backends' tuning record (backends/level.h, docs/backends.md
 * "How a kernel is chosen"): what each init sets from the host it is
 * handed, read back from its log line, with mock hosts of every identity:
 * - unknown / AMD / Intel vendors give the documented crossovers;
 * - a v1 core's host (struct_size without the identity members, whatever
 *   lies past it) is read as "unknown": the plugin never looks past it;
 * - where the record moves a crossover (the avx512 Q4_K / Q6_K gemms on
 *   Intel, their decode's slices by row length), the gemm's columns still
 *   equal its vec_dot bit for bit on both sides of it, with either record
 *   (real Q4_K / Q6_K blocks, random).
 */
#include "check.h"
#include "cpu.h"
#include "picolm/blocks.h"
#include "picolm/plugin.h"

#include <dirent.h>
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>

static char last_log[1024];
static void host_log(int level, const char *msg) {
    (void)level;
    snprintf(last_log, sizeof last_log, "%s", msg);
}
static void *host_alloc(size_t size, size_t align) {
    void *p = NULL;
    if (posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size ? size : 1)) return NULL;
    memset(p, 0, size);
    return p;
}
static void host_free(void *p) { free(p); }
static void host_parallel_for(const picolm_host *h, int64_t n, picolm_task_fn fn, void *ctx) { (void)h; fn(ctx, 0, n, 0); }

/* init with a host of this vendor (struct_size: a v1 host's when v1), the log line in last_log */
static int init_as(const picolm_plugin *pl, uint32_t vendor, int v1) {
    picolm_host h = {.abi_version = PICOLM_ABI_VERSION, .struct_size = sizeof(picolm_host), .cpu_features = cpu_probe(),
                     .log = host_log, .alloc = host_alloc, .free = host_free, .parallel_for = host_parallel_for,
                     .n_threads = 1, .cpu_vendor = vendor, .cpu_family = 6, .cpu_model = 0x8f};
    if (v1) h.struct_size = (uint32_t)offsetof(picolm_host, cpu_vendor);
    char err[256] = "";
    last_log[0] = 0;
    const int rc = pl->init(&h, err, sizeof err);
    CHECK(rc == 0, "%s: init (vendor %u%s): %s", pl->name, vendor, v1 ? ", v1 host" : "", rc ? err : "ok");
    return rc;
}

static uint32_t rng = 0x12345678u;
static uint32_t rnd(void) {
    rng ^= rng << 13, rng ^= rng >> 17, rng ^= rng << 5;
    return rng;
}
/* valid blocks: fp16 scales of a sane size, everything else random */
static void fill_weights(uint32_t type, void *w, size_t bytes, int64_t nb) {
    uint8_t *p = w;
    for (size_t i = 0; i < bytes; i++) p[i] = (uint8_t)rnd();
    for (int64_t b = 0; b < nb; b++) {
        if (type == PICOLM_TYPE_Q4_K) {
            block_q4_K *x = (block_q4_K *)w + b;
            x->d = (uint16_t)(0x1800 + (rnd() & 0x3ff)), x->dmin = (uint16_t)(0x1800 + (rnd() & 0x3ff));
        } else {
            ((block_q6_K *)w)[b].d = (uint16_t)(0x1800 + (rnd() & 0x3ff));
        }
    }
}
static void fill_q8_K(block_q8_K *y, int64_t nb) {
    for (int64_t b = 0; b < nb; b++) {
        y[b].d = 0.001f * (float)(1 + rnd() % 100);
        for (int k = 0; k < QK_K; k++) y[b].qs[k] = (int8_t)(rnd() % 255 - 127);
        for (int g = 0; g < QK_K / 16; g++) {
            int s = 0;
            for (int k = 0; k < 16; k++) s += y[b].qs[16 * g + k];
            y[b].bsums[g] = (int16_t)s;
        }
    }
}

/* gemm of nr rows of nb superblocks x nc columns == vec_dot of each, bit for bit */
static int gemm_is_vec_dot(const picolm_kernel *k, int nc, int64_t nb) {
    const int64_t n = nb * QK_K, nr = 37;
    const size_t bs = k->type_id == PICOLM_TYPE_Q4_K ? sizeof(block_q4_K) : sizeof(block_q6_K), ws = (size_t)nb * bs;
    void *w = malloc(ws * nr);
    block_q8_K *a = malloc(sizeof(block_q8_K) * nb * nc);
    float *dst = malloc(sizeof(float) * nr * nc);
    fill_weights(k->type_id, w, ws * nr, nb * nr);
    fill_q8_K(a, nb * nc);
    k->gemm(n, nr, nc, w, ws, a, sizeof(block_q8_K) * nb, dst, nr);
    int same = 1;
    for (int c = 0; c < nc; c++)
        for (int64_t r = 0; r < nr; r++) {
            float s;
            k->vec_dot(n, &s, (const char *)w + r * ws, a + c * nb);
            same &= !memcmp(&s, &dst[c * nr + r], sizeof s);
        }
    free(w), free(a), free(dst);
    return same;
}

static const picolm_kernel *kernel_of(const picolm_plugin *pl, uint32_t type) {
    const picolm_backend_vtable *vt = pl->vtable;
    for (uint32_t i = 0; i < vt->n_kernels; i++) {
        const picolm_kernel *k = (const picolm_kernel *)((const char *)vt->kernels + (size_t)i * vt->kernel_size);
        if (k->type_id == type) return k;
    }
    return NULL;
}

static void test_plugin(const picolm_plugin *pl) {
    char unknown[1024], amd[1024], intel[1024];
    if (init_as(pl, PICOLM_VENDOR_UNKNOWN, 0)) return;
    snprintf(unknown, sizeof unknown, "%s", last_log);
    CHECK(strstr(unknown, "levels scalar") != NULL, "%s: init logs its levels and record: %s", pl->name, unknown);
    init_as(pl, PICOLM_VENDOR_AMD, 0);
    snprintf(amd, sizeof amd, "%s", last_log);
    init_as(pl, PICOLM_VENDOR_INTEL, 1);
    CHECK(!strcmp(last_log, unknown), "%s: a v1 host's identity is unknown, whatever lies past it (%s)", pl->name, last_log);
    init_as(pl, PICOLM_VENDOR_INTEL, 0);
    snprintf(intel, sizeof intel, "%s", last_log);
    const int x86_attn = !strcmp(pl->name, "avx2") || !strcmp(pl->name, "avx512");
    if (x86_attn) CHECK(strstr(unknown, "attention expf: ") != NULL, "%s: attn_f16's expf chosen at init", pl->name);
    if (strcmp(pl->name, "avx512")) {
        CHECK(!strcmp(intel, unknown) && !strcmp(amd, unknown), "%s: the same record on every vendor", pl->name);
        return;
    }
    CHECK(strstr(unknown, "panels from 8 columns (Q4_K), 8 (Q6_K), 8 (R16)") && !strcmp(amd, unknown), "%s: unknown, AMD: %s", pl->name,
          unknown);
    CHECK(strstr(intel, "panels from 7 columns (Q4_K), 9 (Q6_K), 8 (R16)") != NULL, "%s: Intel: %s", pl->name, intel);
    CHECK(strstr(unknown, "decode by 4 slices from 16 superblocks a row (Q4_K), 16 (Q6_K)") != NULL, "%s: unknown, AMD: %s", pl->name, unknown);
    CHECK(strstr(intel, "decode by 4 slices from 0 superblocks a row (Q4_K), 0 (Q6_K)") != NULL, "%s: Intel: %s", pl->name, intel);
    static const uint32_t types[] = {PICOLM_TYPE_Q4_K, PICOLM_TYPE_Q6_K};
    for (int v = 0; v < 2; v++) {
        init_as(pl, v ? PICOLM_VENDOR_INTEL : PICOLM_VENDOR_AMD, 0);
        for (int t = 0; t < 2; t++) {
            const picolm_kernel *k = kernel_of(pl, types[t]);
            if (!k || !k->gemm) continue;
            int same = 1;
            for (int nc = 6; nc <= 10; nc++) same &= gemm_is_vec_dot(k, nc, 4);
            /* decode: single rows below the slices' crossover, slices from it */
            for (int nb = 4; nb <= 16; nb += 12) same &= gemm_is_vec_dot(k, 1, nb);
            CHECK(same, "%s %s (%s record): gemm of 6..10 columns, and of 1 column (4 and 16 superblocks a row) == vec_dot, bit for bit",
                  pl->name, types[t] == PICOLM_TYPE_Q4_K ? "Q4_K" : "Q6_K", v ? "Intel" : "AMD");
        }
    }
}

int main(void) {
    char dir[1024], path[2048];
    snprintf(dir, sizeof dir, "%s/plugins", build_dir());
    DIR *d = opendir(dir);
    if (!d) {
        SKIP("no plugin directory %s (build first)", dir);
        return 0;
    }
    int n = 0;
    const uint64_t feats = cpu_probe();
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, "backend-", 8)) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        const picolm_entry_fn entry = h ? (picolm_entry_fn)dlsym(h, PICOLM_ENTRY) : NULL;
        const picolm_plugin *pl = entry ? entry() : NULL;
        CHECK(pl != NULL, "%s: loads", e->d_name);
        if (pl && pl->init && (pl->cpu_required & ~feats) == 0) {
            test_plugin(pl);
            n++;
        } else if (pl) {
            SKIP("%s: the CPU lacks its features", pl->name);
        }
    }
    closedir(d);
    CHECK(n > 0, "tested %d backends", n);
    return CHECK_DONE();
}
