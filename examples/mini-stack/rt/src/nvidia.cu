#include <cuda_runtime.h>

#include "backends.h"

namespace {

__global__ void fill(int *out, int value) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    *out = value;
  }
}

// Launches the kernel once on device 0; false when there is no usable device.
bool probe() {
  int *out = nullptr;
  if (cudaMalloc(&out, sizeof(int)) != cudaSuccess) {
    return false;
  }
  fill<<<1, 1>>>(out, 42);
  int host = 0;
  const bool ok = cudaMemcpy(&host, out, sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess && host == 42;
  cudaFree(out);
  return ok;
}

}  // namespace

// Works without a GPU or driver: any CUDA error means "no devices".
int minirt_nvidia_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error
    return 0;
  }
  return count > 0 && probe() ? count : 0;
}
