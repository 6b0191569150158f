// Helpers shared by the tests: the thread counts every scheduler test runs at,
// tasks made from lambdas, bounded waits for code outside the scheduler, CPU
// time, and a runner for misuse ("death") tests in a child process.
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

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

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
inline double ProcessCpuSeconds() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    auto const seconds = [](timeval const &tv) {
        return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) * 1e-6;
    };
    return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

inline unsigned AllowedCpuCount() {
    cpu_set_t set;
    CPU_ZERO(&set);
    sched_getaffinity(0, sizeof(set), &set);
    return static_cast<unsigned>(CPU_COUNT(&set));
}

struct ChildResult {
    bool Exited = false;
    int ExitCode = 0;
    bool Signaled = false;
    int Signal = 0;
    bool TimedOut = false;
    std::string Stderr;

    // Killed by SIGABRT, or exited with a non-zero status: how a fatal error ends.
    bool Died() const { return !TimedOut && ((Signaled && Signal == SIGABRT) || (Exited && ExitCode != 0)); }
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

} // namespace ftl_test
