// Where manypy finds what it loads at run time.
#pragma once

#include <string>

namespace manypy {

// libmanypy_interp.so: $MANYPY_INTERP_LIBRARY if set, else the copy beside
// the library (or program) that holds manypy's core, else the build tree's.
std::string interp_library_path();

// libmanypy_hooks.so: $MANYPY_HOOKS_LIBRARY, else beside the core, else the
// build tree's.
std::string hooks_library_path();

// sys.prefix of the Python to embed: $MANYPY_PYTHON_HOME if set, else the
// prefix of the Python manypy was built against (Debian's: /usr).
std::string python_home();

}  // namespace manypy
