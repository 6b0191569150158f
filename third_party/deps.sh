#!/usr/bin/env bash
# Makes sure the Debian packages a job needs are installed.
#
#   bash third_party/deps.sh main    # build the library, the examples and ftl_bench
#   bash third_party/deps.sh test    # main, plus Catch2, SPIN and valgrind for the test suite
#   bash third_party/deps.sh bench   # main, plus the peers the benchmark suite compares against
#
# Prints nothing when everything is already there. As root it installs what is
# missing; otherwise it names the missing packages and the command that
# installs them, and exits 1.
set -euo pipefail

usage() {
    echo "usage: bash third_party/deps.sh main|test|bench" >&2
}

if [[ $# -ne 1 ]]; then
    usage
    exit 2
fi

job=$1
main_packages=(g++ cmake libboost-context-dev)
case "$job" in
main) packages=("${main_packages[@]}") ;;
test) packages=("${main_packages[@]}" catch2 spin valgrind python3) ;;
bench) packages=("${main_packages[@]}" libtbb-dev libboost-fiber-dev python3-matplotlib) ;;
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

missing_packages() {
    local package status
    for package in "${packages[@]}"; do
        status=$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null || true)
        if [[ "$status" != "install ok installed" ]]; then
            printf '%s\n' "$package"
        fi
    done
}

mapfile -t missing < <(missing_packages)

if [[ ${#missing[@]} -gt 0 ]]; then
    install_command="DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${missing[*]}"
    if [[ $EUID -ne 0 ]]; then
        {
            echo "deps.sh: the '$job' job needs Debian packages that are not installed: ${missing[*]}"
            echo "deps.sh: install them as root, then run this script again:"
            echo "    apt-get update && $install_command"
            echo "deps.sh: (or with sudo: sudo apt-get update && sudo $install_command)"
        } >&2
        exit 1
    fi
    echo "deps.sh: installing for the '$job' job: ${missing[*]}"
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
