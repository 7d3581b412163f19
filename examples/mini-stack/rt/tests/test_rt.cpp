#include <cstdio>
#include <cstring>

#include "mini/rt.h"

int main() {
  int failures = 0;
  const char *backends = minirt_backends();
  if (backends == nullptr || std::strcmp(backends, MINIRT_EXPECTED_BACKENDS) != 0) {
    std::printf("minirt_backends() = \"%s\", expected \"%s\"\n", backends ? backends : "(null)", MINIRT_EXPECTED_BACKENDS);
    ++failures;
  }
  const int devices = minirt_device_count();
  if (devices < 0) {
    std::printf("minirt_device_count() = %d, expected >= 0\n", devices);
    ++failures;
  }
  std::printf("backends=%s devices=%d\n", backends ? backends : "(null)", devices);
  return failures == 0 ? 0 : 1;
}
