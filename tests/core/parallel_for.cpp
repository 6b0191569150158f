// ParallelFor: every element visited exactly once, through each overload,
// for any batch size, from the Init thread and from inside tasks.
#include "ftl/parallel_for.h"
#include "ftl/task_scheduler.h"
#include "test_support.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <list>
#include <stdexcept>
#include <string>
#include <thread>
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

// The index form: ParallelFor(ts, begin, end, f) with automatic batches.

TEST_CASE("ParallelFor over an index range calls f(i) once for every index", "[parallel_for]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    std::size_t const size = GENERATE(std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{17},
                                      std::size_t{1000}, std::size_t{10007});
    CAPTURE(threads, size);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);

    std::vector<std::atomic<unsigned>> visits(size + 2);
    for (auto &visit : visits) {
        visit.store(0);
    }
    std::atomic<unsigned> badThread{0};
    // [1, size + 1): the first and last slots stay unvisited.
    ftl::ParallelFor(&ts, std::size_t{1}, size + 1, [&](std::size_t i) {
        if (ts.GetCurrentThreadIndex() >= threads) {
            badThread.fetch_add(1);
        }
        visits[i].fetch_add(1);
    });
    unsigned wrong = 0;
    for (std::size_t i = 0; i < visits.size(); ++i) {
        bool const inside = i >= 1 && i <= size;
        wrong += visits[i].load() == (inside ? 1u : 0u) ? 0u : 1u;
    }
    REQUIRE(wrong == 0);
    REQUIRE(badThread.load() == 0);
}

TEST_CASE("ParallelFor over an index range takes signed and narrow indices", "[parallel_for]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);

    SECTION("int, from a negative begin, with a priority") {
        std::atomic<long> sum{0};
        std::atomic<unsigned> count{0};
        ftl::ParallelFor(
            &ts, -500, 300,
            [&](int i) {
                sum.fetch_add(i);
                count.fetch_add(1);
            },
            ftl::TaskPriority::High);
        // -500 + ... + 299 = (-500 + 299) * 800 / 2
        REQUIRE(sum.load() == -80400);
        REQUIRE(count.load() == 800);
    }
    SECTION("std::int64_t across the 32-bit boundary") {
        std::int64_t const begin = (std::int64_t{1} << 32) - 100;
        std::atomic<std::int64_t> sum{0};
        ftl::ParallelFor(&ts, begin, begin + 200, [&](std::int64_t i) { sum.fetch_add(i - begin); });
        REQUIRE(sum.load() == 199 * 200 / 2);
    }
    SECTION("unsigned short, up to its largest value") {
        std::vector<std::atomic<unsigned>> visits(65536);
        for (auto &visit : visits) {
            visit.store(0);
        }
        ftl::ParallelFor(&ts, static_cast<unsigned short>(65000), static_cast<unsigned short>(65535),
                         [&](unsigned short i) { visits[i].fetch_add(1); });
        unsigned wrong = 0;
        for (std::size_t i = 0; i < visits.size(); ++i) {
            wrong += visits[i].load() == (i >= 65000 && i < 65535 ? 1u : 0u) ? 0u : 1u;
        }
        REQUIRE(wrong == 0);
    }
    SECTION("an empty or reversed range calls nothing") {
        std::atomic<unsigned> calls{0};
        ftl::ParallelFor(&ts, 10, 10, [&](int) { calls.fetch_add(1); });
        ftl::ParallelFor(&ts, 10, 3, [&](int) { calls.fetch_add(1); });
        ftl::ParallelFor(&ts, 10, 3, [&](int, int) { calls.fetch_add(1); });
        REQUIRE(calls.load() == 0);
    }
}

