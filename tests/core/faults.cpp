// Faults and late misuse end in a clear message, never a hang or silent
// corruption: each case runs in a child process whose exit and stderr are
// checked (see RunInChild in test_support.h).
#include "ftl/atomic_counter.h"
#include "ftl/task_counter.h"
#include "ftl/task_scheduler.h"
#include "scheduler/mechanisms.h"
#include "test_support.h"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <new>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

#if !defined(_WIN32)
#include <csignal>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>
#endif

using ftl_test::ChildResult;
using ftl_test::Options;
using ftl_test::RunInChild;

namespace {

void RequireFatal(ChildResult const &result, std::string const &phrase) {
    INFO("child stderr:\n" << result.Stderr);
    INFO("exited " << result.Exited << " code " << result.ExitCode << ", signaled " << result.Signaled
                   << " signal " << result.Signal << ", timed out " << result.TimedOut);
    REQUIRE(result.Died());
    REQUIRE(result.StderrHas(phrase));
}

// Deep, non-tail recursion with a frame the optimizer cannot drop.
__attribute__((noinline)) unsigned Recurse(unsigned depth) {
    volatile char frame[512];
    std::memset(const_cast<char *>(frame), static_cast<int>(depth & 0x7f), sizeof(frame));
    if (depth == 0) {
        return static_cast<unsigned char>(frame[1]);
    }
    return Recurse(depth - 1) + static_cast<unsigned char>(frame[7]);
}

void RunOneTask(unsigned threads, ftl::TaskFunction function, void *arg, std::size_t stackSize = 256 * 1024,
                bool inlineChildren = true) {
    ftl::TaskScheduler ts;
    ftl::TaskSchedulerInitOptions options = Options(threads);
    options.FiberStackSize = stackSize;
    ftl::detail::Mechanisms mechanisms;
    mechanisms.InlineChildren = inlineChildren;
    REQUIRE(ftl::detail::InitWithMechanisms(ts, options, mechanisms) == 0);
    ftl::TaskCounter counter(&ts);
    ts.AddTask({function, arg}, ftl::TaskPriority::Normal, &counter);
    ts.WaitForCounter(&counter);
}

// A frame of `Bytes` whose first touch is its lowest byte, as the return
// address of a call made from a frame with a large local array is: without
// -fstack-clash-protection nothing touches the pages between the caller's
// frame and that byte first.
template <std::size_t Bytes>
__attribute__((noinline)) unsigned LargeFrame() {
    volatile char frame[Bytes];
    // The array's address escapes: Clang otherwise keeps only the two bytes
    // used, in a frame of a few bytes.
    asm volatile("" : : "r"(frame) : "memory");
    frame[0] = 1;
    frame[Bytes - 1] = 2;
    return static_cast<unsigned>(frame[0] + frame[Bytes - 1]);
}

// Two fibers whose stacks were made one after the other (so the second
// lies just below the first): the second parks on `gate` with its frames at
// the top of its stack, then the first, resumed, runs a frame of `Bytes`
// that steps below its own stack, past the 4 KiB a one-page guard would
// cover. The child must die of ftl's report, not run on with the second
// fiber's stack written over.
template <std::size_t Bytes>
void OverflowAboveAParkedFiber(std::size_t stackSize, std::size_t guardSize) {
    ftl::TaskScheduler ts;
    ftl::TaskSchedulerInitOptions options = Options(1);
    options.FiberStackSize = stackSize;
    options.FiberStackGuardSize = guardSize;
    ftl::detail::Mechanisms mechanisms;
    mechanisms.InlineChildren = false; // every task on a pool fiber of its own
    REQUIRE(ftl::detail::InitWithMechanisms(ts, options, mechanisms) == 0);
    struct Shared {
        ftl::AtomicFlag Started;
        ftl::AtomicFlag Gate;
        unsigned Sink = 0;
    } shared{ftl::AtomicFlag(&ts, 1), ftl::AtomicFlag(&ts, 1)};
    ftl::TaskCounter counter(&ts);
    ts.AddTask({[](ftl::TaskScheduler *t, void *arg) {
                    auto *s = static_cast<Shared *>(arg);
                    ftl::TaskCounter parked(t);
                    t->AddTask({[](ftl::TaskScheduler *t2, void *arg2) {
                                    auto *s2 = static_cast<Shared *>(arg2);
                                    s2->Started.Clear();
                                    t2->WaitForCounter(&s2->Gate);
                                },
                                s},
                               ftl::TaskPriority::Normal, &parked);
                    t->WaitForCounter(&s->Started); // the second fiber runs meanwhile
                    s->Sink = LargeFrame<Bytes>();
                    s->Gate.Clear();
                    t->WaitForCounter(&parked);
                },
                &shared},
               ftl::TaskPriority::Normal, &counter);
    ts.WaitForCounter(&counter);
}

} // namespace

