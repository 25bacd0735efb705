/* libFuzzer harness: GGUF parser (gguf_parse, gguf_bind_types, getters),
   build_tokenizer on whatever metadata parses, and the model loader's
   hyper-parameter / shape validation (build_model) followed by one forward
   step on a 2-token context, all against a fake format table with ggml's
   block sizes (no plugins, no dlopen: deterministic). */
#include "common.h"
#include "gguf.h"
#include "ctx.h"
#include "model.h"
#include "ops.h"
#include "plugins.h"
#include "threadpool.h"
#include "tokenizer.h"

static pl_dispatch D; /* large: static */
static volatile float sink;

/* Per-type fake kernels: touch exactly the bytes a real one may touch, so
   ASan sees any mis-sized buffer the core hands over. */
#define FAKE_TYPES(X) \
    X(F32, 0, 1, 4) X(F16, 1, 1, 2) X(Q4_0, 2, 32, 18) X(Q4_1, 3, 32, 20) X(Q5_0, 6, 32, 22) \
    X(Q5_1, 7, 32, 24) X(Q8_0, 8, 32, 34) X(Q8_1, 9, 32, 36) X(Q2_K, 10, 256, 84) X(Q3_K, 11, 256, 110) \
    X(Q4_K, 12, 256, 144) X(Q5_K, 13, 256, 176) X(Q6_K, 14, 256, 210) X(Q8_K, 15, 256, 292) \
    X(IQ4_NL, 20, 32, 18) X(IQ4_XS, 23, 256, 136) X(BF16, 30, 1, 2)

#define X(name, id, bs, ts) \
    static void deq_##name(const void *src, float *dst, int64_t n) { \
        const uint8_t *s = src; float acc = 0; \
        for (int64_t i = 0; i < n / (bs) * (ts); i++) acc += s[i]; \
        for (int64_t i = 0; i < n; i++) dst[i] = acc; } \
    static void dot_##name(int64_t n, float *s, const void *x, const void *y) { \
        const uint8_t *xb = x; const float *yf = y; float acc = 0; \
        if (n > 0) acc = xb[0] + xb[n / (bs) * (ts) - 1]; \
        for (int64_t i = 0; i < n; i++) acc += yf[i]; \
        *s = acc * 0.f; }
FAKE_TYPES(X)
#undef X
static void quant_f32(const float *src, void *dst, int64_t n) { memcpy(dst, src, (size_t)n * sizeof(float)); }

static const picolm_format fake_formats[] = {
#define X(nm, id, bs, ts) {.type_id = id, .flags = PICOLM_FMT_WEIGHT | PICOLM_FMT_ACTIVATION, .name = #nm, .block_size = bs, .type_size = ts, .dequantize_row = deq_##nm, .vec_dot = dot_##nm},
    FAKE_TYPES(X)
#undef X
};

static int size_fn(void *ctx, uint32_t type, uint32_t *bs, uint32_t *ts) { return dispatch_type_size(ctx, type, bs, ts); }

