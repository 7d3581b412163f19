#include "backends.h"

int minirt_cpu_device_count() { return 1; }
