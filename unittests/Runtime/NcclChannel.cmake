# The CUDA backend's NCCL channel (lib/Runtime/CUDA/NcclChannel.cpp), where
# the build has it (cmake/DSCuda.cmake found the wheel's NCCL: the global
# property DS_HAVE_NCCL). Included by unittests/Runtime/CMakeLists.txt (the
# full build) and runtime/CMakeLists.txt (the runtime-only build of the GPU
# check); needs GTest::gtest.
#  - nccl-host: NcclHostTest.cpp, the channel's host logic on the CPU
#    (NcclTypes.h: dtypes and reductions, blocks, the version text, the
#    unique id's exchange through a Rendezvous; the backend library's entry
#    hands out createChannel, which refuses a CPU device or a stray rank
#    before touching CUDA); nccl.h's enums, no GPU, no communicator;
#  - nccl-channel-cuda (label gpu): NcclChannelTest.cpp, a channel of one
#    rank per visible GPU (threads of one process) through the device
#    registry; exit code 77 (skipped, with the reason) where no GPU is
#    visible.
get_property(_ds_have_nccl GLOBAL PROPERTY DS_HAVE_NCCL)
if(NOT _ds_have_nccl)
  return()
endif()

add_executable(DSNcclHostTest ${CMAKE_CURRENT_LIST_DIR}/NcclHostTest.cpp)
target_include_directories(DSNcclHostTest PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/../../include)
target_compile_options(DSNcclHostTest PRIVATE -fexceptions -frtti)
target_link_libraries(DSNcclHostTest PRIVATE DSNccl DSTorchCPU GTest::gtest
  ${CMAKE_DL_LIBS})
# It loads the backend library (dlopen) to check its entry point.
target_compile_definitions(DSNcclHostTest PRIVATE
  DS_CUDA_BACKEND_LIBRARY="$<TARGET_FILE:DSRuntimeCUDA>")
add_dependencies(DSNcclHostTest DSRuntimeCUDA)
add_test(NAME nccl-host COMMAND DSNcclHostTest)
set_tests_properties(nccl-host PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=1")

add_executable(DSNcclChannelTest ${CMAKE_CURRENT_LIST_DIR}/NcclChannelTest.cpp)
target_compile_options(DSNcclChannelTest PRIVATE -fexceptions -frtti)
target_link_libraries(DSNcclChannelTest PRIVATE DSRuntime GTest::gtest)
add_dependencies(DSNcclChannelTest DSRuntimeCUDA)
add_test(NAME nccl-channel-cuda COMMAND DSNcclChannelTest)
set_tests_properties(nccl-channel-cuda PROPERTIES
  ENVIRONMENT "OMP_NUM_THREADS=1" LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 300)