TEST_CASE("A fiber stack overflow is reported with the fiber and its stack size", "[faults]") {
    auto threads = GENERATE(1u, 2u);
    ChildResult const result = RunInChild([threads] {
        RunOneTask(
            threads,
            [](ftl::TaskScheduler *, void *) {
                volatile unsigned sink = Recurse(10000000);
                (void)sink;
            },
            nullptr, 64 * 1024, false);
    });
    RequireFatal(result, "stack overflow in fiber");
    REQUIRE(result.StderrHas("65536 bytes"));
}

TEST_CASE("A stack overflow in a task run inline on the Init thread's own stack is reported", "[faults]") {
    // The Init thread's wait runs the task itself (InlineChildren), on the
    // thread's own stack.
    ChildResult const result = RunInChild([] {
        RunOneTask(
            1,
            [](ftl::TaskScheduler *, void *) {
                volatile unsigned sink = Recurse(100000000);
                (void)sink;
            },
            nullptr);
    });
    RequireFatal(result, "stack overflow on worker thread 0's own stack");
}

TEST_CASE("Faults that are not a fiber overflow go to the previous handler", "[faults]") {
    ChildResult const result = RunInChild([] {
        RunOneTask(
            2, [](ftl::TaskScheduler *, void *) { ftl_test::RaiseAccessFault(); }, nullptr);
    });
    INFO("child stderr:\n" << result.Stderr);
    REQUIRE(result.AccessFault());
    REQUIRE_FALSE(result.StderrHas("stack overflow"));
}

// Not on Windows: there a fiber's stack is the system's, whose reserve is
// larger than the size asked for, and compilers probe every page of a large
// frame, so the frame below fits or meets the system's own guard.
#if !defined(_WIN32)
TEST_CASE("A frame that steps over a one-page guard is reported, not written into the stack below",
          "[faults]") {
    SECTION("The default guard, a 96 KiB frame on a 64 KiB stack") {
        ChildResult const result = RunInChild([] {
            OverflowAboveAParkedFiber<96 * 1024>(64 * 1024,
                                                 ftl::TaskSchedulerInitOptions{}.FiberStackGuardSize);
        });
        RequireFatal(result, "stack overflow in fiber");
        REQUIRE(result.StderrHas("its stack is 65536 bytes"));
    }
    SECTION("A 512 KiB guard, a 320 KiB frame on a 64 KiB stack") {
        ChildResult const result =
            RunInChild([] { OverflowAboveAParkedFiber<320 * 1024>(64 * 1024, 512 * 1024); });
        RequireFatal(result, "stack overflow in fiber");
        REQUIRE(result.StderrHas("its stack is 65536 bytes"));
    }
}
#endif

TEST_CASE("The default stack guard covers 64 KiB", "[faults]") {
    REQUIRE(ftl::TaskSchedulerInitOptions{}.FiberStackGuardSize == 64u * 1024u);
}

#if !defined(_WIN32)

