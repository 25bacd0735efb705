/*
 * Two tokenizers over one vocabulary layout, equal to llama.cpp's.
 *
 * SentencePiece BPE ("llama", llm_tokenizer_spm):
 *   1. split the input around special-token texts (tokenizer_st_partition):
 *      longest texts first, leftmost non-overlapping matches;
 *   2. each text fragment gets a " " prefix when add_space_prefix is set and
 *      it starts the input or follows a special token, then ' ' -> U+2581;
 *   3. split into UTF-8 characters (by lead byte only, like llama.cpp);
 *   4. repeatedly merge the adjacent pair whose concatenation is a token of
 *      highest score (ties: leftmost), via a binary heap with lazy deletion;
 *   5. symbols that are not tokens become <0xHH> byte tokens (else <unk>).
 *
 * Byte-level BPE ("gpt2", llm_tokenizer_bpe):
 *   1. the same special-token partition;
 *   2. each text fragment is cut into words by the pre-tokenizer that
 *      tokenizer.ggml.pre names (core/unicode.c), and every byte of a word
 *      is written as its GPT-2 code point;
 *   3. per word, repeatedly merge the adjacent pair of lowest rank in
 *      tokenizer.ggml.merges (ties: leftmost), with the same heap; Llama 3
 *      ("ignore_merges") first takes a word that is a token as a whole;
 *   4. a symbol that is not a token falls back to its single bytes that are.
 * Both also find the end-of-generation tokens and the control-looking
 * tokens by llama.cpp's rules (find_roles).
 */
#include "tokenizer.h"
#include "unicode.h"
#include "util.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOK_MAX_INPUT ((size_t)256 << 20)
#define TOK_MAX_VOCAB (1 << 24)

/* hash table entry: the id and the hash's high bits (most probes of a
   miss or a collision end without touching the text) */
typedef struct { int32_t id; uint32_t tag; } slot;

struct tokenizer {
    int32_t n_vocab;
    char *text;          /* all token texts, back to back */
    size_t *text_off;    /* n_vocab + 1 offsets */
    float *score;
    int32_t *type;
    uint8_t *rstrip;     /* per token: eat whitespace after it (phi-3) */
    slot *ht;            /* open addressing: token ids, -1 = empty */
    size_t ht_mask;
    size_t max_len;      /* longest token text */
    int32_t byte_tok[256];
    int32_t bos, eos, unk, pad;
    int add_bos, add_eos, add_space_prefix;
    int32_t *special;    /* candidates for partition, longest text first */
    int32_t n_special;
    char *piece;         /* decoded pieces, back to back */
    const char **piece_ptr;
    uint32_t *piece_len;
    picolm_vocab vocab;
    int32_t *eog;        /* end-of-generation ids, ascending */
    int32_t n_eog;
    /* byte-level BPE only */
    int is_bpe;
    pretok_kind pre;
    int ignore_merges, clean_spaces;
    char byte_enc[256][2]; /* GPT-2 code point of each byte, as UTF-8 */
    uint8_t byte_enc_len[256];
    char *merge_text;    /* "left right" texts back to back; rank = index */
    size_t *merge_off;   /* n_merges + 1 offsets */
    uint32_t *merge_sp;  /* where the separating space is */
    slot *mht;           /* open addressing over (left, right): merge ranks */
    size_t mht_mask;
    int32_t n_merges;
};

/* ------------------------------------------------------------------------ */

/* murmur3's finalizer: every input bit reaches the low bits the tables use */
static inline uint64_t mix64(uint64_t h) {
    h ^= h >> 33; h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33; h *= 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 33);
}

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) { h ^= (uint8_t)s[i]; h *= 1099511628211ull; }
    return mix64(h);
}

static inline const char *tok_text(const tokenizer *t, int32_t id, size_t *n) {
    *n = t->text_off[id + 1] - t->text_off[id];
    return t->text + t->text_off[id];
}

int32_t tokenizer_find(const tokenizer *t, const char *s, size_t n) {
    if (!t || (!s && n) || n > t->max_len) return -1;
    const uint64_t h = hash_bytes(s, n);
    for (size_t i = h & t->ht_mask;; i = (i + 1) & t->ht_mask) {
        int32_t id = t->ht[i].id;
        if (id < 0) return -1;
        if (t->ht[i].tag != (uint32_t)(h >> 32)) continue;
        size_t m;
        const char *p = tok_text(t, id, &m);
        if (m == n && memcmp(p, s, n) == 0) return id;
    }
}

/* Later ids replace earlier ones with the same text, as llama.cpp's map. */
static void ht_insert(tokenizer *t, int32_t id) {
    size_t n;
    const char *s = tok_text(t, id, &n);
    const uint64_t h = hash_bytes(s, n);
    const slot sl = { id, (uint32_t)(h >> 32) };
    for (size_t i = h & t->ht_mask;; i = (i + 1) & t->ht_mask) {
        int32_t o = t->ht[i].id;
        if (o < 0) { t->ht[i] = sl; return; }
        if (t->ht[i].tag != sl.tag) continue;
        size_t m;
        const char *p = tok_text(t, o, &m);
        if (m == n && memcmp(p, s, n) == 0) { t->ht[i] = sl; return; }
    }
}

/* Strict UTF-8 validation (no overlongs, surrogates or > U+10FFFF). */
static int utf8_valid(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) { i++; continue; }
        size_t k; unsigned cp;
        if (c >= 0xC2 && c <= 0xDF) { k = 1; cp = c & 0x1F; }
        else if (c >= 0xE0 && c <= 0xEF) { k = 2; cp = c & 0x0F; }
        else if (c >= 0xF0 && c <= 0xF4) { k = 3; cp = c & 0x07; }
        else return 0;
        if (n - i <= k) return 0;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (s[i + j] & 0x3F);
        }
        if ((k == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
            (k == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
            return 0;
        i += k + 1;
    }
    return 1;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* "<0xHH>" -> HH, else -1 */
static int parse_byte_token(const char *s, size_t n) {
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    int h = hexval(s[3]), l = hexval(s[4]);
    return (h < 0 || l < 0) ? -1 : h * 16 + l;
}

void free_tokenizer(tokenizer *t) {
    if (!t) return;
    free(t->text); free(t->text_off); free(t->score); free(t->type);
    free(t->rstrip); free(t->ht); free(t->special); free(t->piece);
    free(t->piece_ptr); free(t->piece_len); free(t->eog);
    free(t->merge_text); free(t->merge_off); free(t->merge_sp); free(t->mht);
    free(t);
}

#define FAIL(...) do { snprintf(err, errlen, __VA_ARGS__); goto fail; } while (0)

/* Optional token id key: absent -> keep *id; present -> must be in range. */
static int get_id(const gguf_file *f, const char *key, int32_t n_vocab, int32_t *id,
                  char *err, size_t errlen) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) return 0;
    int64_t v;
    if (gguf_get_i64(f, key, &v) != 0) {
        return pl_fail(err, errlen, "tokenizer: %s has type %s, expected an integer", key,
                 gguf_vtype_name(kv->type));
    }
    if (v < 0 || v >= n_vocab) {
        return pl_fail(err, errlen, "tokenizer: %s = %lld is outside the vocabulary (0..%d)", key,
                 (long long)v, (int)n_vocab - 1);
    }
    *id = (int32_t)v;
    return 0;
}

