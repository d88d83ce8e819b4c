#include "runtime_paths.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>

namespace manypy {

namespace {

constexpr const char* kInterpLibraryName = "libmanypy_interp.so";
constexpr const char* kHooksLibraryName = "libmanypy_hooks.so";
// The private directory, relative to the directory of the object holding the core.
constexpr const char* kPrivateDirectory = "manypy";

std::string directory_of_this_object() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&directory_of_this_object), &info) == 0 ||
      info.dli_fname == nullptr) {
    return {};
  }
  std::string path = info.dli_fname;
  std::string::size_type slash = path.rfind('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

// $variable, else `name` in the private directory. The core's test programs
// fall back to the build tree's copy (runtime_paths.h). When nothing is
// found, the private directory's path is returned all the same, so the
// loader's error names the place an installed library looks in.
std::string find_library(const char* variable, const char* name) {
  if (const char* env = std::getenv(variable); env && *env) return env;
  std::string path = directory_of_this_object() + "/" + kPrivateDirectory + "/" + name;
#ifdef MANYPY_BUILD_TREE_PRIVATE_DIR
  if (access(path.c_str(), R_OK) != 0)
    return std::string(MANYPY_BUILD_TREE_PRIVATE_DIR) + "/" + name;
#endif
  return path;
}

}  // namespace

std::string interp_library_path() {
  return find_library("MANYPY_INTERP_LIBRARY", kInterpLibraryName);
}

std::string hooks_library_path() { return find_library("MANYPY_HOOKS_LIBRARY", kHooksLibraryName); }

std::string python_home() {
  if (const char* env = std::getenv("MANYPY_PYTHON_HOME"); env && *env) return env;
  return MANYPY_PYTHON_HOME;
}

}  // namespace manypy
