// TaskScheduler: Init, AddTask(s), WaitForCounter, indices, pool growth,
// pinned waits, register state across fiber switches, thread affinity.
#include "ftl/task_scheduler.h"
#include "ftl/atomic_counter.h"
#include "ftl/task_counter.h"
#include "test_support.h"

#include <algorithm>
#include <cfenv>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__aarch64__)
#include <arm_neon.h>
#else
#include <xmmintrin.h>
#endif

using ftl_test::ClearFlag;
using ftl_test::FibCall;
using ftl_test::FibTask;
using ftl_test::LambdaTask;
using ftl_test::Options;
using ftl_test::ParkOnce;

namespace {

// ---------------------------------------------------------------------------
// Triangle number

struct RangeSum {
    std::uint64_t First;
    std::uint64_t Last;
    std::uint64_t Sum;
};

void SumRange(ftl::TaskScheduler * /*taskScheduler*/, void *arg) {
    auto *range = static_cast<RangeSum *>(arg);
    std::uint64_t sum = 0;
    for (std::uint64_t i = range->First; i <= range->Last; ++i) {
        sum += i;
    }
    range->Sum = sum; // plain store: the counter's ordering makes it visible
}

// Splits 1..n into tasks of perTask numbers, runs them, returns the sum.
std::uint64_t TriangleNumber(ftl::TaskScheduler &ts, std::uint64_t n, std::uint64_t perTask, bool oneByOne) {
    std::size_t const numTasks = static_cast<std::size_t>((n + perTask - 1) / perTask);
    std::vector<RangeSum> ranges(numTasks);
    std::vector<ftl::Task> tasks(numTasks);
    for (std::size_t i = 0; i < numTasks; ++i) {
        std::uint64_t const first = 1 + i * perTask;
        ranges[i] = RangeSum{first, std::min(n, first + perTask - 1), 0};
        tasks[i] = ftl::Task{SumRange, &ranges[i]};
    }
    ftl::TaskCounter counter(&ts);
    if (oneByOne) {
        for (ftl::Task const &task : tasks) {
            ts.AddTask(task, ftl::TaskPriority::Normal, &counter);
        }
    } else {
        ts.AddTasks(static_cast<unsigned>(numTasks), tasks.data(), ftl::TaskPriority::High, &counter);
    }
    ts.WaitForCounter(&counter);
    std::uint64_t total = 0;
    for (RangeSum const &range : ranges) {
        total += range.Sum;
    }
    return total;
}

// ---------------------------------------------------------------------------
// Producers and consumers

constexpr unsigned kProducers = 100;
constexpr unsigned kConsumersPerProducer = 1000;

struct ProducerState {
    std::atomic<unsigned> *Consumed;
    std::atomic<unsigned> *Errors;
    std::atomic<unsigned> Mine{0};
};

void ConsumerTask(ftl::TaskScheduler * /*taskScheduler*/, void *arg) {
    auto *producer = static_cast<ProducerState *>(arg);
    // Relaxed on purpose: the producer's wait must make these visible.
    producer->Mine.fetch_add(1, std::memory_order_relaxed);
    producer->Consumed->fetch_add(1, std::memory_order_relaxed);
}

void ProducerTask(ftl::TaskScheduler *ts, void *arg) {
    auto *producer = static_cast<ProducerState *>(arg);
    std::vector<ftl::Task> tasks(kConsumersPerProducer, ftl::Task{ConsumerTask, producer});
    ftl::TaskCounter counter(ts);
    ts->AddTasks(kConsumersPerProducer, tasks.data(), ftl::TaskPriority::Normal, &counter);
    ts->WaitForCounter(&counter);
    if (producer->Mine.load(std::memory_order_relaxed) != kConsumersPerProducer) {
        producer->Errors->fetch_add(1);
    }
}

} // namespace

TEST_CASE("Triangle number summed in tasks", "[scheduler]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);
    REQUIRE(ts.GetThreadCount() == threads);

    constexpr std::uint64_t n = 10000000;
    bool const oneByOne = GENERATE(false, true);
    CAPTURE(oneByOne);
    REQUIRE(TriangleNumber(ts, n, 1000, oneByOne) == n * (n + 1) / 2);
    // A remainder batch and a single number per task.
    REQUIRE(TriangleNumber(ts, 12345, 1000, oneByOne) == 12345ull * 12346ull / 2);
    REQUIRE(TriangleNumber(ts, 3000, 1, oneByOne) == 3000ull * 3001ull / 2);
}

