# run-bench's steps (cmake -P): the full suite, then ftl at 1 worker against
# ftl at every core (--threads-pair), then the chart and the results, which
# are drawn from the JSON even when a measurement failed (the JSON and the
# tables say which); the step fails afterwards if ftl_bench did.
#
#   -DFTL_BENCH=<ftl_bench> -DJSON=<file> -DPAIR_RUN_DIR=<dir> -DPAIR_JSON=<file> -DCHART=<file>
#   -DRESULTS=<file> -DREADME=<file> [-DPYTHON=<python3 with matplotlib>]
execute_process(COMMAND ${FTL_BENCH} --features --json ${JSON} RESULT_VARIABLE bench_status)
# 6 rounds of every workload in turn: in most runs each figure gets more than
# one round in a host state, and its median there is not one pair's.
#
# The run's own JSON keeps the samples of W8, W8b, T1 and M1, a few MB, so
# that `ftl_bench --pair-merge` can pool it with later runs: it stays in the
# build folder, under its start time (PAIR_RUN_DIR/pair-run-<time>.json). The
# report of it alone, without them, goes to PAIR_JSON in the source tree.
string(TIMESTAMP stamp "%Y%m%d-%H%M%S" UTC)
set(pair_run_json ${PAIR_RUN_DIR}/pair-run-${stamp}.json)
execute_process(COMMAND ${FTL_BENCH} --threads-pair 6 --json ${pair_run_json} RESULT_VARIABLE pair_status)
set(merge_status 0)
if(EXISTS ${pair_run_json})
    execute_process(COMMAND ${FTL_BENCH} --pair-merge ${pair_run_json} --json ${PAIR_JSON} OUTPUT_QUIET
                    RESULT_VARIABLE merge_status)
endif()
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
if(NOT merge_status EQUAL 0)
    message(FATAL_ERROR "run-bench: ftl_bench --pair-merge ${pair_run_json} failed (${merge_status})")
endif()
