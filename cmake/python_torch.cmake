# The Python that interpreters embed and the libtorch the core, the hooks and
# the sample operators link: the one place that tells the two build legs
# apart (README, "Torch and Python versions").
#   default             Debian's /usr/bin/python3 (3.11) with python3-torch,
#                       and Debian's libtorch-dev (torch 1.13)
#   -DMANYPY_PYTHON=P   P, e.g. the venv of scripts/setup_torch2.sh (pyenv's
#                       CPython 3.12 with PyPI's torch 2.x), and the libtorch
#                       inside the wheel that P imports (torch/share/cmake)
# Either way the host links the very libtorch the interpreters import.
# Sets MANYPY_PYTHON_HOME (the Python's sys.prefix: a venv's own directory,
# which the interpreters start from, core/interp/interp.c),
# MANYPY_PYTHON_PACKAGES (the directory torch is installed in),
# and MANYPY_TORCH_VERSION; finds Python3
# (Development.Embed) and Torch, and defines manypy_torch, the libtorch that
# manypy's C++ links.
set(MANYPY_PYTHON /usr/bin/python3 CACHE FILEPATH
    "Python to embed; manypy links the libtorch of the torch it imports")
if(NOT EXISTS "${MANYPY_PYTHON}")
  message(FATAL_ERROR "MANYPY_PYTHON=${MANYPY_PYTHON} does not exist (for the torch 2.x "
                      "leg, run scripts/setup_torch2.sh, or scripts/build.sh torch2)")
endif()
execute_process(
  COMMAND ${MANYPY_PYTHON} -c
    "import os, re, sys
import torch, torch.utils
print(sys.prefix)
print(os.path.dirname(os.path.dirname(torch.__file__)))
print(re.match('[0-9]+[.][0-9]+[.][0-9]+', torch.__version__).group(0))
print(torch.utils.cmake_prefix_path)
print(int(torch._C._GLIBCXX_USE_CXX11_ABI))"
  OUTPUT_VARIABLE probe ERROR_VARIABLE probe_error RESULT_VARIABLE probe_result
  OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT probe_result EQUAL 0)
  message(FATAL_ERROR "${MANYPY_PYTHON} cannot import torch:\n${probe_error}")
endif()
string(REPLACE "\n" ";" probe "${probe}")
list(GET probe 0 MANYPY_PYTHON_HOME)
list(GET probe 1 MANYPY_PYTHON_PACKAGES)
list(GET probe 2 MANYPY_TORCH_VERSION)
list(GET probe 3 torch_cmake_prefix)
list(GET probe 4 torch_cxx11_abi)

set(Python3_EXECUTABLE ${MANYPY_PYTHON} CACHE FILEPATH "Python to embed" FORCE)
find_package(Python3 REQUIRED COMPONENTS Interpreter Development.Embed)
if(NOT Python3_LIBRARIES MATCHES "\\.so")
  message(FATAL_ERROR "${MANYPY_PYTHON} has no shared libpython to embed "
                      "(${Python3_LIBRARIES}): build it with --enable-shared")
endif()

# -DMANYPY_LIBPYTHON_DIR=D: the interpreters load D's libpython, the same
# CPython version built for embedding (scripts/build_libpython.sh: Debian's
# source with PGO and LTO, which Debian's own shared library lacks), instead
# of the one MANYPY_PYTHON links. Everything else (the stdlib, extension
# modules, torch) stays MANYPY_PYTHON's. Off by default: the product runs on
# the distribution's packages (docs/performance.md, "the embedding tax").
set(MANYPY_LIBPYTHON_DIR "" CACHE PATH
    "directory of a libpython built for embedding, loaded instead of the Python's own")
