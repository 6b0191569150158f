// The platform layer: thin wrappers over the OS and the CPU (wait/wake on an
// address, affinity, the spin-wait hint, pages and stacks, a thread's stack,
// the clock, raw stderr). Nothing above this layer calls the OS for these.
// One implementation per OS: linux/platform.cpp (futex, sched_*, mmap) and
// windows/platform.cpp (WaitOnAddress, SetThreadAffinityMask, VirtualAlloc);
// fault.h and symbols.h have the same split.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ftl {
namespace detail {

// A line's pair for the adjacent-line prefetchers of x86 cores: data that
// other threads read in a loop gets a block of this size of its own.
constexpr std::size_t kPrefetchPairBytes = 128;

// One spin-wait hint to the CPU (`pause` on x86, `yield` on arm64): frees
// the sibling hyperthread and keeps a spinning load from flooding the memory
// system. A hint only: it orders nothing.
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
}

// Ends a run of CpuRelax that a look at memory another core writes follows:
// nothing after it starts until the run's last instruction has (`lfence` on
// x86, `isb` on arm64). A CPU that guesses the run's loop has ended runs the
// look ahead of time, and a load run ahead still takes its line from the
// core that writes it: a Fibtex waiter slowed the holder that way, in some
// placements of its loop (docs/design.adoc, Fibtex). Cheap beside the pauses
// before it.
inline void EndSpin() {
#if defined(__x86_64__) || defined(__i386__)
    asm volatile("lfence" ::: "memory");
#elif defined(__aarch64__)
    asm volatile("isb" ::: "memory");
#endif
}

// The floating-point control state of the calling thread: rounding mode,
// flush-to-zero, exception masks (x86-64: MXCSR and the x87 control word;
// arm64: FPCR). It belongs to a fiber, not to the thread that runs it, so a
// switch that does not carry it saves it before and loads it after.
struct FpControl {
#if defined(__x86_64__) || defined(__i386__)
    unsigned Mxcsr;
    unsigned short X87;
    std::uint64_t Pack() const {
        return std::uint64_t{Mxcsr} | (std::uint64_t{X87} << 32);
    }
    static FpControl Unpack(std::uint64_t packed) {
        return FpControl{static_cast<unsigned>(packed & 0xffffffffu),
                         static_cast<unsigned short>(packed >> 32)};
    }
#elif defined(__aarch64__)
    unsigned Fpcr;
    std::uint64_t Pack() const {
        return Fpcr;
    }
    static FpControl Unpack(std::uint64_t packed) {
        return FpControl{static_cast<unsigned>(packed)};
    }
#else
    std::uint64_t Pack() const {
        return 0;
    }
    static FpControl Unpack(std::uint64_t) {
        return FpControl{};
    }
#endif
};

inline FpControl SaveFpControl() {
    FpControl state{};
#if defined(__x86_64__) || defined(__i386__)
    state.Mxcsr = __builtin_ia32_stmxcsr();
    asm volatile("fnstcw %0" : "=m"(state.X87));
#elif defined(__aarch64__)
    state.Fpcr = __builtin_aarch64_get_fpcr();
#endif
    return state;
}

inline void LoadFpControl(FpControl const &state) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_ldmxcsr(state.Mxcsr);
    asm volatile("fldcw %0" : : "m"(state.X87));
#elif defined(__aarch64__)
    __builtin_aarch64_set_fpcr(state.Fpcr);
#else
    (void)state;
#endif
}

// Gives the rest of the calling thread's time slice to another thread.
void YieldThread();

// Sleeps while *word == expected (or until woken; may return spuriously).
// The OS compares *word with expected atomically with going to sleep (Linux
// futex, Windows WaitOnAddress), which is what makes "check, then sleep"
// free of lost wake-ups.
void FutexWait(std::atomic<std::uint32_t> *word, std::uint32_t expected);
// The same, giving up after `timeoutNs` nanoseconds.
void FutexWaitFor(std::atomic<std::uint32_t> *word, std::uint32_t expected, std::uint64_t timeoutNs);
// Wakes up to `count` threads sleeping on word.
void FutexWake(std::atomic<std::uint32_t> *word, int count);

// A process-wide memory barrier: when ProcessBarrier returns, every thread of
// the process has executed a full barrier since it was called, so a thread
// whose fast path orders a store before a load only against the compiler
// (std::atomic_signal_fence) cannot have its load overtake its store across
// that point. EnableProcessBarrier, called once before the first
// ProcessBarrier, says whether the OS offers it (Linux: membarrier's private
// expedited command, since 4.14); where it does not, the fast paths that
// rely on it must use a full barrier of their own instead. ProcessBarrier
// returns false if the OS refused it after all.
bool EnableProcessBarrier();
bool ProcessBarrier();