namespace {

void WriteMarker(char const *text) {
    ssize_t const ignored = write(STDERR_FILENO, text, std::strlen(text));
    (void)ignored;
}

void UserHandler(int, siginfo_t *, void *) {
    WriteMarker("user fault handler ran\n");
    _exit(43);
}

bool IsUserHandler(int signal) {
    struct sigaction current {};
    sigaction(signal, nullptr, &current);
    return (current.sa_flags & SA_SIGINFO) != 0 && current.sa_sigaction == &UserHandler;
}

void InstallUserHandler(int signal, int flags = 0, int masked = 0) {
    struct sigaction action {};
    action.sa_sigaction = &UserHandler;
    action.sa_flags = SA_SIGINFO | flags;
    sigemptyset(&action.sa_mask);
    if (masked != 0) {
        sigaddset(&action.sa_mask, masked);
    }
    REQUIRE(sigaction(signal, &action, nullptr) == 0);
}

} // namespace

TEST_CASE("A fault handler the program installs after Init stays after the scheduler is destroyed",
          "[faults]") {
    ChildResult const result = RunInChild([] {
        {
            ftl::TaskScheduler ts;
            REQUIRE(ts.Init(Options(2)) == 0);
            InstallUserHandler(SIGSEGV);
            InstallUserHandler(SIGBUS);
        }
        WriteMarker(IsUserHandler(SIGSEGV) ? "SIGSEGV: the program's\n" : "SIGSEGV: replaced\n");
        WriteMarker(IsUserHandler(SIGBUS) ? "SIGBUS: the program's\n" : "SIGBUS: replaced\n");
    });
    INFO("child stderr:\n" << result.Stderr);
    REQUIRE(result.Exited);
    REQUIRE(result.ExitCode == 0);
    REQUIRE(result.StderrHas("SIGSEGV: the program's"));
    REQUIRE(result.StderrHas("SIGBUS: the program's"));
}

TEST_CASE("The fault handler from before Init is put back when the scheduler is destroyed", "[faults]") {
    ChildResult const result = RunInChild([] {
        InstallUserHandler(SIGSEGV);
        {
            ftl::TaskScheduler ts;
            REQUIRE(ts.Init(Options(2)) == 0);
            WriteMarker(IsUserHandler(SIGSEGV) ? "during: the program's\n" : "during: ftl's\n");
        }
        WriteMarker(IsUserHandler(SIGSEGV) ? "after: the program's\n" : "after: other\n");
    });
    INFO("child stderr:\n" << result.Stderr);
    REQUIRE(result.Exited);
    REQUIRE(result.ExitCode == 0);
    REQUIRE(result.StderrHas("during: ftl's"));
    REQUIRE(result.StderrHas("after: the program's"));
}

namespace {

// A one-shot handler (SA_RESETHAND) that blocks SIGUSR1 while it runs.
void OneShotHandler(int, siginfo_t *, void *) {
    struct sigaction current {};
    sigaction(SIGSEGV, nullptr, &current);
    WriteMarker((current.sa_flags & SA_SIGINFO) == 0 && current.sa_handler == SIG_DFL
                    ? "reset to default: yes\n"
                    : "reset to default: no\n");
    sigset_t mask;
    pthread_sigmask(SIG_BLOCK, nullptr, &mask);
    WriteMarker(sigismember(&mask, SIGUSR1) == 1 ? "SIGUSR1 blocked: yes\n" : "SIGUSR1 blocked: no\n");
    _exit(44);
}

} // namespace

