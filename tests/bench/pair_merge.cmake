# Checks ftl_bench --pair-merge on the JSON of a --threads-pair run (the
# ftl_bench_threads_pair test's):
#   1. the run merged alone reports what the run reported: the same medians,
#      intervals and verdict, to the digit;
#   2. the run merged with a copy of itself in the other host state (another
#      start time, every round's state swapped) counts each figure's rounds
#      of both in each state: each state's count is the sum of the run's two,
#      and when every W figure had a counted round, the verdict no longer
#      says a state was not counted;
#   3. a merge's report counts as the runs it lists: the report of both
#      merged again alone, and the run's merge merged with the copy, list
#      the same rounds in the same runs as the merge of both, report every
#      figure from rounds as it did, to the digit, and
#      a figure from samples over its rounds (a merge's report keeps no
#      samples); every run keeps the library revision its run named;
#   4. a run given twice, also inside a merge's report, is refused;
#   5. with PYTHON, when it has matplotlib: plot.py renders the report of the
#      two runs, with its rows numbered within their runs.
#
#   -DFTL_BENCH=<ftl_bench> -DPAIR=<pair.json> -DOUT=<dir>
#   [-DPYTHON=<python3> -DTOOL=<plot.py> -DJSON=<results.json>]
if(CMAKE_VERSION VERSION_LESS 3.19)
    message(STATUS "pair merge: cmake ${CMAKE_VERSION} has no string(JSON), not checked")
    return()
endif()

function(merge out expect_status)
    list(JOIN ARGN "," files)
    execute_process(COMMAND ${FTL_BENCH} --pair-merge ${files} --json ${out} RESULT_VARIABLE status
                    OUTPUT_VARIABLE output ERROR_VARIABLE errors)
    if(NOT status STREQUAL expect_status)
        message(FATAL_ERROR "--pair-merge ${ARGN}: exit ${status}, expected ${expect_status}\n${output}${errors}")
    endif()
    set(merge_errors "${errors}" PARENT_SCOPE)
endfunction()

# A state's count in a medians entry: its rounds, or its pooled runs; 0 when none.
function(state_count json index state out)
    string(JSON type TYPE "${json}" medians ${index} ${state})
    set(count 0)
    if(type STREQUAL "OBJECT")
        string(JSON count ERROR_VARIABLE none GET "${json}" medians ${index} ${state} rounds)
        if(none)
            string(JSON count GET "${json}" medians ${index} ${state} pooled_runs)
        endif()
    endif()
    set(${out} ${count} PARENT_SCOPE)
endfunction()

file(READ ${PAIR} run)

# 1. Alone.
merge(${OUT}/pair-merge-alone.json 0 ${PAIR})
file(READ ${OUT}/pair-merge-alone.json alone)
foreach(key medians target)
    string(JSON expected GET "${run}" ${key})
    string(JSON got GET "${alone}" ${key})
    if(NOT got STREQUAL expected)
        message(FATAL_ERROR "the run merged alone reports other ${key}:\n${got}\nagainst the run's\n${expected}")
    endif()
endforeach()
string(JSON tool GET "${alone}" tool)
string(JSON runs LENGTH "${alone}" runs)
if(NOT tool STREQUAL "ftl_bench --pair-merge" OR NOT runs EQUAL 1)
    message(FATAL_ERROR "the merge's report names tool \"${tool}\" and ${runs} runs")
endif()

# 2. With its copy in the other state.
string(JSON started GET "${run}" started)
string(REPLACE "\"started\": \"${started}\"" "\"started\": \"${started} (copy)\"" copy "${run}")
string(REPLACE "\"state\": \"fast\"" "\"state\": \"was fast\"" copy "${copy}")
string(REPLACE "\"state\": \"slow\"" "\"state\": \"fast\"" copy "${copy}")
string(REPLACE "\"state\": \"was fast\"" "\"state\": \"slow\"" copy "${copy}")
file(WRITE ${OUT}/pair-swapped.json "${copy}")
merge(${OUT}/pair-merge-both.json 0 ${PAIR} ${OUT}/pair-swapped.json)
file(READ ${OUT}/pair-merge-both.json both)
string(JSON figures LENGTH "${run}" medians)
math(EXPR last "${figures} - 1")
set(every_w_counted TRUE)
foreach(i RANGE ${last})
    string(JSON figure GET "${run}" medians ${i} figure)
    string(JSON merged_figure GET "${both}" medians ${i} figure)
    state_count("${run}" ${i} fast fast)
    state_count("${run}" ${i} slow slow)
    state_count("${both}" ${i} fast both_fast)
    state_count("${both}" ${i} slow both_slow)
    math(EXPR sum "${fast} + ${slow}")
    if(figure MATCHES "^W" AND sum EQUAL 0)
        set(every_w_counted FALSE)
    endif()
    if(NOT merged_figure STREQUAL figure OR NOT both_fast EQUAL sum OR NOT both_slow EQUAL sum)
        message(FATAL_ERROR "${figure}: the run counted ${fast} fast and ${slow} slow; merged with its swapped "
                            "copy, ${merged_figure} counts ${both_fast} fast and ${both_slow} slow, not ${sum} each")
    endif()
