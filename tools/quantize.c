/*
 * picolm-quantize: convert an F32/F16/BF16 GGUF into any weight format the
 * loaded format plugins can quantize to, or into one of llama.cpp's mixes
 * (Q4_K_M, ...), choosing per-tensor types with llama.cpp's published policy
 * (llama_tensor_get_type in llama-quant.cpp).  A quantized GGUF is accepted
 * only to be repacked: into a picolm layout of the same values (Q4_K_M ->
 * Q4_K_M_R16 / Q4_K_M_R, Q4_K -> Q4_K_R16, ...), through the layout's
 * lossless from_base; nothing is requantized.  The output follows
 * llama-quantize's layout too: metadata copied in order with
 * general.quantization_version and general.file_type (re)set at the end, and
 * tensors ordered by layer, then name.  With the stock format plugins the
 * result is byte-identical to llama-quantize's file.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "picolm/picolm.h"
#include "cli.h"
#include "quant_policy.h"
#include "tmp_guard.h"
#include "tool.h"

#define QNT_VERSION 2 /* ggml's GGML_QNT_VERSION */

static void usage(FILE *o, const picolm_runtime *rt) {
    fprintf(o,
            "usage: picolm-quantize IN.gguf OUT.gguf TYPE [options]\n"
            "Converts an F32/F16/BF16 GGUF model into TYPE.  Norms and other 1-D tensors stay as they are.\n"
            "OUT must be another file than IN; it is written beside OUT under a temporary name and\n"
            "renamed into place when complete, so an error or an interrupt leaves no partial OUT.\n"
            "Without --pure, TYPE is a llama.cpp file type and per-tensor types follow llama-quantize's\n"
            "policy (e.g. output.weight in Q6_K, more bits for some attn_v/ffn_down layers).\n"
            "An already quantized IN is only repacked, exactly: TYPE must be a picolm repacked mix or\n"
            "layout (Q4_K_M_R16, Q4_K_M_R, Q4_K_R16, ...); its base-type tensors (e.g. Q4_K, Q6_K and Q5_0\n"
            "for Q4_K_M_R16) are rearranged without requantizing, every other tensor is copied as is:\n"
            "  picolm-quantize model-Q4_K_M.gguf model-Q4_K_M_R16.gguf Q4_K_M_R16\n"
            "options:\n"
            "  --pure            every 2-D weight matrix in TYPE (as llama-quantize --pure)\n"
            "  --threads N, -j N threads (default: all CPUs)\n"
            "  --plugin-dir DIR  extra plugin directory searched first (format plugins add types)\n"
            "  -h, --help        this text\n"
            "types and mixes:\n");
    for (const qp_mix *m = qp_mixes; m->name; m++) fprintf(o, "  %-8s %s\n", m->name, m->what);
    int any = 0;
    picolm_type_info ti;
    for (int64_t t = -1; rt && (t = picolm_runtime_next_type(rt, t)) >= 0;) {
        picolm_runtime_type(rt, (uint32_t)t, &ti);
        const picolm_format *f = ti.format;
        if (!(f->flags & PICOLM_FMT_WEIGHT) || !f->quantize_row) continue;
        if (qp_find_mix(f->name)) continue;
        if (!any) fprintf(o, "other weight formats of the loaded plugins (always pure):\n");
        any = 1;
        fprintf(o, "  %-8s type id %u, %u elements in %u bytes (%.2f bpw), plugin %s\n", f->name, (unsigned)t, f->block_size,
                f->type_size, 8.0 * f->type_size / f->block_size, ti.plugin ? ti.plugin : "?");
    }
}

/* The format plugin's facts of a type (name: the format's own, Q4_K,
   Q4_K_R16, F32, else ggml's: how the log spells every type). */
static picolm_type_info type_of(const picolm_runtime *rt, uint32_t t) {
    picolm_type_info ti;
    picolm_runtime_type(rt, t, &ti);
    return ti;
}

