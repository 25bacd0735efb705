/*
 * Random-weight model synthesis: writes a real GGUF of a named shape
 * ("tinyllama", "qwen2.5-0.5b", "gemma3-1b", ..., in its architecture: llama,
 * qwen2 with q/k/v biases, qwen3 with q/k head norms, smollm3, gemma3 with
 * its post-norms and window, lfm2 with its convolution layers) and weight type (any weight format a loaded
 * format plugin can quantize to, for every matrix, or a llama.cpp mix that
 * is not a format name -- Q3_K_S/M/L, Q4_K_S/M, Q5_K_S/M -- with the
 * per-tensor rule of quant_policy.h), with a minimal SentencePiece-style
 * vocabulary (<unk>, <s>, </s>, 256 byte tokens, filler) so the file loads
 * in picolm and llama.cpp alike.  Weights are N(0, 0.02) (norms 1), which
 * keeps activations finite like a trained model's.  Deterministic: the same
 * spec gives the same bytes whatever the thread count.
 */
#ifndef PICOLM_SYNTH_H
#define PICOLM_SYNTH_H
#include <stddef.h>
#include <stdio.h>

#include "picolm/picolm.h"

typedef struct synth_shape {
    const char *name;
    int n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab, n_ctx;
    const char *arch;      /* NULL: "llama"; else an architecture of core/model.c's table */
    int head_dim;          /* 0: n_embd / n_head */
    int tied;              /* no output.weight: token_embd is the output too */
    int rope_freqs;        /* a rope_freqs.weight (Llama 3.1+; all ones) */
    float rope_base, rms_eps; /* 0: 10000, 1e-5 */
    int n_swa;             /* gemma3, lfm2: a sliding window (0: none) */
    const char *conv;      /* lfm2: one letter per layer, 'c' a convolution, 'a' attention */
} synth_shape;

/* The built-in shapes, terminated by an entry with name == NULL. */
extern const synth_shape synth_shapes[];

/* Parse "SHAPE:TYPE" (e.g. "tinyllama:Q4_K_M"): the shape, and the type
   name canonicalised into type (upper case).  0, or -1 with a message. */
int synth_parse(const char *spec, synth_shape *shape, char *type, size_t type_len, char *err, size_t errlen);

/* Default output path for a spec: /tmp/picolm-synth-SHAPE-TYPE.gguf (or
   $TMPDIR).  Writes into buf. */
void synth_default_path(const char *spec, char *buf, size_t n);

/* Write the model to path (through a temporary file renamed into place).
   rt supplies the format plugins' quantizers and runs the rows on its
   threads; progress (may be NULL) gets one line per few tensors.
   exact = 0 (fast, seconds for 1B weights): a pool of 16384 blocks per
   quantized type goes through the format's quantize_row, and every matrix
   row is assembled from random picks of those blocks -- a valid file of the
   right size whose values repeat, which is all a speed benchmark needs.
   exact = 1: every row is drawn and quantized (slow: the reference K-quant
   quantizers take ~60 ns per weight).  0, or -1 with a message in err. */
int synth_write(const char *spec, const char *path, picolm_runtime *rt, int exact, FILE *progress, char *err, size_t errlen);

#endif
