# ds_require_mpi_tests(WHAT): the guard of every folder that registers tests
# under mpirun. Unless the runtime was built with MPI (the global property
# DS_HAVE_MPI, lib/Runtime) and mpirun is on the PATH (DS_MPIRUN), it prints
# "MPI or mpirun not found: WHAT" and returns from the calling CMakeLists
# (a macro, so return() leaves the caller).
macro(ds_require_mpi_tests what)
  get_property(DS_HAVE_MPI GLOBAL PROPERTY DS_HAVE_MPI)
  find_program(DS_MPIRUN mpirun)
  if(NOT DS_HAVE_MPI OR NOT DS_MPIRUN)
    message(STATUS "MPI or mpirun not found: ${what}")
    return()
  endif()
endmacro()

# ds_schedule_mpi_tests_first(): at the end of every folder that registers
# tests under the `mpi` resource lock (CMake 3.25 reads test properties of the
# current folder only). Those tests run one at a time and take about a third
# of ctest's time on two cores; ctest without timing data from an earlier run
# (a clean clone, CI) starts tests in the order they were registered, which
# left them for the end, one slot idle beside them. A COST above every
# measured time makes ctest start them first, one after another, while the
# other slot runs the rest. Where a build folder has ctest's timing data, that
# replaces the COST.
function(ds_schedule_mpi_tests_first)
  get_property(tests DIRECTORY PROPERTY TESTS)
  foreach(test ${tests})
    get_test_property(${test} RESOURCE_LOCK locks)
    if(locks AND "mpi" IN_LIST locks)
      set_tests_properties(${test} PROPERTIES COST 1000)
    endif()
  endforeach()
endfunction()
