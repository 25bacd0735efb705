/*
 * Unicode for the byte-level BPE tokenizer: code point flags from a table
 * generated at build time from Debian's unicode-data (mk/unicode.mk), the
 * lenient UTF-8 decoding llama.cpp applies to tokenizer input, GPT-2's
 * byte <-> code point map, and the pre-tokenizers (the regex families of
 * llama.cpp's llm_tokenizer_bpe) that cut text into words before merging.
 */
#ifndef PICOLM_UNICODE_H
#define PICOLM_UNICODE_H
#include <stddef.h>
#include <stdint.h>

/* llama.cpp's unicode_cpt_flags bits: one general category group, plus
   White_Space (PropList.txt) */
enum {
    UCD_UNDEFINED = 0x001, UCD_NUMBER = 0x002, UCD_LETTER = 0x004, UCD_SEPARATOR = 0x008,
    UCD_MARK = 0x010, UCD_PUNCT = 0x020, UCD_SYMBOL = 0x040, UCD_CONTROL = 0x080,
    UCD_WHITESPACE = 0x100
};

/* flags of a code point; UCD_UNDEFINED above U+10FFFF */
uint16_t unicode_flags(uint32_t cp);
/* "15.0.0": the Unicode version the table was generated from */
const char *unicode_version(void);

/* One code point from s[0..n) (n > 0), as llama.cpp's unicode_cpts_from_utf8
   reads it: lead byte decides the length, continuation bytes are checked,
   overlongs and surrogates are accepted; anything else is U+FFFD for one
   byte.  (llama.cpp throws on a decoded value above U+10FFFF; here it is
   U+FFFD for the whole sequence.)  Returns the bytes consumed. */
size_t unicode_decode_utf8(const unsigned char *s, size_t n, uint32_t *cp);
/* UTF-8 of cp (<= U+10FFFF) into out[4]; returns the length */
size_t unicode_encode_utf8(uint32_t cp, char *out);

/* GPT-2 byte-to-unicode map: printable Latin-1 bytes stand for themselves,
   the other 68 bytes for U+0100.. in byte order. */
uint32_t unicode_byte_to_cp(uint8_t b);
/* inverse: the byte, or -1 when cp is not one of the 256 */
int unicode_cp_to_byte(uint32_t cp);

/* Pre-tokenizer families (the regexes named in llama-vocab.cpp) */
typedef enum {
    PRETOK_DEFAULT, /* "[\p{P}$+<=>^~|]+", then GPT-2's, then "\p{N}+", then "[0-9][0-9][0-9]" */
    PRETOK_GPT2,    /* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
    PRETOK_LLAMA3,  /* (?i:'s|..)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
    PRETOK_QWEN2,   /* the same with \p{N} (single digits) */
    PRETOK_SMOLLM   /* "\p{N}", then GPT-2's */
} pretok_kind;

/* Cut cps[0..n) into words.  fl[i] = unicode_flags(cps[i]).  lens and tmp have
   room for n entries each; the word lengths (in code points, all > 0, summing
   to n) end up in lens.  Returns the number of words. */
size_t unicode_pretok_split(pretok_kind kind, const uint32_t *cps, const uint16_t *fl, size_t n, size_t *lens, size_t *tmp);

#endif
