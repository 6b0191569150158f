#include "platform/platform.h"

#include <chrono>
#include <ctime>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace ftl {
namespace detail {

void YieldThread() {
    sched_yield();
}

void FutexWait(std::atomic<std::uint32_t> *word, std::uint32_t expected) {
    // std::atomic<uint32_t> is layout-compatible with uint32_t on Linux; the
    // kernel compares *word with expected atomically with going to sleep, which
    // is what makes "check, then sleep" free of lost wake-ups.
    syscall(SYS_futex, reinterpret_cast<std::uint32_t *>(word), FUTEX_WAIT_PRIVATE, expected, nullptr,
            nullptr, 0);
}

void FutexWaitFor(std::atomic<std::uint32_t> *word, std::uint32_t expected, std::uint64_t timeoutNs) {
    struct timespec timeout;
    timeout.tv_sec = static_cast<time_t>(timeoutNs / 1000000000u);
    timeout.tv_nsec = static_cast<long>(timeoutNs % 1000000000u);
    syscall(SYS_futex, reinterpret_cast<std::uint32_t *>(word), FUTEX_WAIT_PRIVATE, expected, &timeout,
            nullptr, 0);
}

void FutexWake(std::atomic<std::uint32_t> *word, int count) {
    syscall(SYS_futex, reinterpret_cast<std::uint32_t *>(word), FUTEX_WAKE_PRIVATE, count, nullptr, nullptr,
            0);
}

std::vector<int> AllowedCpus() {
    std::vector<int> cpus;
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
        for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
            if (CPU_ISSET(static_cast<std::size_t>(cpu), &set)) {
                cpus.push_back(cpu);
            }
        }
    }
    if (cpus.empty()) {
        long const n = sysconf(_SC_NPROCESSORS_ONLN);
        for (int cpu = 0; cpu < (n > 0 ? n : 1); ++cpu) {
            cpus.push_back(cpu);
        }
    }
    return cpus;
}

SavedAffinity SaveAffinity() {
    return SavedAffinity{AllowedCpus()};
}

void RestoreAffinity(SavedAffinity const &saved) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int cpu : saved.Cpus) {
        CPU_SET(static_cast<std::size_t>(cpu), &set);
    }
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

bool PinCurrentThread(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(static_cast<std::size_t>(cpu), &set);
    return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

std::size_t PageSize() {
    static std::size_t const size = [] {
        long const page = sysconf(_SC_PAGESIZE);
        return page > 0 ? static_cast<std::size_t>(page) : std::size_t(4096);
    }();
    return size;
}

std::uintptr_t ThreadStackFloor() {
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) != 0) {
        return 0;
    }
    void *address = nullptr;
    std::size_t size = 0;
    int const result = pthread_attr_getstack(&attr, &address, &size);
    pthread_attr_destroy(&attr);
    return result == 0 ? reinterpret_cast<std::uintptr_t>(address) : 0;
}

std::uint64_t NowNs() {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          std::chrono::steady_clock::now().time_since_epoch())
                                          .count());
}

} // namespace detail
} // namespace ftl
