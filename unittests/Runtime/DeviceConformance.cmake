# The device conformance suite (DeviceConformanceTest.cpp), one ctest run per
# backend: cpu always; cuda under the label `gpu`, skipped (exit code 77,
# with the reason) where no GPU is visible. Included by
# unittests/Runtime/CMakeLists.txt (the full build) and runtime/CMakeLists.txt
# (the runtime-only build); needs DSRuntime and GTest::gtest.
add_executable(DSDeviceConformance
  ${CMAKE_CURRENT_LIST_DIR}/DeviceConformanceTest.cpp)
target_compile_options(DSDeviceConformance PRIVATE -fexceptions -frtti)
target_link_libraries(DSDeviceConformance PRIVATE DSRuntime GTest::gtest)
add_test(NAME device-conformance-cpu COMMAND DSDeviceConformance)
set_tests_properties(device-conformance-cpu PROPERTIES
  ENVIRONMENT "DS_CONFORMANCE_BACKENDS=cpu;OMP_NUM_THREADS=1")
get_property(_ds_have_cuda_backend GLOBAL PROPERTY DS_HAVE_CUDA_BACKEND)
if(_ds_have_cuda_backend)
  add_dependencies(DSDeviceConformance DSRuntimeCUDA)
  add_test(NAME device-conformance-cuda COMMAND DSDeviceConformance)
  set_tests_properties(device-conformance-cuda PROPERTIES
    ENVIRONMENT "DS_CONFORMANCE_BACKENDS=cuda;OMP_NUM_THREADS=1"
    LABELS gpu SKIP_RETURN_CODE 77)
endif()
