# Fails the run when a test took more than half of its CTest timeout.
#
# A test that passes on a quiet, fast machine and times out on a slower one is
# a flaky CI. Each test should finish within a third of its timeout in the
# slowest build (TSan) on 2 cores; this check fails at half, so the margin
# cannot erode unseen, and lists every test above a third as a warning.
#
#   cmake -DBUILD_DIR=<build dir> -DJUNIT_FILES=<file;file...> -P check_test_times.cmake
#
# The JUnit files are the ones the test presets write (outputJUnitFile); each
# test's timeout is its TIMEOUT property, read from `ctest --show-only=json-v1`.
cmake_minimum_required(VERSION 3.19) # string(JSON)

if(NOT BUILD_DIR OR NOT JUNIT_FILES)
    message(FATAL_ERROR "usage: cmake -DBUILD_DIR=<dir> -DJUNIT_FILES=<file;...> -P check_test_times.cmake")
endif()

execute_process(COMMAND ${CMAKE_CTEST_COMMAND} --show-only=json-v1
                WORKING_DIRECTORY ${BUILD_DIR}
                OUTPUT_VARIABLE listing
                RESULT_VARIABLE listed)
if(NOT listed EQUAL 0)
    message(FATAL_ERROR "ctest --show-only=json-v1 failed in ${BUILD_DIR}")
endif()

# name -> timeout, kept as variables named after an index to survive any
# character a test name may hold.
string(JSON count LENGTH "${listing}" tests)
set(names)
math(EXPR last "${count} - 1")
foreach(i RANGE ${last})
    string(JSON name GET "${listing}" tests ${i} name)
    set(timeout "")
    string(JSON numProperties ERROR_VARIABLE noProperties LENGTH "${listing}" tests ${i} properties)
    if(NOT noProperties AND numProperties GREATER 0)
        math(EXPR lastProperty "${numProperties} - 1")
        foreach(p RANGE ${lastProperty})
            string(JSON propertyName GET "${listing}" tests ${i} properties ${p} name)
            if(propertyName STREQUAL "TIMEOUT")
                string(JSON timeout GET "${listing}" tests ${i} properties ${p} value)
            endif()
        endforeach()
    endif()
    list(LENGTH names index)
    list(APPEND names "${name}")
    set(timeout_${index} "${timeout}")
endforeach()

set(failures 0)
set(checked 0)
set(seen 0)
foreach(junit IN LISTS JUNIT_FILES)
    if(NOT EXISTS "${junit}")
        message(FATAL_ERROR "${junit} not found: run the test presets first (they write it)")
    endif()
    file(READ "${junit}" xml)
    # Entities end in ';', CMake's list separator: decode them first (a
    # double quote stays encoded until the name is cut out of its attribute).
    string(REPLACE "&apos;" "'" xml "${xml}")
    string(REPLACE "&lt;" "<" xml "${xml}")
    string(REPLACE "&gt;" ">" xml "${xml}")
    string(REPLACE "&quot;" "@QUOTE@" xml "${xml}")
    string(REPLACE "&amp;" "&" xml "${xml}")
    string(REPLACE ";" "@SEMICOLON@" xml "${xml}")
    string(REGEX MATCHALL "<testcase [^>]*>" cases "${xml}")
    foreach(case IN LISTS cases)
        math(EXPR seen "${seen} + 1")
        if(NOT case MATCHES " name=\"([^\"]*)\"")
            message(SEND_ERROR "a test case without a name in ${junit}: ${case}")
            math(EXPR failures "${failures} + 1")
            continue()
        endif()
        string(REPLACE "@QUOTE@" "\"" name "${CMAKE_MATCH_1}")
        string(REPLACE "@SEMICOLON@" ";" name "${name}")
        if(NOT case MATCHES " time=\"([0-9.eE+-]*)\"")
            message(SEND_ERROR "test '${name}' has no time in ${junit}")
            math(EXPR failures "${failures} + 1")
            continue()
        endif()
        set(seconds "${CMAKE_MATCH_1}")
        if(NOT seconds MATCHES "\\.")
            set(seconds "${seconds}.0")
        endif()
        list(FIND names "${name}" index)
        if(index LESS 0 OR "${timeout_${index}}" STREQUAL "")
            message(SEND_ERROR "test '${name}' has no TIMEOUT property: give it one")
            math(EXPR failures "${failures} + 1")
            continue()
        endif()
        set(timeout "${timeout_${index}}")
        math(EXPR checked "${checked} + 1")
        # CMake's math() is integer-only: compare in milliseconds.
        string(REGEX REPLACE "\\.([0-9]?)([0-9]?)([0-9]?).*$" ".\\1\\2\\3000" padded "${seconds}")
        string(REGEX REPLACE "^([0-9]+)\\.([0-9][0-9][0-9]).*$" "\\1\\2" ms "${padded}")
        if(NOT ms MATCHES "^[0-9]+$")
            set(ms 0)
        endif()
        string(REGEX REPLACE "\\..*$" "" timeoutSeconds "${timeout}")
        math(EXPR halfMs "${timeoutSeconds} * 500")
        math(EXPR thirdMs "${timeoutSeconds} * 1000 / 3")
        if(ms GREATER halfMs)
            message(SEND_ERROR "'${name}' took ${seconds} s, more than half of its ${timeoutSeconds} s timeout")
            math(EXPR failures "${failures} + 1")
        elseif(ms GREATER thirdMs)
            message(WARNING "'${name}' took ${seconds} s, more than a third of its ${timeoutSeconds} s timeout")
        endif()
    endforeach()
endforeach()

if(NOT checked EQUAL seen)
    math(EXPR failures "${failures} + 1")
    message(SEND_ERROR "checked ${checked} of the ${seen} test cases in the JUnit files")
endif()
if(checked EQUAL 0)
    message(FATAL_ERROR "no test times found in ${JUNIT_FILES}")
endif()
if(failures GREATER 0)
    message(FATAL_ERROR "${failures} test(s) took more than half of their timeout (see above)")
endif()
message(STATUS "test times: ${checked} test(s), each within half of its timeout")