endforeach()
string(JSON verdict GET "${both}" target text)
if(every_w_counted AND verdict MATCHES "no round counted")
    message(FATAL_ERROR "merged with its swapped copy, the verdict still misses a state: ${verdict}")
endif()

# 3. Merges merged again.
string(JSON library GET "${run}" library)
if(library STREQUAL "")
    message(FATAL_ERROR "the run names no library revision")
endif()
merge(${OUT}/pair-merge-again.json 0 ${OUT}/pair-merge-both.json)
merge(${OUT}/pair-merge-grown.json 0 ${OUT}/pair-merge-alone.json ${OUT}/pair-swapped.json)
foreach(name again grown)
    file(READ ${OUT}/pair-merge-${name}.json merged)
    # Every round, each in its run (numbered as in the merge of both).
    string(JSON expected GET "${both}" rows)
    string(JSON got GET "${merged}" rows)
    if(NOT got STREQUAL expected)
        message(FATAL_ERROR "pair-merge-${name}.json lists other rows than the merge of both runs")
    endif()
    foreach(i RANGE ${last})
        string(JSON figure GET "${both}" medians ${i} figure)
        foreach(state fast slow)
            string(JSON expected GET "${both}" medians ${i} ${state})
            string(JSON got GET "${merged}" medians ${i} ${state})
            # A figure from samples goes over its rounds where a run without
            # samples counts a round: in `again` both runs are, in `grown`
            # the run's own (its rounds' states are the run's).
            string(JSON pooled ERROR_VARIABLE from_rounds GET "${both}" medians ${i} ${state} pooled_runs)
            state_count("${run}" ${i} ${state} unsampled)
            if(NOT from_rounds AND (name STREQUAL "again" OR unsampled GREATER 0))
                string(JSON rounds ERROR_VARIABLE from_samples GET "${merged}" medians ${i} ${state} rounds)
                if(from_samples)
                    message(FATAL_ERROR "pair-merge-${name}.json reports ${figure} ${state} ${got}, not over its "
                                        "rounds")
                endif()
            elseif(NOT got STREQUAL expected)
                message(FATAL_ERROR "pair-merge-${name}.json reports ${figure} ${state} ${got}, against the merge "
                                    "of both runs' ${expected}")
            endif()
        endforeach()
    endforeach()
    string(JSON runs LENGTH "${merged}" runs)
    string(JSON first GET "${merged}" runs 0 library)
    string(JSON second GET "${merged}" runs 1 library)
    if(NOT runs EQUAL 2 OR NOT first STREQUAL library OR NOT second STREQUAL library)
        message(FATAL_ERROR "pair-merge-${name}.json lists ${runs} runs, of libraries ${first} and ${second}, "
                            "not 2 of ${library}")
    endif()
endforeach()

# 4. Refusals.
merge(${OUT}/pair-merge-twice.json 2 ${PAIR} ${PAIR})
if(NOT merge_errors MATCHES "are the same run")
    message(FATAL_ERROR "a run given twice: ${merge_errors}")
endif()
merge(${OUT}/pair-merge-inside.json 2 ${OUT}/pair-merge-both.json ${PAIR})
if(NOT merge_errors MATCHES "are the same run")
    message(FATAL_ERROR "a run given again beside a merge that has it: ${merge_errors}")
endif()
# 5. The results document of the two.
if(PYTHON)
    execute_process(COMMAND ${PYTHON} -c "import matplotlib" RESULT_VARIABLE no_matplotlib OUTPUT_QUIET
                    ERROR_QUIET)
    if(NOT no_matplotlib)
        execute_process(COMMAND ${PYTHON} ${TOOL} ${JSON} ${OUT}/pair-merge.svg --results-doc
                                ${OUT}/pair-merge.adoc --pair ${OUT}/pair-merge-both.json RESULT_VARIABLE failed)
        if(failed)
            message(FATAL_ERROR "plot.py failed on the merge's report (${failed})")
        endif()
        file(READ ${OUT}/pair-merge.adoc doc)
        foreach(expected "2 runs of `ftl_bench --threads-pair`, reported as one by `ftl_bench --pair-merge`"
                         "| Figure | Run/round | 1 worker" "| W4 | 1/1 | " "| W4 | 2/1 | ")
            string(FIND "${doc}" "${expected}" at)
            if(at EQUAL -1)
                message(FATAL_ERROR "${OUT}/pair-merge.adoc lacks \"${expected}\"")
            endif()
        endforeach()
    endif()
endif()
message(STATUS "pair merge: checked")
