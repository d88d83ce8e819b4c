// Custom operator libraries (torch.ops.load_library), loaded into the host's
// libtorch and into every interpreter, present and future. One per process,
// the Runtime's (runtime.h).
#pragma once

#include <mutex>
#include <string>
#include <vector>

namespace manypy {

class Interpreter;

class OperatorLibraries {
 public:
  OperatorLibraries() = default;
  OperatorLibraries(const OperatorLibraries&) = delete;
  OperatorLibraries& operator=(const OperatorLibraries&) = delete;

  // Loads `path` into the host and every started interpreter, and remembers
  // it for interpreters started later. Throws Error: kNotFound, kLoader
  // (with the loader's or Python's message, naming the interpreter).
  void load(const std::string& path);

  // An interpreter that has just started takes part from now on: loads
  // every library registered so far (InterpreterSet, when it starts one).
  // Throws like load.
  void join(Interpreter& interp);

 private:
  std::mutex mu_;  // held across loads, so no interpreter misses a library
  std::vector<std::string> paths_;
  std::vector<Interpreter*> members_;
};

}  // namespace manypy
