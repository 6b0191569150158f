// The Worker's adaptive policies (source/policy/), each checked against its
// header's contract with a clock the test sets:
// - StealPolicy: a steal that paid skips nothing and ends the backoff; one
//   that did not skips 1, 2, 4, ... looks up to kMaxBackoff; tasks worth a
//   core (long enough, enough queued) size the next batch to pay instead of
//   backing off; long steals double the batch up to kMaxBatch; a batch takes
//   at most half the victim's deque; the plain policy (both switches off)
//   always looks and takes one task.
// - NextWakePolicy: a wake judged within kPaysNs was wasted and skips the
//   next 1, 2, 4, ... fills; one that paid ends that; the skips fade once the
//   latest wasted wake is kFadeNs older than the tick start; no second wake
//   while one waits for its judgement; the plain policy never wakes.
// - SpinPolicy: spins that miss, each followed by a longer sleep, stop the
//   spin after kMissLimit; a sleep a spin would have caught brings it back;
//   a claim soon after the idling began teaches a spin of 1.5 times that
//   gap, up to the bound, and a gap past the bound or a longer sleep drops
//   it; a timer's poll teaches nothing; the plain policy always spins.
// - The Fibtex's wait (lock_wait.h): the next start walks down one level
//   after a quiet wait and up one after a hot one, within its bounds; a
//   patient waiter lets a free, retaken lock be until kPatienceNs or
//   kMaxLooks, never one the holder stopped retaking; a waiter's beat is
//   fresh within kBeatNs, or 4 of its gaps up to kBeatMaxNs.
// - GlobalIntervalPolicy: the interval follows the moving average of an
//   item's time, within its bounds; the plain policy keeps kFixedInterval;
//   the figure for thieves is the lower of the tick's own and the average.
#include "policy/global_interval.h"
#include "policy/lock_wait.h"
#include "policy/next_wake.h"
#include "policy/spin.h"
#include "policy/steal.h"
#include "test_support.h"

#include <algorithm>
#include <atomic>
#include <cstdint>

using ftl::detail::GlobalIntervalPolicy;
using ftl::detail::LockBackoff;
using ftl::detail::LockHandOff;
using ftl::detail::LockPatience;
using ftl::detail::NextWakePolicy;
using ftl::detail::SpinPolicy;
using ftl::detail::StealPolicy;

namespace {

// Counts the looks a policy lets through out of `looks`, at time `now`.
unsigned LooksAllowed(StealPolicy &policy, std::uint64_t now, unsigned looks) {
    unsigned allowed = 0;
    for (unsigned i = 0; i < looks; ++i) {
        allowed += policy.MayLook([now] { return now; }) ? 1u : 0u;
    }
    return allowed;
}

} // namespace

TEST_CASE("Steals that do not pay back off exponentially, up to the cap", "[policy]") {
    StealPolicy policy;
    policy.Init(true, true);
    std::atomic<std::uint64_t> victimNs{20}; // tiny tasks: not worth a core
    std::uint64_t now = 1000000;
    unsigned expected = 1;
    for (unsigned round = 0; round < 10; ++round) {
        policy.Stole(now, 1, 1000, &victimNs);
        now += StealPolicy::kWorthwhileNs / 2;
        // The first look judges the steal, then skips.
        CHECK(LooksAllowed(policy, now, expected) == 0);
        CHECK(policy.Skip() == 0);
        CHECK(LooksAllowed(policy, now, 1) == 1);
        expected = expected * 2 > StealPolicy::kMaxBackoff ? StealPolicy::kMaxBackoff : expected * 2;
        CHECK(policy.Batch() == StealPolicy::kMinBatch);
    }
    // A steal that paid ends the backoff at once.
    policy.Stole(now, 1, 1000, &victimNs);
    now += StealPolicy::kWorthwhileNs;
    CHECK(LooksAllowed(policy, now, 5) == 5);
    policy.Stole(now, 1, 1000, &victimNs);
    now += 10;
    CHECK(LooksAllowed(policy, now, 2) == 1); // the level starts over from one
}

