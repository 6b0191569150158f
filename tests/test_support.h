// Helpers shared by the tests: the thread counts every scheduler test runs at,
// tasks made from lambdas, bounded waits for code outside the scheduler, CPU
// time, thread affinity, and a runner for misuse ("death") tests in a child
// process.
//
// On Windows, the helpers that need <windows.h> are defined in windows_runner.cpp:
// its macros (Yield(), for one) would break ftl's headers and the tests.
//
// Catch2's assertion macros are not thread-safe, and an exception must never
// unwind through a fiber switch: tasks never use REQUIRE/CHECK. They record
// what they saw in atomics, and the test body checks those after its wait.
#pragma once

#include "ftl/atomic_counter.h"
#include "ftl/task.h"
#include "ftl/task_counter.h"
#include "ftl/task_scheduler.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#if defined(_WIN32)
#include <bitset>
#include <cstdlib>
#else
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

// The thread counts scheduler tests run at: one, two, an odd count, and more
// threads than the machine's cores (CI machines have 2). A macro, because
// GENERATE must expand inside the test case.
#define FTL_GENERATE_THREAD_COUNT() GENERATE(1u, 2u, 3u, 8u)

namespace ftl_test {

// ThreadSanitizer makes each new fiber cost milliseconds (it sets up a thread
// context for it): tests whose shape makes thousands of fibers scale down
// under it, so that every test stays within a third of its timeout there.
#if defined(__SANITIZE_THREAD__)
constexpr bool kThreadSanitizer = true;
#else
constexpr bool kThreadSanitizer = false;
#endif

// AddressSanitizer: every memory access is checked, so a tiny task costs
// several times what it costs in a plain build.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif

// Running under an emulator of another CPU (tests/CMakeLists.txt).
#if defined(FTL_TEST_CPU_EMULATED)
constexpr bool kCpuEmulated = true;
#else
constexpr bool kCpuEmulated = false;
#endif

// A Windows build running under Wine (tests/CMakeLists.txt).
#if defined(FTL_TEST_WINE)
constexpr bool kWine = true;
#else
constexpr bool kWine = false;
#endif

// Under a CPU emulator or Wine a thread can go unscheduled for milliseconds
// while the others run, whatever ftl does: how work spread over the workers
// (a share of the tasks, a count of early takes) is checked natively only;
// there the tests check their counts and results alone. The emulated CI
// presets run each test once, so such a check must not depend on luck.
constexpr bool kEmulated = kCpuEmulated || kWine;

// Any of the above: code runs several times slower than in a plain native
// build, so a timing-dependent figure (a wake-up count, a steal count) holds
// only where it is measured natively.
constexpr bool kSlowBuild = kThreadSanitizer || kAddressSanitizer || kCpuEmulated || kWine;

inline ftl::TaskSchedulerInitOptions
Options(unsigned threads, ftl::EmptyQueueBehavior behavior = ftl::EmptyQueueBehavior::Sleep) {
    ftl::TaskSchedulerInitOptions options;
    options.ThreadPoolSize = threads;
    options.Behavior = behavior;
    return options;
}

// A task that calls f(taskScheduler). f must outlive the task.
template <class F>
ftl::Task LambdaTask(F &f) {
    return ftl::Task{
        [](ftl::TaskScheduler *taskScheduler, void *arg) { (*static_cast<F *>(arg))(taskScheduler); }, &f};
}

// A task that clears the AtomicFlag it is given.
inline void ClearFlag(ftl::TaskScheduler * /*taskScheduler*/, void *arg) {
    static_cast<ftl::AtomicFlag *>(arg)->Clear();
}

// A wait that really parks at one thread (the child that releases it runs
// only once this fiber has left its thread); with more threads the fiber may
// resume on another one.
inline void ParkOnce(ftl::TaskScheduler *ts) {
    ftl::AtomicFlag flag(ts, 1);
    ts->AddTask(ftl::Task{ClearFlag, &flag}, ftl::TaskPriority::High);
    ts->WaitForCounter(&flag);
}

// Recursive Fibonacci, one task per call, each waiting for its two children:
// a workload that is nearly all waits. fib(25) == 75025 runs 242785 tasks.
struct FibCall {
    unsigned N;
    std::uint64_t Result;
};

inline void FibTask(ftl::TaskScheduler *ts, void *arg) {
    auto *call = static_cast<FibCall *>(arg);
    if (call->N < 2) {
        call->Result = call->N;
        return;
    }
    FibCall children[2] = {{call->N - 1, 0}, {call->N - 2, 0}};
    ftl::Task const tasks[2] = {{FibTask, &children[0]}, {FibTask, &children[1]}};
    ftl::TaskCounter counter(ts);
    ts->AddTasks(2, tasks, ftl::TaskPriority::High, &counter);
    ts->WaitForCounter(&counter);
    // Plain reads: the wait makes the children's writes visible.
    call->Result = children[0].Result + children[1].Result;
}

// Threads that are not workers, joined through the scheduler: the thread
// that called Init is worker 0 and runs tasks only while it waits in the
// scheduler, so with one worker a plain join() would hold back the tasks the
// outside threads wait for. Join() waits on a counter that each thread bumps
// as it ends, then joins them.
class OutsideThreads {
public:
    explicit OutsideThreads(ftl::TaskScheduler *ts) : m_ts(ts), m_ended(ts, 0) {}
    OutsideThreads(OutsideThreads const &) = delete;
    OutsideThreads &operator=(OutsideThreads const &) = delete;
    ~OutsideThreads() { Join(); }