TEST_CASE("A fault that is not a fiber overflow reaches the program's handler as the kernel would deliver it",
          "[faults]") {
    ChildResult const result = RunInChild([] {
        struct sigaction action {};
        action.sa_sigaction = &OneShotHandler;
        action.sa_flags = SA_SIGINFO | static_cast<int>(SA_RESETHAND);
        sigemptyset(&action.sa_mask);
        sigaddset(&action.sa_mask, SIGUSR1);
        REQUIRE(sigaction(SIGSEGV, &action, nullptr) == 0);
        RunOneTask(
            2,
            [](ftl::TaskScheduler *, void *) {
                // A real fault (si_code > 0), away from any stack: a new
                // mapping often lands right below the last fiber stack
                // mapped, where a fault counts as that stack's overflow
                // (64 KiB below its guard), so the fault is at the bottom
                // of 256 KiB.
                void *region = mmap(nullptr, 256 * 1024, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                *static_cast<char volatile *>(region) = 1;
            },
            nullptr);
    });
    INFO("child stderr:\n" << result.Stderr);
    REQUIRE(result.Exited);
    REQUIRE(result.ExitCode == 44);
    REQUIRE(result.StderrHas("reset to default: yes"));
    REQUIRE(result.StderrHas("SIGUSR1 blocked: yes"));
    REQUIRE_FALSE(result.StderrHas("stack overflow"));
}

namespace {

void UserAbortHandler(int) {
    WriteMarker("the program's SIGABRT handler ran\n");
    _exit(45);
}

} // namespace

TEST_CASE("After a stack overflow's report the program's SIGABRT handler runs", "[faults]") {
    ChildResult const result = RunInChild([] {
        struct sigaction action {};
        action.sa_handler = &UserAbortHandler;
        sigemptyset(&action.sa_mask);
        REQUIRE(sigaction(SIGABRT, &action, nullptr) == 0);
        RunOneTask(
            2,
            [](ftl::TaskScheduler *, void *) {
                volatile unsigned sink = Recurse(10000000);
                (void)sink;
            },
            nullptr, 64 * 1024, false);
    });
    INFO("child stderr:\n" << result.Stderr);
    REQUIRE(result.Exited);
    REQUIRE(result.ExitCode == 45);
    std::size_t const report = result.Stderr.find("ftl: fatal error: stack overflow in fiber");
    std::size_t const handler = result.Stderr.find("the program's SIGABRT handler ran");
    REQUIRE(report != std::string::npos);
    REQUIRE(handler != std::string::npos);
    REQUIRE(report < handler);
}

#endif

TEST_CASE("An exception escaping a task without a TaskCounter is reported and ends the process", "[faults]") {
    // With a counter it would go to the counter's next waiter
    // (tests/core/closures.cpp); without one nobody could receive it.
    auto threads = GENERATE(1u, 2u);
    ChildResult const result = RunInChild([threads] {
        ftl::TaskScheduler ts;
        REQUIRE(ts.Init(Options(threads)) == 0);
        ts.AddTask(
            ftl::Task{[](ftl::TaskScheduler *, void *) { throw std::runtime_error("the frobnicator broke"); },
                      nullptr},
            ftl::TaskPriority::Normal);
    }); // the destructor runs the task
    RequireFatal(result, "exception escaped a task without a TaskCounter");
    REQUIRE(result.StderrHas("the frobnicator broke"));
}

TEST_CASE("Destroying a scheduler whose tasks can never finish is reported, not a hang", "[faults]") {
    auto threads = GENERATE(1u, 2u, 3u);
    ChildResult const result = RunInChild(
        [threads] {
            auto *ts = new ftl::TaskScheduler;
            REQUIRE(ts->Init(Options(threads)) == 0);
            // Never cleared; deliberately leaked, since the scheduler's
            // destructor never returns.
            auto *gate = new ftl::AtomicFlag(ts, 1);
            for (int i = 0; i < 3; ++i) {
                ts->AddTask({[](ftl::TaskScheduler *t, void *arg) {
                                 t->WaitForCounter(static_cast<ftl::AtomicFlag *>(arg));
                             },
                             gate},
                            ftl::TaskPriority::Normal);
            }
            delete ts;
        },
        std::chrono::seconds(20));
    RequireFatal(result, "can never finish");
    REQUIRE(result.StderrHas("3 task(s)"));
    // Each of the three fibers is listed with its wait and its task.
    std::istringstream lines(result.Stderr);
    std::string line;
    unsigned listed = 0;
    while (std::getline(lines, line)) {
        if (line.find("ftl: fiber ") == 0 && line.find("waits for counter 0x") != std::string::npos &&
            line.find("to reach 0, in ") != std::string::npos) {
            ++listed;
        }
    }
    INFO(result.Stderr);
    REQUIRE(listed == 3);
}

TEST_CASE("Destroying a scheduler while a task yields forever is reported, not a hang", "[faults]") {
    // A worker that resumes a yielding task never goes idle, so the stall is
    // seen where it resumes the yielded fiber. Threads and yielding tasks:
    // one worker; a yielder beside a parked worker; two yielders at two
    // workers, where no worker ever parks.
    auto const shape = GENERATE(std::make_pair(1u, 1u), std::make_pair(2u, 1u), std::make_pair(2u, 2u));
    unsigned const threads = shape.first;
    unsigned const yielders = shape.second;
    ChildResult const result = RunInChild(
        [threads, yielders] {
            auto *ts = new ftl::TaskScheduler;
            REQUIRE(ts->Init(Options(threads)) == 0);
            // Never set; deliberately leaked, since the scheduler's
            // destructor never returns.
            auto *never = new std::atomic<bool>(false);
            for (unsigned i = 0; i < yielders; ++i) {
                ts->AddTask({[](ftl::TaskScheduler *t, void *arg) {
                                 while (!static_cast<std::atomic<bool> *>(arg)->load()) {
                                     t->Yield();
                                 }
                             },
                             never},
                            ftl::TaskPriority::Normal);
            }
            delete ts;
        },
        std::chrono::seconds(20));
    RequireFatal(result, "can never finish");
    REQUIRE(result.StderrHas("tasks keep calling Yield while nothing else finishes"));
    REQUIRE(result.StderrHas("while " + std::to_string(yielders) + " task(s) can never finish"));
}

TEST_CASE("Calls on a scheduler that was never initialized abort", "[misuse]") {
    SECTION("AddTask") {
        ChildResult const result = RunInChild([] {
            ftl::TaskScheduler ts;
            ts.AddTask({[](ftl::TaskScheduler *, void *) {}, nullptr}, ftl::TaskPriority::Normal);
        });
        RequireFatal(result, "not initialized");
    }
    SECTION("WaitForCounter") {
        ChildResult const result = RunInChild([] {
            ftl::TaskScheduler ts;
            ftl::TaskCounter counter(&ts, 1);
            ts.WaitForCounter(&counter);
        });
        RequireFatal(result, "not initialized");
    }
    SECTION("the queries answer without aborting") {
        ftl::TaskScheduler ts;
        REQUIRE(ts.GetThreadCount() == 0);
        REQUIRE(ts.GetFiberCount() == 0);
        REQUIRE(ts.GetCurrentThreadIndex() == ftl::kInvalidIndex);
        REQUIRE(ts.GetCurrentFiberIndex() == ftl::kInvalidIndex);
    }
}

TEST_CASE("Calls on a scheduler after its destruction abort", "[misuse]") {
    // Formally a use after the end of the object's lifetime; the destructor
    // leaves it uninitialized, so the same check as before Init catches it.
    // The storage outlives the object, so the test itself reads no freed
    // memory.
    ChildResult const result = RunInChild([] {
        alignas(ftl::TaskScheduler) unsigned char storage[sizeof(ftl::TaskScheduler)];
        auto *ts = new (storage) ftl::TaskScheduler;
        REQUIRE(ts->Init(Options(2)) == 0);
        ts->~TaskScheduler();
        ts->AddTask({[](ftl::TaskScheduler *, void *) {}, nullptr}, ftl::TaskPriority::Normal);
    });
    RequireFatal(result, "after destruction");
}

TEST_CASE("Waiting on a counter of another scheduler aborts", "[misuse]") {
    ChildResult const result = RunInChild([] {
        ftl::TaskScheduler other;
        ftl::TaskCounter foreign(&other, 1);
        ftl::TaskScheduler ts;
        REQUIRE(ts.Init(Options(2)) == 0);
        ts.WaitForCounter(&foreign);
    });
    RequireFatal(result, "another TaskScheduler");
}

TEST_CASE("Destroying a scheduler from inside one of its tasks aborts", "[misuse]") {
    ChildResult const result = RunInChild([] {
        auto *ts = new ftl::TaskScheduler;
        REQUIRE(ts->Init(Options(2)) == 0);
        ftl::TaskCounter counter(ts);
        ts->AddTask({[](ftl::TaskScheduler *t, void *) { delete t; }, nullptr}, ftl::TaskPriority::Normal,
                    &counter);
        ts->WaitForCounter(&counter);
    });
    RequireFatal(result, "must be destroyed by the thread that called Init");
}
