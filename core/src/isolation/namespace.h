// One glibc link-map namespace holding one interpreter's copy of libpython,
// libc and, later, libtorch. The only code in manypy that knows dlmopen.
#pragma once

#include <dlfcn.h>

#include <string>

#include "interp_api.h"
#include "isolation/key_bands.h"

namespace manypy::isolation {

class Namespace {
 public:
  // Opens a new namespace, fences its pthread keys into `band` of `keys`
  // (which must outlive it) and loads the interpreter library into it.
  // Throws manypy::Error (kStaticTls, kResourceExhausted, kLoader).
  Namespace(const std::string& interp_library, const KeyBands& keys, unsigned band);
  Namespace(const Namespace&) = delete;
  Namespace& operator=(const Namespace&) = delete;
  // Namespaces are never closed: CPython never unloads extension modules, so
  // dlclose would not give the namespace back (hazard 8).
  ~Namespace() = default;

  const manypy_interp_api& api() const { return *api_; }

  // Must run on a thread before each entry into this namespace: sets up the
  // thread's key blocks and the namespace libc's ctype tables, once per thread,
  // and arranges the thread's clean-up at exit. Cheap after the first time.
  void prepare_thread();

  // Runs on a thread that entered this namespace, as it exits: drops its
  // Python thread state and the namespace libc's per-thread state.
  void release_thread() const;

 private:
  void* handle_ = nullptr;
  void* libc_ = nullptr;
  const KeyBands& keys_;
  unsigned band_;
  const manypy_interp_api* api_ = nullptr;
  void (*ctype_init_)() = nullptr;
  void (*call_tls_dtors_)() = nullptr;
  void (*thread_freeres_)() = nullptr;
};

}  // namespace manypy::isolation
