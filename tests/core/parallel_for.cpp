// ParallelFor: every element visited exactly once, through each overload,
// for any batch size, from the Init thread and from inside tasks.
#include "ftl/parallel_for.h"
#include "ftl/task_scheduler.h"
#include "test_support.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <list>
#include <vector>

using ftl_test::Options;

TEST_CASE("ParallelFor over a std::vector with iterators", "[parallel_for]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    std::size_t const batchSize =
        GENERATE(std::size_t{1}, std::size_t{7}, std::size_t{256}, std::size_t{5000});
    CAPTURE(threads, batchSize);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);

    constexpr int kSize = 4321;
    std::vector<int> values(kSize);
    for (int i = 0; i < kSize; ++i) {
        values[static_cast<std::size_t>(i)] = i;
    }
    std::atomic<unsigned> badThread{0};
    ftl::ParallelFor(
        &ts, values.begin(), values.end(), batchSize,
        [&](ftl::TaskScheduler *taskScheduler, int *value) {
            if (taskScheduler != &ts || taskScheduler->GetCurrentThreadIndex() >= threads) {
                badThread.fetch_add(1);
            }
            *value = *value * 2 + 1;
        },
        ftl::TaskPriority::Normal);

    unsigned wrong = 0;
    for (int i = 0; i < kSize; ++i) {
        if (values[static_cast<std::size_t>(i)] != i * 2 + 1) {
            ++wrong;
        }
    }
    REQUIRE(wrong == 0);
    REQUIRE(badThread.load() == 0);
}

TEST_CASE("ParallelFor over a pointer and a size", "[parallel_for]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);

    constexpr std::size_t kSize = 1000;
    std::vector<std::atomic<unsigned>> visits(kSize);
    for (auto &visit : visits) {
        visit.store(0);
    }
    std::vector<double> data(kSize, 1.5);
    // Only the middle of the array: [100, 900).
    ftl::ParallelFor(
        &ts, data.data() + 100, 800, 33,
        [&](ftl::TaskScheduler *, double *value) {
            *value *= 4.0;
            visits[static_cast<std::size_t>(value - data.data())].fetch_add(1);
        },
        ftl::TaskPriority::High);

    unsigned wrong = 0;
    for (std::size_t i = 0; i < kSize; ++i) {
        bool const inside = i >= 100 && i < 900;
        if (data[i] != (inside ? 6.0 : 1.5) || visits[i].load() != (inside ? 1u : 0u)) {
            ++wrong;
        }
    }
    REQUIRE(wrong == 0);

    // An empty range does nothing and returns.
    ftl::ParallelFor(
        &ts, data.data(), 0, 4, [&](ftl::TaskScheduler *, double *value) { *value = -1.0; },
        ftl::TaskPriority::Normal);
    REQUIRE(data[0] == 1.5);
}

TEST_CASE("ParallelFor over an iterable visits its own elements", "[parallel_for]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);

    SECTION("std::vector") {
        std::vector<unsigned> values(777, 3u);
        ftl::ParallelFor(
            &ts, values, 10, [](ftl::TaskScheduler *, unsigned *value) { *value += 4; },
            ftl::TaskPriority::Normal);
        REQUIRE(std::count(values.begin(), values.end(), 7u) == 777);
    }

    SECTION("std::list (bidirectional iterators)") {
        std::list<int> values;
        for (int i = 0; i < 500; ++i) {
            values.push_back(i);
        }
        ftl::ParallelFor(
            &ts, values, 16, [](ftl::TaskScheduler *, int *value) { *value = -*value; },
            ftl::TaskPriority::High);
        int expected = 0;
        unsigned wrong = 0;
        for (int value : values) {
            if (value != -expected) {
                ++wrong;
            }
            ++expected;
        }
        REQUIRE(wrong == 0);
    }

    SECTION("std::array, with a stateful callable passed as an lvalue") {
        std::array<int, 64> values{};
        std::atomic<int> sum{0};
        auto add = [&sum](ftl::TaskScheduler *, int *value) {
            *value = 1;
            sum.fetch_add(1);
        };
        ftl::ParallelFor(&ts, values, 5, add, ftl::TaskPriority::Normal);
        REQUIRE(sum.load() == 64);
        REQUIRE(std::count(values.begin(), values.end(), 1) == 64);
    }
}

TEST_CASE("ParallelFor nested inside tasks", "[parallel_for]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);

    constexpr std::size_t kRows = 40;
    constexpr std::size_t kColumns = 100;
    std::vector<std::vector<unsigned>> rows(kRows, std::vector<unsigned>(kColumns, 1));
    // Each row is itself processed by a ParallelFor inside an outer one.
    ftl::ParallelFor(
        &ts, rows, 3,
        [](ftl::TaskScheduler *taskScheduler, std::vector<unsigned> *row) {
            ftl::ParallelFor(
                taskScheduler, *row, 8, [](ftl::TaskScheduler *, unsigned *cell) { *cell += 9; },
                ftl::TaskPriority::High);
        },
        ftl::TaskPriority::Normal);
    std::size_t total = 0;
    for (auto const &row : rows) {
        for (unsigned cell : row) {
            total += cell;
        }
    }
    REQUIRE(total == kRows * kColumns * 10);
}
