// The task trace (TaskSchedulerInitOptions::TraceFile, or FTL_TRACE=<file>):
// each worker records what it runs into a buffer of its own, with no lock and
// no allocation, and the scheduler writes the buffers as one Chrome
// trace-event file (Perfetto, chrome://tracing) when it is destroyed.
//
// A worker records a task's begin and end, a span inside a task (a graph
// node), a name for the innermost open span, a park and a resume of a fiber,
// an idle stretch and a steal. The writer rebuilds each fiber's stack of open
// tasks from those: a task that parked shows as one piece per stretch it ran,
// each on the track of the worker that ran it, joined by flow arrows, with
// what it waited for on the piece that ended in the wait.
//
// A buffer holds a fixed number of events (TraceBufferEvents), its memory
// populated at Init by its worker's thread. When one fills, that worker stops recording; the trace
// ends, for every worker, at that moment (up to it every worker recorded
// everything, so each fiber's stack of open tasks is whole), marks it, and
// the scheduler says on stderr how many events were not recorded. Nothing is
// dropped silently.
#pragma once

#include "platform/platform.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace ftl {
namespace detail {

// The trace's clock: the CPU's time-stamp counter where it has one that all
// cores share (x86-64's TSC, arm64's virtual counter), 10-25 ns cheaper than
// clock_gettime; the writer converts ticks to nanoseconds with two samples of
// both clocks (TraceClock). Elsewhere, nanoseconds.
inline std::uint64_t TraceTicks() {
#if defined(__x86_64__)
    return __builtin_ia32_rdtsc();
#elif defined(__aarch64__)
    std::uint64_t ticks;
    asm volatile("mrs %0, cntvct_el0" : "=r"(ticks));
    return ticks;
#else
    return NowNs();
#endif
}

// Ticks to nanoseconds on NowNs()'s clock: a line through two samples of
// both clocks, taken when the trace starts and when it is written.
struct TraceClock {
    std::uint64_t Ticks0 = 0;
    std::uint64_t Ns0 = 0;
    double NsPerTick = 1.0;
    static std::pair<std::uint64_t, std::uint64_t> Sample() {
        std::uint64_t const ns = NowNs();
        return {TraceTicks(), ns};
    }
    std::uint64_t Ns(std::uint64_t ticks) const {
        // The difference first, as an integer: a double holds it exactly.
        auto const delta = static_cast<double>(static_cast<std::int64_t>(ticks - Ticks0));
        double const offset = delta * NsPerTick;
        if (offset < 0 && static_cast<std::uint64_t>(-offset) > Ns0) {
            return 0;
        }
        return offset < 0 ? Ns0 - static_cast<std::uint64_t>(-offset)
                          : Ns0 + static_cast<std::uint64_t>(offset);
    }
};

enum class TraceKind : std::uint8_t {
    TaskBegin, // A: the task function (or closure invoker), B: its argument, Aux: 1 for a closure
    TaskEnd,
    SpanBegin, // A: code to name the span after (a closure invoker), B: a given name (char const *) or null
    SpanEnd,
    Suspend, // the fiber parks. A: the waitable, B: its kind (a WaitKindName), Aux: the target
    Resume,  // the fiber runs again
    Idle,    // Ticks: the start, A: the end (as an integer), Aux: 1 parked, 2 woken by another thread
    Steal,   // Aux: the victim worker
};

struct TraceEvent {
    std::uint64_t Ticks; // TraceTicks()
    void const *A;
    void const *B;
    std::uint32_t Aux;
    std::uint32_t FiberAndKind; // the fiber's index << 8 | the TraceKind
    std::uint32_t Fiber() const { return FiberAndKind >> 8; }
    TraceKind Kind() const { return static_cast<TraceKind>(FiberAndKind & 0xffu); }
};
static_assert(sizeof(TraceEvent) == 32, "two events per cache line");

// More events than any buffer holds (32 GiB each).
constexpr std::size_t kMaxTraceEvents = std::size_t{1} << 30;

class TraceBuffer {
public:
    explicit TraceBuffer(std::size_t capacity);
    ~TraceBuffer();
    // Faults every page in, before the first event (on the worker's thread:
    // the workers' buffers are populated side by side, each near its core).
    void Populate();
    TraceBuffer(TraceBuffer const &) = delete;
    TraceBuffer &operator=(TraceBuffer const &) = delete;

    void Record(TraceKind kind, std::uint64_t ticks, void const *a, void const *b, std::uint32_t aux,
                std::uint32_t fiber) {
        if (m_size == m_capacity) {
            if (m_lost++ == 0) {
                m_fullTicks = ticks;
            }
            return;
        }
        TraceEvent &event = m_events[m_size++];
        event.Ticks = ticks;
        event.A = a;
        event.B = b;
        event.Aux = aux;
        event.FiberAndKind = fiber << 8 | static_cast<std::uint32_t>(kind);
    }

    std::size_t Size() const { return m_size; }
    std::size_t Capacity() const { return m_capacity; }
    TraceEvent const &operator[](std::size_t i) const { return m_events[i]; }
    // Events that found the buffer full, and the time of the first.
    std::uint64_t Lost() const { return m_lost; }
    std::uint64_t FullTicks() const { return m_fullTicks; }

private:
    TraceEvent *m_events; // mapped, on huge pages where the system gives them
    std::size_t m_size = 0;
    std::size_t m_capacity;
    std::uint64_t m_lost = 0;
    std::uint64_t m_fullTicks = 0;
};

// Writes the buffers (buffers[i] is worker i's) to `path` as a Chrome
// trace-event JSON file, times in nanoseconds (by `clock`) relative to
// originNs. False, with `error` set, when the file cannot be written.
bool WriteChromeTrace(std::string const &path, TraceBuffer const *const *buffers, unsigned count,
                      TraceClock const &clock, std::uint64_t originNs, std::string &error);

// The name of the function at `code`: its symbol, demangled, without the
// parameter list. For a closure invoker (a template instance over the
// closure's type), the closure's type. "0x..." when no symbol covers it.
std::string CodeName(void const *code);

} // namespace detail
} // namespace ftl
