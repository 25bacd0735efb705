/* Random-weight model synthesis: see synth.h. */
#include "synth.h"
#include "tool.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "quant_policy.h"

const synth_shape synth_shapes[] = {
    /* name        dim  layers heads kv   ffn    vocab  ctx     arch  head_dim tied rope_freqs base eps [window conv] */
    {"tinyllama", 2048, 22, 32, 4, 5632, 32000, 2048, NULL, 0, 0, 0, 0, 0, 0, NULL},  /* TinyLlama-1.1B */
    {"tiny", 256, 4, 8, 4, 768, 32000, 512, NULL, 0, 0, 0, 0, 0, 0, NULL},            /* seconds to make, for tests */
    {"small", 768, 12, 12, 4, 2048, 32000, 1024, NULL, 0, 0, 0, 0, 0, 0, NULL},
    {"llama7b", 4096, 32, 32, 32, 11008, 32000, 4096, NULL, 0, 0, 0, 0, 0, 0, NULL},  /* Llama-2-7B */
    /* today's small models, with their real vocabulary sizes (rows of 896
       are not whole K-quant blocks: the mixes fall back as llama.cpp's do) */
    {"qwen2.5-0.5b", 896, 24, 14, 2, 4864, 151936, 32768, "qwen2", 0, 1, 0, 1e6f, 1e-6f, 0, NULL},
    {"qwen3-0.6b", 1024, 28, 16, 8, 3072, 151936, 40960, "qwen3", 128, 1, 0, 1e6f, 1e-6f, 0, NULL},
    {"llama3.2-1b", 2048, 16, 32, 8, 8192, 128256, 131072, "llama", 0, 1, 1, 5e5f, 1e-5f, 0, NULL},
    /* the same architectures at test size (rows of 384 or 128: K-quant
       fallbacks); tiny-qwen3 and tiny-llama3 have the shapes of the shared
       rand-qwen3/rand-llama3 files but a small vocabulary */
    {"tiny-qwen2", 384, 2, 6, 2, 1024, 2048, 512, "qwen2", 0, 1, 0, 1e6f, 1e-6f, 0, NULL},
    {"tiny-qwen3", 128, 2, 4, 2, 384, 2048, 512, "qwen3", 128, 1, 0, 1e6f, 1e-6f, 0, NULL},
    {"tiny-llama3", 256, 2, 4, 2, 768, 2048, 512, "llama", 0, 1, 1, 5e5f, 1e-5f, 0, NULL},
    /* the families boards run next: Gemma 3 (window 512 on 5 of 6 layers),
       LFM2 (convolutions but in 6 of 16 layers), SmolLM3 (no RoPE in every
       4th layer), and each at test size */
    {"gemma3-270m", 640, 18, 4, 1, 2048, 262144, 32768, "gemma3", 256, 1, 0, 1e6f, 1e-6f, 512, NULL},
    {"gemma3-1b", 1152, 26, 4, 1, 6912, 262144, 32768, "gemma3", 256, 1, 0, 1e6f, 1e-6f, 512, NULL},
    {"lfm2-350m", 1024, 16, 16, 8, 4608, 65536, 128000, "lfm2", 0, 1, 0, 1e6f, 1e-5f, 0, "ccaccaccacacacac"},
    {"lfm2-700m", 1536, 16, 24, 8, 6912, 65536, 128000, "lfm2", 0, 1, 0, 1e6f, 1e-5f, 0, "ccaccaccacacacac"},
    {"lfm2-1.2b", 2048, 16, 32, 8, 8192, 65536, 128000, "lfm2", 0, 1, 0, 1e6f, 1e-5f, 0, "ccaccaccacacacac"},
    {"smollm3-3b", 2048, 36, 16, 4, 11008, 128256, 65536, "smollm3", 0, 1, 0, 5e6f, 1e-6f, 0, NULL},
    {"tiny-gemma3", 128, 6, 2, 1, 384, 2048, 512, "gemma3", 64, 1, 0, 1e6f, 1e-6f, 8, NULL},
    {"tiny-lfm2", 128, 6, 4, 2, 384, 2048, 512, "lfm2", 0, 1, 0, 1e6f, 1e-5f, 0, "ccacca"},
    {"tiny-smollm3", 128, 4, 4, 2, 384, 2048, 512, "smollm3", 0, 1, 0, 5e6f, 1e-6f, 0, NULL},
    /* Llama-3.2-1B's KV cache (16 layers x 8 KV heads of 64, 131072
       positions: 32 KB per position) around small matrices */
    {"tiny-longkv", 512, 16, 8, 8, 256, 2048, 131072, "llama", 0, 1, 1, 5e5f, 1e-5f, 0, NULL},
    {NULL, 0, 0, 0, 0, 0, 0, 0, NULL, 0, 0, 0, 0, 0, 0, NULL},
};

