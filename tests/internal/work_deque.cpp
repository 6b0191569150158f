// WorkDeque (source/queue/work_deque.h), checked against its header's
// contract: the owner pushes and pops at the bottom (newest first), any thread
// steals at the top (oldest first); PushBatch publishes items in order;
// PopBatch takes at most half of what the deque held (at least one, at most
// `max`), newest first, and returns the count; the buffer grows beyond its
// initial capacity without losing an item; LooksEmpty; and, with thieves
// stealing while the owner pushes, pops and grows, every item is taken
// exactly once, whole (a TaskItem's three fields are never torn).
#include "queue/work_deque.h"
#include "platform/platform.h"
#include "queue/task_item.h"
#include "test_support.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <thread>
#include <vector>

using ftl::detail::PointerCell;
using ftl::detail::TaskCell;
using ftl::detail::TaskItem;
using ftl::detail::WorkDeque;

namespace {

using IntDeque = WorkDeque<int *, PointerCell<int *>>;
using TaskDeque = WorkDeque<TaskItem, TaskCell>;

// Items are pointers into a table of ids: the item for id i points at ids[i] == i.
std::vector<int> MakeIds(std::size_t count) {
    std::vector<int> ids(count);
    for (std::size_t i = 0; i < count; ++i) {
        ids[i] = static_cast<int>(i);
    }
    return ids;
}

void TaskA(ftl::TaskScheduler * /*taskScheduler*/, void * /*arg*/) {}
void TaskB(ftl::TaskScheduler * /*taskScheduler*/, void * /*arg*/) {}

// Task items whose three fields all derive from the id, so that a torn item
// (fields from two different pushes) is detected.
class TaskItems {
public:
    explicit TaskItems(std::size_t count) : m_ids(MakeIds(count)), m_counterTags(count) {}

    TaskItem Item(std::size_t id) {
        return TaskItem{id % 2 == 0 ? TaskA : TaskB, &m_ids[id],
                        reinterpret_cast<ftl::TaskCounter *>(&m_counterTags[id])};
    }
    // The item's id, or -1 when its fields do not belong together.
    int IdOf(TaskItem const &item) const {
        if (item.Arg == nullptr) {
            return -1;
        }
        int const id = *static_cast<int const *>(item.Arg);
        auto const index = static_cast<std::size_t>(id);
        bool const whole = id >= 0 && index < m_ids.size() && item.Arg == &m_ids[index] &&
                           item.Function == (index % 2 == 0 ? TaskA : TaskB) &&
                           item.Counter == reinterpret_cast<ftl::TaskCounter const *>(&m_counterTags[index]);
        return whole ? id : -1;
    }
    std::size_t Size() const { return m_ids.size(); }

private:
    std::vector<int> m_ids;
    std::vector<std::uint64_t> m_counterTags;
};

// What one thread took, in the order it took it.
struct Taken {
    std::vector<int> Ids;
    unsigned Torn = 0;
    unsigned OutOfOrder = 0; // a steal older than the previous one, or a batch not newest first
};

// Steals until `done` is set and the deque is then empty. Records ids in order.
void StealUntilDone(TaskDeque &deque, TaskItems const &items, std::atomic<bool> &done, Taken &taken) {
    unsigned misses = 0;
    int last = -1;
    for (;;) {
        bool const finished = done.load(std::memory_order_acquire);
        TaskItem item;
        if (deque.Steal(item)) {
            int const id = items.IdOf(item);
            if (id < 0) {
                ++taken.Torn;
                continue;
            }
            // Top only grows, and an item at a higher index was pushed later:
            // one thief's steals are in push order.
            if (id <= last) {
                ++taken.OutOfOrder;
            }
            last = id;
            taken.Ids.push_back(id);
            misses = 0;
            continue;
        }
        if (finished) {
            return;
        }
        if (++misses % 64 == 0) {
            std::this_thread::yield();
        }
    }
}

// Checks that every id in [0, count) was taken exactly once over all takers.
void RequireEachTakenOnce(std::vector<Taken> const &takers, std::size_t count) {
    std::vector<unsigned> times(count, 0);
    std::size_t total = 0;
    unsigned torn = 0;
    unsigned outOfOrder = 0;
    for (Taken const &taken : takers) {
        total += taken.Ids.size();
        torn += taken.Torn;
        outOfOrder += taken.OutOfOrder;
        for (int id : taken.Ids) {
            ++times[static_cast<std::size_t>(id)];
        }
    }
    REQUIRE(torn == 0);
    REQUIRE(outOfOrder == 0);
    REQUIRE(total == count);
    auto const lost = static_cast<std::size_t>(std::count(times.begin(), times.end(), 0u));
    auto const once = static_cast<std::size_t>(std::count(times.begin(), times.end(), 1u));
    REQUIRE(lost == 0);
    REQUIRE(once == count);
}

// Pops everything left; the ids in pop order.
std::vector<int> PopAll(IntDeque &deque) {
    std::vector<int> ids;
    int *item = nullptr;
    while (deque.Pop(item)) {
        ids.push_back(*item);
    }
    return ids;
}

std::vector<int> Descending(int from, int downTo) {
    std::vector<int> ids;
    for (int i = from; i >= downTo; --i) {
        ids.push_back(i);
    }
    return ids;
}

} // namespace

