# Runs the lineage triangle with FTL_TRACE set, then ftl_trace_check on its
# trace, up to three times until a span lands on every worker's track. The
# program is the lineage's, unchanged: which worker runs which of its tasks
# is for the OS to decide, and a worker kept off its core by other load may
# take none of a run that lasts tens of milliseconds. Every other check (the
# span count, the track names) must hold in each run.
#   -DPROGRAM= -DCHECK= -DTRACE= -DEMULATOR= (its arguments joined by "|")
string(REPLACE "|" ";" emulator "${EMULATOR}")
foreach(run 1 2 3)
    execute_process(COMMAND ${CMAKE_COMMAND} -E env FTL_TRACE=${TRACE} ${emulator} ${PROGRAM}
                    RESULT_VARIABLE failed)
    if(failed)
        message(FATAL_ERROR "${PROGRAM} failed (${failed})")
    endif()
    execute_process(COMMAND ${emulator} ${CHECK} ${TRACE} AddNumberSubset 4760 RESULT_VARIABLE failed
                    OUTPUT_VARIABLE found ERROR_VARIABLE why)
    message(STATUS "run ${run}: ${found}${why}")
    if(NOT failed)
        return()
    endif()
    if(NOT why MATCHES "^no span on worker")
        message(FATAL_ERROR "the trace of run ${run} fails its check")
    endif()
endforeach()
message(FATAL_ERROR "in three runs, some worker's track never got a span")
