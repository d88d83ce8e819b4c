// Builds on a libtorch without AOTInductor's package loader (torch 1.x).
#include <torch/version.h>

#include "aoti_runner.h"
#include "error.h"

namespace manypy {

std::string aoti_unavailable_reason() {
  return "AOTInductor packages (.pt2) need manypy built against torch 2.6 or newer "
         "(torch::inductor::AOTIModelPackageLoader); this manypy was built against "
         "torch " TORCH_VERSION;
}

std::unique_ptr<AotiRunner> open_aoti_runner(const Archive&, const AotiPackageInfo&) {
  throw Error(Code::kUnsupportedVersion, aoti_unavailable_reason());
}

}  // namespace manypy
