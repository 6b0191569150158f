// IdleState (source/idle/idle.h), checked against its header's contract: the
// parked bitmap (SetParked, UnsetParked, IsParked, ClaimAny with `prefer`,
// ClaimSpecific, AllParkedExcept, over every word of the bitmap); the searcher
// count (TryBecomeSearcher's half-the-workers limit, on and off;
// AddClaimedSearcher; StopSearching telling the last searcher; NumSearching);
// concurrent claims taking each parked bit exactly once; and the park
// protocol through Idle and FoundWork with test hooks: a worker that finds no
// work parks and is woken by Notify, NotifyOne or WakeAll from another thread
// and returns as a searcher; Notify wakes no one while a searcher exists;
// work seen at the re-check (or a claim before it) ends Idle without a sleep;
// PollNs/Poll run while asleep; Spin and Yield never park; the last searcher
// to find work wakes the next worker when more work is visible; the adaptive
// spin stops after spins that missed and comes back after a short sleep, and
// learns the length of a waker's short gaps (never from a timer's poll).
#include "idle/idle.h"
#include "platform/platform.h"
#include "test_support.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

using ftl::EmptyQueueBehavior;
using ftl::detail::IdleState;
using ftl_test::SpinUntil;

namespace {

// The hooks Idle and FoundWork call, counting every call. Work is visible
// while *Work > 0, or from the VisibleFromCall-th call to WorkVisible on.
struct TestHooks {
    IdleState *Idle = nullptr;
    unsigned Self = 0;
    std::atomic<int> *Work = nullptr;
    unsigned VisibleFromCall = 0; // 0: never by count
    unsigned StopFromCall = 0;    // StopIdling returns true from this call on; 0: never
    std::uint64_t PollInterval = 0;
    std::function<void()> OnFirstPoll;          // runs inside the first Poll (the re-check's)
    std::chrono::microseconds SpinLookDelay{0}; // how long each spin round's look takes
    // SpinLook leaves out the work it sees for this many calls, as a worker
    // does with tasks its steal backoff skips for now (WorkVisible sees it).
    unsigned HeldBackSpinLooks = 0;

    std::atomic<unsigned> WorkVisibleCalls{0};
    std::atomic<unsigned> SpinLookCalls{0};
    std::atomic<unsigned> StopIdlingCalls{0};
    std::atomic<unsigned> PollNsCalls{0};
    std::atomic<unsigned> PollNsCallsParked{0}; // made while Self's parked bit was set: asleep
    std::atomic<unsigned> PollCalls{0};
    std::atomic<unsigned> WrongBehavior{0}; // StopIdling called with another behaviour than Expected
    std::atomic<unsigned> SeenParked{0};    // WorkVisible calls made while Self's parked bit was set
    EmptyQueueBehavior Expected = EmptyQueueBehavior::Sleep;

    // Spin rounds look like any other look here (after SpinLookDelay, waited
    // out on the clock: a sleep that short may return at once, as with
    // mingw's sleep_for under Wine).
    bool SpinLook() {
        unsigned const look = SpinLookCalls.fetch_add(1) + 1;
        if (SpinLookDelay.count() > 0) {
            auto const until = std::chrono::steady_clock::now() + SpinLookDelay;
            while (std::chrono::steady_clock::now() < until) {
                std::this_thread::yield();
            }
        }
        return WorkVisible() && look > HeldBackSpinLooks;
    }
    bool WorkVisible() {
        unsigned const call = WorkVisibleCalls.fetch_add(1) + 1;
        if (Idle != nullptr && Idle->IsParked(Self)) {
            SeenParked.fetch_add(1);
        }
        if (VisibleFromCall != 0 && call >= VisibleFromCall) {
            return true;
        }
        return Work != nullptr && Work->load() > 0;
    }
    bool StopIdling(EmptyQueueBehavior behavior) {
        unsigned const call = StopIdlingCalls.fetch_add(1) + 1;
        if (behavior != Expected) {
            WrongBehavior.fetch_add(1);
        }
        return StopFromCall != 0 && call >= StopFromCall;
    }
    std::uint64_t PollNs() {
        PollNsCalls.fetch_add(1);
        if (Idle != nullptr && Idle->IsParked(Self)) {
            PollNsCallsParked.fetch_add(1);
        }
        return PollInterval;
    }
    void Poll() {
        if (PollCalls.fetch_add(1) == 0 && OnFirstPoll) {
            OnFirstPoll();
        }
    }
};

// A worker thread that calls Idle(Sleep) once, then `after` (on its own
// thread, as the worker would), and ends.
class Sleeper {
public:
    Sleeper(IdleState &idle, unsigned self, std::atomic<int> *work = nullptr,
            std::function<void(TestHooks &)> after = nullptr,
            std::chrono::microseconds spinLookDelay = std::chrono::microseconds(0))
        : m_idle(idle) {
        Hooks.Idle = &idle;
        Hooks.Self = self;
        Hooks.Work = work;
        Hooks.SpinLookDelay = spinLookDelay;
        m_thread = std::thread([this, self, after] {
            m_idle.Idle(self, EmptyQueueBehavior::Sleep, Hooks);
            m_returned.store(true);
            if (after) {
                after(Hooks);
            }
            m_finished.store(true);
        });
    }
    ~Sleeper() {
        if (m_thread.joinable()) {
            // A failed test must not leave the thread asleep.
            while (!m_returned.load()) {
                m_idle.WakeAll();
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
            }
            m_thread.join();
        }
    }
    Sleeper(Sleeper const &) = delete;
    Sleeper &operator=(Sleeper const &) = delete;

    // Asleep, or about to sleep on its futex word: past the re-check, in the
    // sleep loop (which calls PollNs before each wait, parked; a spin past
    // its rounds calls it too, unparked).
    bool WaitAsleep() {
        return SpinUntil([&] { return Hooks.PollNsCallsParked.load() >= 1; });
    }
    bool WaitReturned() {
        return SpinUntil([&] { return m_finished.load(); });
    }
    bool Returned() const { return m_returned.load(); }
    void Join() { m_thread.join(); }