int synth_parse(const char *spec, synth_shape *shape, char *type, size_t type_len, char *err, size_t errlen) {
    const char *colon = spec ? strchr(spec, ':') : NULL;
    if (!colon || colon == spec || !colon[1]) return tool_fail(err, errlen, "synth spec '%s' is not SHAPE:TYPE (e.g. tinyllama:Q4_K_M)", spec ? spec : "");
    const size_t sl = (size_t)(colon - spec);
    const synth_shape *s = NULL;
    for (const synth_shape *p = synth_shapes; p->name; p++)
        if (strlen(p->name) == sl && !strncasecmp(p->name, spec, sl)) s = p;
    if (!s) {
        char names[256] = "";
        for (const synth_shape *p = synth_shapes; p->name; p++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", names[0] ? ", " : "", p->name);
        return tool_fail(err, errlen, "unknown synth shape '%.*s' (known: %s)", (int)sl, spec, names);
    }
    *shape = *s;
    if (strlen(colon + 1) >= type_len) return tool_fail(err, errlen, "synth type name too long");
    size_t i = 0;
    for (const char *c = colon + 1; *c; c++) type[i++] = (char)(*c >= 'a' && *c <= 'z' ? *c - 'a' + 'A' : *c);
    type[i] = 0;
    return 0;
}

void synth_default_path(const char *spec, char *buf, size_t n) {
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !tmp[0]) tmp = "/tmp";
    char s[128];
    size_t i = 0;
    for (; spec[i] && i + 1 < sizeof s; i++) s[i] = spec[i] == ':' || spec[i] == '/' ? '-' : spec[i];
    s[i] = 0;
    snprintf(buf, n, "%s/picolm-synth-%s.gguf", tmp, s);
}

/* ------------------------------------------------------------------------ */
/* Random rows                                                               */
/* ------------------------------------------------------------------------ */

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Approximately N(0, std): the sum of four 16-bit uniforms (Irwin-Hall),
   centred and scaled; one 64-bit draw per value keeps synthesis fast. */
static void normal_row(float *x, int64_t n, uint64_t seed, float std) {
    uint64_t s = seed;
    const float k = std * 1.7320508f / 65536.0f; /* sqrt(3): var of the sum of 4 U(0,1) is 1/3 */
    for (int64_t i = 0; i < n; i++) {
        const uint64_t r = splitmix64(&s);
        const int32_t sum = (int32_t)(r & 0xffff) + (int32_t)((r >> 16) & 0xffff) + (int32_t)((r >> 32) & 0xffff) +
                            (int32_t)(r >> 48) - 2 * 65536;
        x[i] = (float)sum * k;
    }
}

typedef struct synth_job {
    uint64_t seed;
    int64_t cols;
    int group;                  /* rows per unit: the format's row_group (1: plain rows) */
    picolm_from_float_fn quant; /* NULL: F32 rows written as is */
    uint8_t *dst;
    size_t row_bytes;
    float **scratch;            /* group * cols floats per thread */
    /* block pool (fast mode): rows are random picks of pre-quantized blocks
       (of a whole group of rows for a grouped format) */
    const uint8_t *pool;
    int64_t pool_blocks;
    size_t block_bytes;
} synth_job;

