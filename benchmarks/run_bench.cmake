# run-bench's steps (cmake -P): the full suite, then ftl at 1 worker against
# ftl at every core (--threads-pair), then the chart and the results, which
# are drawn from the JSON even when a measurement failed (the JSON and the
# tables say which); the step fails afterwards if ftl_bench did.
#
#   -DFTL_BENCH=<ftl_bench> -DJSON=<file> -DPAIR_JSON=<file> -DCHART=<file> -DRESULTS=<file>
#   -DREADME=<file> [-DPYTHON=<python3 with matplotlib>]
execute_process(COMMAND ${FTL_BENCH} --features --json ${JSON} RESULT_VARIABLE bench_status)
# 6 rounds of every workload in turn: in most runs each figure gets more than
# one round in a host state, and its median there is not one pair's.
execute_process(COMMAND ${FTL_BENCH} --threads-pair 6 --json ${PAIR_JSON} RESULT_VARIABLE pair_status)
if(PYTHON)
    if(EXISTS ${JSON})
        set(pair_args)
        if(EXISTS ${PAIR_JSON})
            set(pair_args --pair ${PAIR_JSON})
        endif()
        execute_process(COMMAND ${PYTHON} ${CMAKE_CURRENT_LIST_DIR}/plot.py ${JSON} ${CHART} --results-doc ${RESULTS}
                                --readme ${README} ${pair_args}
                        RESULT_VARIABLE plot_status)
        if(NOT plot_status EQUAL 0)
            message(FATAL_ERROR "run-bench: plot.py failed (${plot_status})")
        endif()
    endif()
else()
    message(WARNING "run-bench: no python3 with matplotlib, no chart (bash third_party/deps.sh bench)")
endif()
if(NOT bench_status EQUAL 0)
    message(FATAL_ERROR "run-bench: ftl_bench failed (${bench_status}); see FAILED in its output")
endif()
if(NOT pair_status EQUAL 0)
    message(FATAL_ERROR "run-bench: ftl_bench --threads-pair failed (${pair_status}); see FAILED in its output")
endif()
