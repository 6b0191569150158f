// The "reference" column: what the hardware and the kernel allow, with no job
// system in between.
//
//   W6  the same summing kernel on one std::thread per core (the calling
//       thread being one of them), each pinned to its core and over a
//       contiguous share of the range; the helpers are started once and spin
//       between runs, so a run costs the summing and a start signal (a
//       helper idle for a long while sleeps, and the next run wakes it).
//   W8  a bare futex wake: a thread blocked in FUTEX_WAIT, woken by FUTEX_WAKE
//       after the same 2 ms gap; from just before the wake to the woken thread
//       reading the clock. W8b: the waking thread then stays busy for 1 ms.
//   R1  jump_fcontext to a context and back (Boost.Context, the switch ftl's
//       fibers use).
//   R2  two threads pinned to two cores bounce one cache line: each waits for
//       the other's value and writes the next one.
#include "systems.h"
#include "workloads.h"

#include <boost/context/detail/fcontext.hpp>

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace bench {
namespace {

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

// The CPUs this process may run on.
std::vector<int> AllowedCpus() {
    cpu_set_t set;
    CPU_ZERO(&set);
    std::vector<int> cpus;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        for (std::size_t cpu = 0; cpu < static_cast<std::size_t>(CPU_SETSIZE); ++cpu) {
            if (CPU_ISSET(cpu, &set)) {
                cpus.push_back(static_cast<int>(cpu));
            }
        }
    }
    return cpus;
}

bool PinCallingThread(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(static_cast<std::size_t>(cpu), &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

// W6 ---------------------------------------------------------------------------

long Futex(std::atomic<std::uint32_t> *word, int op, std::uint32_t value);

// The tightest loop one can write by hand: one thread per core, each pinned
// to its own core (as ftl pins its workers), the helpers started once and
// spinning between runs, so a run is the summing and one start signal per
// helper, nothing more. A helper that has spun kSpinsBeforeSleep times (a few
// hundred microseconds, far longer than the gap between two runs measured
// alone) sleeps on a futex until the next run: measured beside an ftl pool,
// run by run (the W6 verdict), spinning helpers would take the cores from
// ftl's runs. The next run then pays a wake, microseconds of a 10 ms run.
class ThreadLoop final : public Fixture {
public:
    ThreadLoop(Sizes const &sizes, std::vector<int> cpus)
        : m_threads(sizes.Threads), m_cpus(std::move(cpus)), m_sums(sizes.Threads) {
        if (m_cpus.empty() || sched_getaffinity(0, sizeof m_originalMask, &m_originalMask) != 0) {
            throw std::runtime_error("cannot read this process's CPU affinity");
        }
        if (!PinCallingThread(m_cpus[0])) {
            throw std::runtime_error("cannot pin the main thread to CPU " + std::to_string(m_cpus[0]));
        }
        for (unsigned part = 1; part < m_threads; ++part) {
            m_helpers.emplace_back([this, part] { Helper(part); });
        }
    }

    ~ThreadLoop() override {
        m_exit.store(true, std::memory_order_relaxed);
        Go();
        for (std::thread &helper : m_helpers) {
            helper.join();
        }
        pthread_setaffinity_np(pthread_self(), sizeof m_originalMask, &m_originalMask);
    }

    void Run() override {
        m_finished.store(0, std::memory_order_relaxed);
        Go();
        SumPart(0);
        while (m_finished.load(std::memory_order_acquire) != m_threads - 1) {
            CpuRelax();
        }
        m_total = 0;
        for (Sum const &sum : m_sums) {
            m_total += sum.Value;
        }
    }

    Verdict Check() override {
        if (m_pinFailed.load()) {
            return Verdict::Fail("could not pin a helper thread to its CPU");
        }
        return ExpectCount("total", std::exchange(m_total, 0), kTriangleExpected);
    }

private:
    static constexpr unsigned kSpinsBeforeSleep = 10000;

    // A new generation, then a wake for the helpers asleep on it. Against a
    // helper's count of sleepers before it sleeps (both seq_cst): either this
    // sees the helper counted and wakes it, or the helper's FUTEX_WAIT finds
    // the new generation and returns at once.
    void Go() {
        m_generation.fetch_add(1, std::memory_order_seq_cst);
        if (m_sleepers.load(std::memory_order_seq_cst) != 0) {
            Futex(&m_generation, FUTEX_WAKE_PRIVATE, std::numeric_limits<int>::max());
        }
    }

    std::uint32_t AwaitGeneration(std::uint32_t seen) {
        unsigned spins = 0;
        std::uint32_t now = 0;
        while ((now = m_generation.load(std::memory_order_acquire)) == seen) {
            if (++spins < kSpinsBeforeSleep) {
                CpuRelax();
                continue;
            }
            m_sleepers.fetch_add(1, std::memory_order_seq_cst);
            Futex(&m_generation, FUTEX_WAIT_PRIVATE, seen);
            m_sleepers.fetch_sub(1, std::memory_order_seq_cst);
            spins = 0;
        }
        return now;
    }

    void Helper(unsigned part) {
        if (!PinCallingThread(m_cpus[part % m_cpus.size()])) {
            m_pinFailed.store(true);
        }
        std::uint32_t seen = 0;
        for (;;) {
            seen = AwaitGeneration(seen);
            if (m_exit.load(std::memory_order_relaxed)) {
                return;
            }
            SumPart(part);
            m_finished.fetch_add(1, std::memory_order_release);
        }
    }

    void SumPart(unsigned part) {
        std::uint64_t const first = kTriangleN * part / m_threads + 1;
        std::uint64_t const last = kTriangleN * (part + 1) / m_threads;
        m_sums[part].Value = SumRange(first, last);
    }

    struct alignas(64) Sum {
        std::uint64_t Value = 0;
    };
    unsigned m_threads;
    std::vector<int> m_cpus;
    std::vector<Sum> m_sums;
    std::uint64_t m_total = 0;
    cpu_set_t m_originalMask{};
    // Runs started (wrapping; a helper compares it for equality only), and
    // the futex word a sleeping helper waits on.
    alignas(64) std::atomic<std::uint32_t> m_generation{0};
    std::atomic<unsigned> m_sleepers{0}; // helpers asleep or about to be
    alignas(64) std::atomic<unsigned> m_finished{0};
    std::atomic<bool> m_exit{false};
    std::atomic<bool> m_pinFailed{false};
    std::vector<std::thread> m_helpers;
};

// W8 ---------------------------------------------------------------------------

long Futex(std::atomic<std::uint32_t> *word, int op, std::uint32_t value) {
    static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t),
                  "a futex is a plain 32-bit word");
    return syscall(SYS_futex, reinterpret_cast<std::uint32_t *>(word), op, value, nullptr, nullptr, 0);
}

// W8b (kBusyWaker): the waking thread stays busy for kBusyAfterAdd after
// each wake.
template <bool kBusyWaker>
class FutexWake final : public Fixture {
public:
    explicit FutexWake(Sizes const &sizes) : m_samples(sizes.WakeSamples) {}

    void Run() override {
        m_starts.assign(m_samples, 0);
        m_latencies.assign(m_samples, 0);
        m_word.store(0, std::memory_order_relaxed);
        m_taken.store(0, std::memory_order_relaxed);
        // The word holds the number of wakes sent; the waiter sleeps while it
        // still holds the last value it saw.
        std::thread waiter([this] {
            std::uint32_t seen = 0;
            for (unsigned i = 0; i < m_samples; ++i) {
                std::uint32_t now = 0;
                while ((now = m_word.load(std::memory_order_acquire)) == seen) {
                    Futex(&m_word, FUTEX_WAIT_PRIVATE, seen);
                }
                std::int64_t const woke = NowNs();
                seen = now;
                m_latencies[i] = woke - m_starts[i];
                m_taken.fetch_add(1, std::memory_order_release);
            }
        });
        for (unsigned i = 0; i < m_samples; ++i) {
            std::this_thread::sleep_for(kWakeGap);
            WaitForSample(i);
            m_starts[i] = NowNs();
            m_word.store(i + 1, std::memory_order_release);
            Futex(&m_word, FUTEX_WAKE_PRIVATE, 1);
            if (kBusyWaker) {
                StayBusyAfterAdd();
            }
        }
        waiter.join();
    }

    Verdict Check() override { return CheckWakeSamples(m_latencies, m_samples); }
    std::vector<double> MeasuredFigures() const override { return WakeFigures(m_latencies); }

private:
    void WaitForSample(unsigned next) const {
        while (m_taken.load(std::memory_order_acquire) < next) {
            std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
    }

    unsigned m_samples;
    std::vector<std::int64_t> m_starts;
    std::vector<std::int64_t> m_latencies;
    std::atomic<std::uint32_t> m_word{0};
    std::atomic<unsigned> m_taken{0};
};

// R1 ---------------------------------------------------------------------------

namespace context = boost::context::detail;

class ContextRoundTrip final : public Fixture {
public:
    ContextRoundTrip() : m_stack(new char[kStackSize]) {}

    void Run() override {
        context::fcontext_t other = context::make_fcontext(m_stack.get() + kStackSize, kStackSize, Bounce);
        for (unsigned i = 0; i < kContextRoundTrips; ++i) {
            other = context::jump_fcontext(other, &m_count).fctx;
        }
        // The other context is left suspended inside Bounce; its stack is
        // reused by the next run and freed with the fixture (it owns nothing).
    }

    Verdict Check() override {
        return ExpectCount("round trips", std::exchange(m_count, 0), kContextRoundTrips);
    }

private:
    static constexpr std::size_t kStackSize = 64 * 1024;

    static void Bounce(context::transfer_t transfer) {
        for (;;) {
            ++*static_cast<std::uint64_t *>(transfer.data);
            transfer = context::jump_fcontext(transfer.fctx, nullptr);
        }
    }

    std::unique_ptr<char[]> m_stack;
    std::uint64_t m_count = 0;
};

// R2 ---------------------------------------------------------------------------

class CacheLineRoundTrip final : public Fixture {
public:
    explicit CacheLineRoundTrip(std::vector<int> cpus) : m_cpus(std::move(cpus)) {}

    void Run() override {
        m_line.Value.store(0, std::memory_order_relaxed);
        m_ready.store(0, std::memory_order_relaxed);
        std::uint64_t const rounds = kCacheLineRoundTrips;
        std::thread pong([this, rounds] {
            if (!PinCallingThread(m_cpus[1])) {
                m_pinFailed.store(true, std::memory_order_relaxed);
            }
            StartTogether();
            for (std::uint64_t i = 0; i < rounds; ++i) {
                while (m_line.Value.load(std::memory_order_acquire) != 2 * i + 1) {
                    CpuRelax();
                }
                m_line.Value.store(2 * i + 2, std::memory_order_release);
            }
        });
        std::thread ping([this, rounds] {
            if (!PinCallingThread(m_cpus[0])) {
                m_pinFailed.store(true, std::memory_order_relaxed);
            }
            StartTogether();
            std::int64_t const start = NowNs();
            for (std::uint64_t i = 0; i < rounds; ++i) {
                m_line.Value.store(2 * i + 1, std::memory_order_release);
                while (m_line.Value.load(std::memory_order_acquire) != 2 * i + 2) {
                    CpuRelax();
                }
            }
            m_nsPerRoundTrip = static_cast<double>(NowNs() - start) / static_cast<double>(rounds);
        });
        ping.join();
        pong.join();
    }

    Verdict Check() override {
        if (m_pinFailed.exchange(false)) {
            return Verdict::Fail("could not pin the threads to CPUs " + std::to_string(m_cpus[0]) + " and " +
                                 std::to_string(m_cpus[1]));
        }
        return ExpectCount("final value", m_line.Value.load(std::memory_order_relaxed),
                           2ull * kCacheLineRoundTrips);
    }
    std::vector<double> MeasuredFigures() const override { return {m_nsPerRoundTrip}; }

private:
    void StartTogether() {
        m_ready.fetch_add(1, std::memory_order_acq_rel);
        while (m_ready.load(std::memory_order_acquire) < 2) {
            CpuRelax();
        }
    }

    struct alignas(64) Line {
        std::atomic<std::uint64_t> Value{0};
    };
    std::vector<int> m_cpus;
    Line m_line;
    alignas(64) std::atomic<unsigned> m_ready{0};
    std::atomic<bool> m_pinFailed{false};
    double m_nsPerRoundTrip = 0;
};

} // namespace

System MakeReferenceSystem() {
    System system{"reference", {}};
    auto &list = system.Implementations;
    std::vector<int> const cpus = AllowedCpus();
    list.push_back(Implementation{"W6", "one pinned std::thread per core, equal contiguous shares",
                                  [cpus](Sizes const &sizes) -> std::unique_ptr<Fixture> {
                                      return std::make_unique<ThreadLoop>(sizes, cpus);
                                  }});
    list.push_back(Implementation{"W8", "FUTEX_WAKE to a thread in FUTEX_WAIT",
                                  [](Sizes const &sizes) -> std::unique_ptr<Fixture> {
                                      return std::make_unique<FutexWake<false>>(sizes);
                                  }});
    list.push_back(Implementation{"W8b", "FUTEX_WAKE from a thread that stays busy after it",
                                  [](Sizes const &sizes) -> std::unique_ptr<Fixture> {
                                      return std::make_unique<FutexWake<true>>(sizes);
                                  }});
    // Boost.Context switches unannounced to the sanitizers would only confuse
    // them; a sanitizer build has no figures anyway.
    if (!kSanitizedBuild) {
        list.push_back(Implementation{
            "R1", "jump_fcontext there and back",
            [](Sizes const &) -> std::unique_ptr<Fixture> { return std::make_unique<ContextRoundTrip>(); }});
    }
    if (cpus.size() >= 2) {
        list.push_back(Implementation{"R2",
                                      "std::atomic bounced between CPUs " + std::to_string(cpus[0]) +
                                          " and " + std::to_string(cpus[1]),
                                      [cpus](Sizes const &) -> std::unique_ptr<Fixture> {
                                          return std::make_unique<CacheLineRoundTrip>(cpus);
                                      }});
    }
    return system;
}

} // namespace bench