TEST_CASE("Producer tasks add consumer tasks and wait for them", "[scheduler]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);

    std::atomic<unsigned> consumed{0};
    std::atomic<unsigned> errors{0};
    std::vector<ProducerState> producers(kProducers);
    std::vector<ftl::Task> tasks;
    for (ProducerState &producer : producers) {
        producer.Consumed = &consumed;
        producer.Errors = &errors;
        tasks.push_back(ftl::Task{ProducerTask, &producer});
    }
    ftl::TaskCounter counter(&ts);
    ts.AddTasks(kProducers, tasks.data(), ftl::TaskPriority::High, &counter);
    ts.WaitForCounter(&counter);

    REQUIRE(consumed.load() == kProducers * kConsumersPerProducer);
    REQUIRE(errors.load() == 0);
}

TEST_CASE("Recursive Fibonacci with a wait in every call", "[scheduler]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);

    FibCall call{25, 0};
    ftl::TaskCounter counter(&ts);
    ts.AddTask(ftl::Task{FibTask, &call}, ftl::TaskPriority::High, &counter);
    ts.WaitForCounter(&counter);
    REQUIRE(call.Result == 75025u);
}

TEST_CASE("More fibers wait on one counter than the fiber pool holds", "[scheduler]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskSchedulerInitOptions options = Options(threads);
    options.FiberPoolSize = 16;
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(options) == 0);

    constexpr unsigned kWaiters = 200;
    ftl::FullAtomicCounter arrived(&ts);
    std::atomic<unsigned> released{0};
    std::atomic<unsigned> resumed{0};
    std::atomic<unsigned> early{0};

    ftl::AtomicFlag flag(&ts, 1);
    ftl::TaskCounter gate(&ts);
    gate.Add(1);
    ftl::FullAtomicCounter open(&ts, 0);

    int const kind = GENERATE(0, 1, 2);
    char const *const kinds[] = {"AtomicFlag", "TaskCounter", "FullAtomicCounter"};
    CAPTURE(kinds[kind]);

    auto waiter = [&](ftl::TaskScheduler *taskScheduler) {
        arrived.FetchAdd(1);
        switch (kind) {
        case 0:
            taskScheduler->WaitForCounter(&flag);
            break;
        case 1:
            taskScheduler->WaitForCounter(&gate);
            break;
        default:
            taskScheduler->WaitForCounter(&open, 1);
            break;
        }
        if (released.load() == 0) {
            early.fetch_add(1);
        }
        resumed.fetch_add(1);
    };
    // Releases the waiters once every one of them has started: at that point
    // each holds a fiber, far more than the pool's initial 16.
    auto releaser = [&](ftl::TaskScheduler *taskScheduler) {
        taskScheduler->WaitForCounter(&arrived, kWaiters);
        released.store(1);
        switch (kind) {
        case 0:
            flag.Clear();
            break;
        case 1:
            gate.Decrement();
            break;
        default:
            open.Store(1);
            break;
        }
    };

    std::vector<ftl::Task> tasks(kWaiters, LambdaTask(waiter));
    tasks.push_back(LambdaTask(releaser));
    ftl::TaskCounter done(&ts);
    ts.AddTasks(static_cast<unsigned>(tasks.size()), tasks.data(), ftl::TaskPriority::Normal, &done);
    ts.WaitForCounter(&done);

    REQUIRE(resumed.load() == kWaiters);
    REQUIRE(early.load() == 0);
    // All the waiters had started and none had finished when they were
    // released; at most one per thread can run on a thread's own fiber.
    REQUIRE(ts.GetFiberCount() >= kWaiters - threads);
}

namespace {

struct PoolGrowth {
    std::atomic<unsigned> Calls{0};
    std::atomic<unsigned> Largest{0};
};

void OnPoolGrown(void *context, unsigned fiberCount) {
    auto *growth = static_cast<PoolGrowth *>(context);
    growth->Calls.fetch_add(1);
    unsigned seen = growth->Largest.load();
    while (seen < fiberCount && !growth->Largest.compare_exchange_weak(seen, fiberCount)) {
    }
}

} // namespace

