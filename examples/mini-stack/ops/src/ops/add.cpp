#include "mini/ops.h"

extern "C" int miniops_add(const float *a, const float *b, float *out, int n) {
  if (n < 0 || (n > 0 && (a == nullptr || b == nullptr || out == nullptr))) {
    return -1;
  }
  for (int i = 0; i < n; ++i) {
    out[i] = a[i] + b[i];
  }
  return 0;
}
