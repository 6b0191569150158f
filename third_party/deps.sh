#!/usr/bin/env bash
# Makes sure the Debian packages a job needs are installed.
#
#   bash third_party/deps.sh main    # build the library, the examples and ftl_bench
#   bash third_party/deps.sh test    # main, plus Catch2, SPIN and valgrind for the test suite
#   bash third_party/deps.sh bench   # main, plus the peers the benchmark suite compares against
#   bash third_party/deps.sh linux-aarch64  # cross-build for arm64 Linux, run under qemu-user
#   bash third_party/deps.sh windows-mingw  # cross-build for Windows with MinGW-w64, run under wine
#
# Prints nothing when everything is already there. As root it installs what is
# missing; otherwise it names the missing packages and the command that
# installs them, and exits 1.
set -euo pipefail

usage() {
    echo "usage: bash third_party/deps.sh main|test|bench|linux-aarch64|windows-mingw" >&2
}

if [[ $# -ne 1 ]]; then
    usage
    exit 2
fi

job=$1
main_packages=(g++ cmake libboost-context-dev)
case "$job" in
main) packages=("${main_packages[@]}") ;;
test) packages=("${main_packages[@]}" clang catch2 spin valgrind python3) ;;
bench) packages=("${main_packages[@]}" libtbb-dev libboost-fiber-dev python3-matplotlib) ;;
# The arm64 Boost.Context comes from Debian's arm64 archive (multiarch).
linux-aarch64) packages=(cmake catch2 python3 g++-aarch64-linux-gnu libboost-context-dev:arm64 qemu-user) ;;
# Debian has no Boost for MinGW: that build switches fibers with Win32 fibers.
windows-mingw) packages=(cmake catch2 python3 g++-mingw-w64-x86-64-posix wine wine64) ;;
-h | --help)
    usage
    exit 0
    ;;
*)
    echo "deps.sh: unknown job '$job'" >&2
    usage
    exit 2
    ;;
esac

if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "deps.sh: dpkg-query not found; this script expects Debian 12 (or a derivative)." >&2
    echo "deps.sh: the '$job' job needs the equivalents of: ${packages[*]}" >&2
    exit 1
fi

native_architecture=$(dpkg --print-architecture)

# A name without ":arch" means the machine's own architecture (or "all"):
# with multiarch, dpkg-query lists every architecture's copy of a package.
missing_packages() {
    local package status
    for package in "${packages[@]}"; do
        if [[ "$package" == *:* ]]; then
            status=$(dpkg-query -W -f='${Status}\n' "$package" 2>/dev/null || true)
        else
            status=$(dpkg-query -W -f='${Status} ${Architecture}\n' "$package" 2>/dev/null |
                sed -n "s/^\(install ok installed\) \($native_architecture\|all\)\$/\1/p" || true)
        fi
        if [[ "$status" != "install ok installed" ]]; then
            printf '%s\n' "$package"
        fi
    done
}

mapfile -t missing < <(missing_packages)

if [[ ${#missing[@]} -gt 0 ]]; then
    install_command="DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${missing[*]}"
    update_command="apt-get update"
    if [[ " ${missing[*]}" == *":arm64"* ]]; then
        update_command="dpkg --add-architecture arm64 && apt-get update"
    fi
    if [[ $EUID -ne 0 ]]; then
        {
            echo "deps.sh: the '$job' job needs Debian packages that are not installed: ${missing[*]}"
            echo "deps.sh: install them as root, then run this script again:"
            echo "    $update_command && $install_command"
            echo "deps.sh: (or with sudo, putting sudo before each command)"
        } >&2
        exit 1
    fi
    echo "deps.sh: installing for the '$job' job: ${missing[*]}"
    # An arm64 package needs the arm64 architecture known to dpkg first.
    for package in "${missing[@]}"; do
        if [[ "$package" == *:arm64 ]] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
            dpkg --add-architecture arm64
        fi
    done
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"

    mapfile -t still_missing < <(missing_packages)
    if [[ ${#still_missing[@]} -gt 0 ]]; then
        echo "deps.sh: still not installed after apt-get: ${still_missing[*]}" >&2
        exit 1
    fi
fi

# The presets use version 6 (workflow presets), which needs CMake 3.25.
cmake_version=$(cmake --version | sed -n 's/^cmake version \([0-9][0-9.]*\).*/\1/p')
IFS=. read -r cmake_major cmake_minor _ <<<"$cmake_version"
if [[ -z "$cmake_version" ]] || ((cmake_major < 3 || (cmake_major == 3 && cmake_minor < 25))); then
    echo "deps.sh: CMake ${cmake_version:-(unknown version)} is too old; cmake --workflow needs CMake 3.25 or newer." >&2
    exit 1
fi
