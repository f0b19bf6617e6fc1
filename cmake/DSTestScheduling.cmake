# ds_start_tests_early(TEST...): tests of the calling folder that take minutes
# alone (CMake 3.25 sets test properties of the current folder only). Without
# timing data from an earlier run (a clean clone, CI) ctest starts tests in
# the order they were registered, and the longest, registered late, ran last
# with the other slot idle beside them. COST 500 starts them right after the
# `mpi`-locked tests (ds_schedule_mpi_tests_first, COST 1000): one slot runs
# the locked chain, the other the long tests, then both the short ones.
function(ds_start_tests_early)
  foreach(test ${ARGN})
    set_tests_properties(${test} PROPERTIES COST 500)
  endforeach()
endfunction()