static int get_flag(const gguf_file *f, const char *key, int *out, char *err, size_t errlen) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) return 0;
    int v;
    if (gguf_get_bool(f, key, &v) != 0) {
        return pl_fail(err, errlen, "tokenizer: %s has type %s, expected bool", key,
                 gguf_vtype_name(kv->type));
    }
    *out = v != 0;
    return 0;
}

/* Contains needle, ASCII case-insensitively. */
static int icontains(const char *s, size_t n, const char *needle) {
    size_t m = strlen(needle);
    for (size_t i = 0; i + m <= n; i++) {
        size_t j = 0;
        while (j < m) {
            char c = s[i + j];
            if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
            if (c != needle[j]) break;
            j++;
        }
        if (j == m) return 1;
    }
    return 0;
}

typedef struct { size_t len; int32_t id; } len_id;

static int cmp_special(const void *a, const void *b) {
    const len_id *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* ------------------------------------------------------------------------ */
/* Byte-level BPE: pre-tokenizer names and merges                             */
/* ------------------------------------------------------------------------ */

/* tokenizer.ggml.pre -> regex family and llama.cpp's per-name flags
   (llama_vocab::impl::load).  Names whose llama.cpp handling needs more than
   these (other regexes, separator tokens, lstrip) are not listed: an
   unknown name is an error, never a silent fallback. */
typedef struct { const char *name; pretok_kind kind; uint8_t ignore_merges, add_bos, clean_spaces; } pre_info;
static const pre_info pre_table[] = {
    { "default", PRETOK_DEFAULT, 0, 0, 1 },
    { "llama3", PRETOK_LLAMA3, 1, 1, 1 }, { "llama-v3", PRETOK_LLAMA3, 1, 1, 1 }, { "llama-bpe", PRETOK_LLAMA3, 1, 1, 1 },
    { "falcon3", PRETOK_LLAMA3, 1, 1, 1 }, { "falcon-h1", PRETOK_LLAMA3, 1, 1, 1 }, { "pixtral", PRETOK_LLAMA3, 1, 1, 1 },
    { "midm-2.0", PRETOK_LLAMA3, 1, 1, 1 }, { "lfm2", PRETOK_LLAMA3, 1, 1, 1 },
    { "dbrx", PRETOK_LLAMA3, 0, 0, 1 }, { "smaug-bpe", PRETOK_LLAMA3, 0, 0, 1 },
    { "gpt-2", PRETOK_GPT2, 0, 0, 1 }, { "phi-2", PRETOK_GPT2, 0, 0, 1 }, { "jina-es", PRETOK_GPT2, 0, 0, 1 },
    { "jina-de", PRETOK_GPT2, 0, 0, 1 }, { "gigachat", PRETOK_GPT2, 0, 0, 1 }, { "a.x-4.0", PRETOK_GPT2, 0, 0, 1 },
    { "mellum", PRETOK_GPT2, 0, 0, 1 }, { "exaone4", PRETOK_GPT2, 0, 0, 1 }, { "mpt", PRETOK_GPT2, 0, 0, 1 },
    { "olmo", PRETOK_GPT2, 0, 0, 1 }, { "jais", PRETOK_GPT2, 0, 0, 1 }, { "trillion", PRETOK_GPT2, 0, 0, 0 },
    { "granite-docling", PRETOK_GPT2, 0, 0, 0 },
    { "qwen2", PRETOK_QWEN2, 0, 0, 0 }, { "deepseek-r1-qwen", PRETOK_QWEN2, 0, 0, 0 }, { "kormo", PRETOK_QWEN2, 0, 0, 0 },
    { "hunyuan", PRETOK_QWEN2, 0, 0, 0 }, { "megrez", PRETOK_QWEN2, 0, 0, 1 }, { "stablelm2", PRETOK_QWEN2, 0, 0, 1 },
    { "smollm", PRETOK_SMOLLM, 0, 0, 0 }, { "command-r", PRETOK_SMOLLM, 0, 0, 0 }, { "starcoder", PRETOK_SMOLLM, 0, 0, 1 },
    { "refact", PRETOK_SMOLLM, 0, 0, 1 }, { "codeshell", PRETOK_SMOLLM, 0, 0, 1 }, { "exaone", PRETOK_SMOLLM, 0, 0, 1 },
    { "minerva-7b", PRETOK_SMOLLM, 0, 0, 1 },
};

/* the n strings back to back in blob; off[0..n] their offsets */
static void pack_strs(const gguf_str *v, uint64_t n, char *blob, size_t *off) {
    size_t o = 0;
    for (uint64_t i = 0; i < n; i++) {
        off[i] = o;
        if (v[i].len) memcpy(blob + o, v[i].ptr, v[i].len);
        o += v[i].len;
    }
    off[n] = o;
}

static inline uint64_t pair_hash(const char *l, size_t ln, const char *r, size_t rn) {
    return mix64(hash_bytes(l, ln) * 0x9E3779B97F4A7C15ull + hash_bytes(r, rn));
}

/* rank of the merge (l, r), or -1 */
static int32_t merge_rank(const tokenizer *t, const char *l, size_t ln, const char *r, size_t rn) {
    const uint64_t h = pair_hash(l, ln, r, rn);
    for (size_t i = h & t->mht_mask;; i = (i + 1) & t->mht_mask) {
        int32_t m = t->mht[i].id;
        if (m < 0) return -1;
        if (t->mht[i].tag != (uint32_t)(h >> 32)) continue;
        const char *p = t->merge_text + t->merge_off[m];
        size_t sp = t->merge_sp[m], len = t->merge_off[m + 1] - t->merge_off[m];
        if (sp == ln && len - sp - 1 == rn && !memcmp(p, l, ln) && !memcmp(p + sp + 1, r, rn)) return m;
    }
}

/* The pre-tokenizer, llama.cpp's defaults that follow from it, the byte map
   and the merges ("left right", split at the first space after the first
   byte; a repeated pair keeps its first rank). */
static int build_bpe(tokenizer *t, const gguf_file *f, char *err, size_t errlen) {
    gguf_str pre = { 0 };
    const gguf_kv *kv_pre = gguf_find_kv(f, "tokenizer.ggml.pre");
    if (kv_pre && gguf_get_str(f, "tokenizer.ggml.pre", &pre) != 0)
        return pl_fail(err, errlen, "tokenizer: tokenizer.ggml.pre is not a string");
    const pre_info *pi = kv_pre ? NULL : &pre_table[0]; /* absent: "default", as llama.cpp */
    for (size_t i = 0; !pi && i < sizeof pre_table / sizeof pre_table[0]; i++)
        if (gguf_str_eq(pre, pre_table[i].name)) pi = &pre_table[i];
    if (!pi)
        return pl_fail(err, errlen, "tokenizer: unknown pre-tokenizer tokenizer.ggml.pre = \"%.*s\" (known: llama3, llama-bpe, qwen2, gpt-2, smollm, default, ...)",
                       (int)(pre.len > 60 ? 60 : pre.len), pre.ptr);
    t->is_bpe = 1;
    t->pre = pi->kind;
    t->ignore_merges = pi->ignore_merges;
    t->add_bos = pi->add_bos;
    t->clean_spaces = pi->clean_spaces;
    for (int b = 0; b < 256; b++) t->byte_enc_len[b] = (uint8_t)unicode_encode_utf8(unicode_byte_to_cp((uint8_t)b), t->byte_enc[b]);

    const gguf_kv *kv = gguf_find_kv(f, "tokenizer.ggml.merges");
    if (!kv) return pl_fail(err, errlen, "tokenizer: tokenizer.ggml.merges is missing (a \"gpt2\" vocabulary needs its BPE merges)");
    if (kv->type != GGUF_ARRAY || kv->v.arr.type != GGUF_STRING || (kv->v.arr.n && !kv->v.arr.strs))
        return pl_fail(err, errlen, "tokenizer: tokenizer.ggml.merges is not an array of strings");
    uint64_t n = kv->v.arr.n;
    if (n > TOK_MAX_VOCAB) return pl_fail(err, errlen, "tokenizer: %llu merges is more than the %d supported", (unsigned long long)n, TOK_MAX_VOCAB);
    size_t total = 0;
    for (uint64_t i = 0; i < n; i++) {
        gguf_str m = kv->v.arr.strs[i];
        if ((m.len && !m.ptr) || m.len > 65536) return pl_fail(err, errlen, "tokenizer: merge %llu is malformed", (unsigned long long)i);
        total += m.len;
    }
    size_t hs = 1;
    while (hs < 2 * n + 2) hs <<= 1;
    t->merge_text = malloc(total ? total : 1);
    t->merge_off = malloc((n + 1) * sizeof *t->merge_off);
    t->merge_sp = malloc((n ? n : 1) * sizeof *t->merge_sp);
    t->mht = malloc(hs * sizeof *t->mht);
    if (!t->merge_text || !t->merge_off || !t->merge_sp || !t->mht)
        return pl_fail(err, errlen, "tokenizer: out of memory for %llu merges", (unsigned long long)n);
    memset(t->mht, 0xff, hs * sizeof *t->mht);
    t->mht_mask = hs - 1;
    t->n_merges = (int32_t)n;
    pack_strs(kv->v.arr.strs, n, t->merge_text, t->merge_off);
    for (uint64_t i = 0; i < n; i++) {
        gguf_str m = kv->v.arr.strs[i];
        const char *sp = m.len > 1 ? memchr(m.ptr + 1, ' ', m.len - 1) : NULL;
        t->merge_sp[i] = sp ? (uint32_t)(sp - m.ptr) : 0;
        if (!sp) continue; /* llama.cpp ranks it as ("", ""): it can never apply */
        size_t ln = (size_t)(sp - m.ptr), rn = m.len - ln - 1;
        /* insert unless the pair is there already (one probe walk) */
        const uint64_t h = pair_hash(m.ptr, ln, sp + 1, rn);
        size_t k = h & t->mht_mask;
        for (; t->mht[k].id >= 0; k = (k + 1) & t->mht_mask) {
            int32_t o = t->mht[k].id;
            if (t->mht[k].tag == (uint32_t)(h >> 32) && t->merge_sp[o] == ln &&
                t->merge_off[o + 1] - t->merge_off[o] == m.len && !memcmp(t->merge_text + t->merge_off[o], m.ptr, m.len))
                break;
        }
        if (t->mht[k].id < 0) t->mht[k] = (slot){ (int32_t)i, (uint32_t)(h >> 32) };
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Control-looking tokens and the end-of-generation set (llama.cpp's rules)   */
/* ------------------------------------------------------------------------ */

/* llama.cpp finds these roles by text when the file gives no id, and makes
   every token it finds a control token (so plain text never matches it and
   it decodes to nothing). */
static const char *const eot_texts[] = { "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
    "<|end_of_text|>", "<EOT>", "_<EOT>", "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>",
    "<end_of_utterance>", NULL };
static const char *const eom_texts[] = { "<|eom_id|>", NULL };
static const char *const fim_pre_texts[] = { "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
    "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>", "<PRE>", "\xE2\x96\x81<PRE>", "<|code_prefix|>", NULL };
static const char *const fim_suf_texts[] = { "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
    "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "hole\xEF\xBD\x9C>", "<SUF>", "\xE2\x96\x81<SUF>", "<|code_suffix|>", NULL };
static const char *const fim_mid_texts[] = { "<|fim_middle|>", "<fim-middle>", "<fim_middle>",
    "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>", "<MID>", "\xE2\x96\x81<MID>", "<|code_middle|>", NULL };
static const char *const fim_pad_texts[] = { "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", NULL };
static const char *const fim_rep_texts[] = { "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", NULL };
static const char *const fim_sep_texts[] = { "<|file_sep|>", NULL };
static const char *const eog_texts[] = { "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
    "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>", "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
    "[e~[", NULL };
/* gpt-oss: always rendered */
static const char *const shown_texts[] = { "<|channel|>", "<|message|>", "<|start|>", "<|constrain|>", NULL };

static int32_t find_str(const tokenizer *t, const char *s) { return tokenizer_find(t, s, strlen(s)); }

/* The role's id from its key, else the first of its texts in the vocabulary
   (llama.cpp takes whichever its hash map yields first; here: the lowest
   id), made a control token.  -1 when neither. */
static int32_t find_role(tokenizer *t, const gguf_file *f, const char *key, const char *key_old, const char *const *texts) {
    int32_t id = -1;
    char tmp[8]; /* a bad id is ignored, as llama.cpp only warns */
    if (get_id(f, key, t->n_vocab, &id, tmp, sizeof tmp)) id = -1;
    if (id < 0 && key_old && get_id(f, key_old, t->n_vocab, &id, tmp, sizeof tmp)) id = -1;
    if (id >= 0) return id;
    for (size_t k = 0; texts[k]; k++) {
        int32_t c = find_str(t, texts[k]);
        if (c >= 0 && (id < 0 || c < id)) id = c;
    }
    if (id >= 0) t->type[id] = TOKEN_TYPE_CONTROL;
    return id;
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static int find_roles(tokenizer *t, const gguf_file *f) {
    int32_t eot = find_role(t, f, "tokenizer.ggml.eot_token_id", NULL, eot_texts);
    int32_t eom = find_role(t, f, "tokenizer.ggml.eom_token_id", NULL, eom_texts);
    find_role(t, f, "tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.prefix_token_id", fim_pre_texts);
    find_role(t, f, "tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.suffix_token_id", fim_suf_texts);
    find_role(t, f, "tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.middle_token_id", fim_mid_texts);
    int32_t cand[64];
    int n = 0;
    cand[n++] = find_role(t, f, "tokenizer.ggml.fim_pad_token_id", NULL, fim_pad_texts);
    cand[n++] = find_role(t, f, "tokenizer.ggml.fim_rep_token_id", NULL, fim_rep_texts);
    cand[n++] = find_role(t, f, "tokenizer.ggml.fim_sep_token_id", NULL, fim_sep_texts);
    for (size_t k = 0; eog_texts[k]; k++) {
        int32_t id = find_str(t, eog_texts[k]);
        if (id >= 0) t->type[id] = TOKEN_TYPE_CONTROL;
        cand[n++] = id;
    }
    for (size_t k = 0; shown_texts[k]; k++) {
        int32_t id = find_str(t, shown_texts[k]);
        if (id >= 0) t->type[id] = TOKEN_TYPE_USER_DEFINED;
    }
    cand[n++] = t->eos;
    cand[n++] = eot;
    cand[n++] = eom;
    /* with <|tool_response>, </s> is an ordinary piece again (gemma4, paddleocr) */
    const int32_t s_end = find_str(t, "</s>");
    if (s_end >= 0 && find_str(t, "<|tool_response>") >= 0 && s_end != t->eos) {
        for (int i = 0; i < n; i++) if (cand[i] == s_end) cand[i] = -1;
        t->type[s_end] = TOKEN_TYPE_NORMAL;
    }
    /* o200k_harmony: with <|return|> and <|call|>, <|end|> is not the end */
    int32_t ret = find_str(t, "<|return|>"), call = find_str(t, "<|call|>"), end = find_str(t, "<|end|>");
    if (ret >= 0 && call >= 0 && end >= 0) {
        for (int i = 0; i < n; i++) if (cand[i] == end) cand[i] = -1;
        t->type[end] = TOKEN_TYPE_USER_DEFINED;
    }
    t->eog = malloc(sizeof cand);
    if (!t->eog) return -1;
    for (int i = 0; i < n; i++) if (cand[i] >= 0) t->eog[t->n_eog++] = cand[i];
    qsort(t->eog, (size_t)t->n_eog, sizeof *t->eog, cmp_i32);
    int32_t m = 0; /* unique */
    for (int32_t i = 0; i < t->n_eog; i++) if (m == 0 || t->eog[m - 1] != t->eog[i]) t->eog[m++] = t->eog[i];
    t->n_eog = m;
    return 0;
}

/* Decoded bytes of token i (llama.cpp's token_to_piece with special =
   false) into d when it fits in room, else only counted: control, unknown, unused
   and undefined tokens give nothing, user-defined ones their text; SPM:
   U+2581 -> ' ', <0xHH> -> the byte; BPE: each code point -> its byte, and
   one outside the byte map becomes llama.cpp's "[UNK_BYTE_0x..<text>]". */
static size_t piece_of(const tokenizer *t, int32_t i, char *d, size_t room) {
    size_t len, m = 0;
    const char *s = tok_text(t, i, &len);
    const int32_t ty = t->type[i];
    /* decoding only shrinks a token, except for the rare marker below */
    if (room < len + 1) { d = NULL; room = 0; }
    if (ty == TOKEN_TYPE_USER_DEFINED) { if (d) memcpy(d, s, len); return len; }
    if (ty == TOKEN_TYPE_BYTE && !t->is_bpe) { if (d) d[0] = (char)parse_byte_token(s, len); return 1; }
    if (ty != TOKEN_TYPE_NORMAL) return 0;
    for (size_t j = 0; j < len;) {
        if (!t->is_bpe) {
            int sp = j + 3 <= len && memcmp(s + j, "\xE2\x96\x81", 3) == 0;
            if (d) d[m] = sp ? ' ' : s[j];
            m++;
            j += sp ? 3 : 1;
            continue;
        }
        uint32_t cp;
        size_t k = unicode_decode_utf8((const unsigned char *)s + j, len - j, &cp);
        int b = unicode_cp_to_byte(cp);
        if (b >= 0) {
            if (d) d[m] = (char)b;
            m++;
        } else {
            char mark[32];
            int ml = snprintf(mark, sizeof mark, "[UNK_BYTE_0x");
            for (size_t q = 0; q < k; q++) ml += snprintf(mark + ml, sizeof mark - (size_t)ml, "%02x", (uint8_t)s[j + q]);
            if (d && m + (size_t)ml + len + 1 <= room) {
                memcpy(d + m, mark, (size_t)ml); memcpy(d + m + ml, s, len); d[m + (size_t)ml + len] = ']';
            } else {
                d = NULL; /* too long for room: count on */
            }
            m += (size_t)ml + len + 1;
        }
        j += k;
    }
    return m;
}

int build_tokenizer(tokenizer **out, const gguf_file *f, char *err, size_t errlen) {
    char dummy[1];
    if (!err || !errlen) { err = dummy; errlen = sizeof dummy; }
    err[0] = 0;
    tokenizer *t = NULL;
    if (!out || !f) return pl_fail(err, errlen, "tokenizer: NULL argument");
    *out = NULL;

    gguf_str model;
    int r = gguf_get_str(f, "tokenizer.ggml.model", &model);
    if (r == -1) return pl_fail(err, errlen, "tokenizer: tokenizer.ggml.model is missing (no vocabulary in this file)");
    if (r != 0) return pl_fail(err, errlen, "tokenizer: tokenizer.ggml.model is not a string");
    const int is_bpe = gguf_str_eq(model, "gpt2");
    if (!is_bpe && !gguf_str_eq(model, "llama")) {
        return pl_fail(err, errlen, "tokenizer: unsupported tokenizer model \"%.*s\" (supported: \"llama\", SentencePiece, and \"gpt2\", byte-level BPE)",
                 (int)(model.len > 40 ? 40 : model.len), model.ptr);
    }

    t = calloc(1, sizeof *t);
    if (!t) return pl_fail(err, errlen, "tokenizer: out of memory");
    if (is_bpe && build_bpe(t, f, err, errlen)) goto fail;

    uint64_t n = 0, ns = 0, nt = 0;
    const gguf_kv *kv_tok = gguf_find_kv(f, "tokenizer.ggml.tokens");
    if (!kv_tok) FAIL("tokenizer: tokenizer.ggml.tokens is missing");
    if (kv_tok->type != GGUF_ARRAY || kv_tok->v.arr.type != GGUF_STRING || !kv_tok->v.arr.strs)
        FAIL("tokenizer: tokenizer.ggml.tokens is not an array of strings");
    n = kv_tok->v.arr.n;
    if (n == 0) FAIL("tokenizer: tokenizer.ggml.tokens is empty");
    if (n > TOK_MAX_VOCAB) FAIL("tokenizer: %llu tokens is more than the %d supported", (unsigned long long)n, TOK_MAX_VOCAB);
    t->n_vocab = (int32_t)n;

    /* scores and token types are optional (llama.cpp: 0.0 and NORMAL) */
    const gguf_kv *kv_sc = gguf_find_kv(f, "tokenizer.ggml.scores");
    if (kv_sc) {
        if (kv_sc->type != GGUF_ARRAY || kv_sc->v.arr.type != GGUF_FLOAT32)
            FAIL("tokenizer: tokenizer.ggml.scores is not an array of float32");
        ns = kv_sc->v.arr.n;
        if (ns != n) FAIL("tokenizer: tokenizer.ggml.scores has %llu entries but there are %llu tokens",
                          (unsigned long long)ns, (unsigned long long)n);
    }
    const gguf_kv *kv_ty = gguf_find_kv(f, "tokenizer.ggml.token_type");
    if (kv_ty) {
        if (kv_ty->type != GGUF_ARRAY || kv_ty->v.arr.type != GGUF_INT32)
            FAIL("tokenizer: tokenizer.ggml.token_type is not an array of int32");
        nt = kv_ty->v.arr.n;
        if (nt != n) FAIL("tokenizer: tokenizer.ggml.token_type has %llu entries but there are %llu tokens",
                          (unsigned long long)nt, (unsigned long long)n);
    }

    size_t total = 0;
    for (uint64_t i = 0; i < n; i++) {
        gguf_str s = kv_tok->v.arr.strs[i];
        if (s.len && !s.ptr) FAIL("tokenizer: token %llu has no data", (unsigned long long)i);
        if (s.len > 65536) FAIL("tokenizer: token %llu is %llu bytes long", (unsigned long long)i, (unsigned long long)s.len);
        if (!utf8_valid((const unsigned char *)s.ptr, s.len))
            FAIL("tokenizer: token %llu is not valid UTF-8", (unsigned long long)i);
        total += s.len;
    }

    t->text = malloc(total ? total : 1);
    t->text_off = malloc((n + 1) * sizeof *t->text_off);
    t->score = malloc(n * sizeof *t->score);
    t->type = malloc(n * sizeof *t->type);
    t->rstrip = calloc(n, 1);
    size_t ht_size = 1;
    while (ht_size < 2 * n) ht_size <<= 1;
    t->ht = malloc(ht_size * sizeof *t->ht);
    t->ht_mask = ht_size - 1;
    t->piece_ptr = malloc(n * sizeof *t->piece_ptr);
    t->piece_len = malloc(n * sizeof *t->piece_len);
    t->special = malloc(n * sizeof *t->special);
    if (!t->text || !t->text_off || !t->score || !t->type || !t->rstrip || !t->ht ||
        !t->piece_ptr || !t->piece_len || !t->special)
        FAIL("tokenizer: out of memory for %llu tokens", (unsigned long long)n);
    memset(t->ht, 0xff, ht_size * sizeof *t->ht);

    pack_strs(kv_tok->v.arr.strs, n, t->text, t->text_off);
    for (uint64_t i = 0; i < n; i++) {
        gguf_str s = kv_tok->v.arr.strs[i];
        if (s.len > t->max_len) t->max_len = s.len;
        float sc = 0.0f;
        if (kv_sc) memcpy(&sc, kv_sc->v.arr.data + 4 * i, 4);
        if (isnan(sc)) FAIL("tokenizer: score of token %llu is NaN", (unsigned long long)i);
        t->score[i] = sc;
        int32_t ty = TOKEN_TYPE_NORMAL;
        if (kv_ty) memcpy(&ty, kv_ty->v.arr.data + 4 * i, 4);
        if (ty < 0 || ty > TOKEN_TYPE_BYTE)
            FAIL("tokenizer: token %llu has invalid type %d (expected 0..6)", (unsigned long long)i, (int)ty);
        if (ty == TOKEN_TYPE_BYTE && parse_byte_token(s.ptr, s.len) < 0)
            FAIL("tokenizer: token %llu has type BYTE but its text is not <0xHH>", (unsigned long long)i);
        t->type[i] = ty;
    }
    for (int32_t i = 0; i < t->n_vocab; i++) ht_insert(t, i);

    /* special ids: llama.cpp's defaults for SPM (unk 0, BOS 1, EOS 2) and for
       BPE (BOS = EOS = 11, no unk), then the metadata */
    t->unk = is_bpe ? -1 : 0;
    t->bos = is_bpe ? (n > 11 ? 11 : -1) : (n > 1 ? 1 : -1);
    t->eos = is_bpe ? (n > 11 ? 11 : -1) : (n > 2 ? 2 : -1);
    t->pad = -1;
    if (get_id(f, "tokenizer.ggml.bos_token_id", t->n_vocab, &t->bos, err, errlen) ||
        get_id(f, "tokenizer.ggml.eos_token_id", t->n_vocab, &t->eos, err, errlen) ||
        get_id(f, "tokenizer.ggml.unknown_token_id", t->n_vocab, &t->unk, err, errlen))
        goto fail;
    /* padding is never used here; llama.cpp only warns about a bad one */
    {
        int32_t pad = -1;
        char tmp[8];
        if (get_id(f, "tokenizer.ggml.padding_token_id", t->n_vocab, &pad, tmp, sizeof tmp) == 0)
            t->pad = pad;
    }
    /* BPE: add_bos as the pre-tokenizer's entry says (Llama 3: yes) */
    if (!is_bpe) t->add_bos = 1;
    t->add_eos = 0;
    t->add_space_prefix = !is_bpe;
    if (get_flag(f, "tokenizer.ggml.add_bos_token", &t->add_bos, err, errlen) ||
        get_flag(f, "tokenizer.ggml.add_eos_token", &t->add_eos, err, errlen) ||
        get_flag(f, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix, err, errlen))
        goto fail;

    /* byte fallback: "<0xHH>", else the byte itself as a token */
    for (int b = 0; b < 256; b++) {
        char buf[8];
        snprintf(buf, sizeof buf, "<0x%02X>", b);
        int32_t id = tokenizer_find(t, buf, 6);
        if (id < 0) { buf[0] = (char)b; id = tokenizer_find(t, buf, 1); }
        t->byte_tok[b] = id;
    }

    if (find_roles(t, f)) FAIL("tokenizer: out of memory");

    /* special-token partition candidates: control, user-defined and unknown
       tokens, longest text first (stable by id for equal lengths) */
    t->n_special = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        int32_t ty = t->type[i];
        if ((ty == TOKEN_TYPE_CONTROL || ty == TOKEN_TYPE_USER_DEFINED || ty == TOKEN_TYPE_UNKNOWN) &&
            t->text_off[i + 1] > t->text_off[i])
            t->special[t->n_special++] = i;
    }
    if (t->n_special > 1) {
        len_id *tmp = malloc((size_t)t->n_special * sizeof *tmp);
        if (!tmp) FAIL("tokenizer: out of memory");
        for (int32_t i = 0; i < t->n_special; i++)
            tmp[i] = (len_id){ t->text_off[t->special[i] + 1] - t->text_off[t->special[i]], t->special[i] };
        qsort(tmp, (size_t)t->n_special, sizeof *tmp, cmp_special);
        for (int32_t i = 0; i < t->n_special; i++) t->special[i] = tmp[i].id;
        free(tmp);
    }

    /* llama.cpp gives phi-3 models' special tokens rstrip, by model name */
    gguf_str name;
    if (gguf_get_str(f, "general.name", &name) == 0 &&
        (icontains(name.ptr, name.len, "phi-3") || icontains(name.ptr, name.len, "phi3"))) {
        for (int32_t i = 0; i < t->n_special; i++) t->rstrip[t->special[i]] = 1;
        int32_t id = tokenizer_find(t, "</s>", 4);
        if (id >= 0) t->rstrip[id] = 1;
        static const char *const keep[] = { "<unk>", "<s>", "<|endoftext|>" };
        for (size_t k = 0; k < sizeof keep / sizeof keep[0]; k++) {
            id = tokenizer_find(t, keep[k], strlen(keep[k]));
            if (id >= 0) t->rstrip[id] = 0;
        }
    }

    /* decoded pieces: as long as the texts, unless a BPE token outside the
       byte map needs its marker; then once more with the size counted */
    size_t cap = total + 1, need = 0;
    for (int pass = 0; pass < 2; pass++) {
        free(t->piece);
        t->piece = malloc(cap);
        if (!t->piece) FAIL("tokenizer: out of memory");
        need = 0;
        for (int32_t i = 0; i < t->n_vocab; i++) {
            size_t room = need < cap ? cap - need : 0;
            t->piece_len[i] = (uint32_t)piece_of(t, i, t->piece + (need < cap ? need : 0), room);
            need += t->piece_len[i];
        }
        if (need <= cap) break;
        cap = need;
    }
    for (size_t i = 0, po = 0; i < (size_t)t->n_vocab; po += t->piece_len[i], i++) t->piece_ptr[i] = t->piece + po;

    t->vocab.n_vocab = t->n_vocab;
    t->vocab.bos_id = t->bos;
    t->vocab.eos_id = t->eos;
    t->vocab.piece = t->piece_ptr;
    t->vocab.piece_len = t->piece_len;
    t->vocab.token_type = t->type;
    *out = t;
    return 0;
fail:
    free_tokenizer(t);
    return -1;
}

/* ------------------------------------------------------------------------ */
/* Encoding                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct { int32_t *v; size_t n, cap; } ivec;

static int ivec_push(ivec *a, int32_t x) {
    if (a->n == a->cap) {
        size_t c = a->cap ? a->cap * 2 : 64;
        int32_t *p = realloc(a->v, c * sizeof *p);
        if (!p) return -1;
        a->v = p; a->cap = c;
    }
    a->v[a->n++] = x;
    return 0;
}

typedef struct { float score; int32_t left, right; uint32_t size; } bigram; /* 16 bytes */

/* heap order: higher score first, then the leftmost pair */
static inline int bg_before(const bigram *a, const bigram *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

typedef struct {
    const tokenizer *t;
    const char *s;
    int32_t *prev, *next;
    uint32_t *pos, *len;
    bigram *heap;
    size_t nheap;
} spm_session;

static void heap_push(spm_session *S, bigram b) {
    size_t i = S->nheap++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!bg_before(&b, &S->heap[p])) break;
        S->heap[i] = S->heap[p];
        i = p;
    }
    S->heap[i] = b;
}

/* Bottom-up pop: walk the hole down to a leaf along the better child, then
   sift the last element up from there (fewer comparisons on big heaps). */
static bigram heap_pop(spm_session *S) {
    bigram top = S->heap[0], last = S->heap[--S->nheap];
    size_t i = 0, n = S->nheap;
    if (n == 0) return top;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && bg_before(&S->heap[c + 1], &S->heap[c])) c++;
        S->heap[i] = S->heap[c];
        i = c;
    }
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!bg_before(&last, &S->heap[p])) break;
        S->heap[i] = S->heap[p];
        i = p;
    }
    S->heap[i] = last;
    return top;
}

