#===- DSTorch.cmake - LibTorch and Python from the PyPI torch wheel --------===#
#
# Finds the Python interpreter whose `torch` the project builds against and
# tests with, and LibTorch from that torch wheel:
#   DS_PYTHON   the interpreter: -DDS_PYTHON=..., else the project's .venv
#               (scripts/setup.sh makes it), else the active virtual
#               environment ($VIRTUAL_ENV), else python3 on PATH.
#   Torch_DIR   from -DTorch_DIR=... when given, else torch.utils.cmake_prefix_path.
# Sets TORCH_LIBRARIES (find_package(Torch)), the target DSTorchCPU,
# DS_TORCH_VERSION,
# DS_TORCH_LIB_DIR and DS_TORCH_RPATH_DIRS (the wheel's nvidia-* library
# folders, for the linker's -rpath-link and the binaries' RUNPATH).
#
# Two traps on machines with the CUDA toolkit or Debian's LibTorch installed
# (both are on the default linker path): an older libnccl.so.2 satisfies
# libtorch_cuda.so's NCCL symbols only partly, and a second libc10.so aborts
# the program at start-up. The linker is given the wheel's folders first, and
# configure fails when any c10/torch library resolves outside the wheel.
#
#===----------------------------------------------------------------------===#

# The repository's .venv (cmake/ sits in the repository root; in the
# runtime-only build PROJECT_SOURCE_DIR is runtime/).
get_filename_component(_ds_venv_python "${CMAKE_CURRENT_LIST_DIR}/../.venv/bin/python" ABSOLUTE)
if(NOT DS_PYTHON)
  if(EXISTS ${_ds_venv_python})
    set(_ds_python ${_ds_venv_python})
  elseif(DEFINED ENV{VIRTUAL_ENV} AND EXISTS "$ENV{VIRTUAL_ENV}/bin/python")
    set(_ds_python "$ENV{VIRTUAL_ENV}/bin/python")
  else()
    find_program(_ds_python NAMES python3 python)
  endif()
  set(DS_PYTHON ${_ds_python} CACHE FILEPATH
      "Python interpreter with torch 2.x (test models, oracle, dsopt)")
endif()

execute_process(
  COMMAND ${DS_PYTHON} -c
    "import os, torch, torch.utils; print(torch.__version__); print(torch.utils.cmake_prefix_path); print(os.path.dirname(os.path.dirname(torch.__file__)))"
  OUTPUT_VARIABLE _ds_torch_info
  ERROR_VARIABLE _ds_torch_error
  RESULT_VARIABLE _ds_torch_rc
  OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _ds_torch_rc EQUAL 0)
  message(FATAL_ERROR
    "No torch found for ${DS_PYTHON}:\n${_ds_torch_error}\n"
    "Run scripts/setup.sh (it installs torch into .venv/), or point CMake at a "
    "Python that has torch 2.x with -DDS_PYTHON=/path/to/python.")
endif()
string(REPLACE "\n" ";" _ds_torch_info "${_ds_torch_info}")
list(GET _ds_torch_info 0 DS_TORCH_VERSION)
list(GET _ds_torch_info 1 _ds_torch_prefix)
list(GET _ds_torch_info 2 _ds_site_packages)
if(DS_TORCH_VERSION VERSION_LESS 2.0)
  message(FATAL_ERROR "${DS_PYTHON} has torch ${DS_TORCH_VERSION}; the project "
    "needs torch 2.x (scripts/setup.sh installs the pinned version into .venv/)")
endif()
if(NOT Torch_DIR)
  list(PREPEND CMAKE_PREFIX_PATH ${_ds_torch_prefix})
endif()

# The wheel's CUDA libraries (cuBLAS, cuDNN, NCCL, ...) live in
# site-packages/nvidia/*/lib; libtorch_cuda.so needs them at link time.
file(GLOB DS_TORCH_RPATH_DIRS LIST_DIRECTORIES true ${_ds_site_packages}/nvidia/*/lib)
foreach(dir ${DS_TORCH_RPATH_DIRS})
  add_link_options("LINKER:-rpath-link,${dir}")
endforeach()

find_package(Torch REQUIRED CONFIG)
get_filename_component(DS_TORCH_LIB_DIR "${TORCH_INSTALL_PREFIX}/lib" REALPATH)
message(STATUS "LibTorch ${DS_TORCH_VERSION} from ${DS_TORCH_LIB_DIR} (Python: ${DS_PYTHON})")
# The LibTorch found must be DS_PYTHON's own: the tests compare the tools with
# that Python's torch, and dsopt shares its process. A Torch_DIR cached by a
# build folder configured before the move to the wheel points elsewhere.
get_filename_component(_ds_python_torch_lib "${_ds_site_packages}/torch/lib" REALPATH)
if(NOT DS_TORCH_LIB_DIR STREQUAL _ds_python_torch_lib)
  message(FATAL_ERROR "Torch_DIR (${Torch_DIR}) is the LibTorch in "
    "${DS_TORCH_LIB_DIR}, not the one of ${DS_PYTHON} (${_ds_python_torch_lib}). "
    "Configure a new build folder (or remove CMakeCache.txt), or give "
    "-DDS_PYTHON a Python whose torch owns that LibTorch.")
endif()

# Every c10/torch library on the link line must be the wheel's, and no
# development copy of another LibTorch may sit on the linker's default path.
include(DSSingleTorch)
ds_check_single_torch(${DS_TORCH_LIB_DIR} ITEMS ${TORCH_LIBRARIES}
  SYSTEM_DIRS /usr/lib/x86_64-linux-gnu /usr/lib /usr/local/lib)

# The CPU tools and libraries link LibTorch's CPU half only (torch_cpu, c10):
# TORCH_LIBRARIES also loads libtorch_cuda and the wheel's CUDA libraries
# (cuBLAS, cuDNN, NCCL, ...) at every start, which costs a CPU-only ds-run
# 0.18 s and 370 MB of resident memory per process. The flags and include
# folders are the `torch` target's.
add_library(DSTorchCPU INTERFACE)
target_link_libraries(DSTorchCPU INTERFACE torch_cpu_library c10)
target_include_directories(DSTorchCPU INTERFACE
  $<TARGET_PROPERTY:torch,INTERFACE_INCLUDE_DIRECTORIES>)
target_compile_options(DSTorchCPU INTERFACE
  $<TARGET_PROPERTY:torch,INTERFACE_COMPILE_OPTIONS>)
target_compile_features(DSTorchCPU INTERFACE cxx_std_20)

# Binaries find the wheel's libraries at run time without LD_LIBRARY_PATH.
set(CMAKE_BUILD_RPATH ${DS_TORCH_LIB_DIR} ${DS_TORCH_RPATH_DIRS})
