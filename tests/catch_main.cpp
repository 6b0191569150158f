// The test runner on Linux: Catch2's own main. (On Windows the runner is
// windows_runner.cpp, which also runs the children of RunInChild.)
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
