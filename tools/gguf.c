/* picolm-gguf: inspect a GGUF file (info) or dequantize one tensor (dequant). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "picolm/picolm.h"
#include "cli.h"
#include "engine.h"
#include "gguf.h"
#include "util.h"

static void usage(FILE *o) {
    fprintf(o,
            "usage: picolm-gguf info MODEL            metadata and tensor table\n"
            "       picolm-gguf dequant MODEL TENSOR OUT_F32_FILE\n"
            "                                          dequantize TENSOR to float32 (row-major)\n"
            "options: --plugin-dir DIR (format plugins), -h/--help\n"
            "Exit status: 0 success, 1 runtime failure, 2 usage error.\n");
}

static void print_value(const gguf_kv *kv) {
    switch (kv->type) {
    case GGUF_STRING: {
        const int n = kv->v.s.len > 120 ? 120 : (int)kv->v.s.len;
        printf("\"%.*s\"%s", n, kv->v.s.ptr, kv->v.s.len > 120 ? "..." : "");
        break;
    }
    case GGUF_ARRAY:
        printf("[%s x %llu]", gguf_vtype_name(kv->v.arr.type), (unsigned long long)kv->v.arr.n);
        if (kv->v.arr.type == GGUF_STRING && kv->v.arr.n)
            printf(" \"%.*s\", ...", (int)(kv->v.arr.strs[0].len > 40 ? 40 : kv->v.arr.strs[0].len), kv->v.arr.strs[0].ptr);
        break;
    case GGUF_FLOAT32: case GGUF_FLOAT64: printf("%g", kv->v.f); break;
    case GGUF_BOOL: printf("%s", kv->v.u ? "true" : "false"); break;
    case GGUF_INT8: case GGUF_INT16: case GGUF_INT32: case GGUF_INT64: printf("%lld", (long long)kv->v.i); break;
    default: printf("%llu", (unsigned long long)kv->v.u);
    }
}

static int info(const char *path, const pl_registry *reg, const pl_dispatch *d) {
    gguf_file f;
    char err[1024];
    if (gguf_open(&f, path, NULL, err, sizeof err)) { fprintf(stderr, "picolm-gguf: %s\n", err); return 1; }
    int bound = !gguf_bind_types(&f, dispatch_type_size, (void *)d, err, sizeof err);
    printf("file: %s\nGGUF version %u, %llu metadata, %llu tensors, alignment %llu, data at %llu, size %zu\n\n", path, f.version,
           (unsigned long long)f.n_kv, (unsigned long long)f.n_tensors, (unsigned long long)f.alignment,
           (unsigned long long)f.data_offset, f.size);
    for (uint64_t i = 0; i < f.n_kv; i++) {
        printf("  %-44.*s %-7s ", (int)f.kv[i].key.len, f.kv[i].key.ptr, gguf_vtype_name(f.kv[i].type));
        print_value(&f.kv[i]);
        printf("\n");
    }
    printf("\n  %-32s %-8s %-24s %12s %12s\n", "tensor", "type", "shape", "offset", "bytes");
    uint64_t total = 0;
    for (uint64_t i = 0; i < f.n_tensors; i++) {
        const gguf_tensor *t = &f.tensors[i];
        char shape[64] = "";
        for (uint32_t k = 0; k < t->n_dims; k++)
            snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld", k ? " x " : "", (long long)t->ne[k]);
        printf("  %-32.*s %-8s %-24s %12llu %12llu\n", (int)t->name.len, t->name.ptr, registry_type_name(reg, t->type), shape,
               (unsigned long long)t->offset, (unsigned long long)t->nbytes);
        total += t->nbytes;
    }
    if (bound) printf("\n  %llu tensor bytes (%.2f MB)\n", (unsigned long long)total, total / 1e6);
    else fprintf(stderr, "picolm-gguf: %s: %s\n", path, err);
    gguf_close(&f);
    return bound ? 0 : 1;
}

static int dequant(const char *path, const char *name, const char *out, const pl_dispatch *d) {
    gguf_file f;
    char err[1024];
    if (pl_same_file(path, out)) { /* writing would destroy the model it reads */
        fprintf(stderr, "picolm-gguf: %s and %s are the same file: refusing to overwrite the model\n", path, out);
        return CLI_USAGE;
    }
    if (gguf_open(&f, path, NULL, err, sizeof err)) { fprintf(stderr, "picolm-gguf: %s\n", err); return 1; }
    if (gguf_bind_types(&f, dispatch_type_size, (void *)d, err, sizeof err)) {
        fprintf(stderr, "picolm-gguf: %s: %s\n", path, err);
        gguf_close(&f);
        return 1;
    }
    const gguf_tensor *t = gguf_find_tensor(&f, name);
    if (!t) { fprintf(stderr, "picolm-gguf: %s: no tensor named '%s'\n", path, name); gguf_close(&f); return 1; }
    const picolm_format *fmt = d->types[t->type].fmt;
    float *buf = malloc((size_t)t->nelements * sizeof(float));
    FILE *o = fopen(out, "wb");
    int rc = 0;
    if (!buf || !o) { fprintf(stderr, "picolm-gguf: cannot write %s\n", out); rc = 1; }
    if (!rc) {
        const int64_t rows = t->nelements / t->ne[0];
        const size_t rb = dispatch_row_size(d, t->type, t->ne[0]);
        const int64_t g = d->types[t->type].row_group; /* a grouped layout converts g rows at a time */
        if (rows % g) { fprintf(stderr, "picolm-gguf: %s: %lld rows, not a multiple of %s's row group %lld\n", name, (long long)rows, fmt->name, (long long)g); rc = 1; }
        for (int64_t r = 0; !rc && r < rows; r += g) fmt->dequantize_row((const uint8_t *)t->data + (size_t)r * rb, buf + (size_t)r * t->ne[0], t->ne[0]);
        if (!rc && fwrite(buf, sizeof(float), (size_t)t->nelements, o) != (size_t)t->nelements) {
            fprintf(stderr, "picolm-gguf: cannot write %s: %s\n", out, strerror(errno));
            rc = 1;
        }
    }
    if (o && fclose(o) && !rc) { fprintf(stderr, "picolm-gguf: cannot write %s: %s\n", out, strerror(errno)); rc = 1; }
    if (!rc) fprintf(stderr, "picolm-gguf: %s (%s, %lld elements) -> %s\n", name, fmt->name, (long long)t->nelements, out);
    free(buf);
    gguf_close(&f);
    return rc;
}

