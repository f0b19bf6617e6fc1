# docs-aten-ops-up-to-date: runs TOOL (ds-aten-doc) into OUT and compares it
# with the committed EXPECTED (docs/generated/AtenOps.md).
execute_process(COMMAND ${TOOL} OUTPUT_FILE ${OUT} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${TOOL} failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${OUT} ${EXPECTED}
                RESULT_VARIABLE differ)
if(differ)
  message(FATAL_ERROR "${EXPECTED} is stale: run `ninja -C build ds-docs`")
endif()