TEST_CASE("Short steals of tasks worth a core size the next batch instead of backing off", "[policy]") {
    StealPolicy policy;
    policy.Init(true, true);
    std::atomic<std::uint64_t> victimNs{StealPolicy::kStealableTaskNs};
    std::int64_t const backlog =
        static_cast<std::int64_t>(StealPolicy::kStealableBacklogNs / victimNs.load());
    std::uint64_t now = 1000000;
    policy.Stole(now, 1, backlog, &victimNs);
    now += 200; // 200 ns for one task
    CHECK(LooksAllowed(policy, now, 3) == 3);
    // A batch that would have paid: 1000 / 200 + 1 = 6 tasks.
    CHECK(policy.Batch() == 6);
    CHECK(policy.MoreToTake(1000) == 5);
    // Half the deque at most.
    CHECK(policy.MoreToTake(4) == 1);
    CHECK(policy.MoreToTake(1) == 0);
    // A backlog too small is not worth a core: back to one, and a skip.
    policy.Stole(now, 6, backlog - 1, &victimNs);
    now += 300;
    CHECK(LooksAllowed(policy, now, 1) == 0);
    CHECK(policy.Batch() == StealPolicy::kMinBatch);
}

TEST_CASE("Long steals double the batch up to its cap", "[policy]") {
    StealPolicy policy;
    policy.Init(true, true);
    std::atomic<std::uint64_t> victimNs{1000};
    std::uint64_t now = 1000000;
    unsigned expected = StealPolicy::kMinBatch;
    for (unsigned round = 0; round < 10; ++round) {
        policy.Stole(now, policy.Batch(), 10000, &victimNs);
        now += StealPolicy::kLongNs;
        CHECK(LooksAllowed(policy, now, 1) == 1);
        expected = expected * 2 > StealPolicy::kMaxBatch ? StealPolicy::kMaxBatch : expected * 2;
        CHECK(policy.Batch() == expected);
    }
    CHECK(policy.MoreToTake(10000) == StealPolicy::kMaxBatch - 1);
}

TEST_CASE("The plain steal policy always looks and takes one task", "[policy]") {
    StealPolicy policy;
    policy.Init(false, false);
    std::atomic<std::uint64_t> victimNs{1};
    for (unsigned round = 0; round < 5; ++round) {
        policy.Stole(1000 + round, 1, 100, &victimNs);
        CHECK(LooksAllowed(policy, 1000 + round + 1, 4) == 4);
        CHECK(policy.MoreToTake(100) == 0);
    }
    // Backoff off, batching on: batches grow, looks never skip.
    policy.Init(false, true);
    policy.Stole(1000, 1, 100, &victimNs);
    CHECK(LooksAllowed(policy, 1000 + StealPolicy::kLongNs, 4) == 4);
    CHECK(policy.MoreToTake(100) == 1);
}

TEST_CASE("Wasted next-slot wakes back off, and a wake that paid ends that", "[policy]") {
    NextWakePolicy policy;
    policy.Init(true);
    std::uint64_t now = 10 * NextWakePolicy::kFadeNs;
    auto clock = [&now] { return now; };
    unsigned expected = 1;
    for (unsigned round = 0; round < 4; ++round) {
        REQUIRE(policy.WantsWake(now, clock));
        policy.Woke(now);
        // No second wake while the first may still be looking.
        CHECK_FALSE(policy.WantsWake(now, clock));
        now += NextWakePolicy::kPaysNs / 2;
        policy.AtSchedulingPoint(clock); // wasted
        for (unsigned i = 0; i < expected; ++i) {
            CHECK_FALSE(policy.WantsWake(now, clock));
        }
        expected *= 2;
    }
    // A wake that paid (judged at a fill kPaysNs later) ends the backoff.
    REQUIRE(policy.WantsWake(now, clock));
    policy.Woke(now);
    now += NextWakePolicy::kPaysNs;
    CHECK(policy.WantsWake(now, clock));
    CHECK(policy.Skip() == 0);
}

