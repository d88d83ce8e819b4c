// An AOTInductor package (.pt2) run by libtorch in the host: a model that
// torch.export captured and AOTInductor compiled to native code. No
// Python, no interpreter. The twin of ScriptModule for PyTorch's current
// way of running a model without Python (docs/models.md).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "archive.h"
#include "archive_trust.h"
#include "call_options.h"
#include "dispatch/job.h"
#include "value.h"

namespace manypy {

class AotiModule {
 public:
  // Throws Error: kInvalidArgument (empty path), kNotFound, kBadArchive,
  // kNotAPackage, kUnsupportedVersion (this build's torch cannot run
  // packages, or the package was compiled for another device, CPU or OS),
  // kLoader (its compiled library does not load), kUntrustedArchive.
  // `trust` (nullptr: none) and the host trust (host_archive_trust()) are
  // checked before libtorch reads anything: a package holds native code,
  // which loading runs.
  static std::unique_ptr<AotiModule> load_file(const std::string& path,
                                               const ArchiveTrust* trust = nullptr);
  static std::unique_ptr<AotiModule> load_bytes(const void* data, size_t size,
                                                const ArchiveTrust* trust = nullptr);
  ~AotiModule();

  // Calls the model with `args` (a list or tuple) and `kwargs` (a dict or
  // nullptr) shaped as its example inputs were; tensors in, tensors out (in
  // the tuples, lists and dicts the model returned). Thread safe.
  // `options` gives the context its operator callbacks report (one record
  // per call, "manypy::aoti_run") and its deadline, checked before the
  // compiled model starts and when it returns: a compiled kernel cannot be
  // stopped.
  Value call(const Value* args, const Value* kwargs, const CallOptions& options);
  // The same, on a host worker (dispatch/host_workers.h): `done` gets the
  // outcome exactly once. Throws Error if refused at once (arguments that
  // do not match, a stop already set); `done` then never runs.
  static void call_async(std::shared_ptr<AotiModule> module, const Value* args, const Value* kwargs,
                         const CallOptions& options, dispatch::Done done);

  // What AOTInductor recorded when it compiled the model (AOTI_DEVICE_KEY,
  // AOTI_CPU_ISA, ...), as a dict of strings.
  Value metadata() const;
  // "(Tensor, Tensor)" -> "{'logits': Tensor}": the call's shape, for
  // messages and docs.
  std::string signature() const;

 private:
  struct Impl;
  class AsyncCall;
  explicit AotiModule(std::unique_ptr<Impl> impl);
  // The archive is not kept: once loaded, the library holds the model.
  static std::unique_ptr<AotiModule> load(std::shared_ptr<Archive> archive,
                                          const ArchiveTrust* trust);
  // The call's input tensors, checked against the input spec.
  std::vector<const Value*> inputs(const Value* args, const Value* kwargs) const;
  Value run(const Value* args, const Value* kwargs, const CallOptions& options, CallStop* stop);
  std::unique_ptr<Impl> impl_;
};

}  // namespace manypy
