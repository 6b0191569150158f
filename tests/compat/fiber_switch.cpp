// The lineage's bare fiber (ftl/fiber.h), as FiberTaskingLib's own fiber
// tests use it: a thread's stack as a default-constructed Fiber, fibers made
// with a stack and moved into place, switches in any order, and the
// floating-point state carried across them.
#include "ftl/fiber.h"

#include "test_support.h"

#include <cfenv>
#include <cstdint>
#include <utility>
#include <vector>

namespace {

constexpr std::size_t kStackSize = 512 * 1024;

struct Ping {
    ftl::Fiber Main;
    ftl::Fiber Other;
    std::uint64_t Value = 0;
    unsigned Rounds = 0;
};

void PingStart(void *arg) {
    auto *ping = static_cast<Ping *>(arg);
    for (;;) {
        ping->Value = ping->Value * 3 + 1;
        ++ping->Rounds;
        ping->Other.SwitchToFiber(&ping->Main);
    }
}

// Six fibers and the thread's own stack take turns in the order of
// `Schedule`; each step applies its fiber's operation to a value the
// fibers share, so any switch to the wrong fiber, or a context restored
// wrong, changes the result.
template <class Number>
struct Ring {
    static constexpr unsigned kFibers = 6;
    ftl::Fiber Main;
    ftl::Fiber Fibers[kFibers];
    std::vector<unsigned> Schedule; // fiber indices, in turn
    std::size_t Step = 0;
    Number Value{};
    // Each fiber's own rounding mode, set once; checked at every one of its turns.
    int Rounding[kFibers] = {};
    unsigned RoundingLost = 0;

    static Number Apply(unsigned fiber, Number value) {
        switch (fiber) {
        case 0:
            return value + 8;
        case 1:
            return value * 3;
        case 2:
            return value + 7;
        case 3:
            return value * 2;
        case 4:
            return value - 5;
        default:
            return value * 5;
        }
    }
};

template <class Number>
struct RingSeat {
    Ring<Number> *Of;
    unsigned Index;
};

template <class Number>
void RingStart(void *arg) {
    auto *seat = static_cast<RingSeat<Number> *>(arg);
    Ring<Number> &ring = *seat->Of;
    unsigned const self = seat->Index;
    if (ring.Rounding[self] != 0) {
        std::fesetround(ring.Rounding[self]);
    }
    for (;;) {
        if (ring.Rounding[self] != 0 && std::fegetround() != ring.Rounding[self]) {
            ++ring.RoundingLost;
        }
        ring.Value = Ring<Number>::Apply(self, ring.Value);
        ++ring.Step;
        ftl::Fiber *next =
            ring.Step == ring.Schedule.size() ? &ring.Main : &ring.Fibers[ring.Schedule[ring.Step]];
        ring.Fibers[self].SwitchToFiber(next);
    }
}

template <class Number>
Number RunRing(Ring<Number> &ring, std::vector<RingSeat<Number>> &seats) {
    for (unsigned i = 0; i < Ring<Number>::kFibers; ++i) {
        seats.push_back(RingSeat<Number>{&ring, i});
    }
    for (unsigned i = 0; i < Ring<Number>::kFibers; ++i) {
        // Moved into place, as the lineage's tests do.
        ring.Fibers[i] = ftl::Fiber(kStackSize, &RingStart<Number>, &seats[i]);
    }
    ring.Main.SwitchToFiber(&ring.Fibers[ring.Schedule[0]]);
    return ring.Value;
}

// 1 2 3 4 5 6 1 5 1 3 2 4 6 4 2 5 3 6 (0-based below), then the thread's stack.
std::vector<unsigned> const kSchedule = {0, 1, 2, 3, 4, 5, 0, 4, 0, 2, 1, 3, 5, 3, 1, 4, 2, 5};

template <class Number>
Number Expected() {
    Number value{};
    for (unsigned fiber : kSchedule) {
        value = Ring<Number>::Apply(fiber, value);
    }
    return value;
}

} // namespace

TEST_CASE("A fiber and the thread's own stack switch back and forth", "[compat][fiber]") {
    Ping ping;
    ping.Other = ftl::Fiber(kStackSize, PingStart, &ping);
    std::uint64_t expected = 0;
    for (unsigned i = 0; i < 100; ++i) {
        ping.Main.SwitchToFiber(&ping.Other);
        expected = expected * 3 + 1;
        REQUIRE(ping.Value == expected);
    }
    REQUIRE(ping.Rounds == 100);
}

TEST_CASE("Six fibers switch among themselves in any order", "[compat][fiber]") {
    Ring<std::uint64_t> ring;
    ring.Schedule = kSchedule;
    std::vector<RingSeat<std::uint64_t>> seats;
    REQUIRE(RunRing(ring, seats) == Expected<std::uint64_t>());
    REQUIRE(ring.Step == kSchedule.size());
}

TEST_CASE("Floating-point values and rounding modes survive fiber switches", "[compat][fiber]") {
    Ring<double> ring;
    ring.Schedule = kSchedule;
    // Half the fibers round upward, half toward zero; none may see another's
    // mode, nor may the thread's stack, which keeps the default.
    for (unsigned i = 0; i < Ring<double>::kFibers; ++i) {
        ring.Rounding[i] = i % 2 == 0 ? FE_UPWARD : FE_TOWARDZERO;
    }
    std::vector<RingSeat<double>> seats;
    REQUIRE(std::fegetround() == FE_TONEAREST);
    double const value = RunRing(ring, seats);
    REQUIRE(std::fegetround() == FE_TONEAREST);
    // Every step is exact in double, whatever the rounding mode.
    REQUIRE(value == Expected<double>());
    REQUIRE(ring.RoundingLost == 0);
}

TEST_CASE("A reset fiber starts again at its new routine", "[compat][fiber]") {
    Ping ping;
    ping.Other = ftl::Fiber(kStackSize, PingStart, &ping);
    ping.Main.SwitchToFiber(&ping.Other);
    REQUIRE(ping.Value == 1);
    struct Second {
        Ping *Of;
        static void Start(void *arg) {
            auto *ping = static_cast<Second *>(arg)->Of;
            for (;;) {
                ping->Value += 100;
                ping->Other.SwitchToFiber(&ping->Main);
            }
        }
    } second{&ping};
    ping.Other.Reset(&Second::Start, &second);
    ping.Main.SwitchToFiber(&ping.Other);
    REQUIRE(ping.Value == 101);
    ping.Main.SwitchToFiber(&ping.Other);
    REQUIRE(ping.Value == 201);
}