TEST_CASE("Fiber pool grows when it runs dry under FiberPoolPolicy::Grow", "[scheduler]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    PoolGrowth growth;
    ftl::TaskSchedulerInitOptions options = Options(threads);
    options.FiberPoolSize = 4;
    options.PoolPolicy = ftl::FiberPoolPolicy::Grow;
    options.Callbacks.Context = &growth;
    options.Callbacks.OnFiberPoolGrown = OnPoolGrown;
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(options) == 0);
    // Init returns once every worker thread runs its first fiber: with more
    // threads than fibers the pool has grown already.
    if (threads - 1 <= 4) {
        REQUIRE(ts.GetFiberCount() == 4u);
    } else {
        REQUIRE(ts.GetFiberCount() >= threads - 1);
    }

    constexpr unsigned kWaiters = 100;
    ftl::AtomicFlag flag(&ts, 1);
    ftl::FullAtomicCounter arrived(&ts);
    std::atomic<unsigned> resumed{0};
    auto waiter = [&](ftl::TaskScheduler *taskScheduler) {
        arrived.FetchAdd(1);
        taskScheduler->WaitForCounter(&flag);
        resumed.fetch_add(1);
    };
    auto releaser = [&](ftl::TaskScheduler *taskScheduler) {
        taskScheduler->WaitForCounter(&arrived, kWaiters);
        flag.Clear();
    };
    std::vector<ftl::Task> tasks(kWaiters, LambdaTask(waiter));
    tasks.push_back(LambdaTask(releaser));
    ftl::TaskCounter done(&ts);
    ts.AddTasks(static_cast<unsigned>(tasks.size()), tasks.data(), ftl::TaskPriority::High, &done);
    ts.WaitForCounter(&done);

    REQUIRE(resumed.load() == kWaiters);
    REQUIRE(ts.GetFiberCount() >= kWaiters - threads);
    REQUIRE(growth.Calls.load() >= 1u);
    REQUIRE(growth.Largest.load() == ts.GetFiberCount());
}

TEST_CASE("Two schedulers one after another in one process", "[scheduler]") {
    for (unsigned threads : {2u, 3u, 1u, 2u}) {
        CAPTURE(threads);
        ftl::TaskScheduler ts;
        REQUIRE(ts.Init(Options(threads)) == 0);
        REQUIRE(ts.GetThreadCount() == threads);
        REQUIRE(ts.GetCurrentThreadIndex() == 0u);
        REQUIRE(TriangleNumber(ts, 100000, 100, false) == 100000ull * 100001ull / 2);
        FibCall call{15, 0};
        ftl::TaskCounter counter(&ts);
        ts.AddTask(ftl::Task{FibTask, &call}, ftl::TaskPriority::Normal, &counter);
        ts.WaitForCounter(&counter);
        REQUIRE(call.Result == 610u);
    }
}

TEST_CASE("Threads outside the scheduler add tasks", "[scheduler]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);

    std::atomic<unsigned> ran{0};
    auto increment = [&](ftl::TaskScheduler *) { ran.fetch_add(1, std::memory_order_relaxed); };
    ftl::Task const incrementTask = LambdaTask(increment);
    constexpr unsigned kPerThread = 1000;

    SECTION("Then the Init thread waits on their counter") {
        ftl::TaskCounter counter(&ts);
        std::vector<std::thread> adders;
        for (unsigned t = 0; t < 4; ++t) {
            adders.emplace_back([&, t] {
                if (t % 2 == 0) {
                    for (unsigned i = 0; i < kPerThread; ++i) {
                        ts.AddTask(incrementTask, ftl::TaskPriority::Normal, &counter);
                    }
                } else {
                    std::vector<ftl::Task> batch(kPerThread, incrementTask);
                    ts.AddTasks(kPerThread, batch.data(), ftl::TaskPriority::High, &counter);
                }
            });
        }
        for (std::thread &adder : adders) {
            adder.join();
        }
        ts.WaitForCounter(&counter);
        REQUIRE(ran.load() == 4 * kPerThread);
    }

    SECTION("While the Init thread is parked") {
        ftl::AtomicFlag flag(&ts, 1);
        ftl::TaskCounter counter(&ts);
        auto closer = [&](ftl::TaskScheduler *taskScheduler) {
            taskScheduler->WaitForCounter(&counter);
            flag.Clear();
        };
        std::thread adder([&] {
            // Give the Init thread time to park.
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
            for (unsigned i = 0; i < kPerThread; ++i) {
                ts.AddTask(incrementTask, ftl::TaskPriority::Normal, &counter);
            }
            ts.AddTask(LambdaTask(closer), ftl::TaskPriority::Normal);
        });
        ts.WaitForCounter(&flag);
        adder.join();
        REQUIRE(ran.load() == kPerThread);
    }
}