/* A candidate merge of symbols l and r: SPM scores it by the merged token's
   score, BPE by the pair's rank in the merges (lower first, so negated;
   ranks < 2^24 are exact in a float). */
static void try_add_bigram(spm_session *S, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    uint32_t size = S->len[l] + S->len[r];
    float score;
    if (S->t->is_bpe) {
        int32_t rank = merge_rank(S->t, S->s + S->pos[l], S->len[l], S->s + S->pos[r], S->len[r]);
        if (rank < 0) return;
        score = -(float)rank;
    } else {
        int32_t id = tokenizer_find(S->t, S->s + S->pos[l], size);
        if (id < 0) return;
        score = S->t->score[id];
    }
    bigram b = { score, l, r, size };
    heap_push(S, b);
}

/* symbol arrays for words of up to n bytes */
static int session_alloc(spm_session *S, const tokenizer *t, size_t n) {
    *S = (spm_session){ .t = t };
    if (n == 0) n = 1;
    S->prev = malloc(n * sizeof *S->prev);
    S->next = malloc(n * sizeof *S->next);
    S->pos = malloc(n * sizeof *S->pos);
    S->len = malloc(n * sizeof *S->len);
    /* input is capped at TOK_MAX_INPUT, so offsets and sizes fit 32 bits */
    /* n-1 initial pairs + at most 2 per merge (< n merges) */
    S->heap = malloc(3 * n * sizeof *S->heap);
    return S->prev && S->next && S->pos && S->len && S->heap ? 0 : -1;
}

