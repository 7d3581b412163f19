#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "minicore/runtime.h"

PYBIND11_MODULE(_minicore, m) {
  m.doc() = "MiniLM's native module, over libminicore_runtime";
  m.def("backends", &minicore::backends, "The runtime's compiled-in backends, e.g. 'cpu,nvidia'");
  m.def("vendor", &minicore::vendor, "The vendor this engine was built for");
  m.def("ops", &minicore::ops, "The operators of the MiniOps build");
  m.def("allreduce_sum", &minicore::allreduce_sum, pybind11::arg("data"), "Sum over all ranks (one rank: identity)");
  m.def("add", &minicore::add, pybind11::arg("a"), pybind11::arg("b"), "Elementwise a + b");
}
