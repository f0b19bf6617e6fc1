# ds-run's measured report at ZeRO stages 0-3 on several ranks (ctest
# mpi-ds-run-zero-N): for each stage, MpiZeroCheck writes a plan, weights
# and data; `mpirun -n RANKS ds-run` trains with --report and
# --save-params (at stage 3 every rank gathers, rank 0 writes);
# MpiZeroCheck checks the report against predictReport and the parameters
# against the oracle.
#
#   cmake -DMPIRUN=... -DDSRUN=... -DCHECK=... -DRANKS=2 -DDIR=... -P this
foreach(stage 0 1 2 3)
  set(dir "${DIR}/stage${stage}")
  file(REMOVE_RECURSE "${dir}")
  file(MAKE_DIRECTORY "${dir}")
  execute_process(COMMAND "${CHECK}" --write "${dir}" ${stage} ${RANKS}
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "stage ${stage}: MpiZeroCheck --write failed")
  endif()
  execute_process(
    COMMAND "${MPIRUN}" --allow-run-as-root --oversubscribe -n ${RANKS}
            "${DSRUN}" "${dir}/plan.json" --data "${dir}/data.safetensors"
            --weights "${dir}/w.safetensors" --report "${dir}/report.json"
            --save-params "${dir}/params.safetensors"
            --losses "${dir}/losses.jsonl"
    RESULT_VARIABLE rc OUTPUT_QUIET)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "stage ${stage}: mpirun ds-run failed (${rc})")
  endif()
  execute_process(COMMAND "${CHECK}" --compare "${dir}" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "stage ${stage}: the measured report differs")
  endif()
endforeach()
file(REMOVE_RECURSE "${DIR}")