static threadpool *pool;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    for (size_t i = 0; i < sizeof fake_formats / sizeof *fake_formats; i++) {
        const picolm_format *f = &fake_formats[i];
        pl_type *t = &D.types[f->type_id];
        t->fmt = f;
        t->row_group = 1; /* plain rows, as registry_dispatch sets for such a format */
        t->fmt_plugin = "fake";
        t->vec_dot_type = PICOLM_TYPE_F32;
        t->vec_dot = f->vec_dot;
        t->act_quant = quant_f32;
        t->kernel_from = "fake";
    }
    ref_ops(&D.ops);
    pool = build_threadpool(1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gguf_file f;
    char err[512];
    if (gguf_parse(&f, data, size, NULL, err, sizeof err)) {
        FUZZ_ASSERT(memchr(err, 0, sizeof err) && err[0], "parse failed without a message");
        return 0;
    }
    FUZZ_ASSERT(f.data_offset <= size || f.n_tensors == 0, "data offset %llu past the end", (unsigned long long)f.data_offset);
    int bound = !gguf_bind_types(&f, size_fn, &D, err, sizeof err);
    if (bound)
        for (uint64_t i = 0; i < f.n_tensors; i++) {
            const gguf_tensor *t = &f.tensors[i];
            FUZZ_ASSERT((const uint8_t *)t->data >= data && (const uint8_t *)t->data + t->nbytes <= data + size,
                        "tensor %llu outside the buffer", (unsigned long long)i);
            if (t->nbytes) sink += ((const uint8_t *)t->data)[t->nbytes - 1];
        }
    /* getters on every key */
    for (uint64_t i = 0; i < f.n_kv; i++) {
        char key[256];
        const gguf_kv *kv = &f.kv[i];
        if (kv->key.len >= sizeof key || memchr(kv->key.ptr, 0, kv->key.len)) continue; /* C-string lookups */
        memcpy(key, kv->key.ptr, kv->key.len);
        key[kv->key.len] = 0;
        uint32_t u; int64_t v; float fl; int b; gguf_str s; uint64_t n;
        gguf_get_u32(&f, key, &u); gguf_get_i64(&f, key, &v); gguf_get_f32(&f, key, &fl);
        gguf_get_bool(&f, key, &b); gguf_get_str(&f, key, &s);
        if (kv->type == GGUF_ARRAY) {
            const gguf_kv *a = gguf_get_arr(&f, key, kv->v.arr.type, &n);
            FUZZ_ASSERT(a == kv && n == kv->v.arr.n, "gguf_get_arr mismatch");
            if (a->v.arr.type == GGUF_STRING)
                for (uint64_t j = 0; j < n; j++)
                    if (a->v.arr.strs[j].len) sink += (float)a->v.arr.strs[j].ptr[a->v.arr.strs[j].len - 1];
        }
    }
    tokenizer *tok = NULL;
    if (!build_tokenizer(&tok, &f, err, sizeof err)) {
        int32_t ids[64];
        int n = tokenizer_encode(tok, "Hello <s> world\xe2\x96\x81\xff", 20, 1, 1, ids, 64);
        for (int i = 0; i < n; i++) {
            size_t len;
            FUZZ_ASSERT(ids[i] >= 0 && ids[i] < tokenizer_n_vocab(tok), "token id out of range");
            tokenizer_piece(tok, ids[i], &len);
        }
        free_tokenizer(tok);
    }
    free_gguf(&f);
    if (!bound) return 0;

    /* the model loader takes a path: hand it the same bytes via a memfd */
    char path[64];
    int fd = fuzz_memfd(data, size, path, sizeof path);
    if (fd < 0) return 0;
    llama_model m;
    if (!build_model(&m, path, &D, NULL, err, sizeof err)) {
        const llama_hparams *hp = &m.hp;
        FUZZ_ASSERT(hp->n_embd > 0 && hp->n_head > 0 && hp->n_head_kv > 0 && hp->n_head % hp->n_head_kv == 0 &&
                    hp->head_dim > 0 && hp->rope_dim > 0 && hp->rope_dim <= hp->head_dim && hp->n_vocab > 0,
                    "accepted bad hyper-parameters");
        /* keep the forward step cheap: skip models whose one token costs a lot */
        const uint64_t work = (uint64_t)hp->n_layer * ((uint64_t)hp->n_embd * (4u * hp->n_embd + 3u * hp->n_ff)) +
                              (uint64_t)hp->n_vocab * hp->n_embd;
        llama_ctx c;
        if (work < (1u << 24) && !build_ctx(&c, &m, 2, 2, KV_F16, pool, err, sizeof err)) {
            const int32_t toks[2] = {0, hp->n_vocab - 1};
            if (!ctx_forward(&c, toks, 2, NULL, err, sizeof err))
                for (int i = 0; i < hp->n_vocab; i++) sink += c.logits[i];
            free_ctx(&c);
        }
        free_model(&m);
    }
    close(fd);
    return 0;
}
