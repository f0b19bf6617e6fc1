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
