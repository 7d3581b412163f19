#include "backends.h"

// Moore Threads (MUSA) backend. No toolkit in the mini stack: the backend reports no devices.
int minirt_moore_device_count() { return 0; }
