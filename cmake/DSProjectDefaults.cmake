#===- DSProjectDefaults.cmake - Settings of every build of the project ----===#
#
# The C++ standard, the build type, ccache, precompiled headers and the output
# folders (bin/, lib/ under the build folder): the full build (CMakeLists.txt) and the
# runtime-only build (runtime/CMakeLists.txt) include it at their top.
#
#===----------------------------------------------------------------------===#

set(CMAKE_CXX_STANDARD 17 CACHE STRING "C++ standard")
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_EXPORT_COMPILE_COMMANDS ON)
if(NOT CMAKE_BUILD_TYPE)
  set(CMAKE_BUILD_TYPE Release CACHE STRING "Build type" FORCE)
endif()

# ccache caches files compiled with a precompiled header only when told that
# the header's macros and __TIME__ may be ignored (cmake/DSPrecompiledHeaders.cmake);
# ccache 4.7 reads that from its environment.
find_program(CCACHE_PROGRAM ccache)
if(CCACHE_PROGRAM)
  set(_ds_ccache env CCACHE_SLOPPINESS=pch_defines,time_macros ${CCACHE_PROGRAM})
  set(CMAKE_CXX_COMPILER_LAUNCHER ${_ds_ccache})
  set(CMAKE_C_COMPILER_LAUNCHER ${_ds_ccache})
endif()
include(${CMAKE_CURRENT_LIST_DIR}/DSPrecompiledHeaders.cmake)

set(CMAKE_RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
set(CMAKE_LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/lib)
set(CMAKE_ARCHIVE_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/lib)
