// Helpers shared by the oracle programs (built against llama.h only).
#pragma once
#include "llama.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

// the whole file, or exit 1 with a message naming it
static inline std::string oracle_slurp(const char * prog, const char * path) {
    FILE * f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "%s: cannot read %s\n", prog, path); exit(1); }
    std::string s;
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
    fclose(f);
    return s;
}

// llama.cpp's warnings, and how the flash-attention "auto" setting resolved
static inline void oracle_log(ggml_log_level level, const char * text, void *) {
    if (level >= GGML_LOG_LEVEL_WARN || strstr(text, "lash")) fputs(text, stderr);
}