/* Units u0..u1 of `group` rows each (one row for plain formats); a grouped
   quantizer takes its rows together. */
static void synth_rows(void *ctx, int64_t u0, int64_t u1, int tid) {
    const synth_job *j = ctx;
    for (int64_t u = u0; u < u1; u++) {
        uint8_t *unit = j->dst + (size_t)u * (size_t)j->group * j->row_bytes;
        if (j->pool) {
            uint64_t s = j->seed ^ ((uint64_t)u * 0xD1B54A32D192ED03ull);
            const size_t nb = (size_t)j->group * j->row_bytes / j->block_bytes;
            for (size_t b = 0; b < nb; b++)
                memcpy(unit + b * j->block_bytes, j->pool + (size_t)(splitmix64(&s) % (uint64_t)j->pool_blocks) * j->block_bytes,
                       j->block_bytes);
            continue;
        }
        float *x = j->quant ? j->scratch[tid] : (float *)unit;
        for (int k = 0; k < j->group; k++) {
            const uint64_t r = (uint64_t)u * (uint64_t)j->group + (uint64_t)k;
            normal_row(x + k * j->cols, j->cols, j->seed ^ (r * 0xD1B54A32D192ED03ull), 0.02f);
        }
        if (j->quant) j->quant(x, unit, j->cols);
    }
}

/* Fast mode: quantize n_blocks blocks of N(0, 0.02) values once per type
   (in parallel, 256 blocks a task); matrices are then assembled from random
   picks of these blocks.  Every block is a genuine output of the format's
   quantizer, so the file is as valid, as large and as fast to run as a fully
   random one; only the values repeat. */
typedef struct pool_job {
    const picolm_format *f;
    int group;       /* the format's row_group: a chunk is group rows of POOL_CHUNK / group blocks */
    uint8_t *dst;
    float **scratch;
    uint64_t seed;
} pool_job;

#define POOL_CHUNK 256 /* blocks per task */

static void pool_rows(void *ctx, int64_t c0, int64_t c1, int tid) {
    const pool_job *j = ctx;
    const int64_t n = (int64_t)j->f->block_size * POOL_CHUNK;
    for (int64_t c = c0; c < c1; c++) {
        normal_row(j->scratch[tid], n, j->seed ^ ((uint64_t)c * 0xD1B54A32D192ED03ull), 0.02f);
        j->f->quantize_row(j->scratch[tid], j->dst + (size_t)c * POOL_CHUNK * j->f->type_size, n / j->group);
    }
}

/* ------------------------------------------------------------------------ */
/* Metadata helpers (the writer takes reader-style pairs)                    */
/* ------------------------------------------------------------------------ */

static int set_f32(picolm_gguf_writer *w, const char *key, float v) {
    const picolm_gguf_kv kv = {.key = key, .key_len = strlen(key), .type = PICOLM_GGUF_FLOAT32, .f = v};
    return picolm_gguf_writer_set(w, &kv);
}
static int set_bool(picolm_gguf_writer *w, const char *key, int v) {
    const picolm_gguf_kv kv = {.key = key, .key_len = strlen(key), .type = PICOLM_GGUF_BOOL, .u = v ? 1 : 0};
    return picolm_gguf_writer_set(w, &kv);
}
/* An array: numbers little-endian at data, or n C strings (et STRING). */
static int set_arr(picolm_gguf_writer *w, const char *key, uint32_t et, uint64_t n, const void *data) {
    const picolm_gguf_kv kv = {.key = key, .key_len = strlen(key), .type = PICOLM_GGUF_ARRAY, .arr_type = et, .arr_n = n, .arr_data = data};
    return picolm_gguf_writer_set(w, &kv);
}

/* Minimal SentencePiece-style vocabulary: <unk> <s> </s>, the 256 byte
   tokens, then filler pieces "▁w<N>" (the bench only needs token ids). */