TEST_CASE("The next-slot wake backoff fades after a quiet millisecond", "[policy]") {
    NextWakePolicy policy;
    policy.Init(true);
    std::uint64_t now = 10 * NextWakePolicy::kFadeNs;
    auto clock = [&now] { return now; };
    for (unsigned round = 0; round < 5; ++round) { // levels 1, 2, 4, 8, 16
        unsigned skipped = 0;
        while (!policy.WantsWake(now, clock)) {
            ++skipped;
        }
        CHECK(skipped == (round == 0 ? 0u : 1u << (round - 1)));
        policy.Woke(now);
        now += 10;
        policy.AtSchedulingPoint(clock);
    }
    std::uint64_t const wastedAt = now;
    CHECK(policy.Skip() == 16);
    CHECK_FALSE(policy.WantsWake(wastedAt, clock)); // a tick that started before the fade
    CHECK(policy.Skip() == 15);
    CHECK(policy.WantsWake(wastedAt + NextWakePolicy::kFadeNs, clock));
    CHECK(policy.Skip() == 0);
    // The plain policy never wakes.
    NextWakePolicy plain;
    plain.Init(false);
    CHECK_FALSE(plain.WantsWake(now, clock));
}

TEST_CASE("The global queue's interval follows the item time within its bounds", "[policy]") {
    GlobalIntervalPolicy policy;
    policy.Init(true);
    CHECK(policy.Interval() == GlobalIntervalPolicy::kLatencyNs / GlobalIntervalPolicy::kInitialAvgNs);
    // Ticks of 128 items of 1 us each: the average converges to 1 us, and
    // the interval to its cap (1 ms / 1 us = 1000 > 255).
    std::uint64_t shared = 0;
    for (unsigned i = 0; i < 100; ++i) {
        shared = policy.TickEnded(128 * 1000, 128);
    }
    CHECK(policy.AvgItemNs() >= 1000);
    CHECK(policy.AvgItemNs() < 1100);
    CHECK(policy.Interval() == GlobalIntervalPolicy::kMaxInterval);
    CHECK(shared == 1000); // the tick's own figure, below the average
    // Items of 1 ms: the interval falls to its floor.
    for (unsigned i = 0; i < 100; ++i) {
        shared = policy.TickEnded(1000000, 1);
    }
    CHECK(policy.Interval() == GlobalIntervalPolicy::kMinInterval);
    CHECK(shared == policy.AvgItemNs()); // the average, below the tick's own
    // Items of 40 us: 1 ms / 40 us = 25.
    for (unsigned i = 0; i < 200; ++i) {
        policy.TickEnded(40000, 1);
    }
    CHECK(policy.Interval() == 25);
    // A tick of zero time still leaves an average of at least 1 ns.
    for (unsigned i = 0; i < 300; ++i) {
        policy.TickEnded(0, 128);
    }
    CHECK(policy.AvgItemNs() == 1);

    GlobalIntervalPolicy plain;
    plain.Init(false);
    plain.TickEnded(1000000, 1);
    CHECK(plain.Interval() == GlobalIntervalPolicy::kFixedInterval);
}

TEST_CASE("Spins that keep missing stop until a sleep a spin would have caught", "[policy]") {
    bool const adaptive = GENERATE(true, false);
    CAPTURE(adaptive);
    SpinPolicy policy;
    policy.Init(adaptive, ftl::detail::kMaxSpinNs);
    std::uint64_t now = 1000000000;
    // An idling of a 20 us spin and a 1 ms sleep a timer's poll ended, twice.
    for (unsigned i = 0; i < SpinPolicy::kMissLimit; ++i) {
        REQUIRE(policy.Spins());
        policy.IdleBegan(now);
        now += 20000;
        policy.SpinMissed(20000);
        now += 1000000;
        policy.SleptFor(now, 1000000, false);
    }
    CHECK(policy.Spins() == !adaptive);
    CHECK(policy.LastSpinNs() == 20000);
    // A park without a spin, whose sleep a spin would have caught.
    policy.IdleBegan(now);
    now += 15000;
    policy.SleptFor(now, 15000, false);
    CHECK(policy.Spins());
    // A spin that finds work counts as a hit.
    policy.IdleBegan(now);
    policy.SpinMissed(20000);
    policy.SleptFor(now + 2000000, 2000000, false);
    policy.SpinCaught();
    CHECK(policy.Spins());
    CHECK(policy.LearnedNs() == 0);
}