TEST_CASE("WorkDeque: the owner pops the newest item, thieves steal the oldest", "[internal][deque]") {
    std::vector<int> ids = MakeIds(10);
    IntDeque deque;
    int *item = nullptr;
    REQUIRE_FALSE(deque.Pop(item));
    REQUIRE_FALSE(deque.Steal(item));
    for (int &id : ids) {
        deque.Push(&id);
    }
    std::vector<int> stolen;
    std::vector<int> popped;
    for (int i = 0; i < 5; ++i) {
        REQUIRE(deque.Steal(item));
        stolen.push_back(*item);
        REQUIRE(deque.Pop(item));
        popped.push_back(*item);
    }
    REQUIRE(stolen == std::vector<int>{0, 1, 2, 3, 4});
    REQUIRE(popped == std::vector<int>{9, 8, 7, 6, 5});
    REQUIRE_FALSE(deque.Pop(item));
    REQUIRE_FALSE(deque.Steal(item));

    // The last item goes to the owner when no thief contests it.
    deque.Push(&ids[3]);
    REQUIRE(deque.Pop(item));
    REQUIRE(item == &ids[3]);
    REQUIRE_FALSE(deque.Pop(item));
}

TEST_CASE("WorkDeque: LooksEmpty follows pushes, pops and steals", "[internal][deque]") {
    std::vector<int> ids = MakeIds(3);
    IntDeque deque(4);
    int *item = nullptr;
    REQUIRE(deque.LooksEmpty());
    deque.Push(&ids[0]);
    REQUIRE_FALSE(deque.LooksEmpty());
    REQUIRE(deque.Pop(item));
    REQUIRE(deque.LooksEmpty());
    deque.Push(&ids[1]);
    deque.Push(&ids[2]);
    REQUIRE(deque.Steal(item));
    REQUIRE(*item == 1);
    REQUIRE_FALSE(deque.LooksEmpty());
    REQUIRE(deque.Steal(item));
    REQUIRE(*item == 2);
    REQUIRE(deque.LooksEmpty());
    // A failed Pop on an empty deque leaves it empty.
    REQUIRE_FALSE(deque.Pop(item));
    REQUIRE(deque.LooksEmpty());
    int *out[4] = {};
    REQUIRE(deque.PopBatch(out, 4) == 0);
    REQUIRE(deque.LooksEmpty());
}

