// The test runner: Catch2's own main.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