static void session_free(spm_session *S) {
    free(S->prev); free(S->next); free(S->pos); free(S->len); free(S->heap);
}

/* Split s[0..n) (n > 0) into UTF-8 characters (by lead byte only, like
   llama.cpp) and merge the best pair until none is left. */
static void merge_symbols(spm_session *S, const char *s, size_t n) {
    static const uint8_t lead_len[16] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4 };
    S->s = s;
    S->nheap = 0;
    int32_t ns = 0;
    for (size_t o = 0; o < n;) {
        size_t l = lead_len[(uint8_t)s[o] >> 4];
        if (l > n - o) l = n - o;
        S->pos[ns] = (uint32_t)o; S->len[ns] = (uint32_t)l;
        S->prev[ns] = ns - 1;
        o += l;
        S->next[ns] = o == n ? -1 : ns + 1;
        ns++;
    }
    for (int32_t i = 1; i < ns; i++) try_add_bigram(S, i - 1, i);

    while (S->nheap) {
        bigram b = heap_pop(S);
        int32_t l = b.left, r = b.right;
        /* stale: one side already merged away or grown */
        if (S->len[l] == 0 || S->len[r] == 0 || S->len[l] + S->len[r] != b.size) continue;
        S->len[l] += S->len[r];
        S->len[r] = 0;
        S->next[l] = S->next[r];
        if (S->next[r] >= 0) S->prev[S->next[r]] = l;
        try_add_bigram(S, S->prev[l], l);
        try_add_bigram(S, l, S->next[l]);
    }
}