    TestHooks Hooks;

private:
    IdleState &m_idle;
    std::atomic<bool> m_returned{false};
    std::atomic<bool> m_finished{false};
    std::thread m_thread;
};

// Waits for `flag` to reach `value`, spinning a little between yields.
// A count that racers wait for, round after round: spun on first (a round
// is short), with a yield now and then, then slept on, so that the rounds still end quickly when other
// jobs take the cores (three threads spinning on two busy cores otherwise
// wait out each other's time slices: 25 times slower beside one busy loop).
class RoundGate {
public:
    void Store(std::uint32_t value) {
        m_value.store(value, std::memory_order_seq_cst);
        WakeSleepers();
    }
    void Add(std::uint32_t value) {
        m_value.fetch_add(value, std::memory_order_seq_cst);
        WakeSleepers();
    }
    void AwaitAtLeast(std::uint32_t value) {
        constexpr unsigned kSpins = 1024;
        for (unsigned spins = 1; m_value.load(std::memory_order_acquire) < value; ++spins) {
            if (spins < kSpins) {
                if (spins % 64 == 0) {
                    std::this_thread::yield(); // three threads, two cores
                } else {
                    ftl::detail::CpuRelax();
                }
                continue;
            }
            // Counted before the look (both seq_cst), so that a store after
            // the look sees the sleeper and wakes it.
            m_sleepers.fetch_add(1, std::memory_order_seq_cst);
            std::uint32_t const seen = m_value.load(std::memory_order_seq_cst);
            if (seen < value) {
                ftl::detail::FutexWait(&m_value, seen);
            }
            m_sleepers.fetch_sub(1, std::memory_order_relaxed);
        }
    }

private:
    void WakeSleepers() {
        if (m_sleepers.load(std::memory_order_seq_cst) != 0) {
            ftl::detail::FutexWake(&m_value, INT32_MAX);
        }
    }
    std::atomic<std::uint32_t> m_value{0};
    std::atomic<std::uint32_t> m_sleepers{0};
};

// Runs `rounds` rounds: setup(round) alone on the calling thread, then
// racer(thread, round) on `racers` threads at once (thread 0 is the caller),
// each after a delay that varies from round to round, so that the racers'
// relative timing sweeps the window the race is in.
template <class Setup, class Racer>
void RunRounds(unsigned rounds, unsigned racers, Setup setup, Racer racer) {
    RoundGate started;
    RoundGate finished;
    auto const jitter = [](unsigned thread, unsigned round) {
        for (unsigned k = (round * 7919u + thread * 104729u) % 200u; k > 0; --k) {
            ftl::detail::CpuRelax();
        }
    };
    std::vector<std::thread> threads;
    for (unsigned t = 1; t < racers; ++t) {
        threads.emplace_back([&, t] {
            for (unsigned round = 1; round <= rounds; ++round) {
                started.AwaitAtLeast(round);
                jitter(t, round);
                racer(t, round);
                finished.Add(1);
            }
        });
    }
    for (unsigned round = 1; round <= rounds; ++round) {
        setup(round);
        started.Store(round);
        jitter(0, round);
        racer(0u, round);
        finished.AwaitAtLeast(round * (racers - 1));
    }
    for (std::thread &thread : threads) {
        thread.join();
    }
}

} // namespace

TEST_CASE("IdleState: parked bits are set, taken back and claimed once", "[internal][idle]") {
    IdleState idle;
    idle.Init(8, true, false);
    for (unsigned i = 0; i < 8; ++i) {
        REQUIRE_FALSE(idle.IsParked(i));
    }
    REQUIRE(idle.ClaimAny() == -1);
    REQUIRE_FALSE(idle.ClaimSpecific(3));

    idle.SetParked(5);
    idle.SetParked(3);
    REQUIRE(idle.IsParked(3));
    REQUIRE(idle.IsParked(5));
    REQUIRE_FALSE(idle.IsParked(4));
    // The lowest parked worker first.
    REQUIRE(idle.ClaimAny() == 3);
    REQUIRE_FALSE(idle.IsParked(3));
    // Its parker finds the bit gone: a waker claimed it first.
    REQUIRE_FALSE(idle.UnsetParked(3));
    // A parker takes its own bit back once.
    REQUIRE(idle.UnsetParked(5));
    REQUIRE_FALSE(idle.IsParked(5));
    REQUIRE_FALSE(idle.UnsetParked(5));
    REQUIRE_FALSE(idle.ClaimSpecific(5));
    REQUIRE(idle.ClaimAny() == -1);

    idle.SetParked(5);
    REQUIRE(idle.ClaimSpecific(5));
    REQUIRE_FALSE(idle.ClaimSpecific(5));
    REQUIRE_FALSE(idle.IsParked(5));

    // `prefer` first when it is parked, else the lowest parked worker.
    idle.SetParked(2);
    idle.SetParked(6);
    REQUIRE(idle.ClaimAny(6) == 6);
    REQUIRE(idle.ClaimAny(6) == 2);
    REQUIRE(idle.ClaimAny(6) == -1);
    REQUIRE(idle.ClaimAny() == -1);
    // Setting a bit twice parks the worker once.
    idle.SetParked(7);
    idle.SetParked(7);
    REQUIRE(idle.ClaimAny() == 7);
    REQUIRE(idle.ClaimAny() == -1);
}

TEST_CASE("IdleState: AllParkedExcept", "[internal][idle]") {
    IdleState idle;
    idle.Init(5, true, false);
    REQUIRE_FALSE(idle.AllParkedExcept(0));
    for (unsigned i : {0u, 1u, 2u, 3u}) {
        idle.SetParked(i);
    }
    REQUIRE(idle.AllParkedExcept(4));
    REQUIRE_FALSE(idle.AllParkedExcept(3));
    idle.SetParked(4);
    REQUIRE(idle.AllParkedExcept(3));
    REQUIRE(idle.AllParkedExcept(4));
    REQUIRE(idle.ClaimSpecific(1));
    REQUIRE_FALSE(idle.AllParkedExcept(0));
    REQUIRE(idle.AllParkedExcept(1));

    IdleState one;
    one.Init(1, true, false);
    REQUIRE(one.AllParkedExcept(0));
}

