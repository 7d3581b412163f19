/* MiniCCL: the collective communication library of the mini stack. */
#ifndef MINI_CCL_H
#define MINI_CCL_H

#if defined(MINICCL_BUILDING)
#define MINICCL_API __attribute__((visibility("default")))
#else
#define MINICCL_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The communication backend this library was built for: "local", "ompi" or "nccl". */
MINICCL_API const char *miniccl_backend(void);

/* In-place sum over all ranks of data[0..n). Single rank: the identity. 0 on success, -1 on bad arguments. */
MINICCL_API int miniccl_allreduce_sum(float *data, int n);

#ifdef __cplusplus
}
#endif

#endif /* MINI_CCL_H */