/* Tokenize one escaped fragment s[0..n) into out. */
static int spm_tokenize(const tokenizer *t, const char *s, size_t n, ivec *out) {
    if (n == 0) return 0;
    spm_session S;
    int rc = -1;
    if (session_alloc(&S, t, n)) goto done;
    merge_symbols(&S, s, n);
    /* every merged symbol is a token; only unmerged characters can miss */
    for (int32_t i = 0; i != -1; i = S.next[i]) {
        int32_t id = tokenizer_find(t, s + S.pos[i], S.len[i]);
        if (id >= 0) { if (ivec_push(out, id)) goto done; continue; }
        for (uint32_t j = 0; j < S.len[i]; j++) {
            id = t->byte_tok[(uint8_t)s[S.pos[i] + j]];
            if (id < 0) id = t->unk;
            if (id < 0 || ivec_push(out, id)) goto done;
        }
    }
    rc = 0;
done:
    session_free(&S);
    return rc;
}

/* Byte-level BPE of one text fragment s[0..n) (n > 0) into out. */
static int bpe_tokenize(const tokenizer *t, const char *s, size_t n, ivec *out) {
    int rc = -1;
    spm_session S = { 0 };
    uint32_t *cps = malloc(n * sizeof *cps);
    uint16_t *fl = malloc(n * sizeof *fl);
    size_t *lens = malloc(n * sizeof *lens), *tmp = malloc(n * sizeof *tmp);
    char *enc = NULL;
    if (!cps || !fl || !lens || !tmp) goto done;
    size_t nc = 0;
    for (size_t o = 0; o < n; nc++) {
        o += unicode_decode_utf8((const unsigned char *)s + o, n - o, &cps[nc]);
        fl[nc] = unicode_flags(cps[nc]);
    }
    size_t nw = unicode_pretok_split(t->pre, cps, fl, nc, lens, tmp);

    /* each word's UTF-8 bytes become GPT-2 code points (1-2 bytes each):
       size the buffers for the longest */
    size_t max_bytes = 0, max_enc = 0, c0 = 0;
    for (size_t w = 0; w < nw; w++) {
        size_t nb = 0, ne = 0;
        for (size_t c = c0; c < c0 + lens[w]; c++) {
            char u[4];
            size_t k = unicode_encode_utf8(cps[c], u);
            nb += k;
            for (size_t q = 0; q < k; q++) ne += t->byte_enc_len[(uint8_t)u[q]];
        }
        if (nb > max_bytes) max_bytes = nb;
        if (ne > max_enc) max_enc = ne;
        c0 += lens[w];
    }
    enc = malloc(max_enc ? max_enc : 1);
    if (!enc || session_alloc(&S, t, max_bytes)) goto done;
    c0 = 0;
    for (size_t w = 0; w < nw; w++) {
        size_t m = 0;
        for (size_t c = c0; c < c0 + lens[w]; c++) {
            char u[4];
            size_t k = unicode_encode_utf8(cps[c], u);
            for (size_t q = 0; q < k; q++) {
                uint8_t b = (uint8_t)u[q];
                memcpy(enc + m, t->byte_enc[b], t->byte_enc_len[b]);
                m += t->byte_enc_len[b];
            }
        }
        c0 += lens[w];
        int32_t id = t->ignore_merges ? tokenizer_find(t, enc, m) : -1;
        if (id >= 0) { if (ivec_push(out, id)) goto done; continue; }
        merge_symbols(&S, enc, m);
        for (int32_t i = 0; i != -1; i = S.next[i]) {
            id = tokenizer_find(t, enc + S.pos[i], S.len[i]);
            if (id >= 0) { if (ivec_push(out, id)) goto done; continue; }
            /* not a token: its single bytes that are tokens, as llama.cpp */
            for (uint32_t j = 0; j < S.len[i]; j++) {
                id = tokenizer_find(t, enc + S.pos[i] + j, 1);
                if (id >= 0 && ivec_push(out, id)) goto done;
            }
        }
    }
    rc = 0;
done:
    session_free(&S);
    free(cps); free(fl); free(lens); free(tmp); free(enc);
    return rc;
}