TEST_CASE("ParallelFor with f(rangeBegin, rangeEnd) gets disjoint subranges covering the range",
          "[parallel_for]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    int const size = GENERATE(1, 2, 64, 5000);
    CAPTURE(threads, size);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);

    std::vector<std::atomic<unsigned>> visits(static_cast<std::size_t>(size));
    for (auto &visit : visits) {
        visit.store(0);
    }
    std::atomic<unsigned> emptyRanges{0};
    std::atomic<unsigned> ranges{0};
    ftl::ParallelFor(&ts, 100, 100 + size, [&](int rangeBegin, int rangeEnd) {
        ranges.fetch_add(1);
        if (rangeBegin >= rangeEnd) {
            emptyRanges.fetch_add(1);
        }
        for (int i = rangeBegin; i < rangeEnd; ++i) {
            visits[static_cast<std::size_t>(i - 100)].fetch_add(1);
        }
    });
    REQUIRE(emptyRanges.load() == 0);
    REQUIRE(std::count_if(visits.begin(), visits.end(), [](auto const &v) { return v.load() == 1; }) == size);
    // One piece per worker to start, each cut where it looks for idle
    // workers (8 times over a piece); on one worker nothing splits.
    auto const expectedAtLeast = std::min<unsigned>(static_cast<unsigned>(size), threads);
    REQUIRE(ranges.load() >= expectedAtLeast);
    if (threads == 1) {
        REQUIRE(ranges.load() == std::min<unsigned>(static_cast<unsigned>(size), 8));
    }
}

TEST_CASE("ParallelFor over an index range nests inside its own iterations", "[parallel_for]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);

    constexpr unsigned kRows = 60;
    constexpr unsigned kColumns = 300;
    std::vector<unsigned> cells(kRows * kColumns, 0);
    ftl::ParallelFor(&ts, 0u, kRows, [&](unsigned row) {
        ftl::ParallelFor(&ts, 0u, kColumns,
                         [&](unsigned column) { cells[row * kColumns + column] += row + 1; });
    });
    std::uint64_t total = 0;
    for (unsigned cell : cells) {
        total += cell;
    }
    REQUIRE(total == std::uint64_t{kColumns} * kRows * (kRows + 1) / 2);
}

TEST_CASE("ParallelFor over an index range hands the rest of a long piece to an idle worker",
          "[parallel_for]") {
    // Two workers, two starting pieces: [0, 32) is slow, [32, 64) quick. Index
    // 0 waits until the quick piece is done and an idle worker is seen, so
    // the slow piece's next look (at index 4; a look every 64 / (2 x 8)
    // indices) splits it. Indices 4 and on then wait until a second worker
    // runs a slow index: only the split-off half can give it one. Each wait
    // gives up after 10 s, so a missing split fails instead of hanging.
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(2)) == 0);
    using Clock = std::chrono::steady_clock;
    auto const deadline = Clock::now() + std::chrono::seconds(10);
    std::atomic<unsigned> quickDone{0};
    std::atomic<unsigned> slowWorkers{0}; // a bit per worker that ran a slow index
    std::vector<std::atomic<unsigned>> visits(64);
    for (auto &visit : visits) {
        visit.store(0);
    }
    ftl::ParallelFor(&ts, 0, 64, [&](int i) {
        visits[static_cast<std::size_t>(i)].fetch_add(1);
        if (i >= 32) {
            quickDone.fetch_add(1);
            return;
        }
        slowWorkers.fetch_or(1u << ts.GetCurrentThreadIndex());
        if (i == 0) {
            while ((quickDone.load() != 32 || !ftl::detail::ParallelForWantsSplit(&ts)) &&
                   Clock::now() < deadline) {
                std::this_thread::yield();
            }
        } else if (i >= 4) {
            while (slowWorkers.load() != 3 && Clock::now() < deadline) {
                std::this_thread::yield();
            }
        }
    });
    REQUIRE(std::count_if(visits.begin(), visits.end(), [](auto const &v) { return v.load() == 1; }) == 64);
    REQUIRE(slowWorkers.load() == 3);
    REQUIRE(Clock::now() < deadline);
}

TEST_CASE("ParallelFor rethrows an iteration's exception after every task ended", "[parallel_for]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);

    std::vector<std::atomic<unsigned>> visits(4000);
    for (auto &visit : visits) {
        visit.store(0);
    }
    std::atomic<unsigned> running{0};
    bool thrown = false;
    try {
        ftl::ParallelFor(&ts, std::size_t{0}, visits.size(), [&](std::size_t i) {
            running.fetch_add(1);
            visits[i].fetch_add(1);
            running.fetch_sub(1);
            if (i == 1234) {
                throw std::runtime_error("iteration 1234");
            }
        });
    } catch (std::runtime_error const &error) {
        thrown = std::string(error.what()) == "iteration 1234";
    }
    REQUIRE(thrown);
    // Nothing runs once it returned, and no index ran twice.
    REQUIRE(running.load() == 0);
    REQUIRE(visits[1234].load() == 1);
    REQUIRE(std::count_if(visits.begin(), visits.end(), [](auto const &v) { return v.load() > 1; }) == 0);
}
