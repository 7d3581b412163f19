// Internal: one device-count function per compiled-in backend.
#pragma once

int minirt_cpu_device_count();
int minirt_nvidia_device_count();
int minirt_moore_device_count();
int minirt_thead_device_count();