typedef struct { size_t off, len; int32_t id; } fragment; /* id >= 0: a token */
typedef struct { fragment *v; size_t n, cap; } fvec;

static int fvec_push(fvec *a, size_t off, size_t len, int32_t id) {
    if (a->n == a->cap) {
        size_t c = a->cap ? a->cap * 2 : 16;
        fragment *p = realloc(a->v, c * sizeof *p);
        if (!p) return -1;
        a->v = p; a->cap = c;
    }
    a->v[a->n++] = (fragment){ off, len, id };
    return 0;
}

static inline int is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/* llama.cpp's tokenizer_st_partition: for each special token (longest
   first), cut its leftmost non-overlapping occurrences out of every
   remaining text fragment. */
static int partition(const tokenizer *t, const char *text, size_t len, int parse_special,
                     fvec *cur, fvec *nxt) {
    if (fvec_push(cur, 0, len, -1)) return -1;
    for (int32_t k = 0; k < t->n_special; k++) {
        int32_t id = t->special[k];
        if (!parse_special && t->type[id] != TOKEN_TYPE_USER_DEFINED) continue;
        size_t sl;
        const char *st = tok_text(t, id, &sl);
        int any = 0;
        for (size_t f = 0; f < cur->n && !any; f++)
            any = cur->v[f].id < 0 && cur->v[f].len >= sl && memmem(text + cur->v[f].off, cur->v[f].len, st, sl);
        if (!any) continue;
        nxt->n = 0;
        for (size_t f = 0; f < cur->n; f++) {
            fragment fr = cur->v[f];
            if (fr.id >= 0) { if (fvec_push(nxt, fr.off, fr.len, fr.id)) return -1; continue; }
            size_t off = fr.off, rem = fr.len;
            while (rem > 0) {
                const char *m = rem >= sl ? memmem(text + off, rem, st, sl) : NULL;
                if (!m) { if (fvec_push(nxt, off, rem, -1)) return -1; break; }
                size_t mo = (size_t)(m - text);
                size_t ll = mo - off; /* no lstrip attribute for SPM vocabularies */
                if (ll > 0 && fvec_push(nxt, off, ll, -1)) return -1;
                if (fvec_push(nxt, mo, sl, id)) return -1;
                size_t ro = mo + sl, rl = off + rem - ro;
                if (t->rstrip[id])
                    while (rl > 0 && is_space(text[ro])) { ro++; rl--; }
                off = ro; rem = rl;
            }
        }
        fvec tmp = *cur; *cur = *nxt; *nxt = tmp;
    }
    return 0;
}