TEST_CASE("IdleState: ClaimAny finds parked workers in every word of the bitmap", "[internal][idle]") {
    unsigned const workers = GENERATE(65u, 200u, ftl::detail::kMaxWorkers);
    INFO(workers << " workers");
    IdleState idle;
    idle.Init(workers, true, false);
    std::vector<unsigned> parked = {63, 64, workers - 1};
    if (workers > 130) {
        parked.push_back(130);
        parked.push_back(128);
        parked.push_back(127);
    }
    std::sort(parked.begin(), parked.end());
    parked.erase(std::unique(parked.begin(), parked.end()), parked.end());
    for (unsigned index : parked) {
        idle.SetParked(index);
    }
    for (unsigned i = 0; i < workers; ++i) {
        bool const expected = std::find(parked.begin(), parked.end(), i) != parked.end();
        REQUIRE(idle.IsParked(i) == expected);
    }
    std::vector<int> claimed;
    for (int index = idle.ClaimAny(); index >= 0; index = idle.ClaimAny()) {
        claimed.push_back(index);
    }
    REQUIRE(claimed == std::vector<int>(parked.begin(), parked.end()));

    // prefer beyond the first word; ClaimSpecific and UnsetParked there too.
    unsigned const last = workers - 1;
    idle.SetParked(0);
    idle.SetParked(last);
    REQUIRE(idle.ClaimAny(static_cast<int>(last)) == static_cast<int>(last));
    REQUIRE(idle.ClaimAny() == 0);
    idle.SetParked(last);
    REQUIRE(idle.ClaimSpecific(last));
    REQUIRE_FALSE(idle.UnsetParked(last));
    idle.SetParked(64);
    REQUIRE(idle.UnsetParked(64));
    REQUIRE(idle.ClaimAny() == -1);

    unsigned const hole = workers / 2 + 1;
    for (unsigned i = 0; i < workers; ++i) {
        if (i != hole) {
            idle.SetParked(i);
        }
    }
    REQUIRE(idle.AllParkedExcept(hole));
    REQUIRE_FALSE(idle.AllParkedExcept(0));
    REQUIRE_FALSE(idle.AllParkedExcept(last));
}

TEST_CASE("IdleState: at most half the workers (or two) search, unless the limit is off",
          "[internal][idle]") {
    struct Case {
        unsigned Workers;
        bool Limit;
        unsigned Admitted;
    };
    // "Fewer than half, or fewer than two, already search": 1 of 1, 2 of 2,
    // 2 of 3, 2 of 4, 3 of 5, 4 of 8; all without the limit.
    Case const cases[] = {{1, true, 1}, {2, true, 2}, {3, true, 2},  {4, true, 2},
                          {5, true, 3}, {8, true, 4}, {1, false, 1}, {4, false, 4}};
    for (Case const &c : cases) {
        INFO(c.Workers << " workers, limit " << c.Limit);
        IdleState idle;
        idle.Init(c.Workers, c.Limit, true);
        REQUIRE(idle.NumSearching() == 0);
        unsigned admitted = 0;
        for (unsigned i = 0; i < c.Workers; ++i) {
            admitted += idle.TryBecomeSearcher() ? 1u : 0u;
        }
        REQUIRE(admitted == c.Admitted);
        REQUIRE(idle.NumSearching() == c.Admitted);
        // A claimed worker always counts itself, whatever the limit.
        idle.AddClaimedSearcher();
        REQUIRE(idle.NumSearching() == c.Admitted + 1);
        REQUIRE(idle.TryBecomeSearcher() == !c.Limit);
        unsigned const searching = idle.NumSearching();
        // Only the last searcher to stop is told so.
        for (unsigned i = searching; i > 1; --i) {
            REQUIRE_FALSE(idle.StopSearching());
            REQUIRE(idle.NumSearching() == i - 1);
        }
        REQUIRE(idle.StopSearching());
        REQUIRE(idle.NumSearching() == 0);
        // With the count back at zero, the limit admits again.
        REQUIRE(idle.TryBecomeSearcher());
        REQUIRE(idle.NumSearching() == 1);
    }
}

TEST_CASE("IdleState: racing claims take one parked bit exactly once", "[internal][idle]") {
    // Two wakers' ClaimAny (one preferring the worker) and the parker's own
    // UnsetParked race for one bit: exactly one of them gets it. Each round
    // takes three threads on two cores through two gates, so its time is the
    // OS's: with another build beside it, 30,000 rounds took 36 s of the
    // 60 s timeout in the Clang build (0.25-4.7 s in the other presets of
    // the same runs), and 50 s
    // under AddressSanitizer. 10,000 still give each of the jitter's 200
    // offsets 50 rounds.
    unsigned const rounds = ftl_test::kSlowBuild ? 2000 : 10000;
    IdleState idle;
    idle.Init(130, true, false);
    unsigned const index = GENERATE(5u, 100u);
    std::vector<std::vector<unsigned>> wins(3);
    std::vector<unsigned> strays(3, 0); // a claim of some other index
    RunRounds(
        rounds, 3, [&](unsigned) { idle.SetParked(index); },
        [&](unsigned thread, unsigned round) {
            bool won = false;
            int claimed = -1;
            if (thread == 0) {
                won = idle.UnsetParked(index);
            } else {
                claimed = thread == 1 ? idle.ClaimAny() : idle.ClaimAny(static_cast<int>(index));
                won = claimed == static_cast<int>(index);
                strays[thread] += claimed >= 0 && !won ? 1u : 0u;
            }
            if (won) {
                wins[thread].push_back(round);
            }
        });
    std::vector<unsigned> winsPerRound(rounds + 1, 0);
    for (auto const &threadWins : wins) {
        for (unsigned round : threadWins) {
            ++winsPerRound[round];
        }
    }
    INFO("wins: parker " << wins[0].size() << ", waker " << wins[1].size() << ", preferring waker "
                         << wins[2].size());
    REQUIRE(strays[1] + strays[2] == 0);
    REQUIRE(static_cast<unsigned>(std::count(winsPerRound.begin() + 1, winsPerRound.end(), 1u)) == rounds);
    REQUIRE_FALSE(idle.IsParked(index));
}

