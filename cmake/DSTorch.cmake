#===- DSTorch.cmake - LibTorch and Python from the PyPI torch wheel --------===#
#
# Finds the Python interpreter whose `torch` the project builds against and
# tests with, and LibTorch from that torch wheel:
#   DS_PYTHON   the interpreter: -DDS_PYTHON=..., else the project's .venv
#               (scripts/setup.sh makes it), else the active virtual
#               environment ($VIRTUAL_ENV), else python3 on PATH.
#   Torch_DIR   from -DTorch_DIR=... when given, else torch.utils.cmake_prefix_path.
# Sets TORCH_LIBRARIES (find_package(Torch)), DS_TORCH_VERSION,
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

set(_ds_venv_python ${PROJECT_SOURCE_DIR}/.venv/bin/python)
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

# Every c10/torch library on the link line must be the wheel's. Walk
# TORCH_LIBRARIES, its imported targets and their link interfaces.
set(_ds_seen)
set(_ds_queue ${TORCH_LIBRARIES})
while(_ds_queue)
  list(POP_FRONT _ds_queue _ds_item)
  if(_ds_item IN_LIST _ds_seen OR _ds_item MATCHES "^(-|\\$<)")
    continue()
  endif()
  list(APPEND _ds_seen ${_ds_item})
  set(_ds_files)
  if(TARGET ${_ds_item})
    get_target_property(_ds_type ${_ds_item} TYPE)
    if(NOT _ds_type STREQUAL "INTERFACE_LIBRARY")
      foreach(_ds_prop IMPORTED_LOCATION IMPORTED_LOCATION_RELEASE IMPORTED_LOCATION_NOCONFIG)
        get_target_property(_ds_loc ${_ds_item} ${_ds_prop})
        if(_ds_loc)
          list(APPEND _ds_files ${_ds_loc})
        endif()
      endforeach()
    endif()
    get_target_property(_ds_deps ${_ds_item} INTERFACE_LINK_LIBRARIES)
    if(_ds_deps)
      list(APPEND _ds_queue ${_ds_deps})
    endif()
  elseif(IS_ABSOLUTE "${_ds_item}")
    list(APPEND _ds_files ${_ds_item})
  elseif(_ds_item MATCHES "^(c10|torch)")
    # A bare name: the linker would search its default path for it.
    find_library(_ds_bare_${_ds_item} ${_ds_item} NO_CACHE)
    list(APPEND _ds_files ${_ds_bare_${_ds_item}})
  endif()
  foreach(_ds_file ${_ds_files})
    get_filename_component(_ds_name ${_ds_file} NAME)
    get_filename_component(_ds_dir ${_ds_file} DIRECTORY)
    get_filename_component(_ds_dir ${_ds_dir} REALPATH)
    if(_ds_name MATCHES "^lib(c10|torch)" AND NOT _ds_dir STREQUAL DS_TORCH_LIB_DIR)
      message(FATAL_ERROR "${_ds_file} would be linked next to the torch in "
        "${DS_TORCH_LIB_DIR}: two LibTorch copies abort at start-up. Remove "
        "Debian's LibTorch (apt-get remove libtorch-dev python3-torch) or "
        "point -DDS_PYTHON / -DTorch_DIR at one torch.")
    endif()
  endforeach()
endwhile()

# A library named like LibTorch's on the default linker path is refused as
# well: -lc10 or a transitive DT_NEEDED could pick it up.
foreach(_ds_name c10 torch torch_cpu)
  find_library(_ds_system_${_ds_name} ${_ds_name} NO_CACHE
               PATHS /usr/lib/x86_64-linux-gnu /usr/lib /usr/local/lib NO_DEFAULT_PATH)
  if(_ds_system_${_ds_name})
    message(FATAL_ERROR "${_ds_system_${_ds_name}} is on the default linker path "
      "next to the torch in ${DS_TORCH_LIB_DIR}: two LibTorch copies abort at "
      "start-up. Remove Debian's LibTorch (apt-get remove libtorch-dev "
      "python3-torch libtorch1.13) before configuring.")
  endif()
endforeach()

# Binaries find the wheel's libraries at run time without LD_LIBRARY_PATH.
set(CMAKE_BUILD_RPATH ${DS_TORCH_LIB_DIR} ${DS_TORCH_RPATH_DIRS})
