/*
 * KV-cache persistence (--cache FILE): save the K/V rows of an evaluated
 * prompt, and on a later run reuse the longest common token prefix.
 *
 * File layout (little-endian, version 1):
 *   0  char[8]  "PICOLMKV"
 *   8  u32      format version (KVCACHE_VERSION)
 *  12  u32      KV type (enum kv_type)
 *  16  u64      model file size
 *  24  u64      model hash: FNV-1a 64 of the GGUF bytes [0, data_offset)
 *               (header, metadata, tensor table)
 *  32  u32      n_layer
 *  36  u32      kv_dim (n_head_kv * head_dim)
 *  40  u32      row_bytes (bytes of one K or V row)
 *  44  u32      n_vocab
 *  48  u32      context the file was written with (informative)
 *  52  u32      n_tokens
 *      version 2 only (a model with recurrent layers):
 *  56  u32      state_floats: floats of the recurrent state
 *  60  u32      interval: positions between its checkpoints
 *   H  i32      tokens[n_tokens]  (H = 56, or 64 in version 2)
 *      then per attention layer: K rows [n_tokens][row_bytes], V rows [n_tokens][row_bytes]
 *      version 2: the state after each whole interval, then after the last token
 *      (n_tokens / interval + 1 x state_floats f32)
 *      u64      FNV-1a 64 of every byte before it
 * Nothing in a file is trusted: every size is checked against the buffer
 * size and the expected model shape before use.
 */
#ifndef PICOLM_KVCACHE_H
#define PICOLM_KVCACHE_H
#include <stddef.h>
#include <stdint.h>

#include "kv.h"

#define KVCACHE_MAGIC "PICOLMKV"
#define KVCACHE_VERSION 2u
#define KVCACHE_HEADER_BYTES 56u

/* What identifies the cache a model/context can use. */
typedef struct kvcache_id {
    uint64_t model_size, model_hash;
    uint32_t kv_type, n_layer, kv_dim, row_bytes, n_vocab; /* n_layer: layers with K/V */
    uint32_t state_floats, interval;                       /* recurrent state (0: none) */
} kvcache_id;

/* A parsed file: tokens copied out, K/V rows still in the caller's buffer. */
typedef struct kvcache_view {
    kvcache_id id;
    uint32_t n_ctx_saved;
    uint32_t n_tokens;
    int32_t *tokens;         /* malloc'd, n_tokens entries */
    const uint8_t *kv;       /* first K row of layer 0, inside the buffer */
    const uint8_t *states;   /* the recurrent checkpoints, or NULL */
} kvcache_view;

uint64_t kvcache_fnv1a(const void *data, size_t n, uint64_t h);
#define KVCACHE_FNV_OFFSET 0xcbf29ce484222325ull

/* The identity of (model, KV pool) of a sequence: hashes the model's header bytes. */
void kvcache_id_of(const kv_seq *s, kvcache_id *id);

/* Why a file cannot be used, the negative returns of the loaders below:
   KVCACHE_STALE, a cache of this model that this run cannot take (another
   format version, KV type or checkpoint interval: the caller may replace
   it); KVCACHE_FOREIGN, anything else (not a picolm KV cache, another
   model's, damaged, unreadable: the caller must leave it alone). */
#define KVCACHE_STALE (-1)
#define KVCACHE_FOREIGN (-2)

/* Parse a cache file image.  expect == NULL: structural checks only (the
   fuzzing entry point); otherwise also refuse a file whose version, model,
   KV type or shape differs, naming the mismatch in err.  Returns 0 and fills
   *v (free with free_kvcache_view), or KVCACHE_STALE / KVCACHE_FOREIGN with
   a message; never reads outside [buf, buf + size). */
int kvcache_load_buffer(const void *buf, size_t size, const kvcache_id *expect, kvcache_view *v, char *err, size_t errlen);
void free_kvcache_view(kvcache_view *v);

/* Common prefix length of the cached tokens and toks[0..n). */
int kvcache_common_prefix(const kvcache_view *v, const int32_t *toks, int n);

/* How many of the file's first n positions can be restored: n, or with a
   recurrent state the last checkpoint at or below it. */
int kvcache_usable(const kvcache_view *v, int n);

/* Copy positions [0, n_use) into the empty sequence s (n_use <= v->n_tokens,
   <= s->n_ctx, kvcache_usable) and set s->n_past = n_use.  0 or -1 with a
   message. */
int kvcache_restore(kv_seq *s, const kvcache_view *v, int n_use, char *err, size_t errlen);

/* Write positions [0, n) of s with their tokens to path atomically (a
   temporary file in the same directory, then rename); with a recurrent
   state, n must be s->n_past. */
int kvcache_save(const char *path, const kv_seq *s, const int32_t *toks, int n, char *err, size_t errlen);

/* Map a file and parse it against expect; the mapping is returned in *map and *map_size
   (release with kvcache_unmap after the view is used).  Returns 0, 1 when the
   file does not exist or is empty (no message: nothing to lose), or
   KVCACHE_STALE / KVCACHE_FOREIGN with a message. */
int kvcache_load_file(const char *path, const kvcache_id *expect, kvcache_view *v, void **map, size_t *map_size, char *err,
                      size_t errlen);
void kvcache_unmap(void *map, size_t map_size);

#endif
