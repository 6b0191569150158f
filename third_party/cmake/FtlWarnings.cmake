# Warning flags and sanitizer switches, scoped to our own targets.
add_library(ftl_warnings INTERFACE)
target_compile_options(ftl_warnings INTERFACE
    -Wall -Wextra -Wshadow -Wconversion -Wsign-conversion -Wnon-virtual-dtor -Wold-style-cast
    -Wcast-align -Woverloaded-virtual -Wnull-dereference -Wdouble-promotion -Wformat=2
    -Wimplicit-fallthrough -Wmisleading-indentation)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(ftl_warnings INTERFACE -Wduplicated-cond -Wlogical-op) # GCC's own
elseif(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    # Clang 14's DWARF 5 has forms Debian's valgrind (3.19) cannot read.
    target_compile_options(ftl_warnings INTERFACE -gdwarf-4)
endif()
if(FTL_WERROR)
    target_compile_options(ftl_warnings INTERFACE -Werror)
endif()

# Adds the FTL_SANITIZE sanitizers to a target (compile and link).
function(ftl_apply_sanitizers target)
    if(FTL_SANITIZE)
        target_compile_options(${target} PUBLIC -fsanitize=${FTL_SANITIZE} -fno-omit-frame-pointer
                                                -fno-sanitize-recover=all)
        target_link_options(${target} PUBLIC -fsanitize=${FTL_SANITIZE})
        if(FTL_SANITIZE MATCHES "thread" AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
            # GCC warns that TSan does not model atomic_thread_fence. The
            # fences order our own Dekker-style handshakes; every data hand-off
            # is also an acquire/release pair TSan does see.
            target_compile_options(${target} PUBLIC -Wno-tsan)
        endif()
    endif()
endfunction()