    template <class F>
    void Start(F f) {
        m_threads.emplace_back([this, f]() mutable {
            f();
            m_ended.FetchAdd(1);
        });
    }

    void Join() {
        m_ts->WaitForCounter(&m_ended, static_cast<unsigned>(m_threads.size()));
        for (std::thread &thread : m_threads) {
            thread.join();
        }
        m_threads.clear();
        m_ended.Store(0);
    }

private:
    ftl::TaskScheduler *m_ts;
    ftl::FullAtomicCounter m_ended;
    std::vector<std::thread> m_threads;
};

// Yields the thread (a task calling it holds its worker meanwhile) until
// pred() holds or the timeout passes; returns pred().
template <class Pred>
bool SpinUntil(Pred pred, std::chrono::milliseconds timeout = std::chrono::milliseconds(10000)) {
    auto const deadline = std::chrono::steady_clock::now() + timeout;
    while (!pred()) {
        if (std::chrono::steady_clock::now() > deadline) {
            return pred();
        }
        std::this_thread::yield();
    }
    return true;
}

// Busy-waits about `micros` microseconds without yielding, to keep a worker busy.
inline void BusyMicros(unsigned micros) {
    auto const end = std::chrono::steady_clock::now() + std::chrono::microseconds(micros);
    while (std::chrono::steady_clock::now() < end) {
    }
}

// CPU time of the whole process (all threads), user plus system, in seconds.
#if defined(_WIN32)
double ProcessCpuSeconds();
#else
inline double ProcessCpuSeconds() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    auto const seconds = [](timeval const &tv) {
        return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) * 1e-6;
    };
    return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}
#endif

// The CPUs the process may run on (Windows: those of its affinity mask).
#if defined(_WIN32)
unsigned AllowedCpuCount();
#else
inline unsigned AllowedCpuCount() {
    cpu_set_t set;
    CPU_ZERO(&set);
    sched_getaffinity(0, sizeof(set), &set);
    return static_cast<unsigned>(CPU_COUNT(&set));
}
#endif

// Sets an environment variable where the library's getenv reads it (on
// Windows, the C runtime's copy of the environment).
inline void SetEnv(char const *name, char const *value) {
#if defined(_WIN32)
    _putenv_s(name, value);
#else
    setenv(name, value, 1);
#endif
}

// The id of the test process, the same in the children of its RunInChild
// calls: a file name made from it names the same file in a child that
// reruns the test case's code (Windows) as in the parent.
#if defined(_WIN32)
unsigned long TestProcessId();
#else
inline unsigned long TestProcessId() {
    return static_cast<unsigned long>(getpid());
}
#endif

// The operating system's thread the caller runs on, to tell whether a fiber
// resumed on the thread it left.
#if defined(_WIN32)
using OsThreadId = unsigned long;
OsThreadId CurrentOsThread();
inline bool SameOsThread(OsThreadId a, OsThreadId b) {
    return a == b;
}
#else
using OsThreadId = pthread_t;
inline OsThreadId CurrentOsThread() {
    return pthread_self();
}
inline bool SameOsThread(OsThreadId a, OsThreadId b) {
    return pthread_equal(a, b) != 0;
}
#endif

