// Tokenizer test vectors from llama.cpp, in the format of llama.cpp's own
// models/ggml-vocab-*.gguf.inp/.out: the strings of INP (each followed by
// "\n__ggml_vocab_test__\n") tokenized without BOS/EOS and with special
// tokens as text; one line per string, each id preceded by a space.
//
//   oracle-tokenize VOCAB_OR_MODEL.gguf INP OUT
#include "oracle.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

int main(int argc, char ** argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s VOCAB.gguf INP OUT\n", argv[0]);
        return argc == 2 && !strcmp(argv[1], "--help") ? 0 : 1;
    }
    llama_log_set(oracle_log, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) { fprintf(stderr, "oracle-tokenize: cannot load %s\n", argv[1]); return 1; }
    const llama_vocab * vocab = llama_model_get_vocab(model);

    const std::string all = oracle_slurp("oracle-tokenize", argv[2]);
    const std::string sep = "\n__ggml_vocab_test__\n";
    FILE * o = fopen(argv[3], "wb");
    if (!o) { fprintf(stderr, "oracle-tokenize: cannot write %s\n", argv[3]); return 1; }
    size_t pos = 0, end;
    int n_str = 0;
    while ((end = all.find(sep, pos)) != std::string::npos) {
        const std::string s = all.substr(pos, end - pos);
        std::vector<llama_token> t(s.size() + 8);
        int n = llama_tokenize(vocab, s.data(), (int) s.size(), t.data(), (int) t.size(), false, false);
        if (n < 0) { fprintf(stderr, "oracle-tokenize: tokenize failed\n"); return 1; }
        for (int i = 0; i < n; i++) fprintf(o, " %d", t[i]);
        fputc('\n', o);
        pos = end + sep.size();
        n_str++;
    }
    if (fclose(o) != 0) { fprintf(stderr, "oracle-tokenize: cannot write %s\n", argv[3]); return 1; }
    fprintf(stderr, "%s: %d strings\n", argv[3], n_str);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