TEST_CASE("Thread and fiber indices", "[scheduler]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);
    REQUIRE(ts.GetThreadCount() == threads);
    REQUIRE(ts.GetCurrentThreadIndex() == 0u);
    // The Init thread runs as fiber 0 of the pool.
    REQUIRE(ts.GetCurrentFiberIndex() == 0u);
    REQUIRE(ts.GetFiberCount() == ftl::TaskSchedulerInitOptions().FiberPoolSize);

    unsigned foreignThread = 0;
    unsigned foreignFiber = 0;
    std::thread([&] {
        foreignThread = ts.GetCurrentThreadIndex();
        foreignFiber = ts.GetCurrentFiberIndex();
    }).join();
    REQUIRE(foreignThread == ftl::kInvalidIndex);
    REQUIRE(foreignFiber == ftl::kInvalidIndex);

    std::atomic<unsigned> badThread{0};
    std::atomic<unsigned> badFiber{0};
    auto check = [&](ftl::TaskScheduler *taskScheduler) {
        unsigned const thread = taskScheduler->GetCurrentThreadIndex();
        unsigned const fiber = taskScheduler->GetCurrentFiberIndex();
        if (thread >= taskScheduler->GetThreadCount()) {
            badThread.fetch_add(1);
        }
        // Fiber 0 is the Init thread's own stack: a task runs there only
        // inline, in a wait of the Init thread.
        if (fiber >= taskScheduler->GetFiberCount() || (fiber == 0 && thread != 0)) {
            badFiber.fetch_add(1);
        }
        ftl_test::BusyMicros(10);
    };
    std::vector<ftl::Task> tasks(500, LambdaTask(check));
    ftl::TaskCounter counter(&ts);
    ts.AddTasks(500, tasks.data(), ftl::TaskPriority::Normal, &counter);
    ts.WaitForCounter(&counter);
    REQUIRE(badThread.load() == 0);
    REQUIRE(badFiber.load() == 0);
    REQUIRE(ts.GetCurrentThreadIndex() == 0u);
    REQUIRE(ts.GetCurrentFiberIndex() == 0u);
}

TEST_CASE("ThreadPoolSize 0 means one thread per allowed CPU", "[scheduler]") {
    // Counted before Init, which pins this thread to one CPU.
    unsigned const cpus = ftl_test::AllowedCpuCount();
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init() == 0);
    REQUIRE(ts.GetThreadCount() == cpus);
    REQUIRE(ts.GetEmptyQueueBehavior() == ftl::EmptyQueueBehavior::Sleep);
    REQUIRE(TriangleNumber(ts, 50000, 100, false) == 50000ull * 50001ull / 2);
}

// ---------------------------------------------------------------------------
// Pinned waits

namespace {

struct PinnedStats {
    std::atomic<unsigned> Waits{0};
    std::atomic<unsigned> Moved{0};      // pinned waits that resumed elsewhere
    std::atomic<unsigned> OutOfRange{0}; // thread indices >= GetThreadCount()
    std::atomic<unsigned> Migrations{0}; // unpinned waits that resumed elsewhere
};

void BusyChild(ftl::TaskScheduler * /*taskScheduler*/, void * /*arg*/) {
    ftl_test::BusyMicros(5);
}

void AddOne(ftl::TaskScheduler * /*taskScheduler*/, void *arg) {
    static_cast<ftl::FullAtomicCounter *>(arg)->FetchAdd(1);
}

// Waits once on a fresh counter of the kind picked by `round`, released by a
// child task that may run on any thread.
void WaitOnce(ftl::TaskScheduler *ts, unsigned round, bool pinned) {
    switch (round % 3) {
    case 0: {
        ftl::TaskCounter counter(ts);
        ftl::Task const children[2] = {{BusyChild, nullptr}, {BusyChild, nullptr}};
        ts->AddTasks(2, children, ftl::TaskPriority::Normal, &counter);
        ts->WaitForCounter(&counter, pinned);
        break;
    }
    case 1: {
        ftl::AtomicFlag flag(ts, 1);
        ts->AddTask(ftl::Task{ClearFlag, &flag}, ftl::TaskPriority::Normal);
        ts->WaitForCounter(&flag, pinned);
        break;
    }
    default: {
        ftl::FullAtomicCounter value(ts);
        ts->AddTask(ftl::Task{AddOne, &value}, ftl::TaskPriority::Normal);
        ts->WaitForCounter(&value, 1, pinned);
        break;
    }
    }
}

} // namespace

