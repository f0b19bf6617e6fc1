#===- DSRuntimeDeps.cmake - Header-only and test deps of the runtime build -===#
#
# The runtime-only build (runtime/CMakeLists.txt) runs where Debian's packages
# may be missing (a GPU node with only a PyTorch environment). Its two
# non-LibTorch dependencies come from the system when CMake finds them, else
# from the sources that scripts/gpu-bundle.sh copies into third_party/ with
# their licences:
#   nlohmann_json::nlohmann_json  header-only; DS_NLOHMANN_JSON_INCLUDE_DIR
#                                 (default third_party/nlohmann_json/include)
#   GTest::gtest                  for the device conformance suite only;
#                                 DS_GTEST_SOURCE_DIR (default
#                                 third_party/googletest: its include/ and
#                                 src/gtest-all.cc). Without it the suite is
#                                 not built (a message says so).
#
#===----------------------------------------------------------------------===#

find_package(nlohmann_json 3 QUIET)
if(nlohmann_json_FOUND)
  message(STATUS "nlohmann-json: ${nlohmann_json_DIR}")
else()
  set(DS_NLOHMANN_JSON_INCLUDE_DIR
      ${DS_SOURCE_DIR}/third_party/nlohmann_json/include CACHE PATH
      "Folder holding nlohmann/json.hpp, used when find_package(nlohmann_json) fails")
  if(NOT EXISTS ${DS_NLOHMANN_JSON_INCLUDE_DIR}/nlohmann/json.hpp)
    message(FATAL_ERROR "nlohmann-json not found: no nlohmann_jsonConfig.cmake "
      "and no ${DS_NLOHMANN_JSON_INCLUDE_DIR}/nlohmann/json.hpp. Install it "
      "(Debian: nlohmann-json3-dev) or point -DDS_NLOHMANN_JSON_INCLUDE_DIR at "
      "the folder that holds nlohmann/json.hpp.")
  endif()
  add_library(ds_nlohmann_json INTERFACE)
  target_include_directories(ds_nlohmann_json SYSTEM INTERFACE
    ${DS_NLOHMANN_JSON_INCLUDE_DIR})
  add_library(nlohmann_json::nlohmann_json ALIAS ds_nlohmann_json)
  message(STATUS "nlohmann-json: headers in ${DS_NLOHMANN_JSON_INCLUDE_DIR}")
endif()

find_package(GTest QUIET)
if(GTest_FOUND)
  message(STATUS "GoogleTest: the system's")
else()
  set(DS_GTEST_SOURCE_DIR ${DS_SOURCE_DIR}/third_party/googletest CACHE PATH
      "GoogleTest's googletest/ folder (include/, src/), used when find_package(GTest) fails")
  if(EXISTS ${DS_GTEST_SOURCE_DIR}/src/gtest-all.cc)
    find_package(Threads REQUIRED)
    # gtest-all.cc includes every other source of the library.
    add_library(ds_gtest STATIC ${DS_GTEST_SOURCE_DIR}/src/gtest-all.cc)
    target_include_directories(ds_gtest SYSTEM PUBLIC
      ${DS_GTEST_SOURCE_DIR}/include)
    target_include_directories(ds_gtest PRIVATE ${DS_GTEST_SOURCE_DIR})
    target_link_libraries(ds_gtest PUBLIC Threads::Threads)
    add_library(GTest::gtest ALIAS ds_gtest)
    message(STATUS "GoogleTest: built from ${DS_GTEST_SOURCE_DIR}")
  endif()
endif()
