#include "backends.h"

// T-Head backend. No toolkit in the mini stack: the backend reports no devices.
int minirt_thead_device_count() { return 0; }