TEST_CASE("Pinned waits resume on the thread they waited on", "[scheduler]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);

    PinnedStats stats;
    constexpr unsigned kRounds = 40;
    auto pinnedWaiter = [&](ftl::TaskScheduler *taskScheduler) {
        for (unsigned round = 0; round < kRounds; ++round) {
            unsigned const before = taskScheduler->GetCurrentThreadIndex();
            ftl_test::OsThreadId const osBefore = ftl_test::CurrentOsThread();
            WaitOnce(taskScheduler, round, true);
            unsigned const after = taskScheduler->GetCurrentThreadIndex();
            if (after != before || !ftl_test::SameOsThread(osBefore, ftl_test::CurrentOsThread())) {
                stats.Moved.fetch_add(1);
            }
            if (after >= taskScheduler->GetThreadCount()) {
                stats.OutOfRange.fetch_add(1);
            }
            stats.Waits.fetch_add(1);
        }
    };
    // Keeps every thread busy with unpinned waits, so the pinned fibers are
    // readied by, and visible to, other threads.
    auto unpinnedWaiter = [&](ftl::TaskScheduler *taskScheduler) {
        for (unsigned round = 0; round < kRounds; ++round) {
            unsigned const before = taskScheduler->GetCurrentThreadIndex();
            WaitOnce(taskScheduler, round, false);
            unsigned const after = taskScheduler->GetCurrentThreadIndex();
            if (after != before) {
                stats.Migrations.fetch_add(1);
            }
            if (after >= taskScheduler->GetThreadCount()) {
                stats.OutOfRange.fetch_add(1);
            }
        }
    };

    constexpr unsigned kPinned = 32;
    std::vector<ftl::Task> tasks(kPinned, LambdaTask(pinnedWaiter));
    tasks.insert(tasks.end(), 4 * threads, LambdaTask(unpinnedWaiter));

    ftl::TaskCounter counter(&ts);
    ts.AddTasks(static_cast<unsigned>(tasks.size()), tasks.data(), ftl::TaskPriority::Normal, &counter);

    // The Init thread's own waits, unpinned, must come back to it.
    std::thread::id const mainId = std::this_thread::get_id();
    unsigned mainMoved = 0;
    for (unsigned round = 0; round < kRounds; ++round) {
        WaitOnce(&ts, round, false);
        if (ts.GetCurrentThreadIndex() != 0 || std::this_thread::get_id() != mainId) {
            ++mainMoved;
        }
    }
    ts.WaitForCounter(&counter);

    REQUIRE(stats.Waits.load() == kPinned * kRounds);
    REQUIRE(stats.Moved.load() == 0);
    REQUIRE(stats.OutOfRange.load() == 0);
    REQUIRE(mainMoved == 0);
    // Unpinned waits may resume anywhere; only recorded, never required.
    if (threads >= 2 && stats.Migrations.load() == 0) {
        WARN("no unpinned wait migrated to another thread in this run");
    }
}

// ---------------------------------------------------------------------------
// Floating-point and SIMD state across fiber switches

namespace {

struct FloatResults {
    double Double;
    float Float;
    double Volatile;
    float Vector[4];

