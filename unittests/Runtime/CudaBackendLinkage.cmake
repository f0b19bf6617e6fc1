# The CUDA backend library's NEEDED list names libtorch_cuda, and libnccl.so.2
# when it was built with its NCCL channel; the CPU binaries' lists name no
# CUDA library of LibTorch, nor NCCL (they load the backend with dlopen, only
# for --device cuda): ds-run and the test binaries, the NCCL channel's
# included.
# -DREADELF=... -DCPU_BINARIES=a|b|... -DCUDA_LIBRARY=... -DNCCL=ON|OFF
function(needed_of file out)
  execute_process(COMMAND ${READELF} -d ${file} OUTPUT_VARIABLE text
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "readelf -d ${file} failed")
  endif()
  string(REGEX MATCHALL "\\(NEEDED\\)[^\n]*\\[([^]]*)\\]" lines "${text}")
  set(${out} "${lines}" PARENT_SCOPE)
endfunction()

needed_of(${CUDA_LIBRARY} cuda_needed)
if(NOT cuda_needed MATCHES "libtorch_cuda\\.so")
  message(FATAL_ERROR "${CUDA_LIBRARY} does not need libtorch_cuda.so:\n${cuda_needed}")
endif()
if(NOT cuda_needed MATCHES "libc10_cuda\\.so")
  message(FATAL_ERROR "${CUDA_LIBRARY} does not need libc10_cuda.so:\n${cuda_needed}")
endif()
if(NCCL AND NOT cuda_needed MATCHES "libnccl\\.so\\.2")
  message(FATAL_ERROR "${CUDA_LIBRARY} was built with its NCCL channel but "
    "does not need libnccl.so.2:\n${cuda_needed}")
endif()
string(REPLACE "|" ";" binaries "${CPU_BINARIES}")
foreach(binary ${binaries})
  needed_of(${binary} needed)
  foreach(forbidden libtorch_cuda libc10_cuda libnccl libcublas)
    if(needed MATCHES "${forbidden}")
      message(FATAL_ERROR "${binary} needs ${forbidden}:\n${needed}")
    endif()
  endforeach()
  message(STATUS "${binary}: no CUDA library of LibTorch in NEEDED")
endforeach()
message(STATUS "${CUDA_LIBRARY}: needs libtorch_cuda.so and libc10_cuda.so")
if(NCCL)
  message(STATUS "${CUDA_LIBRARY}: needs libnccl.so.2")
endif()