// The CPUs the calling thread may run on, in ascending order.
std::vector<int> AllowedCpus();
// Saved and restored affinity of the calling thread.
struct SavedAffinity {
    std::vector<int> Cpus;
};
SavedAffinity SaveAffinity();
void RestoreAffinity(SavedAffinity const &saved);
bool PinCurrentThread(int cpu);
// The CPU the calling thread runs on now (a hint: it may move at once), or -1.
int CurrentCpu();

std::size_t PageSize();
// The most memory mappings the process may have (Linux: vm.max_map_count),
// or 0 when the system sets no such limit or it cannot be read.
std::size_t MappingLimit();

// `bytes` rounded up to whole pages.
inline std::size_t RoundUpToPages(std::size_t bytes) {
    std::size_t const page = PageSize();
    return (bytes + page - 1) / page * page;
}

// Writes a byte to each page of [memory, memory + bytes), which makes the
// system give each its physical page now.
inline void TouchPages(void *memory, std::size_t bytes) {
    std::size_t const page = PageSize();
    for (std::size_t offset = 0; offset < bytes; offset += page) {
        static_cast<char volatile *>(memory)[offset] = 0;
    }
}

// Zeroed memory straight from the OS, in whole pages, given physical pages
// only when first touched where the OS can. nullptr when refused.
void *MapPages(std::size_t bytes);
void UnmapPages(void *memory, std::size_t bytes);
// Gives [memory, memory + bytes) of a MapPages block its physical pages now,
// so that the first write later does not fault.
void PopulatePages(void *memory, std::size_t bytes);

// A fiber stack between two inaccessible regions of reserved address space
// (no memory behind them): the guard below it, which a frame that overflows
// the stack meets first, and the gap above it, one page, so that the usable
// memory of two stacks is never adjacent. An overflow faults as long as the
// first address it touches lies less than the guard plus a neighbour's gap
// below the stack; a frame larger than that can step over both unless the
// compiler probes its pages (-fstack-clash-protection).
//
//   Mapping                                                   Mapping + MappingSize
//   | guard (GuardSize) | usable stack (Size), grows down | gap |
//                       ^ Low
struct StackMemory {
    void *Mapping = nullptr; // the whole block, guard and gap included
    std::size_t MappingSize = 0;
    void *Low = nullptr; // lowest usable address, just above the guard
    std::size_t Size = 0;
    std::size_t GuardSize = 0;
};
// The gap above each stack.
inline std::size_t StackGapSize() {
    return PageSize();
}
// The layout of a stack of `usable` bytes below a guard of `guard` bytes
// (both whole pages) whose block starts at `mapping`.
inline StackMemory GuardedStackAt(void *mapping, std::size_t usable, std::size_t guard) {
    return StackMemory{mapping, guard + usable + StackGapSize(), static_cast<char *>(mapping) + guard, usable,
                       guard};
}
// `usable` and `guard` are rounded up to whole pages; the caller has checked
// that guard + usable + gap fits (FiberPool::ValidSizes). False when the
// memory is refused.
bool MapStack(std::size_t usable, std::size_t guard, StackMemory &stack);
void UnmapStack(void *mapping, std::size_t mappingSize);

#if defined(_WIN32)
// The low end of a Windows stack's reservation, which frames never reach:
// the pages the system keeps uncommitted, its guard page and the stack
// guarantee (what a stack-overflow handler runs on).
constexpr std::uintptr_t kSystemStackGuardBytes = 64 * 1024;
#endif

// The lowest address of the calling thread's stack, or 0 if it cannot be had.
std::uintptr_t ThreadStackFloor();
// Linux: whether `address` lies in the calling thread's stack block as the
// thread library reports it (false when it cannot tell).
bool InThreadStack(void const *address);

// Monotonic clock in nanoseconds.
inline std::uint64_t NowNs() {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          std::chrono::steady_clock::now().time_since_epoch())
                                          .count());
}

// Writes to stderr with one system call and no buffer or lock, so that it
// works from a fault handler and in a process in a bad state.
void WriteStderr(char const *text, std::size_t length);

// Adds `n` to a count that only the calling thread writes and others read:
// a load and a store, no locked instruction. `order` is the store's.
inline void AddOwned(std::atomic<std::uint64_t> &count, std::uint64_t n,
                     std::memory_order order = std::memory_order_relaxed) {
    count.store(count.load(std::memory_order_relaxed) + n, order);
}

} // namespace detail
} // namespace ftl
