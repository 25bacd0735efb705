/* Portable reference versions of the vector primitives a backend may
   override (picolm_backend_vtable), plus small helpers of the forward pass. */
#ifndef PICOLM_OPS_H
#define PICOLM_OPS_H
#include <stdint.h>

struct pl_ops;
/* Fill every member of ops with the portable C versions. */
void ref_ops(struct pl_ops *ops);

void ref_rmsnorm(float *o, const float *x, const float *w, int n, float eps);
float ref_dot_f32(const float *a, const float *b, int n);
float ref_dot_f32_f16(const float *a, const uint16_t *b, int n);
void ref_scale_axpy_f16(float *y, float scale, float a, const uint16_t *v, int n);
void ref_swiglu(float *g, const float *u, int n);
void ref_f32_to_f16(uint16_t *dst, const float *src, int n);
#endif
