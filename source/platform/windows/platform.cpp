// The platform layer on Windows: WaitOnAddress, thread affinity masks,
// VirtualAlloc. One processor group: a process sees at most 64 CPUs here.
#include "platform/platform.h"

#include "platform/windows/win32.h"

namespace ftl {
namespace detail {

void YieldThread() {
    SwitchToThread();
}

void FutexWait(std::atomic<std::uint32_t> *word, std::uint32_t expected) {
    // WaitOnAddress compares the bytes at `word` with `expected` and sleeps
    // while they are equal, with no wake-up lost in between.
    WaitOnAddress(reinterpret_cast<void volatile *>(word), &expected, sizeof(expected), INFINITE);
}

void FutexWaitFor(std::atomic<std::uint32_t> *word, std::uint32_t expected, std::uint64_t timeoutNs) {
    // Whole milliseconds, rounded up: a wait must never end early on purpose
    // (and a timeout of 0 would not sleep at all).
    std::uint64_t const ms = (timeoutNs + 999999u) / 1000000u;
    DWORD const timeout = ms >= INFINITE ? INFINITE - 1 : static_cast<DWORD>(ms);
    WaitOnAddress(reinterpret_cast<void volatile *>(word), &expected, sizeof(expected), timeout);
}

void FutexWake(std::atomic<std::uint32_t> *word, int count) {
    if (count == 1) {
        WakeByAddressSingle(reinterpret_cast<void *>(word));
    } else {
        WakeByAddressAll(reinterpret_cast<void *>(word));
    }
}

bool EnableProcessBarrier() {
    // FlushProcessWriteBuffers is Windows' process-wide barrier, but wine
    // (which runs this build's tests) has long implemented it as a no-op, and
    // a barrier that does nothing would lose wake-ups. The fast paths use a
    // full barrier of their own here instead.
    return false;
}

bool ProcessBarrier() {
    FlushProcessWriteBuffers();
    return true;
}

namespace {

DWORD_PTR ProcessMask() {
    DWORD_PTR process = 0;
    DWORD_PTR system = 0;
    if (GetProcessAffinityMask(GetCurrentProcess(), &process, &system) == 0 || process == 0) {
        return 1;
    }
    return process;
}

std::vector<int> MaskCpus(DWORD_PTR mask) {
    std::vector<int> cpus;
    for (int cpu = 0; cpu < static_cast<int>(sizeof(mask) * 8); ++cpu) {
        if ((mask >> cpu) & 1u) {
            cpus.push_back(cpu);
        }
    }
    return cpus;
}

DWORD_PTR CpusMask(std::vector<int> const &cpus) {
    DWORD_PTR mask = 0;
    for (int cpu : cpus) {
        if (cpu >= 0 && cpu < static_cast<int>(sizeof(mask) * 8)) {
            mask |= DWORD_PTR{1} << cpu;
        }
    }
    return mask;
}

} // namespace

std::vector<int> AllowedCpus() {
    // Windows has no call that reads a thread's mask: setting one returns
    // the previous, which is put straight back.
    DWORD_PTR const process = ProcessMask();
    DWORD_PTR const previous = SetThreadAffinityMask(GetCurrentThread(), process);
    if (previous != 0) {
        SetThreadAffinityMask(GetCurrentThread(), previous);
        return MaskCpus(previous & process);
    }
    return MaskCpus(process);
}

SavedAffinity SaveAffinity() {
    return SavedAffinity{AllowedCpus()};
}

void RestoreAffinity(SavedAffinity const &saved) {
    DWORD_PTR const mask = CpusMask(saved.Cpus);
    if (mask != 0) {
        SetThreadAffinityMask(GetCurrentThread(), mask);
    }
}

bool PinCurrentThread(int cpu) {
    if (cpu < 0 || cpu >= static_cast<int>(sizeof(DWORD_PTR) * 8)) {
        return false;
    }
    return SetThreadAffinityMask(GetCurrentThread(), DWORD_PTR{1} << cpu) != 0;
}

int CurrentCpu() {
    return static_cast<int>(GetCurrentProcessorNumber());
}

std::size_t PageSize() {
    static std::size_t const size = [] {
        SYSTEM_INFO info;
        GetSystemInfo(&info);
        return info.dwPageSize > 0 ? static_cast<std::size_t>(info.dwPageSize) : std::size_t(4096);
    }();
    return size;
}

std::size_t MappingLimit() {
    return 0; // no per-process count of mappings
}

void *MapPages(std::size_t bytes) {
    return VirtualAlloc(nullptr, bytes, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
}

void UnmapPages(void *memory, std::size_t /*bytes*/) {
    VirtualFree(memory, 0, MEM_RELEASE);
}

void PopulatePages(void *memory, std::size_t bytes) {
    // Committed pages get their physical page at the first touch.
    TouchPages(memory, bytes);
}

bool MapStack(std::size_t usable, std::size_t guard, StackMemory &stack) {
    usable = RoundUpToPages(usable);
    guard = RoundUpToPages(guard);
    std::size_t const mappingSize = guard + usable + StackGapSize();
    // Reserved inaccessible as a whole, then the stack committed: the guard
    // and the gap cost address space only.
    void *mapping = VirtualAlloc(nullptr, mappingSize, MEM_RESERVE, PAGE_NOACCESS);
    if (mapping == nullptr) {
        return false;
    }
    if (VirtualAlloc(static_cast<char *>(mapping) + guard, usable, MEM_COMMIT, PAGE_READWRITE) == nullptr) {
        VirtualFree(mapping, 0, MEM_RELEASE);
        return false;
    }
    stack = GuardedStackAt(mapping, usable, guard);
    return true;
}

void UnmapStack(void *mapping, std::size_t /*mappingSize*/) {
    VirtualFree(mapping, 0, MEM_RELEASE);
}

std::uintptr_t ThreadStackFloor() {
    ULONG_PTR low = 0;
    ULONG_PTR high = 0;
    GetCurrentThreadStackLimits(&low, &high);
    return low == 0 ? 0 : static_cast<std::uintptr_t>(low) + kSystemStackGuardBytes;
}

void WriteStderr(char const *text, std::size_t length) {
    DWORD written = 0;
    HANDLE const handle = GetStdHandle(STD_ERROR_HANDLE);
    if (handle != nullptr && handle != INVALID_HANDLE_VALUE) {
        WriteFile(handle, text, static_cast<DWORD>(length), &written, nullptr);
    }
}

} // namespace detail
} // namespace ftl
