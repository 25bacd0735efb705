/* picolm-gguf: inspect a GGUF file (info) or dequantize one tensor (dequant). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "picolm/picolm.h"
#include "cli.h"
#include "tool.h"

static void usage(FILE *o) {
    fprintf(o,
            "usage: picolm-gguf info MODEL            metadata and tensor table\n"
            "       picolm-gguf dequant MODEL TENSOR OUT_F32_FILE\n"
            "                                          dequantize TENSOR to float32 (row-major)\n"
            "options: --plugin-dir DIR (format plugins), -h/--help\n"
            "Exit status: 0 success, 1 runtime failure, 2 usage error.\n");
}

static void print_value(const picolm_gguf *g, int64_t i, const picolm_gguf_kv *kv) {
    switch (kv->type) {
    case PICOLM_GGUF_STRING: {
        const int n = kv->str_len > 120 ? 120 : (int)kv->str_len;
        printf("\"%.*s\"%s", n, kv->str, kv->str_len > 120 ? "..." : "");
        break;
    }
    case PICOLM_GGUF_ARRAY: {
        printf("[%s x %llu]", picolm_gguf_type_name(kv->arr_type), (unsigned long long)kv->arr_n);
        size_t l;
        const char *s0 = picolm_gguf_arr_str(g, i, 0, &l);
        if (s0) printf(" \"%.*s\", ...", (int)(l > 40 ? 40 : l), s0);
        break;
    }
    case PICOLM_GGUF_FLOAT32: case PICOLM_GGUF_FLOAT64: printf("%g", kv->f); break;
    case PICOLM_GGUF_BOOL: printf("%s", kv->u ? "true" : "false"); break;
    case PICOLM_GGUF_INT8: case PICOLM_GGUF_INT16: case PICOLM_GGUF_INT32: case PICOLM_GGUF_INT64: printf("%lld", (long long)kv->i); break;
    default: printf("%llu", (unsigned long long)kv->u);
    }
}

static int info(const char *path, const picolm_runtime *rt) {
    char err[1024];
    picolm_gguf *g = picolm_gguf_load(path, NULL, err, sizeof err);
    if (!g) { fprintf(stderr, "picolm-gguf: %s\n", err); return 1; }
    int bound = !picolm_gguf_bind(g, rt, err, sizeof err);
    picolm_gguf_info f;
    picolm_gguf_describe(g, &f);
    printf("file: %s\nGGUF version %u, %llu metadata, %llu tensors, alignment %llu, data at %llu, size %llu\n\n", path, f.version,
           (unsigned long long)f.n_kv, (unsigned long long)f.n_tensors, (unsigned long long)f.alignment,
           (unsigned long long)f.data_offset, (unsigned long long)f.file_bytes);
    picolm_gguf_kv kv;
    for (int64_t i = 0; !picolm_gguf_kv_at(g, i, &kv); i++) {
        printf("  %-44.*s %-7s ", (int)kv.key_len, kv.key, picolm_gguf_type_name(kv.type));
        print_value(g, i, &kv);
        printf("\n");
    }
    printf("\n  %-32s %-8s %-24s %12s %12s\n", "tensor", "type", "shape", "offset", "bytes");
    uint64_t total = 0;
    picolm_tensor t;
    for (int64_t i = 0; !picolm_gguf_tensor_at(g, i, &t); i++) {
        char shape[64] = "";
        for (uint32_t k = 0; k < t.n_dims; k++)
            snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld", k ? " x " : "", (long long)t.ne[k]);
        picolm_type_info ti;
        picolm_runtime_type(rt, t.type, &ti);
        printf("  %-32.*s %-8s %-24s %12llu %12llu\n", (int)t.name_len, t.name, ti.name, shape, (unsigned long long)t.offset,
               (unsigned long long)t.nbytes);
        total += t.nbytes;
    }
    if (bound) printf("\n  %llu tensor bytes (%.2f MB)\n", (unsigned long long)total, total / 1e6);
    else fprintf(stderr, "picolm-gguf: %s: %s\n", path, err);
    picolm_gguf_free(g);
    return bound ? 0 : 1;
}

static int dequant(const char *path, const char *name, const char *out, const picolm_runtime *rt) {
    char err[1024];
    if (tool_same_file(path, out)) { /* writing would destroy the model it reads */
        fprintf(stderr, "picolm-gguf: %s and %s are the same file: refusing to overwrite the model\n", path, out);
        return CLI_USAGE;
    }
    picolm_gguf *g = picolm_gguf_load(path, NULL, err, sizeof err);
    if (!g) { fprintf(stderr, "picolm-gguf: %s\n", err); return 1; }
    if (picolm_gguf_bind(g, rt, err, sizeof err)) {
        fprintf(stderr, "picolm-gguf: %s: %s\n", path, err);
        picolm_gguf_free(g);
        return 1;
    }
    picolm_tensor tt, *t = &tt;
    if (picolm_gguf_tensor_at(g, picolm_gguf_find_tensor(g, name), t)) {
        fprintf(stderr, "picolm-gguf: %s: no tensor named '%s'\n", path, name);
        picolm_gguf_free(g);
        return 1;
    }
    picolm_type_info ti;
    picolm_runtime_type(rt, t->type, &ti); /* bound: a plugin describes it */
    const picolm_format *fmt = ti.format;
    float *buf = malloc((size_t)t->n_elements * sizeof(float));
    FILE *o = fopen(out, "wb");
    int rc = 0;
    if (!buf || !o) { fprintf(stderr, "picolm-gguf: cannot write %s\n", out); rc = 1; }
    if (!rc) {
        const int64_t rows = t->n_elements / t->ne[0];
        const size_t rb = picolm_type_row_bytes(rt, t->type, t->ne[0]);
        const int64_t gr = ti.row_group; /* a grouped layout converts gr rows at a time */
        if (rows % gr) { fprintf(stderr, "picolm-gguf: %s: %lld rows, not a multiple of %s's row group %lld\n", name, (long long)rows, fmt->name, (long long)gr); rc = 1; }
        for (int64_t r = 0; !rc && r < rows; r += gr) fmt->dequantize_row((const uint8_t *)t->data + (size_t)r * rb, buf + (size_t)r * t->ne[0], t->ne[0]);
        if (!rc && fwrite(buf, sizeof(float), (size_t)t->n_elements, o) != (size_t)t->n_elements) {
            fprintf(stderr, "picolm-gguf: cannot write %s: %s\n", out, strerror(errno));
            rc = 1;
        }
    }
    if (o && fclose(o) && !rc) { fprintf(stderr, "picolm-gguf: cannot write %s: %s\n", out, strerror(errno)); rc = 1; }
    if (!rc) fprintf(stderr, "picolm-gguf: %s (%s, %lld elements) -> %s\n", name, fmt->name, (long long)t->n_elements, out);
    free(buf);
    picolm_gguf_free(g);
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
    const picolm_runtime_params o = {.plugin_dir = pdir, .threads = 1};
    picolm_runtime *rt = picolm_runtime_new(&o, NULL, err, sizeof err);
    if (!rt) { fprintf(stderr, "%s: %s\n", T, err); return CLI_FAIL; }
    int rc = want == 2 ? info(pos[1], rt) : dequant(pos[1], pos[2], pos[3], rt);
    picolm_runtime_free(rt);
    const int wrc = cli_close_stdout(T);
    return rc ? rc : wrc;
}
