// One glibc link-map namespace holding one interpreter's copy of libpython,
// libc and, later, libtorch. The only code in manypy that knows dlmopen.
#pragma once

#include <dlfcn.h>

#include <string>

#include "interp_api.h"

namespace manypy::isolation {

class Namespace {
 public:
  // glibc's DL_NNS is 16, the host's namespace included (hazard 5).
  static constexpr unsigned kMaxNamespaces = 15;

  // Opens a new namespace and loads the interpreter library into it, as its
  // first object so that its pthread key functions serve the whole namespace
  // (core/interp/key_space.h). `index` (< kMaxNamespaces) is this
  // namespace's number among the process's. Throws manypy::Error
  // (kStaticTls, kResourceExhausted, kLoader).
  Namespace(const std::string& interp_library, unsigned index);
  Namespace(const Namespace&) = delete;
  Namespace& operator=(const Namespace&) = delete;
  // Namespaces are never closed: CPython never unloads extension modules, so
  // dlclose would not give the namespace back (hazard 8).
  ~Namespace() = default;

  const manypy_interp_api& api() const { return *api_; }

  // Must run on a thread before each entry into this namespace: sets up the
  // namespace libc's ctype tables, once per thread, and arranges the thread's
  // clean-up at exit. Cheap after the first time.
  void prepare_thread();

  // Runs on a thread that entered this namespace, as it exits: drops its
  // Python thread state and the namespace libc's per-thread state.
  void release_thread() const;

 private:
  void* handle_ = nullptr;
  void* libc_ = nullptr;
  unsigned index_;
  const manypy_interp_api* api_ = nullptr;
  void (*ctype_init_)() = nullptr;
  void (*call_tls_dtors_)() = nullptr;
  void (*thread_freeres_)() = nullptr;
};

}  // namespace manypy::isolation
