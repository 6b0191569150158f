# Finds the Debian-packaged dependencies of the library itself. Each failure
# names the package to install (third_party/deps.sh installs them all).
set(THREADS_PREFER_PTHREAD_FLAG ON)
find_package(Threads REQUIRED)

find_package(Boost 1.66 QUIET COMPONENTS context)
if(NOT TARGET Boost::context)
    message(FATAL_ERROR "Boost.Context not found: install the Debian package libboost-context-dev "
                        "(or run: bash third_party/deps.sh main)")
endif()
