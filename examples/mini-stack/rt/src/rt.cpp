#include "mini/rt.h"

#include "backends.h"
#include "minirt_backends.h"  // generated at configure (scripts/generate_backends.py)

extern "C" const char *minirt_backends(void) { return MINIRT_BACKENDS; }

extern "C" int minirt_device_count(void) {
#if defined(MINIRT_WITH_NVIDIA)
  return minirt_nvidia_device_count();
#elif defined(MINIRT_WITH_MOORE)
  return minirt_moore_device_count();
#elif defined(MINIRT_WITH_THEAD)
  return minirt_thead_device_count();
#elif defined(MINIRT_WITH_CPU)
  return minirt_cpu_device_count();
#else
  return 0;
#endif
}
