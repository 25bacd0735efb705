// Reference logits from llama.cpp: the prompt evaluated one token at a time
// on one thread, then a greedy continuation; everything else is llama.cpp's
// default (F16 KV cache, flash attention "auto", which the CPU turns on).
// Built by mkfamilies.sh against an oracle llama.cpp build; written against
// llama.h's public API only.
//
//   oracle-logits MODEL PROMPT_FILE OUT_PREFIX [--tail K] [--greedy N] [--kv KEY=int|float:VALUE]... [--no-flash]
//
// Writes OUT_PREFIX.tokens.i32 (the prompt's ids, BOS first when the
// vocabulary adds it), .logits.f32 (float32 logits of the last K prompt
// positions, K x n_vocab row-major; K = 0: every position), .greedy.i32 and
// .greedy.txt (N argmax tokens, stopping before the first end-of-generation
// token; text without special tokens, as llama-cli prints it).  --kv
// overrides a metadata value (llama.cpp's --override-kv): how far the logits
// move when a key is ignored shows what the reference data can detect.
// --no-flash turns flash attention off: the distance between the two runs
// shows how much the model amplifies rounding differences.
#include "oracle.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

static void spill(const std::string & path, const void * p, size_t n) {
    FILE * f = fopen(path.c_str(), "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "oracle-logits: cannot write %s\n", path.c_str());
        exit(1);
    }
}

int main(int argc, char ** argv) {
    if (argc < 4 || !strcmp(argv[1], "--help")) {
        fprintf(stderr, "usage: %s MODEL PROMPT_FILE OUT_PREFIX [--tail K] [--greedy N] [--kv KEY=int|float:VALUE]... [--no-flash]\n", argv[0]);
        return argc < 4 ? 1 : 0;
    }
    int tail = 0, n_greedy = 40;
    bool flash = true;
    std::vector<llama_model_kv_override> kv;
    for (int i = 4; i < argc; i += 2) {
        if (!strcmp(argv[i], "--no-flash")) { flash = false; i--; continue; }
        if (i + 1 >= argc) { fprintf(stderr, "oracle-logits: %s needs a value\n", argv[i]); return 1; }
        if (!strcmp(argv[i], "--tail")) tail = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--greedy")) n_greedy = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--kv")) {
            llama_model_kv_override o = {};
            const char * eq = strchr(argv[i + 1], '=');
            const char * colon = eq ? strchr(eq, ':') : nullptr;
            if (!colon || eq - argv[i + 1] >= (long) sizeof o.key) { fprintf(stderr, "oracle-logits: bad --kv %s\n", argv[i + 1]); return 1; }
            memcpy(o.key, argv[i + 1], eq - argv[i + 1]);
            if (!strncmp(eq + 1, "int:", 4)) { o.tag = LLAMA_KV_OVERRIDE_TYPE_INT; o.val_i64 = atoll(colon + 1); }
            else if (!strncmp(eq + 1, "float:", 6)) { o.tag = LLAMA_KV_OVERRIDE_TYPE_FLOAT; o.val_f64 = atof(colon + 1); }
            else { fprintf(stderr, "oracle-logits: bad --kv type in %s\n", argv[i + 1]); return 1; }
            kv.push_back(o);
        }
        else { fprintf(stderr, "oracle-logits: unknown option %s\n", argv[i]); return 1; }
    }
    if (!kv.empty()) kv.push_back(llama_model_kv_override{});
    llama_log_set(oracle_log, nullptr);
    llama_backend_init();

    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    mp.kv_overrides = kv.empty() ? nullptr : kv.data();
    llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) { fprintf(stderr, "oracle-logits: cannot load %s\n", argv[1]); return 1; }
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);

    const std::string prompt = oracle_slurp("oracle-logits", argv[2]);
    std::vector<llama_token> toks(prompt.size() + 16);
    int n = llama_tokenize(vocab, prompt.data(), (int) prompt.size(), toks.data(), (int) toks.size(), true, false);
    if (n < 0) { fprintf(stderr, "oracle-logits: tokenize failed\n"); return 1; }
    toks.resize(n);

    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 1024;
    cp.n_batch = cp.n_ubatch = 1;
    cp.n_threads = cp.n_threads_batch = 1;
    if (!flash) cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) { fprintf(stderr, "oracle-logits: cannot create a context\n"); return 1; }

    if (tail <= 0 || tail > n) tail = n;
    std::vector<float> logits;
    for (int i = 0; i < n; i++) {
        llama_token t = toks[i];
        if (llama_decode(ctx, llama_batch_get_one(&t, 1)) != 0) { fprintf(stderr, "oracle-logits: decode failed\n"); return 1; }
        if (i >= n - tail) {
            const float * l = llama_get_logits_ith(ctx, -1);
            logits.insert(logits.end(), l, l + n_vocab);
        }
    }
    const std::string out = argv[3];
    spill(out + ".tokens.i32", toks.data(), toks.size() * sizeof(llama_token));
    spill(out + ".logits.f32", logits.data(), logits.size() * sizeof(float));

    std::vector<llama_token> gen;
    std::string text;
    for (int k = 0; k < n_greedy; k++) {
        const float * l = llama_get_logits_ith(ctx, -1);
        llama_token best = 0;
        for (int v = 1; v < n_vocab; v++) if (l[v] > l[best]) best = v;
        if (llama_vocab_is_eog(vocab, best)) break;
        gen.push_back(best);
        char piece[256];
        int m = llama_token_to_piece(vocab, best, piece, sizeof piece, 0, false);
        if (m > 0) text.append(piece, m);
        if (llama_decode(ctx, llama_batch_get_one(&best, 1)) != 0) { fprintf(stderr, "oracle-logits: decode failed\n"); return 1; }
    }
    spill(out + ".greedy.i32", gen.data(), gen.size() * sizeof(llama_token));
    spill(out + ".greedy.txt", text.data(), text.size());
    fprintf(stderr, "%s: %d prompt tokens, logits of the last %d, %zu greedy tokens\n", argv[1], n, tail, gen.size());

    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
