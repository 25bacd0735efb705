// The byte-level BPE pre-tokenizers (core/unicode.c) against the engine
// llama.cpp runs its regexes on: libstdc++'s std::regex (optimize|nosubs,
// ECMAScript) over llama.cpp's "collapsed" text (ASCII as is, other code
// points as one byte per category, White_Space as \v), with the category
// classes rewritten the way unicode_regex_split rewrites them.  Built and run
// by tests/t_pretok_regex.sh; prints PASS/FAIL per family.
#include <regex>
#include <string>
#include <vector>
#include <cstdio>
#include <random>
extern "C" {
#include "unicode.h"
}
#define N_STRINGS 20000

static std::vector<size_t> split_stl(const std::string &text, const std::regex &expr, const std::vector<size_t> &offsets) {
    std::vector<size_t> out; size_t start = 0;
    for (auto offset : offsets) {
        std::cregex_iterator it(text.data() + start, text.data() + start + offset, expr), end;
        int64_t si = 0;
        for (; it != end; ++it) { auto m = *it; if (m.position() > si) out.push_back(m.position() - si); out.push_back(m.length()); si = m.position() + m.length(); }
        if (si < (int64_t)offset) out.push_back(offset - si);
        start += offset;
    }
    return out;
}
int main() {
    std::mt19937 rng(42);
    // letters, digits, contractions, punctuation and the classes' edge cases:
    // CJK, full-width comma and digit, ideographic and no-break space, emoji,
    // Arabic-Indic digit, combining mark, euro sign, U+2028, NEL (White_Space
    // but Cc), U+001C (not White_Space), unassigned, private use, surrogate
    const uint32_t pool[] = {' ', ' ', ' ', '\n', '\r', '\t', 'a', 'b', 'Z', 'q', '\'', 's', 'S', 't', 'l', 'e', 'r', 'v', 'm', 'd', '1', '2', '9', '0', '.', ',', '!', '$', '+', '<', '|', '^', '~', '`', '_', '(', ')', '*', 0x4E2D, 0x6587, 0xFF0C, 0x3000, 0xA0, 0x1F642, 0xFF11, 0x0661, 0x00E9, 0x0301, 0x20AC, 0x2028, 0x85, 0x1C, 0x0378, 0xE000, 0xD800};
    const char *rx_qwen2 = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\xD2\x41-\x5A\x61-\x7A\xD1\x30-\x39]?[\xD2\x41-\x5A\x61-\x7A]+|[\xD1\x30-\x39]| ?[^\\s\xD2\x41-\x5A\x61-\x7A\xD1\x30-\x39]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
    const char *rx_llama3 = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\xD2\x41-\x5A\x61-\x7A\xD1\x30-\x39]?[\xD2\x41-\x5A\x61-\x7A]+|[\xD1\x30-\x39]{1,3}| ?[^\\s\xD2\x41-\x5A\x61-\x7A\xD1\x30-\x39]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
    const char *rx_gpt2 = "'s|'t|'re|'ve|'m|'ll|'d| ?[\xD2\x41-\x5A\x61-\x7A]+| ?[\xD1\x30-\x39]+| ?[^\\s\xD2\x41-\x5A\x61-\x7A\xD1\x30-\x39]+|\\s+(?!\\S)|\\s+";
    const char *rx_punct = "[\xD3\x21-\x23\x25-\x2A\x2C-\x2F\x3A-\x3B\x3F-\x40\\\x5B-\\\x5D\x5F\\\x7B\\\x7D\\$\\+<=>\\^~\\|]+";
    const char *rx_n1 = "[\xD1\x30-\x39]";
    const char *rx_nplus = "[\xD1\x30-\x39]+";
    const char *rx_d3 = "[0-9][0-9][0-9]";
    struct { pretok_kind k; std::vector<const char *> rx; const char *name; } fam[] = {
        { PRETOK_QWEN2, { rx_qwen2 }, "qwen2" }, { PRETOK_LLAMA3, { rx_llama3 }, "llama3" }, { PRETOK_GPT2, { rx_gpt2 }, "gpt2" },
        { PRETOK_SMOLLM, { rx_n1, rx_gpt2 }, "smollm" }, { PRETOK_DEFAULT, { rx_punct, rx_gpt2, rx_nplus, rx_d3 }, "default" },
    };
    for (auto &f : fam) {
        std::vector<std::regex> rxs;
        for (auto r : f.rx) rxs.emplace_back(r, std::regex_constants::optimize | std::regex_constants::nosubs);
        int bad = 0;
        for (int it = 0; it < N_STRINGS; it++) {
            size_t n = 1 + rng() % 24;
            std::vector<uint32_t> cps(n); std::vector<uint16_t> fl(n);
            std::string col(n, 0);
            for (size_t i = 0; i < n; i++) {
                cps[i] = pool[rng() % (sizeof pool / sizeof pool[0])];
                fl[i] = unicode_flags(cps[i]);
                if (cps[i] < 128) col[i] = (char)cps[i];
                else if (fl[i] & UCD_WHITESPACE) col[i] = 0x0B;
                else { int c = fl[i] & 0xFF; col[i] = (char)(c == UCD_NUMBER ? 0xD1 : c == UCD_LETTER ? 0xD2 : c == UCD_PUNCT ? 0xD3 : c == UCD_MARK ? 0xD4 : c == UCD_SYMBOL ? 0xD5 : 0xD0); }
            }
            std::vector<size_t> ref = { n };
            for (auto &r : rxs) ref = split_stl(col, r, ref);
            std::vector<size_t> lens(n), tmp(n);
            size_t m = unicode_pretok_split(f.k, cps.data(), fl.data(), n, lens.data(), tmp.data());
            lens.resize(m);
            if (lens != ref) { if (bad++ < 3) { printf("%s mismatch:", f.name); for (auto c : cps) printf(" %X", c); printf("\n  ref"); for (auto x : ref) printf(" %zu", x); printf("\n  got"); for (auto x : lens) printf(" %zu", x); printf("\n"); } }
        }
        printf("%s: %s: %d of %d random strings split differently from std::regex\n", bad ? "FAIL" : "PASS", f.name, bad, N_STRINGS);
    }
}