int tokenizer_encode(const tokenizer *t, const char *text, size_t len, int add_bos,
                     int parse_special, int32_t *out, int cap) {
    if (!t || (!text && len) || len > TOK_MAX_INPUT || cap < 0 || (cap > 0 && !out)) return -1;
    ivec toks = { 0 };
    fvec cur = { 0 }, nxt = { 0 };
    char *buf = NULL;
    int rc = -1;

    if (add_bos) {
        if (t->bos < 0 || ivec_push(&toks, t->bos)) goto done;
    }
    if (len > 0) {
        if (partition(t, text, len, parse_special, &cur, &nxt)) goto done;
        size_t maxf = 0;
        for (size_t f = 0; f < cur.n; f++)
            if (cur.v[f].id < 0 && cur.v[f].len > maxf) maxf = cur.v[f].len;
        buf = malloc(3 * (maxf + 1));
        if (!buf) goto done;
        int prev_special = 1;
        for (size_t f = 0; f < cur.n; f++) {
            fragment fr = cur.v[f];
            if (fr.id >= 0) {
                if (ivec_push(&toks, fr.id)) goto done;
                prev_special = 1;
                continue;
            }
            if (t->is_bpe) {
                if (bpe_tokenize(t, text + fr.off, fr.len, &toks)) goto done;
                continue;
            }
            /* dummy prefix, then ' ' -> U+2581 */
            size_t m = 0;
            if (t->add_space_prefix && prev_special) { memcpy(buf, "\xE2\x96\x81", 3); m = 3; }
            for (size_t i = 0; i < fr.len; i++) {
                char c = text[fr.off + i];
                if (c == ' ') { memcpy(buf + m, "\xE2\x96\x81", 3); m += 3; }
                else buf[m++] = c;
            }
            if (spm_tokenize(t, buf, m, &toks)) goto done;
            prev_special = 0;
        }
    }
    if (toks.n > (size_t)INT_MAX) goto done;
    if (toks.n > (size_t)cap) { rc = -(int)toks.n; goto done; }
    if (toks.n) memcpy(out, toks.v, toks.n * sizeof *out);
    rc = (int)toks.n;
done:
    free(toks.v); free(cur.v); free(nxt.v); free(buf);
    return rc;
}

