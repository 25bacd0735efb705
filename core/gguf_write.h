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
#include "picolm/picolm.h"

#define GGUF_DEFAULT_ALIGNMENT 32

/* The library's picolm_gguf_writer (picolm.h): its functions are
   picolm_gguf_writer_*; the core and the tests have this one more. */
typedef struct picolm_gguf_writer gguf_writer;

/* A reader's pair, verbatim (picolm_gguf_writer_copy and _set go through
   it): 0, or -1 (out of memory, an invalid value). */
int gguf_writer_copy_kv(gguf_writer *w, const gguf_kv *kv);

#endif
