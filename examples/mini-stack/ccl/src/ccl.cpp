#include "mini/ccl.h"

extern "C" const char *miniccl_backend(void) { return MINICCL_BACKEND; }

extern "C" int miniccl_allreduce_sum(float *data, int n) {
  if (n < 0 || (n > 0 && data == nullptr)) {
    return -1;
  }
  return 0;  // one rank: the sum over ranks is the data itself
}
