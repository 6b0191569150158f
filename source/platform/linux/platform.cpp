// The platform layer on Linux: futex, sched_*affinity, mmap.
#include "platform/platform.h"

#include <cerrno>
#include <cstdio>
#include <ctime>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace ftl {
namespace detail {

void YieldThread() {
    sched_yield();
}

void FutexWait(std::atomic<std::uint32_t> *word, std::uint32_t expected) {
    // std::atomic<uint32_t> is layout-compatible with uint32_t on Linux.
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

bool EnableProcessBarrier() {
    // Registration is per process and stays for its life; a kernel without
    // the command (or a sandbox that filters the call) answers an error.
    return syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
}

bool ProcessBarrier() {
    // Interrupts every CPU running one of this process's threads and makes it
    // execute a full barrier; CPUs running none of them are past one already
    // (the switch away from this process's thread was one).
    return syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0;
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

int CurrentCpu() {
    return sched_getcpu();
}

std::size_t PageSize() {
    static std::size_t const size = [] {
        long const page = sysconf(_SC_PAGESIZE);
        return page > 0 ? static_cast<std::size_t>(page) : std::size_t(4096);
    }();
    return size;
}

std::size_t MappingLimit() {
    static std::size_t const limit = [] {
        std::FILE *file = std::fopen("/proc/sys/vm/max_map_count", "r");
        if (file == nullptr) {
            return std::size_t(0);
        }
        unsigned long value = 0;
        bool const read = std::fscanf(file, "%lu", &value) == 1;
        std::fclose(file);
        return read ? static_cast<std::size_t>(value) : std::size_t(0);
    }();
    return limit;
}

void *MapPages(std::size_t bytes) {
    void *memory =
        mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (memory == MAP_FAILED) {
        return nullptr;
    }
#if defined(MADV_HUGEPAGE)
    // Fewer page faults and TLB misses for large blocks, where the system
    // gives huge pages.
    madvise(memory, bytes, MADV_HUGEPAGE);
#endif
    return memory;
}

void UnmapPages(void *memory, std::size_t bytes) {
    munmap(memory, bytes);
}

void PopulatePages(void *memory, std::size_t bytes) {
#if defined(MADV_POPULATE_WRITE)
    if (madvise(memory, bytes, MADV_POPULATE_WRITE) == 0 || errno == ENOMEM) {
        return;
    }
#endif
    TouchPages(memory, bytes); // older kernels
}

bool MapStack(std::size_t usable, std::size_t guard, StackMemory &stack) {
    usable = RoundUpToPages(usable);
    guard = RoundUpToPages(guard);
    std::size_t const mappingSize = guard + usable + StackGapSize();
    // Reserved inaccessible as a whole, then the stack opened: the guard and
    // the gap cost address space only. Two stacks mapped next to each other
    // give two mappings each, since the gap of the lower one and the guard of
    // the upper one merge into one.
    void *mapping =
        mmap(nullptr, mappingSize, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (mapping == MAP_FAILED) {
        return false;
    }
    if (mprotect(static_cast<char *>(mapping) + guard, usable, PROT_READ | PROT_WRITE) != 0) {
        munmap(mapping, mappingSize);
        return false;
    }
    stack = GuardedStackAt(mapping, usable, guard);
    return true;
}

void UnmapStack(void *mapping, std::size_t mappingSize) {
    munmap(mapping, mappingSize);
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

bool InThreadStack(void const *address) {
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) != 0) {
        return false;
    }
    void *base = nullptr;
    std::size_t size = 0;
    int const result = pthread_attr_getstack(&attr, &base, &size);
    pthread_attr_destroy(&attr);
    auto const at = reinterpret_cast<std::uintptr_t>(address);
    auto const low = reinterpret_cast<std::uintptr_t>(base);
    return result == 0 && at >= low && at - low < size;
}

void WriteStderr(char const *text, std::size_t length) {
    ssize_t const ignored = write(STDERR_FILENO, text, length);
    (void)ignored;
}

} // namespace detail
} // namespace ftl