static int write_vocab(picolm_gguf_writer *w, int n_vocab) {
    const int n_fixed = 3 + 256;
    char *text = malloc((size_t)n_vocab * 16);
    const char **strs = malloc((size_t)n_vocab * sizeof *strs);
    float *scores = malloc((size_t)n_vocab * sizeof *scores);
    int32_t *types = malloc((size_t)n_vocab * sizeof *types);
    int bad = !text || !strs || !scores || !types;
    for (int i = 0; !bad && i < n_vocab; i++) {
        char *t = text + (size_t)i * 16;
        if (i == 0) snprintf(t, 16, "<unk>"), types[i] = 2;
        else if (i == 1) snprintf(t, 16, "<s>"), types[i] = 3;
        else if (i == 2) snprintf(t, 16, "</s>"), types[i] = 3;
        else if (i < n_fixed) snprintf(t, 16, "<0x%02X>", i - 3), types[i] = 6;
        else snprintf(t, 16, "\xe2\x96\x81w%d", i - n_fixed), types[i] = 1;
        scores[i] = i < n_fixed ? 0.0f : -(float)(i - n_fixed);
        strs[i] = t;
    }
    bad = bad || picolm_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama") ||
          set_arr(w, "tokenizer.ggml.tokens", PICOLM_GGUF_STRING, (uint64_t)n_vocab, strs) ||
          set_arr(w, "tokenizer.ggml.scores", PICOLM_GGUF_FLOAT32, (uint64_t)n_vocab, scores) ||
          set_arr(w, "tokenizer.ggml.token_type", PICOLM_GGUF_INT32, (uint64_t)n_vocab, types) ||
          picolm_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1) || picolm_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2) ||
          picolm_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0) || set_bool(w, "tokenizer.ggml.add_bos_token", 1) ||
          set_bool(w, "tokenizer.ggml.add_eos_token", 0);
    free(text);
    free(strs);
    free(scores);
    free(types);
    return bad ? -1 : 0;
}

/* ------------------------------------------------------------------------ */
/* The model                                                                 */
/* ------------------------------------------------------------------------ */

typedef struct stensor {
    char name[64];
    int64_t ne[2];
    uint32_t n_dims, type;
    uint64_t nbytes;
    int norm;   /* 1-D, every value `fill` */
    float fill;
} stensor;

/* fmt holds "%d" for the layer when layer >= 0; rows == 1 makes a vector
   (F32: ones for norms and frequency factors, zeros for biases).  The type
   is chosen afterwards. */
static void add_t(stensor *t, const char *fmt, int layer, int64_t cols, int64_t rows) {
    if (layer >= 0) snprintf(t->name, sizeof t->name, fmt, layer);
    else snprintf(t->name, sizeof t->name, "%s", fmt);
    t->ne[0] = cols;
    t->ne[1] = rows;
    t->n_dims = rows > 1 ? 2 : 1;
    t->norm = rows == 1;
    t->fill = strstr(t->name, ".bias") ? 0.0f : 1.0f;
}

static uint32_t find_type(const picolm_runtime *rt, const char *name) {
    picolm_type_info ti;
    for (int64_t t = -1; (t = picolm_runtime_next_type(rt, t)) >= 0;)
        if (!picolm_runtime_type(rt, (uint32_t)t, &ti) && (ti.format->flags & PICOLM_FMT_WEIGHT) && !strcasecmp(ti.format->name, name))
            return (uint32_t)t;
    return UINT32_MAX;
}

/* The format plugin's facts of a type the caller knows is described. */
static picolm_type_info type_of(const picolm_runtime *rt, uint32_t t) {
    picolm_type_info ti;
    picolm_runtime_type(rt, t, &ti);
    return ti;
}

#define POOL_BLOCKS (64 * POOL_CHUNK)

