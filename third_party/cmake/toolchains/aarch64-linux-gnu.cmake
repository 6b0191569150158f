# Cross build for 64-bit Arm Linux on a Debian x86-64 host: Debian's
# g++-aarch64-linux-gnu, Boost.Context from the arm64 multiarch package
# (libboost-context-dev:arm64), and qemu-user to run what is built.
# third_party/deps.sh linux-aarch64 installs all three.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# The compiler reports the multiarch triple, so CMake looks for the arm64
# libraries and package files under /usr/lib/aarch64-linux-gnu; Catch2 is
# header-only and architecture-independent (/usr/lib/cmake, /usr/include).
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
# Tests, examples and the test discovery run through qemu. The arm64 loader
# and libraries are the multiarch ones (/lib/aarch64-linux-gnu, installed
# with libboost-context-dev:arm64). Not `-L /usr/aarch64-linux-gnu`: with
# the cross toolchain's own copy of the C library, qemu 7.2 never returns
# from the first pthread_create.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)
