/* MiniOps: the operators of the mini stack. */
#ifndef MINI_OPS_H
#define MINI_OPS_H

#include "mini/ops_config.h" /* MINIOPS_HAS_<OP> for each operator in this build */

#if defined(MINIOPS_BUILDING)
#define MINIOPS_API __attribute__((visibility("default")))
#else
#define MINIOPS_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Comma list of the operators in this build (MINI_OPS_OPS), e.g. "add,gemm". */
MINIOPS_API const char *miniops_list(void);

/* The backends of the runtime the operators run on (minirt_backends()). */
MINIOPS_API const char *miniops_backends(void);

/* Each operator returns 0 on success and -1 on bad arguments. Only those in miniops_list() exist. */
#if defined(MINIOPS_HAS_ADD)
/* out[i] = a[i] + b[i], 0 <= i < n */
MINIOPS_API int miniops_add(const float *a, const float *b, float *out, int n);
#endif
#if defined(MINIOPS_HAS_MUL)
/* out[i] = a[i] * b[i], 0 <= i < n */
MINIOPS_API int miniops_mul(const float *a, const float *b, float *out, int n);
#endif
#if defined(MINIOPS_HAS_GEMM)
/* c (m x n) = a (m x k) * b (k x n), row-major */
MINIOPS_API int miniops_gemm(const float *a, const float *b, float *c, int m, int n, int k);
#endif

#ifdef __cplusplus
}
#endif

#endif /* MINI_OPS_H */
