# Finds the Debian-packaged dependencies of the library itself. Each failure
# names the package to install (third_party/deps.sh installs them all).
#
# Sets, for the library's targets:
#   FTL_FIBER_BACKEND      boost or win32 (the cache option, resolved)
#   FTL_PRIVATE_LIBRARIES  what the library links privately
#   FTL_PRIVATE_DEFINITIONS  FTL_FIBER_WIN32=1 with the Win32 fiber backend
set(THREADS_PREFER_PTHREAD_FLAG ON)
find_package(Threads REQUIRED)

# How fibers switch: Boost.Context (fcontext) wherever it is installed; the
# Win32 fiber API (CreateFiberEx/SwitchToFiber) on Windows without Boost, as
# with Debian's MinGW-w64 cross compiler.
set(FTL_FIBER_BACKEND auto CACHE STRING "Fiber switch: auto, boost or win32")
set_property(CACHE FTL_FIBER_BACKEND PROPERTY STRINGS auto boost win32)
if(NOT FTL_FIBER_BACKEND STREQUAL "win32")
    find_package(Boost 1.66 QUIET COMPONENTS context)
endif()
if(FTL_FIBER_BACKEND STREQUAL "auto")
    if(TARGET Boost::context)
        set(FTL_FIBER_BACKEND boost)
    elseif(WIN32)
        set(FTL_FIBER_BACKEND win32)
    else()
        set(FTL_FIBER_BACKEND boost)
    endif()
endif()
if(FTL_FIBER_BACKEND STREQUAL "win32" AND NOT WIN32)
    message(FATAL_ERROR "FTL_FIBER_BACKEND=win32 needs a Windows target")
endif()

set(FTL_PRIVATE_LIBRARIES)
set(FTL_PRIVATE_DEFINITIONS)
if(FTL_FIBER_BACKEND STREQUAL "boost")
    if(NOT TARGET Boost::context)
        message(FATAL_ERROR "Boost.Context not found: install the Debian package libboost-context-dev "
                            "(or run: bash third_party/deps.sh main)")
    endif()
    list(APPEND FTL_PRIVATE_LIBRARIES Boost::context)
elseif(FTL_FIBER_BACKEND STREQUAL "win32")
    list(APPEND FTL_PRIVATE_DEFINITIONS FTL_FIBER_WIN32=1)
else()
    message(FATAL_ERROR "FTL_FIBER_BACKEND must be auto, boost or win32, not '${FTL_FIBER_BACKEND}'")
endif()
if(WIN32)
    # WaitOnAddress and WakeByAddressSingle live in synchronization.lib.
    list(APPEND FTL_PRIVATE_LIBRARIES synchronization)
endif()
message(STATUS "ftl: fibers switch with ${FTL_FIBER_BACKEND}")
if(MINGW)
    # MinGW-w64's own printf family (C99 formats such as %zu and %llu)
    # instead of the system C runtime's.
    add_compile_definitions(__USE_MINGW_ANSI_STDIO=1)
endif()
