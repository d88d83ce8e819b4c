// Where manypy finds what it loads at run time.
//
// libmanypy.so loads two private libraries, libmanypy_interp.so (into each
// interpreter's namespace) and libmanypy_hooks.so. They live in the private
// directory manypy/ beside the library that holds the core: <libdir>/manypy/
// beside <libdir>/libmanypy.so, in an install and in the build tree alike
// (build/lib/manypy/). The directory is found from where libmanypy.so was
// loaded (dladdr), so no environment variable is needed.
//
// The core's own test programs (tests/core) link the core statically from
// build/bin, so nothing is beside them: they are compiled with
// MANYPY_BUILD_TREE_PRIVATE_DIR (CMake target manypy_runtime_paths_build_tree)
// and fall back to the build tree's copies. libmanypy.so is compiled without
// it, so an installed library never looks into a build tree.
#pragma once

#include <string>

namespace manypy {

// libmanypy_interp.so: $MANYPY_INTERP_LIBRARY if set, else the one in the
// private directory.
std::string interp_library_path();

// libmanypy_hooks.so: $MANYPY_HOOKS_LIBRARY if set, else the one in the
// private directory.
std::string hooks_library_path();

// sys.prefix of the Python to embed: $MANYPY_PYTHON_HOME if set, else the
// prefix of the Python manypy was built against (Debian's: /usr).
std::string python_home();

}  // namespace manypy
