// The platform layer: thin wrappers over the OS and the CPU (futex, affinity,
// the spin-wait hint, page size, a thread's stack, the clock). Nothing above
// this layer calls the OS for these.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ftl {
namespace detail {

// One spin-wait hint to the CPU (x86 `pause`): frees the sibling hyperthread
// and keeps a spinning load from flooding the memory system.
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
}

// Gives the rest of the calling thread's time slice to another thread.
void YieldThread();

// Sleeps while *word == expected (or until woken; may return spuriously).
void FutexWait(std::atomic<std::uint32_t> *word, std::uint32_t expected);
// The same, giving up after `timeoutNs` nanoseconds.
void FutexWaitFor(std::atomic<std::uint32_t> *word, std::uint32_t expected, std::uint64_t timeoutNs);
// Wakes up to `count` threads sleeping on word.
void FutexWake(std::atomic<std::uint32_t> *word, int count);

// The CPUs the calling thread may run on, in ascending order.
std::vector<int> AllowedCpus();
// Saved and restored affinity of the calling thread.
struct SavedAffinity {
    std::vector<int> Cpus;
};
SavedAffinity SaveAffinity();
void RestoreAffinity(SavedAffinity const &saved);
bool PinCurrentThread(int cpu);

std::size_t PageSize();

// The lowest address of the calling thread's stack, or 0 if it cannot be had.
std::uintptr_t ThreadStackFloor();

// Monotonic clock in nanoseconds.
std::uint64_t NowNs();

// Adds `n` to a count that only the calling thread writes and others read:
// a load and a store, no locked instruction. `order` is the store's.
inline void AddOwned(std::atomic<std::uint64_t> &count, std::uint64_t n,
                     std::memory_order order = std::memory_order_relaxed) {
    count.store(count.load(std::memory_order_relaxed) + n, order);
}

} // namespace detail
} // namespace ftl
