/*
 * The weight matmuls of the forward pass: out[b][r] = W[r] . x[b] for a
 * batch of nb activation rows, the rows of up to 3 matrices that share an
 * input scheduled over the context's thread pool in one parallel region.
 */
#ifndef PICOLM_MATMUL_H
#define PICOLM_MATMUL_H
#include <stdalign.h>
#include <stdint.h>

#include "model.h"

/* one thread's share of the running matmul, on its own cache line
   (build_batch allocates one per thread) */
typedef struct mm_part {
    alignas(64) _Atomic uint64_t fe; /* units [front, end) not yet claimed */
} mm_part;

/* n (1..3) matrices with the same input x (nb rows of w[0]->cols): the
   input is quantized once per distinct activation type. */
void matmul_n(llama_batch *c, int n, const qmat *const *w, float *const *out, const float *x, int nb);
void matmul(llama_batch *c, const qmat *w, float *out, const float *x, int nb);

#endif
