# Compiles every public header alone, as a translation unit of its own, with
# FiberTaskingLib's warning set plus -Wpedantic -Werror: a header that needs
# another included before it, or that warns in a user's build, fails. Each
# header is compiled twice by each compiler: as is, and with -fno-exceptions
# -fno-rtti, as engine builds are.
#
# cmake -DINCLUDE_DIR=... -DWORK_DIR=... -DCOMPILERS=g++,clang++ -P check_headers.cmake
cmake_minimum_required(VERSION 3.20)

# The lineage's set (its cmake/AddCompilerFlags.cmake), by compiler: GCC knows
# every flag; Clang the ones it shares.
set(common_flags
    -std=c++17 -fsyntax-only -Wall -Wextra -Wpedantic -Wconversion -Wsign-conversion -Wcast-align -Wcast-qual
    -Wdisabled-optimization -Wdouble-promotion -Wformat=2 -Wmissing-include-dirs -Wnull-dereference
    -Wold-style-cast -Woverloaded-virtual -Wshadow -Wstrict-aliasing=1 -Wstrict-overflow=2 -Wswitch-default
    -Wundef -Wno-unknown-pragmas -Wno-missing-field-initializers -Werror)
set(gcc_flags -Wduplicated-branches -Wduplicated-cond -Wlogical-op -Wnoexcept -Wstrict-null-sentinel
    -Wuseless-cast -Wno-aligned-new)

file(GLOB headers RELATIVE ${INCLUDE_DIR} ${INCLUDE_DIR}/ftl/*.h ${INCLUDE_DIR}/ftl/detail/*.h)
list(LENGTH headers header_count)
if(header_count LESS 10)
    message(FATAL_ERROR "found only ${header_count} headers under ${INCLUDE_DIR}")
endif()
string(REPLACE "," ";" compilers "${COMPILERS}")
file(MAKE_DIRECTORY ${WORK_DIR})
set(failures 0)
set(compiled 0)
foreach(compiler IN LISTS compilers)
    execute_process(COMMAND ${compiler} --version OUTPUT_VARIABLE version ERROR_QUIET RESULT_VARIABLE found)
    if(NOT found EQUAL 0)
        message(FATAL_ERROR "${compiler} not found (Debian packages: g++, clang)")
    endif()
    set(flags ${common_flags})
    if(version MATCHES "Free Software Foundation")
        list(APPEND flags ${gcc_flags})
    endif()
    foreach(header IN LISTS headers)
        string(MAKE_C_IDENTIFIER ${header} name)
        set(source ${WORK_DIR}/${name}.cpp)
        file(WRITE ${source} "#include \"${header}\"\n")
        foreach(variant IN ITEMS "" "-fno-exceptions;-fno-rtti")
            execute_process(COMMAND ${compiler} ${flags} ${variant} -I${INCLUDE_DIR} ${source}
                            OUTPUT_VARIABLE out ERROR_VARIABLE out RESULT_VARIABLE result)
            math(EXPR compiled "${compiled} + 1")
            if(NOT result EQUAL 0)
                message(SEND_ERROR "${compiler} ${variant}: ${header} alone does not compile cleanly:\n${out}")
                math(EXPR failures "${failures} + 1")
            endif()
        endforeach()
    endforeach()
endforeach()
if(failures GREATER 0)
    message(FATAL_ERROR "${failures} of ${compiled} header compilations failed")
endif()
message(STATUS "${compiled} header compilations (${header_count} headers) clean under ${COMPILERS}")
