// Custom operator libraries (torch.ops.load_library), loaded into the host's
// libtorch and into every interpreter, present and future.
#pragma once

#include <string>

namespace manypy {

class Interpreter;

namespace operator_libraries {

// Loads `path` into the host and every started interpreter, and remembers it
// for interpreters started later. Throws Error: kNotFound, kLoader (with the
// loader's or Python's message, naming the interpreter).
void load(const std::string& path);

// Called by each interpreter once it has started: loads every library
// registered so far, then takes part in later loads. Throws like load.
void join(Interpreter& interp);

}  // namespace operator_libraries
}  // namespace manypy
