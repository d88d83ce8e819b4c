#include "isolation/namespace.h"

#include <link.h>

#include <bitset>
#include <cstring>

#include "error.h"

namespace manypy::isolation {

namespace {

Error loader_error(const std::string& what, const char* dl_message) {
  std::string detail = dl_message ? dl_message : "unknown dynamic loader error";
  if (detail.find("static TLS") != std::string::npos) {
    return Error(Code::kStaticTls, std::string(kStaticTlsHint) + " (" + detail + ")");
  }
  if (detail.find("namespace") != std::string::npos) {
    return Error(Code::kResourceExhausted,
                 what + ": no link-map namespace left (glibc allows 15): " + detail);
  }
  return Error(Code::kLoader, what + ": " + detail);
}

template <typename Fn>
Fn symbol(void* handle, const char* name, bool required) {
  void* p = dlsym(handle, name);
  if (p == nullptr && required) {
    throw Error(Code::kLoader, std::string("symbol ") + name +
                                   " not found in a namespace's libc (needs glibc >= 2.34)");
  }
  return reinterpret_cast<Fn>(p);
}

// Which namespaces the current thread has entered, so that it can leave each
// of them clean when it exits (hazard 10). Indexed by namespace.
struct ThreadRecord {
  std::bitset<Namespace::kMaxNamespaces> prepared;
  const Namespace* entered[Namespace::kMaxNamespaces] = {};
  ~ThreadRecord() {
    for (unsigned b = 0; b < Namespace::kMaxNamespaces; ++b) {
      if (entered[b] != nullptr) entered[b]->release_thread();
    }
  }
};

thread_local ThreadRecord t_record;

}  // namespace

Namespace::Namespace(const std::string& interp_library, unsigned index) : index_(index) {
  if (index >= kMaxNamespaces) {
    throw Error(Code::kResourceExhausted,
                "no link-map namespace left (glibc allows " + std::to_string(kMaxNamespaces) + ")");
  }
  // RTLD_LOCAL: RTLD_GLOBAL in a secondary namespace crashes glibc 2.36
  // (hazard 2). The first object of a new namespace heads its global scope,
  // so the interpreter library's pthread key functions take precedence over
  // the namespace libc's for every library loaded there after it (hazard 3).
  handle_ = dlmopen(LM_ID_NEWLM, interp_library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle_ == nullptr) throw loader_error("cannot load " + interp_library, dlerror());

  Lmid_t lmid = 0;
  if (dlinfo(handle_, RTLD_DI_LMID, &lmid) != 0) {
    throw Error(Code::kLoader, std::string("dlinfo failed: ") + dlerror());
  }
  libc_ = dlmopen(lmid, "libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  if (libc_ == nullptr) throw loader_error("cannot find the namespace's libc", dlerror());

  ctype_init_ = symbol<void (*)()>(libc_, "__ctype_init", true);
  // Optional: they free what a host thread leaves in the namespace as it
  // exits, its thread_local objects and, through __call_tls_dtors, its
  // values of the namespace's pthread keys (hazards 3 and 10).
  call_tls_dtors_ = symbol<void (*)()>(libc_, "__call_tls_dtors", false);
  thread_freeres_ = symbol<void (*)()>(libc_, "__libc_thread_freeres", false);

  // The namespace's libc never created a thread, so it believes the process
  // is single-threaded, and libstdc++ in the namespace would then use
  // non-atomic shared_ptr reference counts (hazard 7). Tell it the truth.
  if (auto* single = static_cast<char*>(dlsym(libc_, "__libc_single_threaded"))) *single = 0;

  auto get_api =
      reinterpret_cast<manypy_interp_get_api_fn>(dlsym(handle_, "manypy_interp_get_api"));
  if (get_api == nullptr) {
    throw Error(Code::kLoader, interp_library + " is not a manypy interpreter library");
  }
  api_ = get_api(MANYPY_INTERP_API_VERSION);
  if (api_ == nullptr || api_->size < sizeof(manypy_interp_api)) {
    throw Error(Code::kLoader, interp_library + " does not speak interpreter API version " +
                                   std::to_string(MANYPY_INTERP_API_VERSION));
  }
}

void Namespace::prepare_thread() {
  ThreadRecord& record = t_record;
  if (record.prepared.test(index_)) return;
  ctype_init_();
  record.prepared.set(index_);
  record.entered[index_] = this;
}

void Namespace::release_thread() const {
  api_->thread_exit();
  if (call_tls_dtors_ != nullptr) call_tls_dtors_();
  if (thread_freeres_ != nullptr) thread_freeres_();
}

}  // namespace manypy::isolation
