# Draws the lineage triangle's trace with benchmarks/timeline.py and checks
# the picture: an SVG with worker 0's row and the task's name and count in its
# legend.
# Skipped (the test's SKIP_REGULAR_EXPRESSION) when matplotlib is missing.
execute_process(COMMAND ${PYTHON} -c "import matplotlib" RESULT_VARIABLE no_matplotlib OUTPUT_QUIET ERROR_QUIET)
if(no_matplotlib)
    message(STATUS "matplotlib is missing (Debian: python3-matplotlib): picture not drawn")
    return()
endif()
file(REMOVE ${OUT})
execute_process(COMMAND ${PYTHON} ${TOOL} ${TRACE} ${OUT} RESULT_VARIABLE failed)
if(failed)
    message(FATAL_ERROR "timeline.py failed (${failed})")
endif()
file(READ ${OUT} svg)
foreach(expected "<svg" "worker 0" "AddNumberSubset (4760)")
    string(FIND "${svg}" "${expected}" at)
    if(at EQUAL -1)
        message(FATAL_ERROR "${OUT} lacks \"${expected}\"")
    endif()
endforeach()
message(STATUS "${OUT}: drawn and checked")
