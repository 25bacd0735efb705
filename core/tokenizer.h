/*
 * Tokenizers built from GGUF metadata, token for token equal to llama.cpp's:
 * SentencePiece BPE ("SPM", tokenizer.ggml.model = "llama": special-token
 * partition, dummy prefix, score-driven merges, byte fallback) and byte-level
 * BPE ("gpt2": the same partition, the pre-tokenizer tokenizer.ggml.pre
 * names, GPT-2's byte map, merges by rank from tokenizer.ggml.merges).  A
 * built tokenizer is immutable: encode and the lookups may run concurrently
 * from several threads.
 */
#ifndef PICOLM_TOKENIZER_H
#define PICOLM_TOKENIZER_H
#include <stddef.h>
#include <stdint.h>
#include "gguf.h"
#include "picolm/plugin.h"

typedef struct tokenizer tokenizer;

/* GGUF token types (tokenizer.ggml.token_type) */
enum {
    TOKEN_TYPE_UNDEFINED = 0, TOKEN_TYPE_NORMAL = 1, TOKEN_TYPE_UNKNOWN = 2,
    TOKEN_TYPE_CONTROL = 3, TOKEN_TYPE_USER_DEFINED = 4, TOKEN_TYPE_UNUSED = 5,
    TOKEN_TYPE_BYTE = 6
};

/* Build from the file's tokenizer.ggml.* keys.  Everything is copied: the
   tokenizer stays valid after the gguf_file is closed.  0 on success, else
   non-zero with a message in err. */
int build_tokenizer(tokenizer **out, const gguf_file *f, char *err, size_t errlen);
void free_tokenizer(tokenizer *t);

/* Tokenize len bytes of text (any bytes; invalid UTF-8 falls back to byte
   tokens in SPM, and reads as U+FFFD in BPE, as in llama.cpp).  add_bos:
   prepend BOS (pass tokenizer_add_bos() for the model's own choice).  parse_special: control/unknown token texts
   in the input ("<s>", "</s>", "<|user|>") become their ids; user-defined
   tokens are always matched, as in llama.cpp.  EOS is never appended (see
   tokenizer_add_eos).  Returns the number of tokens written (<= cap), or
   -needed when cap is too small (nothing meaningful in out), or -1 on error
   (no BOS token, a byte with neither a byte token nor <unk>, input > 256 MiB).
   The count never exceeds 4 * len + 4, so a buffer that large always fits;
   sizing with cap = 0 works too, except that "-1" is then ambiguous when
   exactly one token is needed (retry with cap = 1). */
int tokenizer_encode(const tokenizer *t, const char *text, size_t len, int add_bos,
                     int parse_special, int32_t *out, int cap);

/* Decoded bytes of a token, NOT NUL-terminated (llama.cpp's token_to_piece,
   special = false): SPM "▁" -> " ", <0xHH> -> that byte; BPE: each GPT-2
   code point -> its byte (a piece may end inside a UTF-8 character: stream
   through tokenizer_utf8_prefix); control/unknown/unused tokens -> "",
   user-defined -> their text.  An out-of-range id gives "" with *len = 0. */
const char *tokenizer_piece(const tokenizer *t, int32_t id, size_t *len);

/* Whole-text decoding, llama.cpp's llama_detokenize with remove_special and
   unparse_special false: the pieces back to back, the first one without its
   dummy-prefix space (SPM), then, where the vocabulary says so
   (tokenizer_clean_spaces), " ?" " !" " ." " ," " ' " " 's" " 'm" " 're"
   " 've" lose their space.  Returns the length (no NUL), -needed when cap is
   too small, or -1 on bad arguments.  Streaming uses tokenizer_piece. */
int tokenizer_detokenize(const tokenizer *t, const int32_t *ids, int n, char *out, int cap);

int32_t tokenizer_n_vocab(const tokenizer *t);
int32_t tokenizer_bos(const tokenizer *t);   /* -1 when absent */
int32_t tokenizer_eos(const tokenizer *t);   /* -1 when absent */
int32_t tokenizer_unk(const tokenizer *t);   /* -1 when absent */
/* tokenizer.ggml.add_bos_token; when absent llama.cpp's default: SPM 1,
   BPE 1 for the Llama 3 pre-tokenizers, else 0 */
int tokenizer_add_bos(const tokenizer *t);
int tokenizer_add_eos(const tokenizer *t);   /* tokenizer.ggml.add_eos_token (default 0) */
int32_t tokenizer_token_type(const tokenizer *t, int32_t id); /* TOKEN_TYPE_*, -1 if out of range */
/* Raw vocabulary text of a token (with "▁", "<0x0A>" etc.), NOT NUL-terminated. */
const char *tokenizer_text(const tokenizer *t, int32_t id, size_t *len);
/* exact token text -> id, or -1 (the last id wins for duplicate texts) */
int32_t tokenizer_find(const tokenizer *t, const char *text, size_t len);
/* The vocabulary as sampler plugins see it; lives as long as t. */
const picolm_vocab *tokenizer_vocab(const tokenizer *t);
int tokenizer_is_bpe(const tokenizer *t);       /* "gpt2" vocabulary */
/* llama.cpp's clean_up_tokenization_spaces for this vocabulary (BPE only;
   tokenizer_detokenize applies it, streamed pieces never) */
int tokenizer_clean_spaces(const tokenizer *t);

/* End of generation, as llama.cpp's EOG set: EOS, EOT, EOM, the FIM
   pad/repo/file-separator tokens and every token named <|eot_id|>,
   <|im_end|>, <|end|>, <end_of_turn>, <|endoftext|>, <|eom_id|>, <EOT>,
   <|end_of_text|>, ... (found by text when the file gives no id; they are
   control tokens from then on). */
int tokenizer_is_eog(const tokenizer *t, int32_t id);
/* the EOG ids, ascending; returns their count */
int32_t tokenizer_eog_ids(const tokenizer *t, const int32_t **ids);

/* Streaming helper: length of the longest prefix of buf that does not end
   inside an (incomplete) UTF-8 character.  Bytes that cannot start or
   continue a valid sequence are never held back. */
size_t tokenizer_utf8_prefix(const char *buf, size_t len);

#endif