    // Bit for bit: a value that was damaged and one that was rounded
    // differently must both fail.
    bool operator==(FloatResults const &other) const {
        return std::memcmp(&Double, &other.Double, sizeof(Double)) == 0 &&
               std::memcmp(&Float, &other.Float, sizeof(Float)) == 0 &&
               std::memcmp(&Volatile, &other.Volatile, sizeof(Volatile)) == 0 &&
               std::memcmp(Vector, other.Vector, sizeof(Vector)) == 0;
    }
};

// Four floats in a SIMD register: SSE on x86-64, NEON on arm64.
#if defined(__aarch64__)
using Simd = float32x4_t;
Simd SimdSet(float a, float b, float c, float d) {
    float const lanes[4] = {d, c, b, a}; // _mm_set_ps order: a is the highest lane
    return vld1q_f32(lanes);
}
Simd SimdSplat(float a) {
    return vdupq_n_f32(a);
}
Simd SimdMulAdd(Simd v, Simd factor, Simd addend) {
    return vaddq_f32(vmulq_f32(v, factor), addend);
}
void SimdStore(float *out, Simd v) {
    vst1q_f32(out, v);
}
// The rounding-mode bits of the floating-point control register: FPCR.RMode.
unsigned FpControl() {
    return static_cast<unsigned>(__builtin_aarch64_get_fpcr());
}
void SetFpControl(unsigned value) {
    __builtin_aarch64_set_fpcr(value);
}
constexpr unsigned kRoundingMask = 0xC00000;   // FPCR.RMode
constexpr unsigned kRoundUpControl = 0x400000; // RMode = 01b: toward +infinity
constexpr unsigned kRoundNearestControl = 0x0; // RMode = 00b
#else
using Simd = __m128;
Simd SimdSet(float a, float b, float c, float d) {
    return _mm_set_ps(a, b, c, d);
}
Simd SimdSplat(float a) {
    return _mm_set1_ps(a);
}
Simd SimdMulAdd(Simd v, Simd factor, Simd addend) {
    return _mm_add_ps(_mm_mul_ps(v, factor), addend);
}
void SimdStore(float *out, Simd v) {
    _mm_storeu_ps(out, v);
}
// The SSE control and status register, whose RC bits are the rounding mode.
unsigned FpControl() {
    return _mm_getcsr();
}
void SetFpControl(unsigned value) {
    _mm_setcsr(value);
}
constexpr unsigned kRoundingMask = 0x6000;     // MXCSR.RC
constexpr unsigned kRoundUpControl = 0x4000;   // RC = 10b: toward +infinity
constexpr unsigned kRoundNearestControl = 0x0; // RC = 00b
#endif

// The computation of the float test; with ts == nullptr it never waits, which
// gives the expected bits.
FloatResults FloatWork(ftl::TaskScheduler *ts, unsigned seed) {
    double acc = 1.0 + static_cast<double>(seed) * 0.001;
    float facc = 0.5f + static_cast<float>(seed) * 0.25f;
    volatile double vacc = static_cast<double>(seed) / 7.0;
    Simd vec = SimdSet(static_cast<float>(seed), 1.5f, -2.25f, 0.1f);
    Simd const factor = SimdSplat(1.0009765625f);
    Simd const addend = SimdSet(0.3f, -0.7f, 1.1f, 0.013f);
    for (int step = 0; step < 6; ++step) {
        acc = acc * 1.000000119 + 0.1 * static_cast<double>(step);
        facc = facc * 1.125f - 0.3f;
        vacc = vacc * 3.0000001 - 1.0 / 3.0;
        vec = SimdMulAdd(vec, factor, addend);
        if (ts != nullptr) {
            ParkOnce(ts);
        }
    }
    FloatResults results{};
    results.Double = acc;
    results.Float = facc;
    results.Volatile = vacc;
    SimdStore(results.Vector, vec);
    return results;
}

// Not inlined, so the division cannot move across a fesetround call.
__attribute__((noinline)) double OneThird() {
    volatile double one = 1.0;
    volatile double three = 3.0;
    return one / three;
}

} // namespace

TEST_CASE("Floating-point and SIMD values survive waits", "[scheduler]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);

    constexpr unsigned kTasks = 64;
    std::vector<FloatResults> expected(kTasks);
    for (unsigned i = 0; i < kTasks; ++i) {
        expected[i] = FloatWork(nullptr, i);
    }
    std::atomic<unsigned> next{0};
    std::atomic<unsigned> wrong{0};
    auto work = [&](ftl::TaskScheduler *taskScheduler) {
        unsigned const seed = next.fetch_add(1);
        if (!(FloatWork(taskScheduler, seed) == expected[seed])) {
            wrong.fetch_add(1);
        }
    };
    std::vector<ftl::Task> tasks(kTasks, LambdaTask(work));
    ftl::TaskCounter counter(&ts);
    ts.AddTasks(kTasks, tasks.data(), ftl::TaskPriority::Normal, &counter);
    // The Init thread's fiber computes too. (The seed from a volatile: a
    // constant one lets Clang fold the expected run at compile time, fusing
    // each a * b + c that the run on the fiber rounds twice.)
    volatile unsigned const mySeed = 1000;
    FloatResults const mine = FloatWork(&ts, mySeed);
    ts.WaitForCounter(&counter);
    REQUIRE(mine == FloatWork(nullptr, mySeed));
    REQUIRE(wrong.load() == 0);
}