int synth_write(const char *spec, const char *path, picolm_runtime *rt, int exact, FILE *progress, char *err, size_t errlen) {
    synth_shape s;
    char tname[32];
    if (synth_parse(spec, &s, tname, sizeof tname, err, errlen)) return -1;
    /* A weight format's own name means that type for every matrix (what a
       format benchmark wants); the other llama.cpp mix names (Q4_K_M,
       Q3_K_S, ...) follow its per-tensor rule, as picolm-quantize does. */
    const uint32_t base = find_type(rt, tname);
    const qp_mix *mix = base == UINT32_MAX ? qp_find_mix(tname) : NULL;
    if (base == UINT32_MAX && !mix)
        return tool_fail(err, errlen, "synth type '%s': no loaded format plugin provides a weight format of that name", tname);
    const char *arch = s.arch ? s.arch : "llama";
    const int hd = s.head_dim ? s.head_dim : s.n_embd / s.n_head, qd = hd * s.n_head, kvd = hd * s.n_head_kv;
    const int bias = !strcmp(arch, "qwen2"), post_norm = !strcmp(arch, "gemma3");
    const int qk_norm = !strcmp(arch, "qwen3") || post_norm || s.conv;
    const int per_layer = 9 + 3 * bias + 2 * qk_norm + 2 * post_norm; /* tensors per layer, at most */

    /* Tensor list in llama.cpp's order (non-layer first, then by layer). */
    const int n_top = 3 - s.tied + s.rope_freqs, max_t = n_top + per_layer * s.n_layer;
    stensor *ts = calloc((size_t)max_t, sizeof *ts);
    int *layer_end = calloc((size_t)s.n_layer + 1, sizeof *layer_end);
    if (!ts || !layer_end) { free(ts); free(layer_end); return tool_fail(err, errlen, "out of memory"); }
    int k = 0;
    add_t(&ts[k++], "token_embd.weight", -1, s.n_embd, s.n_vocab);
    add_t(&ts[k++], s.conv ? "token_embd_norm.weight" : "output_norm.weight", -1, s.n_embd, 1);
    if (!s.tied) add_t(&ts[k++], "output.weight", -1, s.n_embd, s.n_vocab);
    if (s.rope_freqs) add_t(&ts[k++], "rope_freqs.weight", -1, hd / 2, 1);
    for (int l = 0; l < s.n_layer; l++) {
        add_t(&ts[k++], "blk.%d.attn_norm.weight", l, s.n_embd, 1);
        if (s.conv && s.conv[l] == 'c') {
            add_t(&ts[k++], "blk.%d.shortconv.conv.weight", l, 3, s.n_embd);
            ts[k - 1].norm = 0; /* a 2-D F32 tensor of random taps */
            add_t(&ts[k++], "blk.%d.shortconv.in_proj.weight", l, s.n_embd, 3 * (int64_t)s.n_embd);
            add_t(&ts[k++], "blk.%d.shortconv.out_proj.weight", l, s.n_embd, s.n_embd);
        } else {
            add_t(&ts[k++], "blk.%d.attn_q.weight", l, s.n_embd, qd);
            add_t(&ts[k++], "blk.%d.attn_k.weight", l, s.n_embd, kvd);
            add_t(&ts[k++], "blk.%d.attn_v.weight", l, s.n_embd, kvd);
            if (bias) {
                add_t(&ts[k++], "blk.%d.attn_q.bias", l, qd, 1);
                add_t(&ts[k++], "blk.%d.attn_k.bias", l, kvd, 1);
                add_t(&ts[k++], "blk.%d.attn_v.bias", l, kvd, 1);
            }
            if (qk_norm) {
                add_t(&ts[k++], "blk.%d.attn_q_norm.weight", l, hd, 1);
                add_t(&ts[k++], "blk.%d.attn_k_norm.weight", l, hd, 1);
            }
            add_t(&ts[k++], "blk.%d.attn_output.weight", l, qd, s.n_embd);
        }
        if (post_norm) add_t(&ts[k++], "blk.%d.post_attention_norm.weight", l, s.n_embd, 1);
        add_t(&ts[k++], "blk.%d.ffn_norm.weight", l, s.n_embd, 1);
        add_t(&ts[k++], "blk.%d.ffn_gate.weight", l, s.n_embd, s.n_ff);
        add_t(&ts[k++], "blk.%d.ffn_up.weight", l, s.n_embd, s.n_ff);
        add_t(&ts[k++], "blk.%d.ffn_down.weight", l, s.n_ff, s.n_embd);
        if (post_norm) add_t(&ts[k++], "blk.%d.post_ffw_norm.weight", l, s.n_embd, 1);
        layer_end[l] = k;
    }
    const int n_t = k;

    /* Types: norms F32, matrices the pure type or the mix's rule.  The rule's
       counters are per tensor kind, so this order (by layer) is llama.cpp's. */
    qp_model qm;
    qp_model_init(&qm, arch, s.n_layer, s.n_head, s.n_head_kv, 0);
    for (int i = 0; i < n_t; i++) qp_model_count(&qm, ts[i].name);
    qp_counters qc = {0};
    /* A pure grouped type: the matrices it cannot hold (token_embd, whole
       groups only) keep its base type, as in the repacked mixes. */
    qp_mix pure = {.name = tname, .type = base, .store = {{base, base}}};
    if (!mix && type_of(rt, base).row_group > 1 && type_of(rt, base).layout_of) pure.store[0].base = type_of(rt, base).layout_of;
    uint32_t used[16]; /* distinct matrix types, for the quantizer check and the block pools */
    int n_used = 0;
    for (int i = 0; i < n_t; i++) {
        stensor *t = &ts[i];
        t->type = PICOLM_TYPE_F32;
        if (!qp_quantizable(t->name, t->n_dims)) continue;
        t->type = mix ? qp_tensor_type(mix, t->name, t->ne[0], t->ne[1], &qm, &qc, rt, NULL, err, errlen)
                      : qp_store_as(&pure, pure.store[0].base, t->name, t->ne[1], rt, err, errlen);
        if (t->type == UINT32_MAX) { free(ts); free(layer_end); return -1; }
        int seen = 0;
        for (int u = 0; u < n_used; u++) seen |= used[u] == t->type;
        if (seen) continue;
        const picolm_type_info ti = type_of(rt, t->type);
        const picolm_format *f = ti.format;
        if (!f || (t->type != PICOLM_TYPE_F32 && !f->quantize_row) || n_used == (int)(sizeof used / sizeof *used)) {
            free(ts);
            free(layer_end);
            return tool_fail(err, errlen, "synth type '%s' needs %s, which no loaded format plugin can quantize to", tname, ti.name);
        }
        used[n_used++] = t->type;
    }

    int rc = -1;
    picolm_gguf_writer *w = picolm_gguf_writer_new();
    FILE *of = NULL;
    picolm_outfile *af = NULL;
    uint8_t *buf = NULL, *pools[sizeof used / sizeof *used] = {NULL};
    float **scratch = NULL;
    const int nthr = picolm_runtime_threads(rt);
    uint64_t max_bytes = 0, total = 0;
    int64_t max_unit = 0; /* floats of one unit (group of rows) */
    if (!w) { tool_fail(err, errlen, "out of memory"); goto done; }
    for (int i = 0; i < n_t; i++) {
        const picolm_type_info ti = type_of(rt, ts[i].type);
        const picolm_format *f = ti.format;
        if (ts[i].ne[0] % f->block_size) {
            tool_fail(err, errlen, "%s: row length %lld is not a multiple of %s's block size %u", ts[i].name, (long long)ts[i].ne[0],
                 f->name, f->block_size);
            goto done;
        }
        ts[i].nbytes = (uint64_t)picolm_type_row_bytes(rt, ts[i].type, ts[i].ne[0]) * (uint64_t)ts[i].ne[1];
        if (ts[i].nbytes > max_bytes) max_bytes = ts[i].nbytes;
        const int g = (int)ti.row_group;
        if (ts[i].ne[1] % g) {
            tool_fail(err, errlen, "%s: %lld rows are not whole groups of %d (%s)", ts[i].name, (long long)ts[i].ne[1], g, f->name);
            goto done;
        }
        if (g * ts[i].ne[0] > max_unit) max_unit = g * ts[i].ne[0];
        total += ts[i].nbytes;
    }

    /* Metadata: what llama.cpp's converter writes for the architecture, plus the vocabulary. */
    char name[96];
    snprintf(name, sizeof name, "picolm-synth %s %s (random weights)", s.name, tname);
    const int ft = mix ? (qp_mix_repacked(mix) ? -1 : mix->ftype) : qp_pure_ftype(base); /* repacked mixes: no llama.cpp file type */
    int32_t kv_heads[256]; /* lfm2: 0 for a convolution layer */
    for (int l = 0; l < s.n_layer && l < 256; l++) kv_heads[l] = s.conv && s.conv[l] == 'c' ? 0 : s.n_head_kv;
    char key[96];
#define KEY(k) (snprintf(key, sizeof key, "%s." k, arch), key)
    int bad = picolm_gguf_writer_set_str(w, "general.architecture", arch) || picolm_gguf_writer_set_str(w, "general.name", name) ||
              picolm_gguf_writer_set_u32(w, KEY("context_length"), (uint32_t)s.n_ctx) ||
              picolm_gguf_writer_set_u32(w, KEY("embedding_length"), (uint32_t)s.n_embd) ||
              picolm_gguf_writer_set_u32(w, KEY("block_count"), (uint32_t)s.n_layer) ||
              picolm_gguf_writer_set_u32(w, KEY("feed_forward_length"), (uint32_t)s.n_ff) ||
              picolm_gguf_writer_set_u32(w, KEY("rope.dimension_count"), (uint32_t)hd) ||
              picolm_gguf_writer_set_u32(w, KEY("attention.head_count"), (uint32_t)s.n_head) ||
              (s.conv ? set_arr(w, KEY("attention.head_count_kv"), PICOLM_GGUF_INT32, (uint64_t)s.n_layer, kv_heads)
                      : picolm_gguf_writer_set_u32(w, KEY("attention.head_count_kv"), (uint32_t)s.n_head_kv)) ||
              (s.head_dim && (picolm_gguf_writer_set_u32(w, KEY("attention.key_length"), (uint32_t)hd) ||
                              picolm_gguf_writer_set_u32(w, KEY("attention.value_length"), (uint32_t)hd))) ||
              set_f32(w, KEY("attention.layer_norm_rms_epsilon"), s.rms_eps > 0 ? s.rms_eps : 1e-5f) ||
              set_f32(w, KEY("rope.freq_base"), s.rope_base > 0 ? s.rope_base : 10000.0f) ||
              picolm_gguf_writer_set_u32(w, KEY("vocab_size"), (uint32_t)s.n_vocab) ||
              (s.n_swa && picolm_gguf_writer_set_u32(w, KEY("attention.sliding_window"), (uint32_t)s.n_swa)) ||
              (s.conv && picolm_gguf_writer_set_u32(w, KEY("shortconv.l_cache"), 3)) ||
              (ft >= 0 && picolm_gguf_writer_set_u32(w, "general.file_type", (uint32_t)ft)) ||
              picolm_gguf_writer_set_u32(w, "general.quantization_version", 2) || write_vocab(w, s.n_vocab);
#undef KEY
    for (int i = 0; !bad && i < n_t; i++)
        bad = picolm_gguf_writer_add_tensor(w, ts[i].name, strlen(ts[i].name), ts[i].n_dims, ts[i].ne, ts[i].type, ts[i].nbytes);
    if (bad) { tool_fail(err, errlen, "out of memory building the header"); goto done; }

    if (!(af = picolm_outfile_new(path, err, errlen))) goto done;
    of = picolm_outfile_stream(af);
    if (picolm_gguf_writer_write_header(w, of, err, errlen)) goto done;
    buf = malloc((size_t)max_bytes);
    scratch = calloc((size_t)nthr, sizeof *scratch);
    if (!buf || !scratch) { tool_fail(err, errlen, "out of memory"); goto done; }
    for (int i = 0; i < nthr; i++)
        if (!(scratch[i] = malloc((size_t)(max_unit > 256 * POOL_CHUNK ? max_unit : 256 * POOL_CHUNK) * sizeof(float)))) {
            tool_fail(err, errlen, "out of memory");
            goto done;
        }
    /* block pools for the quantized types (not for F32/F16/BF16: cheap to make exactly) */
    for (int i = 0; !exact && i < n_used; i++) {
        const picolm_type_info ti = type_of(rt, used[i]);
        const picolm_format *f = ti.format;
        const int g = (int)ti.row_group;
        if (f->block_size < 32 || f->block_size > 256 || POOL_CHUNK % g) continue;
        if (!(pools[i] = malloc((size_t)POOL_BLOCKS * f->type_size))) { tool_fail(err, errlen, "out of memory"); goto done; }
        pool_job pj = {f, g, pools[i], scratch, 0xB10C0000ull + used[i]};
        picolm_runtime_parallel(rt, POOL_BLOCKS / POOL_CHUNK, pool_rows, &pj);
    }

    if (progress)
        fprintf(progress, "synth: %s -> %s: %d tensors, %.1f MB, %d thread%s%s\n", spec, path, n_t, total / 1e6, nthr,
                nthr == 1 ? "" : "s", exact ? ", every row quantized" : "");
    const double t0 = tool_now();
    uint64_t done_bytes = 0;
    for (int i = 0; i < n_t; i++) {
        const stensor *t = &ts[i];
        if (t->norm) {
            float *x = (float *)buf;
            for (int64_t j = 0; j < t->ne[0]; j++) x[j] = t->fill;
        } else {
            const picolm_type_info ti = type_of(rt, t->type);
            const picolm_format *f = ti.format;
            const int g = (int)ti.row_group;
            const uint8_t *bp = NULL;
            for (int u = 0; u < n_used; u++)
                if (used[u] == t->type) bp = pools[u];
            synth_job j = {.seed = 0x5EED0000ull + (uint64_t)i * 0x9E3779B97F4A7C15ull, .cols = t->ne[0], .group = g,
                           .quant = t->type == PICOLM_TYPE_F32 ? NULL : f->quantize_row, .dst = buf,
                           .row_bytes = picolm_type_row_bytes(rt, t->type, t->ne[0]), .scratch = scratch,
                           .pool = bp, .pool_blocks = POOL_BLOCKS / g, .block_bytes = (size_t)g * f->type_size};
            picolm_runtime_parallel(rt, t->ne[1] / g, synth_rows, &j);
        }
        if (picolm_gguf_writer_write_tensor(w, of, buf, t->nbytes, err, errlen)) goto done;
        done_bytes += t->nbytes;
        /* progress: the big non-layer tensors and each finished layer */
        int layer_done = -1;
        for (int l = 0; l < s.n_layer && layer_done < 0; l++) layer_done = layer_end[l] == i + 1 ? l : -1;
        if (progress && (i < n_top ? !t->norm : layer_done >= 0)) {
            char what[64];
            if (i < n_top) snprintf(what, sizeof what, "%s", t->name);
            else snprintf(what, sizeof what, "layer %d/%d", layer_done + 1, s.n_layer);
            fprintf(progress, "synth: %-20s %3.0f%%  %7.1f MB  %5.1f s\n", what, 100.0 * done_bytes / total, done_bytes / 1e6,
                    tool_now() - t0);
        }
    }
    of = NULL;
    if (picolm_outfile_commit(af, err, errlen)) goto done;
    if (progress) fprintf(progress, "synth: wrote %s (%.1f MB) in %.1f s\n", path, picolm_gguf_writer_file_size(w) / 1e6, tool_now() - t0);
    rc = 0;
done:
    picolm_outfile_free(af);
    if (scratch)
        for (int i = 0; i < nthr; i++) free(scratch[i]);
    free(scratch);
    for (int u = 0; u < n_used; u++) free(pools[u]);
    free(buf);
    picolm_gguf_writer_free(w);
    free(ts);
    free(layer_end);
    return rc;
}
