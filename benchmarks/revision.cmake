# Writes the revision of the source tree ftl_bench is built from into a
# header (cmake -DSOURCE=<tree> -DOUT=<header> -P revision.cmake), run at
# every build so that a report names the library it measured: the commit,
# "+changes" when the tracked files differ from it, "unknown" outside git.
# The header is rewritten only when the text changes, so that an unchanged
# revision rebuilds nothing.
set(revision "unknown")
execute_process(
    COMMAND git -C "${SOURCE}" rev-parse --short=7 HEAD
    OUTPUT_VARIABLE head
    RESULT_VARIABLE failed
    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT failed)
    set(revision "${head}")
    execute_process(
        COMMAND git -C "${SOURCE}" diff --quiet HEAD --
        RESULT_VARIABLE changed
        ERROR_QUIET)
    if(changed)
        set(revision "${head}+changes")
    endif()
endif()
file(WRITE "${OUT}.new" "#define FTL_BENCH_REVISION \"${revision}\"\n")
file(COPY_FILE "${OUT}.new" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.new")
