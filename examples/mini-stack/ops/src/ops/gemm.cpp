#include "mini/ops.h"

extern "C" int miniops_gemm(const float *a, const float *b, float *c, int m, int n, int k) {
  if (m < 0 || n < 0 || k < 0) {
    return -1;
  }
  if (m > 0 && n > 0 && (c == nullptr || (k > 0 && (a == nullptr || b == nullptr)))) {
    return -1;
  }
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      float sum = 0.0f;
      for (int p = 0; p < k; ++p) {
        sum += a[i * k + p] * b[p * n + j];
      }
      c[i * n + j] = sum;
    }
  }
  return 0;
}