int main(int argc, char **argv) {
    picolm_log_set(picolm_log_stderr, NULL); /* the engine and plugins note things on stderr */
    const char *pdir = NULL, *pos[5];
    const char *T = "picolm-gguf";
    char err[1024];
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { usage(stdout); return cli_close_stdout(T); }
        if (!strcmp(argv[i], "--plugin-dir")) {
            if (i + 1 >= argc) return cli_usage_error(T, "option --plugin-dir needs a value (DIR)");
            pdir = argv[++i];
            continue;
        }
        if (argv[i][0] == '-' && argv[i][1]) { snprintf(err, sizeof err, "unknown option %s", argv[i]); return cli_usage_error(T, err); }
        if (npos == 5) break;
        pos[npos++] = argv[i];
    }
    /* say what is wrong before any plugin is loaded */
    const int want = npos == 0 ? 0 : !strcmp(pos[0], "info") ? 2 : !strcmp(pos[0], "dequant") ? 4 : -1;
    if (npos == 0) { usage(stderr); return CLI_USAGE; }
    if (want < 0) { snprintf(err, sizeof err, "unknown command '%s' (info or dequant)", pos[0]); return cli_usage_error(T, err); }
    if (npos < want) {
        snprintf(err, sizeof err, "%s: missing %s", pos[0], npos == 1 ? "MODEL" : npos == 2 ? "TENSOR" : "OUT_F32_FILE");
        return cli_usage_error(T, err);
    }
    if (npos > want) { snprintf(err, sizeof err, "%s: unexpected argument '%s'", pos[0], pos[want]); return cli_usage_error(T, err); }
    if (cli_check_env(T)) return CLI_USAGE;
    engine_opts o = {.plugin_dir = pdir, .threads = 1};
    engine *e = build_engine(&o, err, sizeof err);
    if (!e) { fprintf(stderr, "%s: %s\n", T, err); return CLI_FAIL; }
    int rc = want == 2 ? info(pos[1], &e->reg, &e->d) : dequant(pos[1], pos[2], pos[3], &e->d);
    free_engine(e);
    const int wrc = cli_close_stdout(T);
    return rc ? rc : wrc;
}