/* ------------------------------------------------------------------------ */

static size_t tokenizer_piece_len(const tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_vocab ? t->piece_len[id] : 0;
}

const char *tokenizer_piece(const tokenizer *t, int32_t id, size_t *len) {
    if (!t || id < 0 || id >= t->n_vocab) { if (len) *len = 0; return ""; }
    if (len) *len = t->piece_len[id];
    return t->piece_ptr[id];
}

/* llama.cpp's clean_up_tokenization_spaces, in place on s[0..n), pass by
   pass as llama_vocab::impl::detokenize does it (each pass reads the
   previous pass's text; the second writes a NUL after a removed space). */
static size_t clean_spaces(char *text, size_t n) {
    size_t total = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) { /* " ?", " !", " .", " ," */
        const char x = text[i];
        if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) total--;
        text[total++] = x;
    }
    const size_t n2 = total;
    total = n2 ? 1 : 0;
    for (size_t i = 1; i < n2; i++) { /* " ' " -> "'" */
        const char x = text[i];
        if (x == '\'' && i + 1 < n2 && text[i - 1] == ' ' && text[i + 1] == ' ') {
            total--;
            text[++i] = '\0';
        }
        text[total++] = x;
    }
    const size_t n3 = total;
    total = n3 ? 1 : 0;
    for (size_t i = 1; i < n3; i++) { /* " 's", " 'm", " 're", " 've" */
        const char x = text[i];
        if (text[i - 1] == ' ' && x == '\'' && i + 1 < n3) {
            const char x1 = text[i + 1];
            if (x1 == 's' || x1 == 'm') total--;
            else if (i + 2 < n3 && ((x1 == 'r' && text[i + 2] == 'e') || (x1 == 'v' && text[i + 2] == 'e'))) total--;
        }
        text[total++] = x;
    }
    return total;
}

int tokenizer_detokenize(const tokenizer *t, const int32_t *ids, int n, char *out, int cap) {
    if (!t || n < 0 || (n && !ids) || cap < 0 || (cap && !out)) return -1;
    size_t total = 0;
    for (int i = 0; i < n; i++) total += tokenizer_piece_len(t, ids[i]);
    if (total > (size_t)INT_MAX) return -1;
    char *buf = malloc(total ? total : 1);
    if (!buf) return -1;
    size_t m = 0;
    for (int i = 0; i < n; i++) {
        size_t l;
        const char *p = tokenizer_piece(t, ids[i], &l);
        /* the first piece loses one leading space where a dummy prefix was added */
        if (i == 0 && t->add_space_prefix && l && p[0] == ' ') { p++; l--; }
        memcpy(buf + m, p, l);
        m += l;
    }
    if (t->clean_spaces) m = clean_spaces(buf, m);
    int rc = (int)m;
    if (m > (size_t)cap) rc = -(int)m;
    else memcpy(out, buf, m);
    free(buf);
    return rc;
}

const char *tokenizer_text(const tokenizer *t, int32_t id, size_t *len) {
    if (!t || id < 0 || id >= t->n_vocab) { if (len) *len = 0; return ""; }
    size_t n;
    const char *s = tok_text(t, id, &n);
    if (len) *len = n;
    return s;
}

int32_t tokenizer_n_vocab(const tokenizer *t) { return t ? t->n_vocab : 0; }
int32_t tokenizer_bos(const tokenizer *t) { return t ? t->bos : -1; }
int32_t tokenizer_eos(const tokenizer *t) { return t ? t->eos : -1; }
int32_t tokenizer_unk(const tokenizer *t) { return t ? t->unk : -1; }
int tokenizer_add_bos(const tokenizer *t) { return t ? t->add_bos : 0; }
int tokenizer_add_eos(const tokenizer *t) { return t ? t->add_eos : 0; }
int32_t tokenizer_token_type(const tokenizer *t, int32_t id) {
    return (t && id >= 0 && id < t->n_vocab) ? t->type[id] : -1;
}
const picolm_vocab *tokenizer_vocab(const tokenizer *t) { return t ? &t->vocab : NULL; }
int tokenizer_is_bpe(const tokenizer *t) { return t ? t->is_bpe : 0; }
int tokenizer_clean_spaces(const tokenizer *t) { return t ? t->clean_spaces : 0; }

int tokenizer_is_eog(const tokenizer *t, int32_t id) {
    if (!t) return 0;
    int32_t lo = 0, hi = t->n_eog; /* a handful of ids, ascending */
    while (lo < hi) {
        int32_t mid = (lo + hi) / 2;
        if (t->eog[mid] == id) return 1;
        if (t->eog[mid] < id) lo = mid + 1;
        else hi = mid;
    }
    return 0;
}

int32_t tokenizer_eog_ids(const tokenizer *t, const int32_t **ids) {
    if (ids) *ids = t ? t->eog : NULL;
    return t ? t->n_eog : 0;
}

size_t tokenizer_utf8_prefix(const char *buf, size_t len) {
    if (!buf) return 0;
    /* find the last byte that is not a continuation byte, within 3 back */
    size_t k = 0;
    while (k < len && k < 4 && ((uint8_t)buf[len - 1 - k] & 0xC0) == 0x80) k++;
    if (k == len || k == 4) return len;       /* stray continuation bytes */
    uint8_t c = (uint8_t)buf[len - 1 - k];
    size_t need = c >= 0xF0 && c <= 0xF7 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (c >= 0xF8) need = 1;                  /* never a lead byte */
    return need > k + 1 ? len - 1 - k : len;
}