/* llama.cpp's tensor order (llama_model_loader's weights_map): layer index
   (-1 for non-layer tensors), then name. */
typedef struct tref {
    picolm_tensor t;
    int layer;
    char name[256];
} tref;

static int cmp_tref(const void *a, const void *b) {
    const tref *x = a, *y = b;
    if (x->layer != y->layer) return x->layer < y->layer ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* ggml_n_dims: trailing 1s do not count (llama-quantize writes it that way). */
static uint32_t n_dims_of(const picolm_tensor *t) {
    uint32_t n = t->n_dims;
    while (n > 1 && t->ne[n - 1] == 1) n--;
    return n;
}

/* ------------------------------------------------------------------------ */
/* Row-parallel conversion                                                   */
/* ------------------------------------------------------------------------ */
typedef struct job {
    const uint8_t *src;
    size_t src_row;
    picolm_to_float_fn to_float;   /* NULL: the source is F32 */
    picolm_from_float_fn from_float;
    /* lossless repack from the source's (base) type, instead of the two above */
    void (*from_base)(const void *src, size_t src_stride, void *dst, int64_t n);
    uint8_t *dst;
    size_t dst_row;
    int64_t cols;
    int group;                     /* rows per unit: the output's row_group, else 1 */
    float **scratch;               /* group * cols floats per thread */
} job;

/* Units [begin, end) of j->group rows: a grouped format converts a whole
   group of rows at once. */
static void convert_units(void *ctx, int64_t begin, int64_t end, int tid) {
    const job *j = ctx;
    for (int64_t u = begin; u < end; u++) {
        const size_t r0 = (size_t)u * (size_t)j->group;
        const uint8_t *s = j->src + r0 * j->src_row;
        uint8_t *o = j->dst + r0 * j->dst_row;
        if (j->from_base) {
            j->from_base(s, j->src_row, o, j->cols);
            continue;
        }
        const float *x = (const float *)s; /* F32 rows are contiguous */
        if (j->to_float) {
            for (int k = 0; k < j->group; k++) j->to_float(s + (size_t)k * j->src_row, j->scratch[tid] + k * j->cols, j->cols);
            x = j->scratch[tid];
        }
        j->from_float(x, o, j->cols);
    }
}

static int is_float_type(uint32_t t) { return t == PICOLM_TYPE_F32 || t == PICOLM_TYPE_F16 || t == PICOLM_TYPE_BF16; }

/* A layout of another type's values that can be made from that type
   losslessly (picolm_type_info.layout_of, from_base): its facts, else 0. */
static int repack_type(const picolm_runtime *rt, uint32_t t, picolm_type_info *ti) {
    return !picolm_runtime_type(rt, t, ti) && ti->layout_of && ti->from_base;
}

typedef struct plan {
    tref *refs;
    uint32_t *type;     /* output type per (sorted) tensor */
    uint64_t *nbytes;
    int n;
} plan;

/* ---- the output file: never IN, never half-written ----
   OUT is written to a temporary file beside it and renamed into place when
   complete (picolm_outfile).  An error removes the temporary file; so does a
   signal that ends the process (the handler unlinks it, then dies of the
   signal as it would have). */
static picolm_outfile *out_open(const char *path, char *err, size_t errlen) {
    tmp_guard_hold(1);
    picolm_outfile *af = picolm_outfile_new(path, err, errlen);
    if (af) tmp_guard_set(picolm_outfile_tmp_name(af));
    tmp_guard_hold(0);
    return af;
}

static int out_commit(picolm_outfile *af, char *err, size_t errlen) {
    tmp_guard_hold(1);
    int rc = picolm_outfile_commit(af, err, errlen);
    tmp_guard_set(NULL);
    tmp_guard_hold(0);
    return rc;
}

static void out_abort(picolm_outfile *af) {
    tmp_guard_hold(1);
    picolm_outfile_free(af);
    tmp_guard_set(NULL);
    tmp_guard_hold(0);
}

/* The path an error while writing names: the temporary file, else OUT. */
static const char *out_name(const picolm_outfile *af, const char *path) {
    const char *tmp = picolm_outfile_tmp_name(af);
    return tmp[0] ? tmp : path;
}

/* A metadata integer that fits in 32 bits, unsigned (*out stays otherwise). */
static int get_u32(const picolm_gguf *g, const char *key, uint32_t *out) {
    int64_t v;
    if (picolm_gguf_int(g, key, &v) || v < 0 || v > UINT32_MAX) return -1;
    *out = (uint32_t)v;
    return 0;
}

int main(int argc, char **argv) {
    picolm_log_set(picolm_log_stderr, NULL); /* the engine and plugins note things on stderr */
    const char *pos[3];
    int npos = 0, pure = 0, threads = 0, want_help = 0;
    const char *pdir = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { want_help = 1; continue; }
        if (!strcmp(a, "--pure")) { pure = 1; continue; }
        if (!strcmp(a, "--threads") || !strcmp(a, "-j") || !strcmp(a, "--plugin-dir")) {
            if (i + 1 >= argc) { fprintf(stderr, "picolm-quantize: %s needs a value\n", a); return 2; }
            const char *v = argv[++i];
            if (!strcmp(a, "--plugin-dir")) pdir = v;
            else {
                char *endp;
                long n = strtol(v, &endp, 10);
                if (*endp || n < 1 || n > 1024) { fprintf(stderr, "picolm-quantize: %s wants a thread count, got '%s'\n", a, v); return 2; }
                threads = (int)n;
            }
            continue;
        }
        if (a[0] == '-' && a[1]) { fprintf(stderr, "picolm-quantize: unknown option %s (see --help)\n", a); return 2; }
        if (npos == 3) { fprintf(stderr, "picolm-quantize: too many arguments (see --help)\n"); return 2; }
        pos[npos++] = a;
    }

    if (cli_check_env("picolm-quantize")) return CLI_USAGE;
    char err[1024];
    const picolm_runtime_params rp = {.plugin_dir = pdir, .threads = threads};
    picolm_runtime *rt = picolm_runtime_new(&rp, NULL, err, sizeof err);
    if (want_help) { usage(stdout, rt); picolm_runtime_free(rt); return cli_close_stdout("picolm-quantize"); }
    if (npos != 3) { usage(stderr, rt); picolm_runtime_free(rt); return 2; }
    if (!rt) { fprintf(stderr, "picolm-quantize: %s\n", err); return 1; }
    const char *in_path = pos[0], *out_path = pos[1], *tname = pos[2];

    /* TYPE: a llama.cpp type/mix, else any weight format a plugin can quantize to. */
    const qp_mix *known = qp_find_mix(tname);
    qp_mix m = known ? *known : (qp_mix){0};
    if (!m.name) {
        for (int64_t t = -1; !m.name && (t = picolm_runtime_next_type(rt, t)) >= 0;) {
            const picolm_format *f = type_of(rt, (uint32_t)t).format;
            if ((f->flags & PICOLM_FMT_WEIGHT) && f->quantize_row && !strcasecmp(f->name, tname)) {
                m.name = f->name;
                m.ftype = QP_FT_CUSTOM;
                m.type = (uint32_t)t;
            }
        }
        if (!m.name) {
            fprintf(stderr, "picolm-quantize: unknown type '%s': not a llama.cpp type or mix, and no loaded format plugin "
                            "provides a weight format of that name with a quantizer (see --help)\n", tname);
            picolm_runtime_free(rt);
            return 2;
        }
        pure = 1; /* no policy exists for a plugin's own type */
        /* a layout of another type's values (Q4_K_R16 of Q4_K): what it cannot
           hold (token_embd, partial row groups) stays in that type, and a
           file of that type can be repacked into it */
        picolm_type_info rf;
        if (repack_type(rt, m.type, &rf)) m.store[0] = (qp_store){rf.layout_of, m.type};
    }
    {
        const picolm_type_info ti = type_of(rt, m.type);
        if (!ti.format || !ti.format->quantize_row) {
            fprintf(stderr, "picolm-quantize: type %s: no loaded format plugin provides a quantizer for %s\n", m.name, ti.name);
            picolm_runtime_free(rt);
            return 1;
        }
    }

    if (tool_same_file(in_path, out_path)) {
        fprintf(stderr, "picolm-quantize: %s and %s are the same file: refusing to overwrite the input "
                        "(write to another file)\n", in_path, out_path);
        picolm_runtime_free(rt);
        return CLI_USAGE;
    }
    picolm_gguf *in = picolm_gguf_load(in_path, NULL, err, sizeof err);
    if (!in) {
        fprintf(stderr, "picolm-quantize: %s\n", err);
        picolm_runtime_free(rt);
        return 1;
    }
    int rc = 1;
    plan p = {0};
    picolm_gguf_writer *w = NULL;
    FILE *of = NULL;
    picolm_outfile *af = NULL;
    float **scratch = NULL;
    uint8_t *obuf = NULL;
    const int nthr = picolm_runtime_threads(rt);
    picolm_gguf_info info;
    picolm_gguf_describe(in, &info);

    if (picolm_gguf_bind(in, rt, err, sizeof err)) {
        fprintf(stderr, "picolm-quantize: %s: %s\n", in_path, err);
        goto done;
    }
    {
        uint32_t splits = 1;
        if (!get_u32(in, "split.count", &splits) && splits > 1) {
            fprintf(stderr, "picolm-quantize: %s is one part of a split model (split.count = %u); merge it first\n", in_path, splits);
            goto done;
        }
    }
    /* A quantized input can only be repacked (see the header comment). */
    picolm_tensor quantized_in = {0}; /* name NULL: none */
    for (int64_t i = 0; i < (int64_t)info.n_tensors; i++) {
        picolm_tensor t;
        picolm_gguf_tensor_at(in, i, &t);
        if (!is_float_type(t.type) && !quantized_in.name) quantized_in = t;
        if (t.name_len >= sizeof p.refs[0].name) {
            fprintf(stderr, "picolm-quantize: %s: tensor name too long\n", in_path);
            goto done;
        }
    }

    /* Model facts the policy needs. */
    qp_model qm;
    {
        char arch[64] = "llama", key[128];
        const char *sp;
        size_t sl;
        if (!picolm_gguf_str(in, "general.architecture", &sp, &sl) && sl < sizeof arch) {
            memcpy(arch, sp, sl);
            arch[sl] = 0;
        }
        uint32_t nl = 0, nh = 0, nkv = 0, nexp = 0;
        snprintf(key, sizeof key, "%s.block_count", arch);
        get_u32(in, key, &nl);
        snprintf(key, sizeof key, "%s.attention.head_count", arch);
        get_u32(in, key, &nh);
        snprintf(key, sizeof key, "%s.attention.head_count_kv", arch);
        if (get_u32(in, key, &nkv)) nkv = nh;
        snprintf(key, sizeof key, "%s.expert_count", arch);
        get_u32(in, key, &nexp);
        qp_model_init(&qm, arch, (int)nl, (int)nh, (int)nkv, (int)nexp);
    }
    if (quantized_in.name && !qp_mix_repacked(&m)) {
        fprintf(stderr, "picolm-quantize: %s: tensor '%.*s' is %s: the input must be an F32, F16 or BF16 model "
                        "(requantizing an already quantized model loses quality and is not supported); a quantized "
                        "model can only be repacked into a picolm layout of the same values (e.g. Q4_K_M -> Q4_K_M_R16), "
                        "and %s is not one\n",
                in_path, (int)quantized_in.name_len, quantized_in.name, type_of(rt, quantized_in.type).name, m.name);
        goto done;
    }
    qp_counters qc = {0};
    int n_fallback = 0, n_repack = 0;

    /* Sort as llama.cpp does and decide each tensor's type. */
    p.n = (int)info.n_tensors;
    p.refs = calloc((size_t)p.n + 1, sizeof *p.refs);
    p.type = calloc((size_t)p.n + 1, sizeof *p.type);
    p.nbytes = calloc((size_t)p.n + 1, sizeof *p.nbytes);
    if (!p.refs || !p.type || !p.nbytes) { fprintf(stderr, "picolm-quantize: out of memory\n"); goto done; }
    for (int i = 0; i < p.n; i++) {
        tref *r = &p.refs[i];
        picolm_gguf_tensor_at(in, i, &r->t);
        memcpy(r->name, r->t.name, r->t.name_len);
        r->name[r->t.name_len] = 0;
        r->layer = -1;
        if (sscanf(r->name, "blk.%d.", &r->layer) != 1) r->layer = -1;
        qp_model_count(&qm, r->name);
    }
    qsort(p.refs, (size_t)p.n, sizeof *p.refs, cmp_tref);
    int64_t max_unit = 0; /* floats of the largest unit (row group) dequantized or quantized */
    uint64_t max_out = 0;
    for (int i = 0; i < p.n; i++) {
        const picolm_tensor *t = &p.refs[i].t;
        uint32_t nt = t->type;
        if (quantized_in.name) {
            /* repack: base-type tensors into their layout, the rest as is */
            if (qp_quantizable(p.refs[i].name, n_dims_of(t))) {
                nt = qp_store_as(&m, t->type, p.refs[i].name, t->ne[1], rt, err, sizeof err);
                if (nt == UINT32_MAX) { fprintf(stderr, "picolm-quantize: %s\n", err); goto done; }
                if (nt != t->type) {
                    picolm_type_info rf;
                    if (!repack_type(rt, nt, &rf) || rf.layout_of != t->type) {
                        fprintf(stderr, "picolm-quantize: tensor '%s': %s offers no lossless conversion from %s (from_base)\n",
                                p.refs[i].name, type_of(rt, nt).name, type_of(rt, t->type).name);
                        goto done;
                    }
                    n_repack++;
                }
            }
        } else if (qp_quantizable(p.refs[i].name, n_dims_of(t))) {
            /* a pure layout type stands for its base type, stored in it where it fits */
            nt = qp_store_as(&m, m.store[0].as == m.type ? m.store[0].base : m.type, p.refs[i].name, t->ne[1], rt, err, sizeof err);
            if (nt == UINT32_MAX) { fprintf(stderr, "picolm-quantize: %s\n", err); goto done; }
            if (!pure && qp_mix_has_policy(&m)) {
                uint32_t from;
                nt = qp_tensor_type(&m, p.refs[i].name, t->ne[0], t->ne[1], &qm, &qc, rt, &from, err, sizeof err);
                if (nt == UINT32_MAX) { fprintf(stderr, "picolm-quantize: %s\n", err); goto done; }
                if (from != UINT32_MAX) {
                    fprintf(stderr, "picolm-quantize: %s: row length %lld is not a multiple of %u (%s): using %s instead\n",
                            p.refs[i].name, (long long)t->ne[0], qp_block_size(rt, from), type_of(rt, from).name, type_of(rt, nt).name);
                    n_fallback++;
                }
            } else if (t->ne[0] % qp_block_size(rt, nt)) {
                fprintf(stderr, "picolm-quantize: tensor '%s': row length %lld is not a multiple of %s's block size %u "
                                "(--pure has no fallback types; drop --pure to get llama.cpp's fallbacks)\n",
                        p.refs[i].name, (long long)t->ne[0], type_of(rt, nt).name, qp_block_size(rt, nt));
                goto done;
            }
        }
        p.type[i] = nt;
        p.nbytes[i] = nt == t->type ? t->nbytes : (uint64_t)picolm_type_row_bytes(rt, nt, t->ne[0]) * (uint64_t)(t->n_elements / t->ne[0]);
        if (nt != t->type) {
            const picolm_type_info nti = type_of(rt, nt);
            const int g = (int)nti.row_group;
            if ((t->n_elements / t->ne[0]) % g) {
                fprintf(stderr, "picolm-quantize: tensor '%s': %lld rows are not whole groups of %d rows (%s)\n", p.refs[i].name,
                        (long long)(t->n_elements / t->ne[0]), g, nti.name);
                goto done;
            }
            if (!quantized_in.name && !nti.format->quantize_row) {
                fprintf(stderr, "picolm-quantize: tensor '%s': no loaded format plugin provides a quantizer for %s\n", p.refs[i].name,
                        nti.name);
                goto done;
            }
            if (!quantized_in.name && g * t->ne[0] > max_unit) max_unit = g * t->ne[0];
            if (p.nbytes[i] > max_out) max_out = p.nbytes[i];
        }
    }
    if (quantized_in.name && !n_repack) {
        fprintf(stderr, "picolm-quantize: %s is quantized and has no tensor %s can repack (it stores ", in_path, m.name);
        for (int k = 0; k < QP_MAX_STORE && m.store[k].as; k++)
            fprintf(stderr, "%s%s as %s", k ? ", " : "", type_of(rt, m.store[k].base).name, type_of(rt, m.store[k].as).name);
        fprintf(stderr, ")\n");
        goto done;
    }

    /* Header: metadata verbatim and in order, then llama-quantize's updates. */
    w = picolm_gguf_writer_new();
    if (!w) { fprintf(stderr, "picolm-quantize: out of memory\n"); goto done; }
    int bad = 0;
    for (int64_t i = 0; !bad && i < (int64_t)info.n_kv; i++) bad = picolm_gguf_writer_copy(w, in, i);
    bad = bad || picolm_gguf_writer_set_u32(w, "general.quantization_version", QNT_VERSION);
    /* a repacked mix (Q4_K_M_R) has no llama.cpp file type: none written */
    if (m.ftype >= 0 && !qp_mix_repacked(&m)) bad = bad || picolm_gguf_writer_set_u32(w, "general.file_type", (uint32_t)m.ftype);
    else picolm_gguf_writer_remove(w, "general.file_type"); /* llama.cpp has no number for a plugin's type */
    picolm_gguf_writer_remove(w, "split.no");
    picolm_gguf_writer_remove(w, "split.count");
    picolm_gguf_writer_remove(w, "split.tensors.count");
    for (int i = 0; !bad && i < p.n; i++) {
        const picolm_tensor *t = &p.refs[i].t;
        bad = picolm_gguf_writer_add_tensor(w, t->name, t->name_len, n_dims_of(t), t->ne, p.type[i], p.nbytes[i]);
    }
    if (bad) { fprintf(stderr, "picolm-quantize: out of memory building the header\n"); goto done; }

    /* Temp file next to the output, renamed into place when complete. */
    if (!(af = out_open(out_path, err, sizeof err))) { fprintf(stderr, "picolm-quantize: %s\n", err); goto done; }
    of = picolm_outfile_stream(af);
    if (picolm_gguf_writer_write_header(w, of, err, sizeof err)) { fprintf(stderr, "picolm-quantize: %s: %s\n", out_name(af, out_path), err); goto done; }

    scratch = calloc((size_t)nthr, sizeof *scratch);
    obuf = max_out ? malloc((size_t)max_out) : NULL;
    if (!scratch || (max_out && !obuf)) { fprintf(stderr, "picolm-quantize: out of memory\n"); goto done; }
    for (int i = 0; i < nthr; i++)
        if (!(scratch[i] = malloc((size_t)(max_unit ? max_unit : 1) * sizeof(float)))) { fprintf(stderr, "picolm-quantize: out of memory\n"); goto done; }

    fprintf(stderr, "picolm-quantize: %s -> %s as %s%s%s (%d thread%s)\n", in_path, out_path, m.name, pure && !quantized_in.name ? " --pure" : "",
            quantized_in.name ? ", repacking (lossless)" : "", nthr, nthr == 1 ? "" : "s");
    const double t0 = tool_now();
    uint64_t in_bytes = 0, out_bytes = 0, n_elem = 0;
    const int wdt = p.n >= 1000 ? 4 : p.n >= 100 ? 3 : 2;
    int wname = 8, wtype = 3; /* column widths, so that the log lines up */
    for (int i = 0; i < p.n; i++) {
        const int ln = (int)strlen(p.refs[i].name), la = (int)strlen(type_of(rt, p.refs[i].t.type).name),
                  lb = (int)strlen(type_of(rt, p.type[i]).name);
        wname = ln > wname ? ln : wname;
        wtype = la > wtype ? la : lb > wtype ? lb : wtype;
    }
    for (int i = 0; i < p.n; i++) {
        const picolm_tensor *t = &p.refs[i].t;
        const uint32_t nt = p.type[i];
        const void *data = t->data;
        if (nt != t->type) {
            const picolm_type_info nti = type_of(rt, nt);
            const int g = (int)nti.row_group;
            job j = {.src = t->data, .src_row = picolm_type_row_bytes(rt, t->type, t->ne[0]), .dst = obuf,
                     .dst_row = picolm_type_row_bytes(rt, nt, t->ne[0]), .cols = t->ne[0], .group = g, .scratch = scratch};
            if (quantized_in.name) j.from_base = nti.from_base;
            else {
                j.to_float = t->type == PICOLM_TYPE_F32 ? NULL : type_of(rt, t->type).format->dequantize_row;
                j.from_float = nti.format->quantize_row;
            }
            picolm_runtime_parallel(rt, t->n_elements / t->ne[0] / g, convert_units, &j);
            data = obuf;
        }
        if (picolm_gguf_writer_write_tensor(w, of, data, p.nbytes[i], err, sizeof err)) {
            fprintf(stderr, "picolm-quantize: %s: %s\n", out_name(af, out_path), err);
            goto done;
        }
        char shape[96] = "";
        for (uint32_t k = 0; k < n_dims_of(t); k++)
            snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld", k ? " x " : "", (long long)t->ne[k]);
        fprintf(stderr, "[%*d/%*d] %-*s %*s -> %-*s %-14s %8.2f MB -> %8.2f MB\n", wdt, i + 1, wdt, p.n, wname, p.refs[i].name,
                wtype, type_of(rt, t->type).name, wtype, type_of(rt, nt).name, shape, t->nbytes / 1e6, p.nbytes[i] / 1e6);
        in_bytes += t->nbytes;
        out_bytes += p.nbytes[i];
        n_elem += (uint64_t)t->n_elements;
    }
    of = NULL;
    if (out_commit(af, err, sizeof err)) { fprintf(stderr, "picolm-quantize: %s\n", err); goto done; }
    fprintf(stderr, "picolm-quantize: tensors %.2f MB -> %.2f MB, %.3f M weights, %.2f -> %.2f bits per weight; "
                    "file %.2f MB -> %.2f MB; %.2f s\n",
            in_bytes / 1e6, out_bytes / 1e6, n_elem / 1e6, n_elem ? 8.0 * in_bytes / n_elem : 0.0,
            n_elem ? 8.0 * out_bytes / n_elem : 0.0, info.file_bytes / 1e6, picolm_gguf_writer_file_size(w) / 1e6, tool_now() - t0);
    if (n_fallback) fprintf(stderr, "picolm-quantize: %d tensor(s) needed a fallback type\n", n_fallback);
    rc = 0;
done:
    out_abort(af);
    if (scratch)
        for (int i = 0; i < nthr; i++) free(scratch[i]);
    free(scratch);
    free(obuf);
    picolm_gguf_writer_free(w);
    free(p.refs);
    free(p.type);
    free(p.nbytes);
    picolm_gguf_free(in);
    picolm_runtime_free(rt);
    return rc;
}
