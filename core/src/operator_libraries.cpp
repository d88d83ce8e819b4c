#include "operator_libraries.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <mutex>
#include <vector>

#include "error.h"
#include "interpreter.h"

namespace manypy::operator_libraries {

namespace {

struct Registry {
  std::mutex mu;  // held across loads, so no interpreter misses a library
  std::vector<std::string> paths;
  std::vector<Interpreter*> members;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed, as interpreters
  return *r;
}

}  // namespace

void load(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    throw Error(Code::kNotFound, "cannot load operator library " + path + ": no such file");
  }
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  // The host's libtorch: the library's constructors register its operators.
  // Never closed, as torch.ops.load_library never closes one.
  if (dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL) == nullptr) {
    const char* why = dlerror();
    throw Error(Code::kLoader, "cannot load operator library " + path + ": " +
                                   (why ? why : "unknown error"));
  }
  r.paths.push_back(path);
  for (Interpreter* interp : r.members) {
    if (!interp->serving()) continue;  // retired: runs no model again
    try {
      interp->load_library(path);
    } catch (const Error& e) {
      throw e.prefixed("interpreter " + std::to_string(interp->slot()) + ": ");
    }
  }
}

void join(Interpreter& interp) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.members.push_back(&interp);
  for (const std::string& path : r.paths) interp.load_library(path);
}

}  // namespace manypy::operator_libraries