TEST_CASE("IdleState: racing ClaimAny calls claim each parked worker once", "[internal][idle]") {
    // Every bit of 130 workers (three words) parked; three wakers claim until
    // none is left; ClaimSpecific joins in for a few of them.
    unsigned const workers = 130;
    unsigned const rounds = ftl_test::kThreadSanitizer ? 300 : 3000;
    IdleState idle;
    idle.Init(workers, true, false);
    std::vector<std::vector<unsigned>> claims(3);
    RunRounds(
        rounds, 3,
        [&](unsigned) {
            for (unsigned i = 0; i < workers; ++i) {
                idle.SetParked(i);
            }
        },
        [&](unsigned thread, unsigned round) {
            unsigned const base = (round - 1) * workers;
            if (thread == 2) {
                for (unsigned i = 0; i < workers; i += 7) {
                    if (idle.ClaimSpecific(i)) {
                        claims[thread].push_back(base + i);
                    }
                }
            }
            for (int index = idle.ClaimAny(static_cast<int>(thread * 60)); index >= 0;
                 index = idle.ClaimAny()) {
                claims[thread].push_back(base + static_cast<unsigned>(index));
            }
        });
    std::vector<unsigned> times(rounds * workers, 0);
    for (auto const &threadClaims : claims) {
        for (unsigned claim : threadClaims) {
            ++times[claim];
        }
    }
    INFO("claims: " << claims[0].size() << ", " << claims[1].size() << ", " << claims[2].size());
    REQUIRE(static_cast<unsigned>(std::count(times.begin(), times.end(), 1u)) == rounds * workers);
    REQUIRE(idle.ClaimAny() == -1);
}

TEST_CASE("IdleState: a parked worker is woken by Notify and returns as a searcher", "[internal][idle]") {
    bool const spin = GENERATE(false, true);
    INFO("spin before park " << spin);
    IdleState idle;
    idle.Init(2, true, spin);
    std::atomic<int> work{0};
    Sleeper sleeper(idle, 0, &work);
    REQUIRE(sleeper.WaitAsleep());
    REQUIRE(idle.IsParked(0));
    REQUIRE_FALSE(idle.IsParked(1));
    REQUIRE(idle.NumSearching() == 0); // it stopped searching when it parked
    REQUIRE(idle.AllParkedExcept(1));
    REQUIRE_FALSE(sleeper.Returned());

    work.store(1);
    idle.Notify();
    REQUIRE(sleeper.WaitReturned());
    sleeper.Join();
    REQUIRE_FALSE(idle.IsParked(0));
    REQUIRE(idle.Searching(0));
    REQUIRE(idle.NumSearching() == 1);
    // As a searcher it spun first (when told to), then looked once more after
    // announcing itself: each look is one WorkVisible call.
    REQUIRE(sleeper.Hooks.WorkVisibleCalls.load() == (spin ? ftl::detail::kSpinRounds : 0u) + 1u);
    REQUIRE(sleeper.Hooks.SeenParked.load() == 1); // only the re-check ran after the announcement
    // With PollNs() == 0 Poll runs at the re-check only, never while asleep.
    REQUIRE(sleeper.Hooks.PollCalls.load() == 1);
    REQUIRE(sleeper.Hooks.StopIdlingCalls.load() == 1);
    REQUIRE(sleeper.Hooks.WrongBehavior.load() == 0);
}

TEST_CASE("IdleState: Notify wakes no one while a searcher exists", "[internal][idle]") {
    IdleState idle;
    idle.Init(2, true, true);
    std::atomic<int> work{0};
    // The test thread stands for two searchers: worker 0 is refused (two
    // already search), so it parks without spinning: a look for work to
    // take, one for any work (it would spin while it saw work it held back
    // from), and the re-check.
    idle.AddClaimedSearcher();
    idle.AddClaimedSearcher();
    Sleeper sleeper(idle, 0, &work);
    REQUIRE(sleeper.WaitAsleep());
    REQUIRE(sleeper.Hooks.WorkVisibleCalls.load() == 3);
    REQUIRE(idle.NumSearching() == 2);
    REQUIRE(idle.IsParked(0));

    work.store(1);
    idle.Notify();
    REQUIRE(idle.IsParked(0)); // not claimed: the searcher finds the work
    idle.Notify(0);
    REQUIRE(idle.IsParked(0));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    REQUIRE_FALSE(sleeper.Returned());

    REQUIRE_FALSE(idle.StopSearching());
    idle.Notify();
    REQUIRE(idle.IsParked(0));     // one searcher is enough
    REQUIRE(idle.StopSearching()); // the last searcher
    idle.Notify();
    REQUIRE(sleeper.WaitReturned());
    sleeper.Join();
    REQUIRE(idle.Searching(0));
    REQUIRE(idle.NumSearching() == 1);
    REQUIRE_FALSE(idle.IsParked(0));
}

TEST_CASE("IdleState: Notify claims the preferred worker, then the lowest parked one", "[internal][idle]") {
    IdleState idle;
    idle.Init(3, true, false);
    std::atomic<int> work{0};
    // Worker 2 finds the work gone when it wakes: FoundWork as the last
    // searcher with no work visible wakes no one.
    Sleeper s0(idle, 0, &work);
    Sleeper s1(idle, 1, &work);
    Sleeper s2(idle, 2, &work, [&idle](TestHooks &hooks) { idle.FoundWork(2, hooks); });
    REQUIRE(s0.WaitAsleep());
    REQUIRE(s1.WaitAsleep());
    REQUIRE(s2.WaitAsleep());
    REQUIRE(idle.NumSearching() == 0);

    idle.Notify(2);
    REQUIRE(s2.WaitReturned());
    s2.Join();
    REQUIRE(idle.IsParked(0));
    REQUIRE(idle.IsParked(1));
    REQUIRE_FALSE(idle.IsParked(2));
    REQUIRE(idle.NumSearching() == 0);
    REQUIRE_FALSE(idle.Searching(2));
    REQUIRE(s2.Hooks.WorkVisibleCalls.load() == 2); // the re-check and FoundWork's look

    // A preferred worker that is not parked: the lowest parked one instead.
    idle.Notify(2);
    REQUIRE(s0.WaitReturned());
    s0.Join();
    REQUIRE(idle.IsParked(1));
    REQUIRE_FALSE(s1.Returned());
    REQUIRE(idle.NumSearching() == 1);

    // Worker 0 searches now: a Notify wakes no one; WakeAll wakes the rest.
    idle.Notify();
    REQUIRE(idle.IsParked(1));
    idle.WakeAll();
    REQUIRE(s1.WaitReturned());
    s1.Join();
    REQUIRE(idle.NumSearching() == 2);
    REQUIRE(idle.Searching(0));
    REQUIRE(idle.Searching(1));
    REQUIRE(idle.ClaimAny() == -1);
}

