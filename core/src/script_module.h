// A TorchScript module run by libtorch in the host: no Python, no
// interpreter.
#pragma once

#include <memory>
#include <string>

#include "archive.h"
#include "archive_trust.h"
#include "call_options.h"
#include "dispatch/job.h"
#include "value.h"

namespace manypy {

class ScriptModule {
 public:
  // Throws Error: kInvalidArgument (empty path), kNotFound, kBadArchive,
  // kUnsupportedVersion, kNotAPackage.
  // `trust` (nullptr: none) and the host trust are checked before libtorch
  // reads anything: its TorchScript frontend compiles the archive's code as
  // it loads.
  static std::unique_ptr<ScriptModule> load_file(const std::string& path,
                                                 const ArchiveTrust* trust = nullptr);
  static std::unique_ptr<ScriptModule> load_bytes(const void* data, size_t size,
                                                  const ArchiveTrust* trust = nullptr);
  ~ScriptModule();

  // method nullptr: forward. Thread safe. `options` gives the context its
  // operator callbacks report and what bounds it (its interpreter is
  // ignored).
  Value call(const std::string* method, const Value* args, const Value* kwargs,
             const CallOptions& options);
  // The same, asynchronously, on a host worker (dispatch/host_workers.h):
  // `done` gets the outcome exactly once. Arguments are copied (tensors are
  // shared); the call holds `module`. Throws Error if the call is refused
  // (a missing method, bad arguments, a stop already set); `done` then
  // never runs.
  static void call_async(std::shared_ptr<ScriptModule> module, const std::string* method,
                         const Value* args, const Value* kwargs, const CallOptions& options,
                         dispatch::Done done);

  // torch.jit.save to `path` with `extra_files` (a dict of name -> bytes or
  // string, or nullptr) under extra/, plus the export hook's files.
  void save(const std::string& path, const Value* extra_files) const;

 private:
  struct Impl;
  class AsyncCall;
  explicit ScriptModule(std::unique_ptr<Impl> impl);
  // Throws Error(kNoSuchName) unless the module has `method` (nullptr:
  // forward), and checks the arguments' kinds.
  void check_call(const std::string* method, const Value* args, const Value* kwargs) const;
  // The call, within `stop` (nullptr: unbounded).
  Value run(const std::string* method, const Value* args, const Value* kwargs,
            const CallOptions& options, CallStop* stop);
  static std::unique_ptr<ScriptModule> load(const Archive& archive, const ArchiveTrust* trust);
  std::unique_ptr<Impl> impl_;
};

// torch.set_num_threads for the host's own libtorch (intra-op threads of
// TorchScript calls).
void set_host_intra_op_threads(int threads);

}  // namespace manypy