if(MANYPY_LIBPYTHON_DIR)
  execute_process(
    COMMAND ${MANYPY_PYTHON} -c "import sysconfig; print(sysconfig.get_config_var('INSTSONAME'))"
    OUTPUT_VARIABLE libpython_soname OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT EXISTS "${MANYPY_LIBPYTHON_DIR}/${libpython_soname}")
    message(FATAL_ERROR "MANYPY_LIBPYTHON_DIR=${MANYPY_LIBPYTHON_DIR} has no ${libpython_soname}, "
                        "the library ${MANYPY_PYTHON} embeds (scripts/build_libpython.sh makes one)")
  endif()
  message(STATUS "manypy: interpreters load ${MANYPY_LIBPYTHON_DIR}/${libpython_soname}")
endif()

set(torch_from_wheel OFF)
if(EXISTS "${torch_cmake_prefix}/Torch/TorchConfig.cmake")
  set(torch_from_wheel ON)
  # A wheel: its own libtorch. Its Caffe2 config looks for the CUDA toolkit
  # (nvcc, headers) when the wheel is a CUDA build, as PyPI's is, and fails
  # without it; but nothing of ours compiles CUDA, and the host links
  # libtorch_cpu and libc10 only (below), so CUDA is never loaded into the
  # host process. Its cuda.cmake returns at once when torch::cudart exists:
  # an empty one stands in, and no target of ours links the CUDA targets.
  if(NOT TARGET torch::cudart)
    add_library(torch::cudart INTERFACE IMPORTED)
  endif()
  # Its TorchConfig finds Caffe2 with PATHS, which CMake searches after the
  # system's: Debian's libtorch-dev (the first leg) would win. The wheel's
  # directory goes first.
  list(PREPEND CMAKE_PREFIX_PATH "${torch_cmake_prefix}")
  set(Caffe2_DIR "${torch_cmake_prefix}/Caffe2" CACHE PATH "the wheel's Caffe2 (libtorch) config" FORCE)
  find_package(Torch REQUIRED PATHS "${torch_cmake_prefix}" NO_DEFAULT_PATH)
  # Installed, libmanypy.so, the hooks and the interpreter side still find
  # the wheel's libraries and the non-system libpython where they are.
  set(CMAKE_INSTALL_RPATH_USE_LINK_PATH ON)
else()
  # Debian's python3-torch has no CMake files; libtorch-dev's are the same
  # build (the version check below makes sure).
  find_package(Torch REQUIRED)
endif()
# manypy_torch: what the core, the hooks and the sample operators link.
add_library(manypy_torch INTERFACE IMPORTED)
if(torch_from_wheel)
  # The wheel's: libtorch_cpu and libc10, its headers (the C++ API's too:
  # TORCH_INCLUDE_DIRS) and its C++ ABI flag (TORCH_CXX_FLAGS). Not `torch`,
  # which brings libtorch_cuda and the CUDA libraries. torch 2.15's headers
  # need C++20 (std::strong_ordering, requires-clauses); only what includes
  # them is compiled so.
  separate_arguments(torch_cxx_flags UNIX_COMMAND "${TORCH_CXX_FLAGS}")
  set_target_properties(manypy_torch PROPERTIES
    INTERFACE_LINK_LIBRARIES "torch_cpu;c10"
    INTERFACE_INCLUDE_DIRECTORIES "${TORCH_INCLUDE_DIRS}"
    INTERFACE_COMPILE_OPTIONS "${torch_cxx_flags}"
    INTERFACE_COMPILE_FEATURES cxx_std_20)
else()
  set_target_properties(manypy_torch PROPERTIES INTERFACE_LINK_LIBRARIES "${TORCH_LIBRARIES}")
endif()

if(NOT Torch_VERSION VERSION_EQUAL MANYPY_TORCH_VERSION)
  message(FATAL_ERROR "libtorch ${Torch_VERSION} (${Torch_DIR}) is not the torch "
                      "${MANYPY_TORCH_VERSION} that ${MANYPY_PYTHON} imports")
endif()
message(STATUS "manypy: Python ${Python3_VERSION} (${MANYPY_PYTHON}), torch ${Torch_VERSION} "
               "(${Torch_DIR}, C++11 ABI ${torch_cxx11_abi})")