TEST_CASE("IdleState: the last searcher to find work wakes the next worker while work is visible",
          "[internal][idle]") {
    IdleState idle;
    idle.Init(3, true, false);
    std::atomic<int> work{0};
    std::atomic<unsigned> taken{0};
    // Each woken worker takes one unit of work, then reports FoundWork.
    auto takeOne = [&](unsigned self) {
        return [&, self](TestHooks &hooks) {
            if (work.fetch_sub(1) > 0) {
                taken.fetch_add(1);
            }
            idle.FoundWork(self, hooks);
        };
    };
    Sleeper s0(idle, 0, &work, takeOne(0));
    Sleeper s1(idle, 1, &work, takeOne(1));
    Sleeper s2(idle, 2, &work, takeOne(2));
    REQUIRE(s0.WaitAsleep());
    REQUIRE(s1.WaitAsleep());
    REQUIRE(s2.WaitAsleep());

    // Two units: Notify wakes worker 0, which takes one and, seeing one more,
    // wakes worker 1, which takes it and wakes no one. Worker 2 sleeps on.
    work.store(2);
    idle.Notify();
    REQUIRE(s0.WaitReturned());
    REQUIRE(s1.WaitReturned());
    s0.Join();
    s1.Join();
    REQUIRE(taken.load() == 2);
    REQUIRE(work.load() == 0);
    REQUIRE(idle.NumSearching() == 0);
    REQUIRE_FALSE(idle.Searching(0));
    REQUIRE_FALSE(idle.Searching(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    REQUIRE(idle.IsParked(2));
    REQUIRE_FALSE(s2.Returned());

    idle.NotifyOne(2);
    REQUIRE(s2.WaitReturned());
    s2.Join();
    REQUIRE(taken.load() == 2); // nothing left for it
    REQUIRE(idle.NumSearching() == 0);
}

TEST_CASE("IdleState: NotifyOne wakes only that worker, even while a searcher exists", "[internal][idle]") {
    IdleState idle;
    idle.Init(3, true, false);
    Sleeper s0(idle, 0);
    Sleeper s1(idle, 1);
    Sleeper s2(idle, 2);
    REQUIRE(s0.WaitAsleep());
    REQUIRE(s1.WaitAsleep());
    REQUIRE(s2.WaitAsleep());
    idle.AddClaimedSearcher(); // a searcher does not stop NotifyOne

    idle.NotifyOne(1);
    REQUIRE(s1.WaitReturned());
    s1.Join();
    REQUIRE(idle.IsParked(0));
    REQUIRE(idle.IsParked(2));
    REQUIRE(idle.Searching(1));
    REQUIRE(idle.NumSearching() == 2);
    // A worker that is not parked: nothing happens.
    idle.NotifyOne(1);
    REQUIRE(idle.IsParked(0));
    REQUIRE(idle.IsParked(2));
    REQUIRE(idle.NumSearching() == 2);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    REQUIRE_FALSE(s0.Returned());
    REQUIRE_FALSE(s2.Returned());

    idle.WakeAll();
    REQUIRE(s0.WaitReturned());
    REQUIRE(s2.WaitReturned());
    s0.Join();
    s2.Join();
    REQUIRE(idle.NumSearching() == 4);
    REQUIRE(idle.ClaimAny() == -1);
}

TEST_CASE("IdleState: workers beyond the first bitmap word park and are woken", "[internal][idle]") {
    IdleState idle;
    idle.Init(130, true, false);
    // Worker 70 finds no work when woken: FoundWork ends its search.
    Sleeper low(idle, 70, nullptr, [&idle](TestHooks &hooks) { idle.FoundWork(70, hooks); });
    Sleeper high(idle, 129);
    REQUIRE(low.WaitAsleep());
    REQUIRE(high.WaitAsleep());
    REQUIRE(idle.IsParked(70));
    REQUIRE(idle.IsParked(129));
    idle.Notify();
    REQUIRE(low.WaitReturned());
    low.Join();
    REQUIRE(idle.IsParked(129));
    REQUIRE_FALSE(idle.Searching(70));
    REQUIRE(idle.NumSearching() == 0);
    idle.Notify();
    REQUIRE(high.WaitReturned());
    high.Join();
    REQUIRE(idle.Searching(129));
    REQUIRE(idle.NumSearching() == 1);
}

TEST_CASE("IdleState: work seen at the re-check ends Idle without a sleep", "[internal][idle]") {
    IdleState idle;
    idle.Init(2, true, false);
    TestHooks hooks;
    hooks.Idle = &idle;

    bool work = false;
    SECTION("work visible") {
        hooks.VisibleFromCall = 1;
        idle.Idle(0, EmptyQueueBehavior::Sleep, hooks);
        REQUIRE(hooks.StopIdlingCalls.load() == 0);
        work = true;
    }
    SECTION("the hooks say stop") {
        hooks.StopFromCall = 1;
        idle.Idle(0, EmptyQueueBehavior::Sleep, hooks);
        REQUIRE(hooks.StopIdlingCalls.load() == 1);
        REQUIRE(hooks.WrongBehavior.load() == 0);
    }
    // It announced itself, looked once, took its bit back and did not sleep.
    REQUIRE(hooks.WorkVisibleCalls.load() == 1);
    REQUIRE(hooks.SeenParked.load() == 1);
    REQUIRE(hooks.PollCalls.load() == 1);
    REQUIRE(hooks.PollNsCalls.load() == 0);
    REQUIRE_FALSE(idle.IsParked(0));
    // It stopped searching when it announced itself, and was not claimed.
    // For work it saw, it searches again (the chain goes on from it when it
    // finds that work); told to stop, it does not.
    REQUIRE(idle.Searching(0) == work);
    REQUIRE(idle.NumSearching() == (work ? 1u : 0u));
}

TEST_CASE("IdleState: a searcher that sees work while spinning returns before parking", "[internal][idle]") {
    IdleState idle;
    idle.Init(2, true, true);
    TestHooks hooks;
    hooks.Idle = &idle;
    hooks.VisibleFromCall = 3;
    idle.Idle(0, EmptyQueueBehavior::Sleep, hooks);
    REQUIRE(hooks.WorkVisibleCalls.load() == 3);
    REQUIRE(hooks.SeenParked.load() == 0);
    REQUIRE(hooks.PollCalls.load() == 0);
    REQUIRE_FALSE(idle.IsParked(0));
    REQUIRE(idle.Searching(0));
    REQUIRE(idle.NumSearching() == 1);
    // Then FoundWork: the last searcher; work is visible, but no one is parked.
    idle.FoundWork(0, hooks);
    REQUIRE_FALSE(idle.Searching(0));
    REQUIRE(idle.NumSearching() == 0);
    REQUIRE(hooks.WorkVisibleCalls.load() == 4);
    // FoundWork of a worker that is not searching does nothing.
    idle.FoundWork(0, hooks);
    REQUIRE(hooks.WorkVisibleCalls.load() == 4);
    REQUIRE(idle.NumSearching() == 0);
}

TEST_CASE("IdleState: a worker claimed before its re-check wakes as a searcher without sleeping",
          "[internal][idle]") {
    IdleState idle;
    idle.Init(2, true, false);
    TestHooks hooks;
    hooks.Idle = &idle;
    std::atomic<int> claimed{-2};
    // A waker's claim lands between the announcement and the re-check.
    hooks.OnFirstPoll = [&] { claimed.store(idle.ClaimAny()); };
    bool const visible = GENERATE(true, false);
    INFO("work visible at the re-check " << visible);
    hooks.VisibleFromCall = visible ? 1 : 0;
    idle.Idle(0, EmptyQueueBehavior::Sleep, hooks);
    REQUIRE(claimed.load() == 0);
    REQUIRE(hooks.PollNsCalls.load() == 0); // never reached a wait
    REQUIRE_FALSE(idle.IsParked(0));
    REQUIRE(idle.Searching(0));
    REQUIRE(idle.NumSearching() == 1);
}

TEST_CASE("IdleState: a sleeping worker whose PollNs is not 0 wakes that often to Poll", "[internal][idle]") {
    IdleState idle;
    idle.Init(2, true, false);
    TestHooks hooks;
    hooks.Idle = &idle;
    hooks.PollInterval = 1000 * 1000; // 1 ms
    std::atomic<bool> returned{false};
    std::thread worker([&] {
        idle.Idle(0, EmptyQueueBehavior::Sleep, hooks);
        returned.store(true);
    });
    // One Poll at the re-check, then one after every timed wait.
    bool const polled =
        SpinUntil([&] { return hooks.PollCalls.load() >= 6; }, std::chrono::milliseconds(5000));
    bool const stillParked = idle.IsParked(0);
    bool const stillIdle = !returned.load();
    idle.Notify();
    worker.join();
    REQUIRE(polled);
    REQUIRE(stillParked); // the timed waits did not unpark it
    REQUIRE(stillIdle);
    REQUIRE(hooks.PollNsCalls.load() >= hooks.PollCalls.load() - 1);
    // Each poll is followed by one look for work (a poll may make some).
    REQUIRE(hooks.WorkVisibleCalls.load() >= 6);
    REQUIRE(hooks.WorkVisibleCalls.load() <= hooks.PollCalls.load());
    REQUIRE(idle.Searching(0));
    REQUIRE(idle.NumSearching() == 1);
    REQUIRE_FALSE(idle.IsParked(0));
}

TEST_CASE("IdleState: a poll that makes work ends the sleep without a waker", "[internal][idle]") {
    IdleState idle;
    idle.Init(2, true, false);
    TestHooks hooks;
    hooks.Idle = &idle;
    hooks.PollInterval = 1000 * 1000; // 1 ms
    hooks.VisibleFromCall = 4;        // the third poll after the re-check "fires a timer"
    std::atomic<bool> returned{false};
    std::thread worker([&] {
        idle.Idle(0, EmptyQueueBehavior::Sleep, hooks);
        returned.store(true);
    });
    bool const left = SpinUntil([&] { return returned.load(); }, std::chrono::milliseconds(5000));
    if (!left) {
        idle.Notify();
    }
    worker.join();
    REQUIRE(left);
    REQUIRE(hooks.WorkVisibleCalls.load() == 4);
    REQUIRE(hooks.PollCalls.load() == 4);
    REQUIRE_FALSE(idle.IsParked(0));
    // As at the re-check: it saw the work itself, so no one claimed it, and
    // it leaves as a searcher (the chain goes on from it).
    REQUIRE(idle.Searching(0));
    REQUIRE(idle.NumSearching() == 1);
}

TEST_CASE("IdleState: Spin and Yield look for work without parking", "[internal][idle]") {
    EmptyQueueBehavior const behavior = GENERATE(EmptyQueueBehavior::Spin, EmptyQueueBehavior::Yield);
    INFO("behaviour " << static_cast<int>(behavior));
    IdleState idle;
    idle.Init(2, true, true);
    TestHooks hooks;
    hooks.Idle = &idle;
    hooks.Expected = behavior;

    SECTION("until work is visible") {
        hooks.VisibleFromCall = 5;
        idle.Idle(0, behavior, hooks);
        REQUIRE(hooks.WorkVisibleCalls.load() == 5);
        REQUIRE(hooks.StopIdlingCalls.load() == 4);
        REQUIRE(hooks.PollCalls.load() == 4);
    }
    SECTION("until the hooks say stop") {
        hooks.StopFromCall = 3;
        idle.Idle(0, behavior, hooks);
        REQUIRE(hooks.WorkVisibleCalls.load() == 3);
        REQUIRE(hooks.StopIdlingCalls.load() == 3);
        REQUIRE(hooks.PollCalls.load() == 2);
    }
    REQUIRE(hooks.WrongBehavior.load() == 0);
    REQUIRE(hooks.SeenParked.load() == 0);
    REQUIRE(hooks.PollNsCalls.load() == 0);
    REQUIRE_FALSE(idle.IsParked(0));
    // It became a searcher and still is one.
    REQUIRE(idle.Searching(0));
    REQUIRE(idle.NumSearching() == 1);
}

TEST_CASE("IdleState: the adaptive spin stops after spins that missed and comes back after a short sleep",
          "[internal][idle]") {
    bool const adaptive = GENERATE(true, false);
    INFO("adaptive spin " << adaptive);
    IdleState idle;
    idle.Init(2, true, true, adaptive);
    std::atomic<int> work{0};
    // Each spin round's look takes 250 us, so a spin lasts at least 16 ms: a
    // wake right after the worker falls asleep ends well within it, and a
    // sleep of twice the spin plus 5 ms does not.
    auto const lookDelay = std::chrono::microseconds(250);
    unsigned const spinLooks = ftl::detail::kSpinRounds;
    std::uint64_t const minSpinNs = spinLooks * 250000ull;
    // One Idle call on worker 0: it spins (or not), parks, sleeps `longSleep`
    // or not at all, and is woken by Notify. Returns the looks it made.
    auto idleOnce = [&](bool longSleep) {
        Sleeper sleeper(idle, 0, &work, nullptr, lookDelay);
        REQUIRE(sleeper.WaitAsleep());
        if (longSleep) {
            std::uint64_t const spinNs = idle.LastSpinNs(0);
            std::this_thread::sleep_for(std::chrono::nanoseconds(2 * spinNs) + std::chrono::milliseconds(5));
        }
        work.store(1);
        idle.Notify();
        REQUIRE(sleeper.WaitReturned());
        sleeper.Join();
        work.store(0);
        REQUIRE(idle.Searching(0)); // claimed: it idles next time as a searcher
        return sleeper.Hooks.WorkVisibleCalls.load();
    };

    // Two spins that miss, each followed by a long sleep.
    REQUIRE(idle.SpinsBeforePark(0));
    REQUIRE(idleOnce(true) == spinLooks + 1); // the spin, then the re-check
    REQUIRE(idle.LastSpinNs(0) >= minSpinNs);
    REQUIRE(idle.SpinsBeforePark(0));
    REQUIRE(idleOnce(true) == spinLooks + 1);
    REQUIRE(idle.SpinsBeforePark(0) == !adaptive);
    if (!adaptive) {
        // Off: it spins whatever the sleeps.
        REQUIRE(idleOnce(true) == spinLooks + 1);
        REQUIRE(idle.SpinsBeforePark(0));
        return;
    }
    // Then it parks at once: one look for work to take, one for any work,
    // then the re-check. A long sleep keeps it so.
    REQUIRE(idleOnce(true) == 3);
    REQUIRE_FALSE(idle.SpinsBeforePark(0));
    // A sleep that ends within a spin's length brings the spin back.
    REQUIRE(idleOnce(false) == 3);
    REQUIRE(idle.SpinsBeforePark(0));
    // One miss, then a spin that finds work: the count of misses starts over,
    // so one more miss leaves the spin on.
    REQUIRE(idleOnce(true) == spinLooks + 1);
    REQUIRE(idle.SpinsBeforePark(0));
    {
        TestHooks hooks;
        hooks.Idle = &idle;
        hooks.VisibleFromCall = 3;
        idle.Idle(0, EmptyQueueBehavior::Sleep, hooks);
        REQUIRE(hooks.WorkVisibleCalls.load() == 3);
        REQUIRE_FALSE(idle.IsParked(0));
    }
    REQUIRE(idleOnce(true) == spinLooks + 1);
    REQUIRE(idle.SpinsBeforePark(0));
    // A second miss in a row: it parks at once again.
    REQUIRE(idleOnce(true) == spinLooks + 1);
    REQUIRE_FALSE(idle.SpinsBeforePark(0));
    // Work in sight that it holds back from still makes it spin, so that
    // its looks keep the spin's pace: it never announces itself parked.
    // Finding that work says nothing of new work, so the spin stays off.
    {
        TestHooks hooks;
        hooks.Idle = &idle;
        hooks.VisibleFromCall = 1;
        hooks.HeldBackSpinLooks = 10;
        idle.Idle(0, EmptyQueueBehavior::Sleep, hooks);
        REQUIRE(hooks.SpinLookCalls.load() == 11); // the look before the spin, then 10 rounds
        REQUIRE(hooks.WorkVisibleCalls.load() == 12);
        REQUIRE(hooks.SeenParked.load() == 0);
        REQUIRE_FALSE(idle.IsParked(0));
        REQUIRE(idle.Searching(0));
    }
    REQUIRE_FALSE(idle.SpinsBeforePark(0));
}

TEST_CASE("IdleState: the adaptive spin learns the gaps a waker ends soon, up to a bound",
          "[internal][idle]") {
    // The default bound, a lower one (MaxIdleSpinMicros = 120: still longer
    // than the spin's rounds) and 0: no learning, as with the adaptive spin
    // off.
    struct Case {
        bool Adaptive;
        std::uint64_t MaxNs;
    };
    Case const c = GENERATE(Case{true, ftl::detail::kMaxSpinNs}, Case{false, ftl::detail::kMaxSpinNs},
                            Case{true, 120 * 1000}, Case{true, 0});
    INFO("adaptive spin " << c.Adaptive << ", bound " << c.MaxNs << " ns");
    IdleState idle;
    idle.Init(2, true, true, c.Adaptive, c.MaxNs);
    std::atomic<int> work{0};
    std::uint64_t const maxNs = c.MaxNs;
    bool const adaptive = c.Adaptive && maxNs > 0;
    unsigned const rounds = ftl::detail::kSpinRounds;
    using Clock = std::chrono::steady_clock;
    // One Idle call on worker 0 with these hooks, woken by Notify `sleep`
    // after it is asleep. Returns the time from before its start to after
    // its return: longer than its idling.
    auto idleOnce = [&](TestHooks &hooks, std::chrono::nanoseconds sleep) {
        hooks.Idle = &idle;
        hooks.Work = &work;
        std::atomic<bool> returned{false};
        auto const start = Clock::now();
        std::thread worker([&] {
            idle.Idle(0, EmptyQueueBehavior::Sleep, hooks);
            returned.store(true);
        });
        bool const ended = SpinUntil([&] { return returned.load() || hooks.PollNsCallsParked.load() >= 1; });
        if (!returned.load()) {
            // On the clock: a sleep may oversleep by more than the bound.
            ftl_test::BusyMicros(
                static_cast<unsigned>(std::chrono::duration_cast<std::chrono::microseconds>(sleep).count()));
            work.store(1);
            idle.Notify();
        }
        worker.join();
        auto const outerNs = static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count());
        work.store(0);
        REQUIRE(ended);
        return outerNs;
    };
    // Claims `sleep` after the sleep begins (a sleep with a timeout when
    // `pollInterval` is not 0, as with a timer pending), until one comes
    // within the bound of the start of the idling: on a native build most
    // do, though another test on the same CPUs may delay some.
    auto learn = [&](std::uint64_t pollInterval, std::chrono::nanoseconds sleep) {
        for (unsigned attempt = 0; attempt < (adaptive ? 200u : 20u); ++attempt) {
            TestHooks hooks;
            hooks.PollInterval = pollInterval;
            std::uint64_t const outerNs = idleOnce(hooks, sleep);
            std::uint64_t const learned = idle.LearnedSpinNs(0);
            if (!adaptive) {
                REQUIRE(learned == 0); // off: the spin is its rounds, whatever the gaps
                continue;
            }
            if (learned == 0) {
                continue;
            }
            CAPTURE(attempt, learned, outerNs, idle.LastSpinNs(0), hooks.SpinLookCalls.load());
            // 1.5 times the idling: less than 1.5 times the outside view,
            // more than 1.5 times its spin (when it spun).
            REQUIRE(learned <= maxNs);
            REQUIRE(learned <= outerNs + outerNs / 2);
            if (hooks.SpinLookCalls.load() >= rounds) {
                REQUIRE(learned >= std::min(maxNs, idle.LastSpinNs(0) + idle.LastSpinNs(0) / 2));
            }
            REQUIRE(idle.SpinsBeforePark(0));
            return learned;
        }
        return std::uint64_t(0);
    };
    bool const slowHost = ftl_test::kSlowBuild;
    // A sleep that a timer's poll ends, no waker: the look after the
    // `polls`-th poll sees work. Returns the spin's looks.
    auto pollEnded = [&](unsigned polls, std::uint64_t pollInterval) {
        TestHooks hooks;
        hooks.Idle = &idle;
        hooks.PollInterval = pollInterval;
        // The spin's looks, the re-check, then one look after each poll.
        hooks.VisibleFromCall = rounds + 1 + polls;
        std::atomic<bool> returned{false};
        std::thread worker([&] {
            idle.Idle(0, EmptyQueueBehavior::Sleep, hooks);
            returned.store(true);
        });
        bool const left = SpinUntil([&] { return returned.load(); });
        if (!left) {
            idle.Notify();
        }
        worker.join();
        REQUIRE(left);
        REQUIRE(hooks.PollCalls.load() == 1 + polls);
        return hooks.SpinLookCalls.load();
    };

    // Such a sleep teaches nothing: the timed wait is on time without a spin.
    REQUIRE(pollEnded(2, 20 * 1000) == rounds);
    REQUIRE(idle.LearnedSpinNs(0) == 0);

    std::uint64_t const learned = learn(0, std::chrono::nanoseconds(0));
    if (!adaptive) {
        return;
    }
    if (learned == 0) {
        // Under a sanitizer, an emulator or Wine no claim may come that soon.
        REQUIRE(slowHost);
        return;
    }
    // The next spin lasts that long; a sleep longer than the bound then
    // drops what it learned, and the spin is its rounds again.
    {
        TestHooks hooks;
        idleOnce(hooks, std::chrono::nanoseconds(maxNs) + std::chrono::milliseconds(5));
        CAPTURE(learned, hooks.SpinLookCalls.load());
        REQUIRE(idle.LastSpinNs(0) >= learned);
        REQUIRE(hooks.SpinLookCalls.load() >= rounds);
        REQUIRE(idle.LearnedSpinNs(0) == 0);
        REQUIRE(idle.SpinsBeforePark(0));
    }
    // A claim that ends a sleep with a timeout (a timer pending) teaches too.
    if (learn(1000 * 1000 * 1000, std::chrono::nanoseconds(0)) == 0) {
        REQUIRE(slowHost);
        return;
    }
    // A timer due before the learned spin would end stops it after its
    // rounds (the spin does not poll)...
    REQUIRE(pollEnded(1, 1) == rounds);
    // ...and one due later does not. A claim 100 us into the sleep teaches
    // at least 150 us, well past the rounds' length (a claim right after a
    // park without a spin may teach less than it); the rounds may still be
    // held up: a few tries. Under the lower bound a claim 150 us into the
    // sleep teaches nothing.
    if (maxNs < ftl::detail::kMaxSpinNs) {
        learn(0, std::chrono::microseconds(150));
        REQUIRE(idle.LearnedSpinNs(0) == 0);
        return;
    }
    bool extended = false;
    unsigned tries = 0;
    for (unsigned attempt = 0; attempt < 10 && !extended; ++attempt) {
        if (learn(0, std::chrono::microseconds(100)) < 150 * 1000) {
            continue;
        }
        ++tries;
        TestHooks hooks;
        hooks.PollInterval = 1000 * 1000 * 1000; // 1 s
        hooks.VisibleFromCall = rounds + 2;      // the longer spin's second look
        idleOnce(hooks, std::chrono::nanoseconds(0));
        CAPTURE(attempt, hooks.SpinLookCalls.load(), hooks.SeenParked.load());
        extended = hooks.SeenParked.load() == 0 && hooks.SpinLookCalls.load() == rounds + 2;
    }
    CAPTURE(tries);
    REQUIRE((extended || slowHost));
}

TEST_CASE("IdleState: a worker that is not a searcher spins while it sees work it holds back from",
          "[internal][idle]") {
    IdleState idle;
    idle.Init(2, true, true);
    // Two searchers already (the most a pool of two admits): worker 0 cannot.
    REQUIRE(idle.TryBecomeSearcher());
    REQUIRE(idle.TryBecomeSearcher());
    SECTION("work held back for 10 looks: it spins, and never announces itself parked") {
        TestHooks hooks;
        hooks.Idle = &idle;
        hooks.VisibleFromCall = 1;
        hooks.HeldBackSpinLooks = 10;
        idle.Idle(0, EmptyQueueBehavior::Sleep, hooks);
        REQUIRE(hooks.SpinLookCalls.load() == 11);
        REQUIRE(hooks.SeenParked.load() == 0);
        REQUIRE_FALSE(idle.Searching(0));
    }
    SECTION("work it can take at once: one look, no spin") {
        TestHooks hooks;
        hooks.Idle = &idle;
        hooks.VisibleFromCall = 1;
        idle.Idle(0, EmptyQueueBehavior::Sleep, hooks);
        REQUIRE(hooks.SpinLookCalls.load() == 1);
        REQUIRE(hooks.WorkVisibleCalls.load() == 1);
        REQUIRE(hooks.SeenParked.load() == 0);
    }
    REQUIRE_FALSE(idle.IsParked(0));
    REQUIRE(idle.NumSearching() == 2);
}
