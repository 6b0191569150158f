// ThreadLocal: one value per worker, looked up again after every wait; the
// factory constructor; GetHandle; GetAllValues, GetAllValuesByRef and
// ForEachValue.
#include "ftl/thread_local.h"
#include "ftl/atomic_counter.h"
#include "ftl/task_counter.h"
#include "ftl/task_scheduler.h"
#include "test_support.h"

#include <atomic>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

using ftl_test::LambdaTask;
using ftl_test::Options;
using ftl_test::ParkOnce;

TEST_CASE("ThreadLocal counters stay per thread across waits", "[thread_local]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);

    ftl::ThreadLocal<unsigned> counts(&ts);
    // The factory runs on the worker that first touches its value, so each
    // value can name its owner.
    ftl::ThreadLocal<unsigned> owner(&ts, [&ts] { return ts.GetCurrentThreadIndex(); });
    std::atomic<unsigned> wrongOwner{0};
    constexpr unsigned kTasks = 64;
    constexpr unsigned kRounds = 10;
    auto work = [&](ftl::TaskScheduler *taskScheduler) {
        for (unsigned round = 0; round < kRounds; ++round) {
            ++*counts;
            if (*owner != taskScheduler->GetCurrentThreadIndex()) {
                wrongOwner.fetch_add(1);
            }
            ParkOnce(taskScheduler);
            // Possibly another thread now: the lookup must follow.
            *counts += 1;
            if (*owner != taskScheduler->GetCurrentThreadIndex()) {
                wrongOwner.fetch_add(1);
            }
        }
    };
    std::vector<ftl::Task> tasks(kTasks, LambdaTask(work));
    ftl::TaskCounter counter(&ts);
    ts.AddTasks(kTasks, tasks.data(), ftl::TaskPriority::Normal, &counter);
    ts.WaitForCounter(&counter);

    REQUIRE(wrongOwner.load() == 0);
    unsigned builtBefore = 0;
    counts.ForEachValue([&](unsigned, unsigned &) { ++builtBefore; });
    REQUIRE(builtBefore >= 1u);
    REQUIRE(builtBefore <= threads);
    // One value per thread, the ones no task touched built (as 0) on the way.
    std::vector<unsigned> const values = counts.GetAllValues();
    REQUIRE(values.size() == threads);
    REQUIRE(std::accumulate(values.begin(), values.end(), 0u) == kTasks * kRounds * 2);

    unsigned sum = 0;
    unsigned visited = 0;
    counts.ForEachValue([&](unsigned threadIndex, unsigned &value) {
        REQUIRE(threadIndex < threads);
        sum += value;
        ++visited;
    });
    REQUIRE(sum == kTasks * kRounds * 2);
    REQUIRE(visited == values.size());

    unsigned wrongIndex = 0;
    owner.ForEachValue([&](unsigned threadIndex, unsigned &value) {
        if (value != threadIndex) {
            ++wrongIndex;
        }
    });
    REQUIRE(wrongIndex == 0);
}

namespace {

struct Tracked {
    static std::atomic<int> Live;
    explicit Tracked(std::string name) : Name(std::move(name)) { Live.fetch_add(1); }
    Tracked(Tracked const &other) : Name(other.Name), Hits(other.Hits) { Live.fetch_add(1); }
    Tracked &operator=(Tracked const &) = default;
    ~Tracked() { Live.fetch_sub(1); }
    std::string Name;
    unsigned Hits = 0;
};
std::atomic<int> Tracked::Live{0};

} // namespace

TEST_CASE("ThreadLocal builds each value once, by the factory, and destroys it", "[thread_local]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);

    std::atomic<unsigned> built{0};
    int const liveBefore = Tracked::Live.load();
    {
        ftl::ThreadLocal<Tracked> tracked(&ts, [&built] {
            built.fetch_add(1);
            return Tracked("from the factory");
        });
        unsigned builtBefore = 0;
        tracked.ForEachValue([&](unsigned, Tracked &) { ++builtBefore; });
        REQUIRE(builtBefore == 0u);

        std::atomic<unsigned> wrongName{0};
        auto work = [&](ftl::TaskScheduler *taskScheduler) {
            for (int i = 0; i < 4; ++i) {
                if (tracked->Name != "from the factory") {
                    wrongName.fetch_add(1);
                }
                tracked->Hits += 1;
                ParkOnce(taskScheduler);
            }
        };
        std::vector<ftl::Task> tasks(48, LambdaTask(work));
        ftl::TaskCounter counter(&ts);
        ts.AddTasks(48, tasks.data(), ftl::TaskPriority::Normal, &counter);
        ts.WaitForCounter(&counter);
        // The Init thread's own value is index 0.
        (*tracked).Hits += 1000;

        REQUIRE(wrongName.load() == 0);
        unsigned builtByTasks = 0;
        tracked.ForEachValue([&](unsigned, Tracked &) { ++builtByTasks; });
        REQUIRE(builtByTasks == built.load());
        // GetAllValuesByRef builds the values of threads that ran no task, by
        // the factory, once: a second call builds nothing.
        std::vector<std::reference_wrapper<Tracked>> refs = tracked.GetAllValuesByRef();
        REQUIRE(refs.size() == threads);
        REQUIRE(built.load() == threads);
        refs[threads - 1].get().Hits += 7;
        std::vector<Tracked> const values = tracked.GetAllValues();
        REQUIRE(values.size() == threads);
        REQUIRE(built.load() == threads);
        unsigned hits = 0;
        for (unsigned i = 0; i < threads; ++i) {
            REQUIRE(&refs[i].get() != &values[i]); // copies, not the slots
            REQUIRE(refs[i].get().Hits == values[i].Hits);
            hits += values[i].Hits;
        }
        REQUIRE(hits == 48 * 4 + 1000 + 7);
        bool sawInitThread = false;
        tracked.ForEachValue([&](unsigned threadIndex, Tracked &value) {
            if (threadIndex == 0) {
                sawInitThread = value.Hits >= 1000;
            }
        });
        REQUIRE(sawInitThread);
    }
    // Every value the ThreadLocal built was destroyed with it.
    REQUIRE(Tracked::Live.load() == liveBefore);
}

TEST_CASE("ThreadLocal handles and the deduction guide", "[thread_local]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);

    ftl::ThreadLocal deduced(&ts, [] { return 5L; });
    static_assert(std::is_same<decltype(deduced), ftl::ThreadLocal<long>>::value,
                  "the factory's result type names the value type");
    REQUIRE(*deduced == 5L);

    // A handle caches the value; it is used only between waits.
    auto work = [&](ftl::TaskScheduler *taskScheduler) {
        for (int round = 0; round < 3; ++round) {
            ftl::ThreadLocalHandle<long> handle = deduced.GetHandle();
            *handle += 2;
            *handle.operator->() -= 1;
            ParkOnce(taskScheduler);
        }
    };
    std::vector<ftl::Task> tasks(40, LambdaTask(work));
    ftl::TaskCounter counter(&ts);
    ts.AddTasks(40, tasks.data(), ftl::TaskPriority::Normal, &counter);
    ts.WaitForCounter(&counter);

    std::vector<long> const values = deduced.GetAllValues();
    REQUIRE(values.size() == threads);
    long const total = std::accumulate(values.begin(), values.end(), 0L);
    // Each value started at 5; the tasks added 40 * 3 in total.
    REQUIRE(total == 5L * static_cast<long>(values.size()) + 40L * 3L);
}
