#include "operator_libraries.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include "error.h"
#include "interpreter.h"

namespace manypy {

void OperatorLibraries::load(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    throw Error(Code::kNotFound, "cannot load operator library " + path + ": no such file");
  }
  std::lock_guard<std::mutex> lock(mu_);
  // The host's libtorch: the library's constructors register its operators.
  // Never closed, as torch.ops.load_library never closes one.
  if (dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL) == nullptr) {
    const char* why = dlerror();
    throw Error(Code::kLoader,
                "cannot load operator library " + path + ": " + (why ? why : "unknown error"));
  }
  paths_.push_back(path);
  for (Interpreter* interp : members_) {
    if (!interp->serving()) continue;  // retired: runs no model again
    try {
      interp->load_library(path);
    } catch (const Error& e) {
      throw e.prefixed("interpreter " + std::to_string(interp->slot()) + ": ");
    }
  }
}

void OperatorLibraries::join(Interpreter& interp) {
  std::lock_guard<std::mutex> lock(mu_);
  members_.push_back(&interp);
  for (const std::string& path : paths_) interp.load_library(path);
}

}  // namespace manypy
