/*
 * GGUF v3 writer.  Metadata and tensor infos are collected in memory, then
 * written as one header (padded to the alignment), followed by each tensor's
 * data in the order the tensors were added, each padded to the alignment.
 * Offsets follow the GGUF spec: relative to the data section, each a
 * multiple of the alignment (general.alignment if set, else 32).
 *
 * Setting a key that already exists removes the old entry and appends the
 * new one (ggml's gguf_set_val semantics), so a copy-then-set sequence gives
 * the same key order as llama.cpp's tools.
 */
#ifndef PICOLM_GGUF_WRITE_H
#define PICOLM_GGUF_WRITE_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gguf.h"

#define GGUF_DEFAULT_ALIGNMENT 32

/* The library's picolm_gguf_writer (picolm.h) under its internal name. */
typedef struct picolm_gguf_writer gguf_writer;

gguf_writer *gguf_writer_new(void);
void gguf_writer_free(gguf_writer *w);

/* Metadata.  All return 0, or -1 (out of memory / invalid value). */
int gguf_writer_copy_kv(gguf_writer *w, const gguf_kv *kv);   /* a reader's pair, verbatim */
int gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v);
int gguf_writer_set_str(gguf_writer *w, const char *key, const char *v);
int gguf_writer_remove_kv(gguf_writer *w, const char *key);   /* 1 if it was present */
int gguf_writer_n_kv(const gguf_writer *w);

/* Add a tensor's info; nbytes is its data size (without padding). */
int gguf_writer_add_tensor(gguf_writer *w, const char *name, size_t name_len, uint32_t n_dims, const int64_t *ne,
                           uint32_t type, uint64_t nbytes);

/* general.alignment when set (a power of two), else 32. */
uint64_t gguf_writer_alignment(const gguf_writer *w);
/* Bytes of the header (metadata + tensor infos + padding) and of the whole file. */
uint64_t gguf_writer_header_size(const gguf_writer *w);
uint64_t gguf_writer_file_size(const gguf_writer *w);

/* Write the header; then call write_tensor once per tensor, in add order.
   Both return 0 or -1 with a message in err. */
int gguf_writer_write_header(gguf_writer *w, FILE *f, char *err, size_t errlen);
int gguf_writer_write_tensor(gguf_writer *w, FILE *f, const void *data, uint64_t nbytes, char *err, size_t errlen);

#endif
