// libtorch's AOTInductor runtime behind an interface the rest of the core
// compiles against on every torch: aoti_runner_torch2.cpp where libtorch has
// torch::inductor::AOTIModelPackageLoader (torch 2.6 and newer),
// aoti_runner_unavailable.cpp elsewhere (CMakeLists.txt picks one).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "aoti_package.h"
#include "value.h"

namespace manypy {

class Archive;

class AotiRunner {
 public:
  virtual ~AotiRunner() = default;
  // The serialized input and output TreeSpecs.
  virtual std::string input_spec() const = 0;
  virtual std::string output_spec() const = 0;
  // Runs the compiled model on `inputs` (tensor values, in the input spec's
  // order) in inference mode; returns its output tensors. Thread safe: up to
  // one call per core runs at once, more wait for a free model instance.
  // Throws Error: kBadTensor (a dtype, shape, stride or device the model was
  // not compiled for), kPython (the model's own failure, with its message).
  virtual std::vector<Value> run(const std::vector<const Value*>& inputs) = 0;
};

// Empty when this build can run AOTInductor packages; otherwise why not,
// naming the torch it needs.
std::string aoti_unavailable_reason();

// Hands `archive` (already inspected as `info`) to libtorch's loader.
// Throws Error: kUnsupportedVersion (aoti_unavailable_reason), kLoader (the
// compiled library does not load: built by another torch, a library it
// needs is missing), kBadArchive (the loader refuses the package).
std::unique_ptr<AotiRunner> open_aoti_runner(const Archive& archive, const AotiPackageInfo& info);

}  // namespace manypy
