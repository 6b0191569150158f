# Writes the results document from the committed full run and a fresh
# --threads-pair run (the ftl_bench_threads_pair test's JSON) with
# benchmarks/plot.py, and checks that it carries the comparison of ftl at 1
# worker and at 2, per host state, with its target's verdict.
# Skipped (the test's SKIP_REGULAR_EXPRESSION) when matplotlib is missing.
#
#   -DPYTHON=<python3> -DTOOL=<plot.py> -DJSON=<results.json> -DPAIR=<pair.json> -DOUT=<dir>
execute_process(COMMAND ${PYTHON} -c "import matplotlib" RESULT_VARIABLE no_matplotlib OUTPUT_QUIET ERROR_QUIET)
if(no_matplotlib)
    message(STATUS "matplotlib is missing (Debian: python3-matplotlib): results not written")
    return()
endif()
file(REMOVE ${OUT}/results.adoc ${OUT}/results.svg)
execute_process(COMMAND ${PYTHON} ${TOOL} ${JSON} ${OUT}/results.svg --results-doc ${OUT}/results.adoc --pair ${PAIR}
                RESULT_VARIABLE failed)
if(failed)
    message(FATAL_ERROR "plot.py failed (${failed})")
endif()
file(READ ${OUT}/results.adoc doc)
# W4 took 2 rounds of its own in each of the run's 2 (--short).
foreach(expected "== A second worker: ftl at 1 worker and at 2" "| W1 | ns/task | " "| W4 | 1 | " "| W4 | 4 | "
                 "takes 2 rounds of its own in each round of the run"
                 "| 1-thread probe (ns) | State"
                 "Target: no workload (W1-W8) slower at 2 workers than at 1")
    string(FIND "${doc}" "${expected}" at)
    if(at EQUAL -1)
        message(FATAL_ERROR "${OUT}/results.adoc lacks \"${expected}\"")
    endif()
endforeach()
# W8's ratios come from its pooled samples, W1's from its rounds, each with
# its interval (when a state kept a round of it).
file(READ ${PAIR} pair)
if(pair MATCHES "\"figure\": \"W8 p99\"[^\n]*\"interval\"" AND
   NOT doc MATCHES "\\| W8 p99 \\| us p99 \\| [^\n]*\\([0-9.]+-[0-9.]+\\)")
    message(FATAL_ERROR "${OUT}/results.adoc lacks W8 p99's pooled ratio with its interval")
endif()
if(pair MATCHES "\"figure\": \"W1\"[^\n]*\"interval\"" AND
   NOT doc MATCHES "\\| W1 \\| ns/task \\| [^\n]*\\([0-9.]+-[0-9.]+\\)")
    message(FATAL_ERROR "${OUT}/results.adoc lacks W1's median ratio with its interval")
endif()
message(STATUS "${OUT}/results.adoc: written and checked")
