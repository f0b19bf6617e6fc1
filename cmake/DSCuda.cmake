#===- DSCuda.cmake - Whether to build the CUDA backend --------------------===#
#
# The CUDA backend (lib/Runtime/CUDA, libDSRuntimeCUDA.so) builds by default
# when the LibTorch found is a CUDA build (it has torch_cuda and c10_cuda)
# and the CUDA runtime's headers are there (the toolkit, or the wheel's
# nvidia/cu13/include). -DDS_ENABLE_CUDA=OFF skips it. No GPU is needed to
# build it, nor to load it.
# Sets DS_ENABLE_CUDA (ON or OFF) and the target DSTorchCUDA (LibTorch with
# its CUDA half, for the backend library only).
#
# NCCL (the backend's collective channel, lib/Runtime/CUDA/NcclChannel.cpp)
# is the PyTorch wheel's, the one libtorch_cuda itself loads: nccl.h from
# site-packages/nvidia/nccl/include and libnccl.so.2 from
# site-packages/nvidia/nccl/lib of DS_PYTHON's torch, never the CUDA
# toolkit's older /usr/local/cuda/include/nccl.h. Found (2.18 or later), it
# sets DS_HAVE_NCCL and the target DSNccl (header folder first on the include
# path, the library, and the header's version for a static_assert);
# otherwise the backend builds without a channel and a STATUS line says why.
# -DDS_NCCL_INCLUDE_DIR= and -DDS_NCCL_LIBRARY= point elsewhere.
#
#===----------------------------------------------------------------------===#

option(DS_ENABLE_CUDA "Build the CUDA backend when a CUDA LibTorch is found" ON)

set(_ds_cuda_missing "")
if(NOT C10_CUDA_LIBRARY OR NOT TARGET torch_cuda_library)
  set(_ds_cuda_missing "LibTorch (${DS_TORCH_LIB_DIR}) is not a CUDA build")
else()
  find_path(DS_CUDA_RUNTIME_INCLUDE_DIR cuda_runtime_api.h
    HINTS ${CUDAToolkit_INCLUDE_DIRS} ${CUDA_TOOLKIT_ROOT_DIR}/include
          ${_ds_site_packages}/nvidia/cu13/include
          ${_ds_site_packages}/nvidia/cuda_runtime/include
          /usr/local/cuda/include)
  if(NOT DS_CUDA_RUNTIME_INCLUDE_DIR)
    set(_ds_cuda_missing "no cuda_runtime_api.h (the CUDA toolkit's headers)")
  endif()
endif()

if(DS_ENABLE_CUDA AND _ds_cuda_missing)
  message(STATUS "CUDA backend: off (${_ds_cuda_missing})")
  set(DS_ENABLE_CUDA OFF)
elseif(DS_ENABLE_CUDA)
  message(STATUS "CUDA backend: on (LibTorch ${DS_TORCH_VERSION}, "
    "cuda_runtime_api.h from ${DS_CUDA_RUNTIME_INCLUDE_DIR})")
  add_library(DSTorchCUDA INTERFACE)
  # The `torch` target: torch_cpu, torch_cuda, c10_cuda and the CUDA
  # runtime, with their include folders and flags.
  target_link_libraries(DSTorchCUDA INTERFACE torch ${C10_CUDA_LIBRARY})
  target_include_directories(DSTorchCUDA INTERFACE
    ${DS_CUDA_RUNTIME_INCLUDE_DIR})
  target_compile_features(DSTorchCUDA INTERFACE cxx_std_20)
else()
  message(STATUS "CUDA backend: off (-DDS_ENABLE_CUDA=OFF)")
endif()

# -- NCCL: the wheel's -----------------------------------------------------------
set(DS_HAVE_NCCL OFF)
if(DS_ENABLE_CUDA)
  find_path(DS_NCCL_INCLUDE_DIR nccl.h
    PATHS ${_ds_site_packages}/nvidia/nccl/include
          ${_ds_site_packages}/nvidia/cu13/include
    NO_DEFAULT_PATH)
  find_library(DS_NCCL_LIBRARY NAMES nccl libnccl.so.2
    PATHS ${_ds_site_packages}/nvidia/nccl/lib
          ${_ds_site_packages}/nvidia/cu13/lib
    NO_DEFAULT_PATH)
  set(_ds_nccl_missing "")
  if(NOT DS_NCCL_INCLUDE_DIR)
    set(_ds_nccl_missing "no nccl.h in ${_ds_site_packages}/nvidia/nccl/include")
  elseif(NOT DS_NCCL_LIBRARY)
    set(_ds_nccl_missing "no libnccl.so.2 in ${_ds_site_packages}/nvidia/nccl/lib")
  else()
    file(STRINGS ${DS_NCCL_INCLUDE_DIR}/nccl.h _ds_nccl_defines
      REGEX "^#define NCCL_(MAJOR|MINOR|PATCH|VERSION_CODE) +[0-9]+")
    foreach(part MAJOR MINOR PATCH VERSION_CODE)
      string(REGEX REPLACE ".*#define NCCL_${part} +([0-9]+).*" "\\1"
        _ds_nccl_${part} "${_ds_nccl_defines}")
    endforeach()
    set(DS_NCCL_VERSION
      "${_ds_nccl_MAJOR}.${_ds_nccl_MINOR}.${_ds_nccl_PATCH}")
    if(NOT _ds_nccl_VERSION_CODE MATCHES "^[0-9]+$")
      set(_ds_nccl_missing "${DS_NCCL_INCLUDE_DIR}/nccl.h has no NCCL_VERSION_CODE")
    elseif(DS_NCCL_VERSION VERSION_LESS 2.18)
      set(_ds_nccl_missing "${DS_NCCL_INCLUDE_DIR}/nccl.h is NCCL ${DS_NCCL_VERSION}, older than 2.18")
    endif()
  endif()
  if(_ds_nccl_missing)
    message(STATUS "CUDA backend: no NCCL channel (${_ds_nccl_missing}); "
      "the cuda backend's createChannel stays empty")
  else()
    set(DS_HAVE_NCCL ON)
    message(STATUS "CUDA backend: NCCL ${DS_NCCL_VERSION} channel "
      "(nccl.h from ${DS_NCCL_INCLUDE_DIR}, ${DS_NCCL_LIBRARY})")
    add_library(DSNccl INTERFACE)
    # BEFORE and not SYSTEM: -I comes ahead of LibTorch's -isystem folders
    # and of the CUDA runtime's (which may be the toolkit's, with its own
    # older nccl.h); NcclTypes.h's static_assert checks that it did.
    # (nccl.h includes cuda_runtime.h: the CUDA runtime's folder after it.)
    # Link DSNccl ahead of DSTorchCUDA so that its folders come first.
    target_include_directories(DSNccl BEFORE INTERFACE ${DS_NCCL_INCLUDE_DIR}
      ${DS_CUDA_RUNTIME_INCLUDE_DIR})
    target_compile_definitions(DSNccl INTERFACE DS_HAVE_NCCL
      DS_NCCL_HEADER_VERSION_CODE=${_ds_nccl_VERSION_CODE})
  endif()
endif()