// A thread's affinity mask: the CPUs it may run on. On Windows, one bit per
// CPU of the process's processor group.
#if defined(_WIN32)
using CpuMask = std::uint64_t;
// Windows has no call that reads a thread's mask: windows_runner.cpp sets the
// process's mask and puts the previous one back.
CpuMask CurrentThreadCpus();
bool SetCurrentThreadCpus(CpuMask const &mask);
inline std::size_t CpuCount(CpuMask const &mask) {
    return std::bitset<64>(mask).count();
}
inline bool HasCpu(CpuMask const &mask, std::size_t cpu) {
    return cpu < 64 && ((mask >> cpu) & 1u) != 0;
}
inline bool SameCpus(CpuMask const &a, CpuMask const &b) {
    return a == b;
}
inline CpuMask OnlyCpu(std::size_t cpu) {
    return CpuMask{1} << cpu;
}
inline std::size_t CpuLimit() {
    return 64;
}
#else
using CpuMask = cpu_set_t;
inline CpuMask CurrentThreadCpus() {
    cpu_set_t mask;
    CPU_ZERO(&mask);
    pthread_getaffinity_np(pthread_self(), sizeof(mask), &mask);
    return mask;
}
inline bool SetCurrentThreadCpus(CpuMask const &mask) {
    return pthread_setaffinity_np(pthread_self(), sizeof(mask), &mask) == 0;
}
inline std::size_t CpuCount(CpuMask const &mask) {
    return static_cast<std::size_t>(CPU_COUNT(&mask));
}
inline bool HasCpu(CpuMask const &mask, std::size_t cpu) {
    return CPU_ISSET(cpu, &mask);
}
inline bool SameCpus(CpuMask const &a, CpuMask const &b) {
    return CPU_EQUAL(&a, &b);
}
inline CpuMask OnlyCpu(std::size_t cpu) {
    cpu_set_t mask;
    CPU_ZERO(&mask);
    CPU_SET(cpu, &mask);
    return mask;
}
inline std::size_t CpuLimit() {
    return std::size_t{CPU_SETSIZE};
}
#endif

// The CPUs of a mask, in increasing order.
inline std::vector<std::size_t> CpusOf(CpuMask const &mask) {
    std::vector<std::size_t> cpus;
    for (std::size_t cpu = 0; cpu < CpuLimit(); ++cpu) {
        if (HasCpu(mask, cpu)) {
            cpus.push_back(cpu);
        }
    }
    return cpus;
}

// A fault for the library's fault handler to pass on, being no fiber's stack
// overflow: SIGSEGV sent to the process; on Windows, a real access violation
// (a write to address 16), since a Windows handler sees exceptions, not
// signals.
#if defined(_WIN32)
void RaiseAccessFault();
#else
inline void RaiseAccessFault() {
    std::raise(SIGSEGV);
}
#endif

struct ChildResult {
    bool Exited = false;
    int ExitCode = 0;
    // Killed by a signal. On Windows: ended by an exception nothing handled,
    // whose code (an NTSTATUS such as 0xC0000005) is then the Signal.
    bool Signaled = false;
    int Signal = 0;
    bool TimedOut = false;
    std::string Stderr;

    // Ended by abort(): SIGABRT; on Windows, the exit code 3 that the C
    // runtime's abort() gives.
    bool Aborted() const {
#if defined(_WIN32)
        return Exited && ExitCode == 3;
#else
        return Signaled && Signal == SIGABRT;
#endif
    }
    // Ended by a fault nothing handled: SIGSEGV; on Windows, an access
    // violation (0xC0000005).
    bool AccessFault() const {
#if defined(_WIN32)
        return Signaled && static_cast<unsigned>(Signal) == 0xC0000005u;
#else
        return Signaled && Signal == SIGSEGV;
#endif
    }
    // Aborted, or exited with a non-zero status: how a fatal error ends.
    bool Died() const {
        return !TimedOut && (Aborted() || (Exited && ExitCode != 0));
    }
    // Case-insensitive search of what the child wrote to stderr.
    bool StderrHas(std::string const &phrase) const {
        auto const lower = [](std::string text) {
            for (char &c : text) {
                c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
            }
            return text;
        };
        return lower(Stderr).find(lower(phrase)) != std::string::npos;
    }
};

#if defined(_WIN32)

