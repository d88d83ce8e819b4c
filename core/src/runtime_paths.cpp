#include "runtime_paths.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>

namespace manypy {

namespace {

constexpr const char* kInterpLibraryName = "libmanypy_interp.so";
constexpr const char* kHooksLibraryName = "libmanypy_hooks.so";

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

// $variable, else `name` beside the core, else `built`.
std::string find_library(const char* variable, const char* name, const char* built) {
  if (const char* env = std::getenv(variable); env && *env) return env;
  std::string beside = directory_of_this_object() + "/" + name;
  if (access(beside.c_str(), R_OK) == 0) return beside;
  return built;
}

}  // namespace

std::string interp_library_path() {
  return find_library("MANYPY_INTERP_LIBRARY", kInterpLibraryName, MANYPY_INTERP_BUILD_PATH);
}

std::string hooks_library_path() {
  return find_library("MANYPY_HOOKS_LIBRARY", kHooksLibraryName, MANYPY_HOOKS_BUILD_PATH);
}

std::string python_home() {
  if (const char* env = std::getenv("MANYPY_PYTHON_HOME"); env && *env) return env;
  return MANYPY_PYTHON_HOME;
}

}  // namespace manypy
