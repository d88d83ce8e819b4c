// A small custom operator library, as a fleet would ship one: registers
// manypy_sample::scaled_add(a, b, alpha) = a + alpha * b with TORCH_LIBRARY.
// manypy_load_operator_library loads it into the host and every interpreter.
#include <ATen/ATen.h>
#include <torch/library.h>

namespace {

at::Tensor scaled_add(const at::Tensor& a, const at::Tensor& b, double alpha) {
  return a + b * alpha;
}

}  // namespace

TORCH_LIBRARY(manypy_sample, m) {
  m.def("scaled_add(Tensor a, Tensor b, float alpha) -> Tensor");
  m.impl("scaled_add", c10::DispatchKey::CPU, TORCH_FN(scaled_add));
}
