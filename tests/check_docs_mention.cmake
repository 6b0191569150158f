# Fails when a file does not mention each of some phrases: an option's
# documentation in the public header and the README, checked as a test.
#
#   cmake -DFILE=<file> -DPHRASES=<phrase|phrase...> -P check_docs_mention.cmake
cmake_minimum_required(VERSION 3.16)

if(NOT FILE OR NOT PHRASES)
    message(FATAL_ERROR "usage: cmake -DFILE=<file> -DPHRASES=<phrase|phrase...> -P check_docs_mention.cmake")
endif()
file(READ ${FILE} text)
string(REPLACE "|" ";" phrases "${PHRASES}")
foreach(phrase IN LISTS phrases)
    string(FIND "${text}" "${phrase}" where)
    if(where EQUAL -1)
        message(FATAL_ERROR "${FILE} does not mention \"${phrase}\"")
    endif()
endforeach()