TEST_CASE("WorkDeque grows beyond its initial capacity and keeps every item", "[internal][deque]") {
    std::vector<int> ids = MakeIds(2000);
    int *item = nullptr;

    SECTION("Push, with the top moved on so that the buffer has wrapped") {
        IntDeque deque(3); // rounded up to 4
        for (int i = 0; i < 4; ++i) {
            deque.Push(&ids[static_cast<std::size_t>(i)]);
        }
        REQUIRE(deque.Steal(item));
        REQUIRE(*item == 0);
        REQUIRE(deque.Steal(item));
        REQUIRE(*item == 1);
        // Items 2, 3 sit at indices 2, 3; 4, 5 wrap to cells 0, 1; 6 grows it.
        for (int i = 4; i < 1000; ++i) {
            deque.Push(&ids[static_cast<std::size_t>(i)]);
        }
        std::vector<int> stolen;
        for (int i = 0; i < 10; ++i) {
            REQUIRE(deque.Steal(item));
            stolen.push_back(*item);
        }
        REQUIRE(stolen == std::vector<int>{2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
        REQUIRE(PopAll(deque) == Descending(999, 12));
        REQUIRE(deque.LooksEmpty());
    }

    SECTION("PushBatch of more items than the buffer holds") {
        IntDeque deque(2);
        deque.Push(&ids[0]);
        REQUIRE(deque.Steal(item)); // top and bottom at 1
        deque.PushBatch(1500, [&](std::size_t i) { return &ids[i]; });
        deque.PushBatch(3, [&](std::size_t i) { return &ids[1500 + i]; });
        REQUIRE(deque.Steal(item));
        REQUIRE(*item == 0);
        REQUIRE(PopAll(deque) == Descending(1502, 1));
    }
}

TEST_CASE("WorkDeque PushBatch publishes the made items in order", "[internal][deque]") {
    std::vector<int> ids = MakeIds(16);
    IntDeque deque(8);
    std::vector<std::size_t> calls;
    deque.Push(&ids[0]);
    deque.PushBatch(5, [&](std::size_t i) {
        calls.push_back(i);
        return &ids[1 + i];
    });
    REQUIRE(calls == std::vector<std::size_t>{0, 1, 2, 3, 4});
    deque.PushBatch(0, [&](std::size_t i) {
        calls.push_back(100 + i);
        return &ids[15];
    });
    REQUIRE(calls.size() == 5);
    int *item = nullptr;
    REQUIRE(deque.Steal(item));
    REQUIRE(*item == 0);
    REQUIRE(deque.Steal(item));
    REQUIRE(*item == 1);
    REQUIRE(PopAll(deque) == std::vector<int>{5, 4, 3, 2});
}

TEST_CASE("WorkDeque PopBatch takes at most half, at least one, newest first", "[internal][deque]") {
    struct Case {
        int Held;
        std::size_t Max;
        std::size_t Expected;
    };
    Case const cases[] = {{0, 8, 0},  {1, 8, 1},  {2, 8, 1},    {3, 8, 1},  {4, 8, 2},  {5, 8, 2},
                          {9, 8, 4},  {10, 8, 5}, {10, 3, 3},   {10, 1, 1}, {17, 8, 8}, {100, 8, 8},
                          {16, 8, 8}, {1, 1, 1},  {64, 64, 32}, {3, 100, 1}};
    // `stolen` items are pushed first and stolen, so that the top is not 0
    // and the half is of what the deque holds, not of its bottom index.
    for (int stolen : {0, 3}) {
        for (Case const &c : cases) {
            INFO("held " << c.Held << ", max " << c.Max << ", stolen first " << stolen);
            std::vector<int> ids = MakeIds(static_cast<std::size_t>(stolen + c.Held));
            IntDeque deque(4);
            for (int &id : ids) {
                deque.Push(&id);
            }
            int *item = nullptr;
            for (int i = 0; i < stolen; ++i) {
                REQUIRE(deque.Steal(item));
            }
            std::vector<int *> out(c.Max + 1, nullptr);
            std::size_t const n = deque.PopBatch(out.data(), c.Max);
            REQUIRE(n == c.Expected);
            REQUIRE(out[n] == nullptr); // nothing written past the count
            int const newest = stolen + c.Held - 1;
            for (std::size_t j = 0; j < n; ++j) {
                REQUIRE(*out[j] == newest - static_cast<int>(j));
            }
            // The rest is still there, in order.
            REQUIRE(PopAll(deque) == Descending(newest - static_cast<int>(n), stolen));
        }
    }
}

TEST_CASE("WorkDeque: every item is taken exactly once by the owner and concurrent thieves",
          "[internal][deque]") {
    // The owner pushes (one at a time and in batches) and pops (one at a time
    // and in batches) in random bursts, keeping the deque small so that the
    // last item is often contested, and sometimes lets it fill up so that it
    // grows under the thieves; then drains it.
    unsigned const thieves = GENERATE(1u, 3u);
    std::size_t const count = ftl_test::kThreadSanitizer ? 100000 : 400000;
    TaskItems items(count);
    TaskDeque deque(8);
    std::atomic<bool> done{false};
    std::vector<Taken> takers(thieves + 1);
    std::vector<std::thread> threads;
    for (unsigned t = 1; t <= thieves; ++t) {
        threads.emplace_back([&, t] { StealUntilDone(deque, items, done, takers[t]); });
    }

    Taken &owner = takers[0];
    unsigned popBatchOverMax = 0;
    unsigned emptyAfterFailedPop = 0; // a failed Pop must leave the deque (looking) empty
    std::minstd_rand rng(12345u + thieves);
    std::size_t next = 0;
    TaskItem batch[16];
    auto record = [&](TaskItem const &item) {
        int const id = items.IdOf(item);
        if (id < 0) {
            ++owner.Torn;
        } else {
            owner.Ids.push_back(id);
        }
    };
    auto pop = [&] {
        TaskItem item;
        if (deque.Pop(item)) {
            record(item);
        } else if (!deque.LooksEmpty()) {
            ++emptyAfterFailedPop;
        }
    };
    while (next < count) {
        std::size_t const burst = std::min<std::size_t>(rng() % 100 == 0 ? 300 : 1 + rng() % 6, count - next);
        if (rng() % 2 == 0) {
            deque.PushBatch(burst, [&](std::size_t i) { return items.Item(next + i); });
        } else {
            for (std::size_t i = 0; i < burst; ++i) {
                deque.Push(items.Item(next + i));
            }
        }
        next += burst;
        if (burst > 6) {
            continue; // let the thieves at a full deque
        }
        switch (rng() % 3) {
        case 0:
            pop();
            break;
        case 1: {
            std::size_t const max = 1 + rng() % 16;
            std::size_t const n = deque.PopBatch(batch, max);
            if (n > max) {
                ++popBatchOverMax;
            }
            for (std::size_t j = 0; j < n && j < max; ++j) {
                record(batch[j]);
                // Newest first: ids fall within a batch.
                if (j > 0 && items.IdOf(batch[j]) >= items.IdOf(batch[j - 1])) {
                    ++owner.OutOfOrder;
                }
            }
            break;
        }
        default:
            break;
        }
    }
    for (;;) {
        TaskItem item;
        if (!deque.Pop(item)) {
            if (!deque.LooksEmpty()) {
                ++emptyAfterFailedPop;
            }
            break;
        }
        record(item);
    }
    done.store(true, std::memory_order_release);
    for (std::thread &thread : threads) {
        thread.join();
    }

    REQUIRE(popBatchOverMax == 0);
    REQUIRE(emptyAfterFailedPop == 0);
    std::size_t stolen = 0;
    for (unsigned t = 1; t <= thieves; ++t) {
        stolen += takers[t].Ids.size();
    }
    INFO("stolen " << stolen << " of " << count);
    RequireEachTakenOnce(takers, count);
    REQUIRE(deque.LooksEmpty());
}

TEST_CASE("WorkDeque: the last items go to exactly one of the owner and a thief", "[internal][deque]") {
    // One to three items at a time, after a random short delay (so that
    // either side wins often) drained by the owner's Pop or PopBatch (whose
    // one-item batches always take the contested path) while a spinning
    // thief steals them.
    std::size_t const count = ftl_test::kThreadSanitizer ? 40000 : 400000;
    TaskItems items(count);
    TaskDeque deque(2);
    std::atomic<bool> done{false};
    std::atomic<bool> ready{false};
    std::vector<Taken> takers(2);
    std::thread thief([&] {
        ready.store(true);
        StealUntilDone(deque, items, done, takers[1]);
    });
    while (!ready.load()) {
        std::this_thread::yield();
    }
    unsigned notEmptyAfterFailure = 0; // a failed Pop or an empty batch must leave the deque empty
    unsigned batchTooBig = 0;
    auto record = [&](TaskItem const &item) {
        int const id = items.IdOf(item);
        if (id < 0) {
            ++takers[0].Torn;
        } else {
            takers[0].Ids.push_back(id);
        }
    };
    std::minstd_rand rng(777);
    // ThreadSanitizer slows the thief's Steal far more than a pause.
    unsigned const maxDelay = ftl_test::kThreadSanitizer ? 4096 : 256;
    std::size_t next = 0;
    for (unsigned round = 0; next < count; ++round) {
        std::size_t const burst = std::min<std::size_t>(1 + round % 3, count - next);
        for (std::size_t i = 0; i < burst; ++i) {
            deque.Push(items.Item(next++));
        }
        for (unsigned k = static_cast<unsigned>(rng() % maxDelay); k > 0; --k) {
            ftl::detail::CpuRelax();
        }
        TaskItem item;
        if (round / 3 % 2 == 0) {
            while (deque.Pop(item)) {
                record(item);
            }
        } else {
            TaskItem batch[4];
            for (;;) {
                std::size_t const n = deque.PopBatch(batch, 4);
                if (n == 0) {
                    break;
                }
                batchTooBig += n > 1 ? 1u : 0u; // half of at most three items, but one
                for (std::size_t j = 0; j < n && j < 4; ++j) {
                    record(batch[j]);
                }
            }
        }
        notEmptyAfterFailure += deque.LooksEmpty() ? 0u : 1u;
    }
    done.store(true, std::memory_order_release);
    thief.join();
    INFO("the thief took " << takers[1].Ids.size() << " of " << count);
    REQUIRE(batchTooBig == 0);
    REQUIRE(notEmptyAfterFailure == 0);
    RequireEachTakenOnce(takers, count);
}

TEST_CASE("WorkDeque: thieves steal while the owner grows the buffer", "[internal][deque]") {
    // A fresh deque of capacity 2 each round, filled to 512 items (eight
    // growths) while two thieves, already waiting for the round, steal from
    // it; then the owner drains it.
    struct Round {
        TaskDeque Deque{2};
        std::atomic<bool> Done{false};
    };
    unsigned const rounds = ftl_test::kThreadSanitizer ? 100 : 400;
    std::size_t const perRound = 512;
    TaskItems items(rounds * perRound);
    std::vector<std::unique_ptr<Round>> state;
    for (unsigned r = 0; r < rounds; ++r) {
        state.push_back(std::make_unique<Round>());
    }
    std::atomic<unsigned> started{0};
    std::vector<Taken> takers(3);
    auto thief = [&](Taken &taken) {
        for (unsigned r = 0; r < rounds; ++r) {
            while (started.load(std::memory_order_acquire) <= r) {
                std::this_thread::yield();
            }
            StealUntilDone(state[r]->Deque, items, state[r]->Done, taken);
        }
    };
    std::thread first(thief, std::ref(takers[1]));
    std::thread second(thief, std::ref(takers[2]));
    for (unsigned r = 0; r < rounds; ++r) {
        TaskDeque &deque = state[r]->Deque;
        started.store(r + 1, std::memory_order_release);
        std::size_t const base = r * perRound;
        for (std::size_t i = 0; i < perRound; ++i) {
            deque.Push(items.Item(base + i));
        }
        TaskItem item;
        while (deque.Pop(item)) {
            int const id = items.IdOf(item);
            if (id < 0) {
                ++takers[0].Torn;
            } else {
                takers[0].Ids.push_back(id);
            }
        }
        state[r]->Done.store(true, std::memory_order_release);
    }
    first.join();
    second.join();
    INFO("stolen " << takers[1].Ids.size() + takers[2].Ids.size() << " of " << items.Size());
    RequireEachTakenOnce(takers, items.Size());
}