TEST_CASE("A claim soon after idling began teaches the spin that gap and half again", "[policy]") {
    std::uint64_t const bound = GENERATE(std::uint64_t{200000}, std::uint64_t{50000});
    CAPTURE(bound);
    SpinPolicy policy;
    policy.Init(true, bound);
    std::uint64_t now = 1000000000;
    policy.IdleBegan(now);
    now += 30000; // claimed 30 us after the idling began
    policy.SleptFor(now, 10000, true);
    CHECK(policy.LearnedNs() == std::min<std::uint64_t>(bound, 45000));
    // A timer's poll teaches nothing and keeps what was learned when the
    // sleep was no longer than the spin.
    policy.SpinMissed(45000);
    policy.IdleBegan(now);
    now += 40000;
    policy.SleptFor(now, 30000, false);
    CHECK(policy.LearnedNs() == std::min<std::uint64_t>(bound, 45000));
    // A gap past the bound drops it.
    policy.IdleBegan(now);
    now += bound + 1;
    policy.SleptFor(now, bound, true);
    CHECK(policy.LearnedNs() == 0);
    // The plain policy learns nothing.
    SpinPolicy plain;
    plain.Init(false, bound);
    plain.IdleBegan(now);
    plain.SleptFor(now + 1000, 1000, true);
    CHECK(plain.LearnedNs() == 0);
}

TEST_CASE("A Fibtex wait starts one level below a quiet wait's and above a hot one's", "[policy]") {
    CHECK(LockBackoff::NextStart(5, false) == 4);
    CHECK(LockBackoff::NextStart(0, false) == 0);
    CHECK(LockBackoff::NextStart(5, true) == 6);
    CHECK(LockBackoff::NextStart(LockBackoff::kMaxHotLevel, true) == LockBackoff::kMaxHotLevel);
    // Hot waits climb to the hot cap and no further; quiet ones walk down.
    unsigned level = 0;
    for (unsigned i = 0; i < 20; ++i) {
        level = LockBackoff::NextStart(level, true);
    }
    CHECK(level == LockBackoff::kMaxHotLevel);
    CHECK(LockBackoff::MaxLevelFrom(level) == LockBackoff::kMaxHotLevel);
    CHECK(LockBackoff::MaxLevelFrom(2) == LockBackoff::kMaxLevel);
}

TEST_CASE("A patient Fibtex waiter lets a relocking holder keep the lock for a bounded time", "[policy]") {
    std::uint64_t now = 1000000;
    auto clock = [&now] { return now; };
    std::uint32_t acquisitions = 100;
    LockPatience patience(acquisitions);
    // Free, but nobody took it since: the holder stopped. Take it.
    CHECK_FALSE(patience.LetsBe(acquisitions, true, clock));
    // Retaken since, and free now: let it be.
    CHECK(patience.LetsBe(++acquisitions, true, clock));
    // Retaken but held: the look would fail anyway.
    CHECK_FALSE(patience.LetsBe(++acquisitions, false, clock));
    // Until the patience is over.
    now += LockPatience::kPatienceNs - 1;
    CHECK(patience.LetsBe(++acquisitions, true, clock));
    now += 1;
    CHECK_FALSE(patience.LetsBe(++acquisitions, true, clock));
    // The bound in looks, with a clock that never moves.
    LockPatience counted(0);
    unsigned let = 0;
    for (std::uint32_t i = 1; i <= 2 * LockPatience::kMaxLooks; ++i) {
        let += counted.LetsBe(i, true, [] { return std::uint64_t{5}; }) ? 1u : 0u;
    }
    CHECK(let == LockPatience::kMaxLooks);
}

TEST_CASE("A Fibtex waiter that asked is handed the lock only while its beat is fresh", "[policy]") {
    std::uint64_t const beat = 1000000;
    CHECK(LockHandOff::BeatFresh(beat + LockHandOff::kBeatNs - 1, beat, 0));
    CHECK_FALSE(LockHandOff::BeatFresh(beat + LockHandOff::kBeatNs, beat, 0));
    // Beats further apart (an emulator): 4 of its gaps.
    CHECK(LockHandOff::BeatFresh(beat + 39999, beat, 10000));
    CHECK_FALSE(LockHandOff::BeatFresh(beat + 40000, beat, 10000));
    // A gap that spans a preemption counts up to kBeatMaxNs only.
    CHECK_FALSE(LockHandOff::BeatFresh(beat + LockHandOff::kBeatMaxNs, beat, 10000000));
}
