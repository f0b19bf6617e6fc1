#===- DSSanitizers.cmake - Sanitizer and fuzzer builds ---------------------===#
#
# Off in the normal build. scripts/sanitize.sh and scripts/fuzz.sh configure
# their own build folder (build-san) with Debian's clang-22:
#   DS_SANITIZE=address;undefined  instruments every target of the project
#                                  (LibTorch, MPI and MLIR stay as shipped);
#   DS_ENABLE_FUZZERS=ON           adds coverage instrumentation for
#                                  libFuzzer and the ds-fuzz-<reader> targets.
# The replay drivers of the same targets (test/fuzz) are in every build.
#
#===----------------------------------------------------------------------===#

set(DS_SANITIZE "" CACHE STRING
    "Sanitizers for every target (e.g. address;undefined); needs clang")
option(DS_ENABLE_FUZZERS "Build the libFuzzer targets (clang only)" OFF)

if(DS_SANITIZE OR DS_ENABLE_FUZZERS)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "DS_SANITIZE and DS_ENABLE_FUZZERS need clang "
                        "(CMAKE_CXX_COMPILER=clang++-22); this build uses "
                        "${CMAKE_CXX_COMPILER_ID}")
  endif()
endif()

if(DS_SANITIZE)
  list(JOIN DS_SANITIZE "," ds_sanitizers)
  # UBSan reports end the process, so that a test cannot pass over one.
  add_compile_options(
    "$<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=${ds_sanitizers};-fno-sanitize-recover=all;-fno-omit-frame-pointer;-g>")
  add_link_options(-fsanitize=${ds_sanitizers})
endif()

if(DS_ENABLE_FUZZERS)
  # Coverage feedback from every library a target links; the fuzz targets
  # alone link libFuzzer's main (test/fuzz/CMakeLists.txt).
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=fuzzer-no-link>")
  # The coverage callbacks' runtime, for the executables that are not fuzz
  # targets (tools, tests).
  add_link_options(-fsanitize=fuzzer-no-link)
endif()
