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
