// libminicore_runtime: the engine's C++ API over MiniRT, MiniOps and MiniCCL.
#pragma once

#include <string>
#include <vector>

#if defined(MINICORE_BUILDING)
#define MINICORE_API __attribute__((visibility("default")))
#else
#define MINICORE_API
#endif

namespace minicore {

// The runtime's compiled-in backends, e.g. "cpu,nvidia".
MINICORE_API std::string backends();

// The vendor this engine was built for: cpu, nvidia, moore or thead.
MINICORE_API std::string vendor();

// The operators of the MiniOps build, e.g. {"add", "gemm"}.
MINICORE_API std::vector<std::string> ops();

// Sum over all ranks (one rank: the identity).
MINICORE_API std::vector<float> allreduce_sum(std::vector<float> data);

// Elementwise a + b; throws std::invalid_argument on a length mismatch and std::runtime_error when
// MiniOps was built without "add".
MINICORE_API std::vector<float> add(const std::vector<float> &a, const std::vector<float> &b);

}  // namespace minicore
