# cmake -DCASE=<case> -DWORK=<dir> -P single-torch.cmake
# Runs ds_check_single_torch (cmake/DSSingleTorch.cmake) on a fake wheel and a
# fake system LibTorch made under WORK. Cases:
#   clean        only the wheel's libraries: passes
#   second-file  the link items name a libc10.so outside the wheel: fails, naming it
#   system-dev   a libtorch_cpu.so on a system folder: fails, naming it
#   bare-name    a bare `c10` item the linker would find on a system folder: fails
cmake_minimum_required(VERSION 3.20)
include(${CMAKE_CURRENT_LIST_DIR}/../../cmake/DSSingleTorch.cmake)

file(REMOVE_RECURSE ${WORK})
set(wheel ${WORK}/wheel/torch/lib)
set(system ${WORK}/system)
file(MAKE_DIRECTORY ${wheel} ${system})
foreach(name c10 torch torch_cpu)
  file(TOUCH ${wheel}/lib${name}.so)
endforeach()
set(wheel_items ${wheel}/libtorch.so ${wheel}/libtorch_cpu.so ${wheel}/libc10.so)

if(CASE STREQUAL "clean")
  ds_check_single_torch(${wheel} ITEMS ${wheel_items} -Wl,--no-as-needed
                        SYSTEM_DIRS ${system})
  message(STATUS "single torch: accepted")
elseif(CASE STREQUAL "second-file")
  file(TOUCH ${system}/libc10.so.1.13)
  ds_check_single_torch(${wheel} ITEMS ${wheel_items} ${system}/libc10.so.1.13
                        SYSTEM_DIRS ${WORK}/empty)
elseif(CASE STREQUAL "system-dev")
  file(TOUCH ${system}/libtorch_cpu.so)
  ds_check_single_torch(${wheel} ITEMS ${wheel_items} SYSTEM_DIRS ${system})
elseif(CASE STREQUAL "bare-name")
  file(TOUCH ${system}/libc10.so)
  ds_check_single_torch(${wheel} ITEMS ${wheel}/libtorch.so c10
                        SYSTEM_DIRS ${system})
else()
  message(FATAL_ERROR "unknown CASE '${CASE}'")
endif()
