// A TorchScript module run by libtorch in the host: no Python, no
// interpreter.
#pragma once

#include <memory>
#include <string>

#include "archive.h"
#include "archive_trust.h"
#include "call_options.h"
#include "value.h"

namespace manypy {

class ScriptModule {
 public:
  // Throws Error: kInvalidArgument (empty path), kNotFound, kBadArchive,
  // kUnsupportedVersion, kNotAPackage.
  // `trust` (nullptr: none) is checked before libtorch reads anything: its
  // TorchScript frontend compiles the archive's code as it loads.
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

  // torch.jit.save to `path` with `extra_files` (a dict of name -> bytes or
  // string, or nullptr) under extra/, plus the export hook's files.
  void save(const std::string& path, const Value* extra_files) const;

 private:
  struct Impl;
  explicit ScriptModule(std::unique_ptr<Impl> impl);
  static std::unique_ptr<ScriptModule> load(const Archive& archive, const ArchiveTrust* trust);
  std::unique_ptr<Impl> impl_;
};

// torch.set_num_threads for the host's own libtorch (intra-op threads of
// TorchScript calls).
void set_host_intra_op_threads(int threads);

}  // namespace manypy