TEST_CASE("Rounding mode set in a task survives its waits", "[scheduler]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);

    int const originalRound = std::fegetround();
    REQUIRE(originalRound == FE_TONEAREST);
    double const nearestThird = OneThird();
    std::fesetround(FE_UPWARD);
    double const upwardThird = OneThird();
    std::fesetround(originalRound);
    REQUIRE(nearestThird != upwardThird);

    std::atomic<unsigned> lost{0};   // the rounding task saw another mode after a wait
    std::atomic<unsigned> leaked{0}; // a bystander task saw round-upward
    std::atomic<unsigned> roundingDone{0};
    auto rounding = [&](ftl::TaskScheduler *taskScheduler) {
        unsigned const savedControl = FpControl();
        int const savedRound = std::fegetround();
        std::fesetround(FE_UPWARD);
        for (int i = 0; i < 5; ++i) {
            ParkOnce(taskScheduler);
            if (std::fegetround() != FE_UPWARD || (FpControl() & kRoundingMask) != kRoundUpControl ||
                OneThird() != upwardThird) {
                lost.fetch_add(1);
            }
        }
        std::fesetround(savedRound);
        SetFpControl(savedControl);
        roundingDone.fetch_add(1);
    };
    // Runs while rounding tasks are parked with round-upward in their context.
    auto bystander = [&](ftl::TaskScheduler *) {
        if (std::fegetround() != FE_TONEAREST || (FpControl() & kRoundingMask) != kRoundNearestControl ||
            OneThird() != nearestThird) {
            leaked.fetch_add(1);
        }
    };
    std::vector<ftl::Task> tasks;
    for (unsigned i = 0; i < 32; ++i) {
        tasks.push_back(LambdaTask(rounding));
        tasks.push_back(LambdaTask(bystander));
        tasks.push_back(LambdaTask(bystander));
    }
    ftl::TaskCounter counter(&ts);
    ts.AddTasks(static_cast<unsigned>(tasks.size()), tasks.data(), ftl::TaskPriority::Normal, &counter);
    ts.WaitForCounter(&counter);

    REQUIRE(roundingDone.load() == 32u);
    REQUIRE(lost.load() == 0);
    REQUIRE(leaked.load() == 0);
    REQUIRE(std::fegetround() == FE_TONEAREST);
    REQUIRE((FpControl() & kRoundingMask) == kRoundNearestControl);
}

// ---------------------------------------------------------------------------
// Thread affinity

using ftl_test::CpuMask;

namespace {

// Each worker's affinity mask, read by tasks on that worker (index 0 by the
// Init thread itself). Each task holds its worker until every worker has run
// one, so the tasks still queued can only go to workers not seen yet.
std::vector<CpuMask> WorkerMasks(ftl::TaskScheduler &ts, bool &complete) {
    unsigned const threads = ts.GetThreadCount();
    std::vector<CpuMask> masks(threads);
    std::vector<std::atomic<bool>> seen(threads);
    for (auto &flag : seen) {
        flag.store(false);
    }
    std::mutex mutex;
    masks[0] = ftl_test::CurrentThreadCpus();
    seen[0].store(true);
    auto allSeen = [&] {
        return std::all_of(seen.begin(), seen.end(), [](std::atomic<bool> const &s) { return s.load(); });
    };
    auto record = [&](ftl::TaskScheduler *taskScheduler) {
        unsigned const index = taskScheduler->GetCurrentThreadIndex();
        if (index < threads && !seen[index].load()) {
            CpuMask const mask = ftl_test::CurrentThreadCpus();
            std::lock_guard<std::mutex> lock(mutex);
            masks[index] = mask;
            seen[index].store(true);
        }
        ftl_test::SpinUntil(allSeen, std::chrono::milliseconds(10000));
    };
    std::vector<ftl::Task> tasks(2 * threads, LambdaTask(record));
    ftl::TaskCounter counter(&ts);
    ts.AddTasks(static_cast<unsigned>(tasks.size()), tasks.data(), ftl::TaskPriority::Normal, &counter);
    ts.WaitForCounter(&counter);
    complete = allSeen();
    return masks;
}

// Gives the calling thread its mask back, even when a REQUIRE fails.
struct RestoreAffinity {
    CpuMask Mask = ftl_test::CurrentThreadCpus();
    ~RestoreAffinity() { ftl_test::SetCurrentThreadCpus(Mask); }
};

} // namespace