namespace detail {

// The part a RunInChild call plays (windows_runner.cpp numbers the calls of each test
// case and decides).
struct ChildCall {
    enum class Role {
        Start,  // the test process: start a child for this call
        Replay, // a child, at a call before its own: return what the parent saw
        Run,    // a child, at its own call: run the body, then end the process
    };
    Role What = Role::Start;
    unsigned Index = 0;
    ChildResult Stored; // Replay: the parent's result of this call
};

ChildCall NextChildCall();
ChildResult StartChild(unsigned index, std::chrono::seconds timeout);
// Ends the child with status 0 once its body has returned, as _exit(0)
// would: no destructors, no atexit handlers.
[[noreturn]] void EndChild();

} // namespace detail

// Runs body() in a child process whose stderr goes into a pipe, then ends the
// child with status 0. Returns how the child ended and what it wrote to
// stderr. A child that runs longer than the timeout is killed and reported
// as TimedOut.
//
// Windows has no fork: the child is this program again, told (windows_runner.cpp) to
// run only the current test case, and in it only this call's body. Catch2
// runs a test case the same way in both processes, once per leaf SECTION and
// GENERATE value, so the RunInChild calls of a test case are numbered, and
// in the child the calls before its own return the results the parent got
// from them. The code of the test case before a RunInChild call is thus
// run again in the child: it must take the same path there (files it reads,
// the time, thread ids), and paths it makes should use TestProcessId().
template <class Body>
ChildResult RunInChild(Body body, std::chrono::seconds timeout = std::chrono::seconds(30)) {
    detail::ChildCall const call = detail::NextChildCall();
    switch (call.What) {
    case detail::ChildCall::Role::Replay:
        return call.Stored;
    case detail::ChildCall::Role::Run:
        body();
        detail::EndChild();
    case detail::ChildCall::Role::Start:
        break;
    }
    return detail::StartChild(call.Index, timeout);
}

#else

// Runs body() in a forked child whose stderr goes into a pipe, then _exit(0).
// Returns how the child ended and what it wrote to stderr. The parent must not
// have a live scheduler (its threads would not exist in the child). A child
// that runs longer than the timeout is killed and reported as TimedOut.
template <class Body>
ChildResult RunInChild(Body body, std::chrono::seconds timeout = std::chrono::seconds(30)) {
    ChildResult result;
    int fds[2];
    if (pipe(fds) != 0) {
        result.Stderr = "pipe failed";
        result.TimedOut = true;
        return result;
    }
    // Buffered output would be written twice, once by each process.
    std::fflush(nullptr);
    pid_t const pid = fork();
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], STDERR_FILENO);
        close(fds[1]);
        int const devNull = open("/dev/null", O_WRONLY);
        if (devNull >= 0) {
            dup2(devNull, STDOUT_FILENO);
            close(devNull);
        }
        // Catch2's handlers would report the signal as a test failure of
        // their own; the child must die of it plainly.
        for (int sig : {SIGABRT, SIGSEGV, SIGILL, SIGFPE, SIGBUS, SIGTRAP}) {
            struct sigaction action {};
            action.sa_handler = SIG_DFL;
            sigemptyset(&action.sa_mask);
            sigaction(sig, &action, nullptr);
        }
        body();
        _exit(0);
    }
    close(fds[1]);
    if (pid < 0) {
        close(fds[0]);
        result.Stderr = "fork failed";
        result.TimedOut = true;
        return result;
    }

    auto const deadline = std::chrono::steady_clock::now() + timeout;
    char buffer[4096];
    for (;;) {
        auto const left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) {
            result.TimedOut = true;
            kill(pid, SIGKILL);
            break;
        }
        pollfd pfd{fds[0], POLLIN, 0};
        int const ready = poll(&pfd, 1, static_cast<int>(left.count()));
        if (ready < 0 && errno == EINTR) {
            continue;
        }
        if (ready <= 0) {
            continue; // the deadline check above decides
        }
        ssize_t const n = read(fds[0], buffer, sizeof(buffer));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            break; // EOF: every copy of the write end is closed
        }
        result.Stderr.append(buffer, static_cast<std::size_t>(n));
    }
    close(fds[0]);

    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status)) {
        result.Exited = true;
        result.ExitCode = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
        result.Signaled = true;
        result.Signal = WTERMSIG(status);
    }
    return result;
}

#endif

} // namespace ftl_test
