#include "minicore/runtime.h"

#include <climits>
#include <sstream>
#include <stdexcept>

#include "mini/ccl.h"
#include "mini/ops.h"
#include "mini/rt.h"

namespace minicore {

namespace {

int checked_size(std::size_t size) {
  if (size > static_cast<std::size_t>(INT_MAX)) {
    throw std::invalid_argument("minicore: too many elements");
  }
  return static_cast<int>(size);
}

}  // namespace

std::string backends() { return minirt_backends(); }

std::string vendor() { return MINICORE_VENDOR; }

std::vector<std::string> ops() {
  std::vector<std::string> names;
  std::istringstream list(miniops_list());
  for (std::string name; std::getline(list, name, ',');) {
    if (!name.empty()) {
      names.push_back(name);
    }
  }
  return names;
}

std::vector<float> allreduce_sum(std::vector<float> data) {
  if (miniccl_allreduce_sum(data.data(), checked_size(data.size())) != 0) {
    throw std::runtime_error("minicore: miniccl_allreduce_sum failed");
  }
  return data;
}

std::vector<float> add(const std::vector<float> &a, const std::vector<float> &b) {
  if (a.size() != b.size()) {
    throw std::invalid_argument("minicore.add: the lists differ in length");
  }
#if defined(MINIOPS_HAS_ADD)
  std::vector<float> out(a.size());
  if (miniops_add(a.data(), b.data(), out.data(), checked_size(a.size())) != 0) {
    throw std::runtime_error("minicore: miniops_add failed");
  }
  return out;
#else
  throw std::runtime_error("minicore.add: MiniOps was built without the 'add' operator");
#endif
}

}  // namespace minicore