TEST_CASE("Worker threads are pinned to the process's CPUs", "[scheduler][affinity]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    CpuMask const original = ftl_test::CurrentThreadCpus();
    std::vector<std::size_t> const cpus = ftl_test::CpusOf(original);
    REQUIRE(!cpus.empty());

    SECTION("PinThreads on (the default)") {
        {
            ftl::TaskScheduler ts;
            REQUIRE(ts.Init(Options(threads)) == 0);
            bool complete = false;
            std::vector<CpuMask> const masks = WorkerMasks(ts, complete);
            REQUIRE(complete);
            for (unsigned i = 0; i < threads; ++i) {
                CAPTURE(i);
                REQUIRE(ftl_test::CpuCount(masks[i]) == 1);
                REQUIRE(ftl_test::HasCpu(masks[i], cpus[i % cpus.size()]));
            }
        }
        CpuMask const after = ftl_test::CurrentThreadCpus();
        REQUIRE(ftl_test::SameCpus(after, original));
    }

#if defined(__linux__)
    SECTION("A thread the pinned Init thread starts gets its core, for good") {
        CpuMask started;
        CpuMask afterwards;
        std::atomic<bool> schedulerGone{false};
        std::thread thread;
        {
            ftl::TaskScheduler ts;
            REQUIRE(ts.Init(Options(threads)) == 0);
            thread = std::thread([&] {
                started = ftl_test::CurrentThreadCpus();
                ftl_test::SpinUntil([&] { return schedulerGone.load(); }, std::chrono::milliseconds(10000));
                afterwards = ftl_test::CurrentThreadCpus();
            });
        }
        schedulerGone.store(true);
        thread.join();
        REQUIRE(ftl_test::SameCpus(started, ftl_test::OnlyCpu(cpus[0])));
        REQUIRE(ftl_test::SameCpus(afterwards, ftl_test::OnlyCpu(cpus[0])));
        REQUIRE(ftl_test::SameCpus(ftl_test::CurrentThreadCpus(), original));
    }
#endif

    SECTION("PinCallingThread off: the Init thread keeps its mask, the others are pinned") {
        ftl::TaskSchedulerInitOptions options = Options(threads);
        options.PinCallingThread = false;
        ftl::TaskScheduler ts;
        REQUIRE(ts.Init(options) == 0);
        REQUIRE(ftl_test::SameCpus(ftl_test::CurrentThreadCpus(), original));
        bool complete = false;
        std::vector<CpuMask> const masks = WorkerMasks(ts, complete);
        REQUIRE(complete);
        REQUIRE(ftl_test::SameCpus(masks[0], original));
        for (unsigned i = 1; i < threads; ++i) {
            CAPTURE(i);
            REQUIRE(ftl_test::CpuCount(masks[i]) == 1);
            REQUIRE(ftl_test::HasCpu(masks[i], cpus[i % cpus.size()]));
        }
#if defined(__linux__)
        CpuMask started;
        std::thread([&] { started = ftl_test::CurrentThreadCpus(); }).join();
        REQUIRE(ftl_test::SameCpus(started, original));
#endif
        // A task added from another thread wakes a worker as usual (that
        // wake looks for the worker on the adder's CPU, which worker 0 no
        // longer claims to be on).
        std::atomic<unsigned> ran{0};
        auto run = [&](ftl::TaskScheduler *) { ran.fetch_add(1); };
        ftl::TaskCounter counter(&ts);
        std::thread([&] {
            std::vector<ftl::Task> tasks(64, LambdaTask(run));
            ts.AddTasks(static_cast<unsigned>(tasks.size()), tasks.data(), ftl::TaskPriority::Normal,
                        &counter);
        }).join();
        ts.WaitForCounter(&counter);
        REQUIRE(ran.load() == 64u);
    }

    SECTION("PinThreads off") {
        ftl::TaskSchedulerInitOptions options = Options(threads);
        options.PinThreads = false;
        ftl::TaskScheduler ts;
        REQUIRE(ts.Init(options) == 0);
        bool complete = false;
        std::vector<CpuMask> const masks = WorkerMasks(ts, complete);
        REQUIRE(complete);
        for (unsigned i = 0; i < threads; ++i) {
            CAPTURE(i);
            REQUIRE(ftl_test::SameCpus(masks[i], original));
        }
    }

    SECTION("A restricted mask is the set of CPUs") {
        if (cpus.size() < 2) {
            SUCCEED("one CPU only: nothing to restrict");
            return;
        }
        RestoreAffinity const restore;
        CpuMask const restricted = ftl_test::OnlyCpu(cpus.back());
        REQUIRE(ftl_test::SetCurrentThreadCpus(restricted));
        {
            ftl::TaskScheduler ts;
            REQUIRE(ts.Init(Options(threads)) == 0);
            bool complete = false;
            std::vector<CpuMask> const masks = WorkerMasks(ts, complete);
            REQUIRE(complete);
            for (unsigned i = 0; i < threads; ++i) {
                CAPTURE(i);
                REQUIRE(ftl_test::SameCpus(masks[i], restricted));
            }
        }
        {
            ftl::TaskScheduler ts;
            REQUIRE(ts.Init() == 0);
            REQUIRE(ts.GetThreadCount() == 1u);
        }
        CpuMask const after = ftl_test::CurrentThreadCpus();
        REQUIRE(ftl_test::SameCpus(after, restricted));
    }
}
