#include "fiber/fiber.h"

// What every switch backend shares: the state machine's error report and a
// new fiber's floating-point state.
#include "ftl/assert.h"
#include "platform/platform.h"

namespace ftl {
namespace detail {

namespace {

char const *StateName(FiberState state) {
    switch (state) {
    case FiberState::Free:
        return "Free";
    case FiberState::Running:
        return "Running";
    case FiberState::Waiting:
        return "Waiting";
    case FiberState::Ready:
        return "Ready";
    }
    return "?";
}

} // namespace

namespace {
std::atomic<std::uint64_t> g_newFiberFp{SaveFpControl().Pack()};
} // namespace

void RememberNewFiberFpControl() {
    g_newFiberFp.store(SaveFpControl().Pack(), std::memory_order_relaxed);
}

void LoadNewFiberFpControl() {
    LoadFpControl(FpControl::Unpack(g_newFiberFp.load(std::memory_order_relaxed)));
}

void DescribePoolFiber(Fiber &fiber, unsigned index, FiberEntry entry) {
    fiber.Index = index;
    fiber.Entry = entry;
    fiber.IsThreadFiber = false;
    fiber.State.store(FiberState::Free, std::memory_order_relaxed);
}

void DescribeThreadFiber(Fiber &fiber, unsigned index, bool reported) {
    fiber.Index = index;
    fiber.IsThreadFiber = true;
    fiber.Reported = reported;
    fiber.StackFloor = ThreadStackFloor();
    fiber.State.store(FiberState::Running, std::memory_order_relaxed);
}

void Fiber::BadTransition(FiberState from, FiberState to, FiberState was) const {
    FTL_FATAL("fiber %u: state change %s -> %s, but it was %s", Index, StateName(from), StateName(to),
              StateName(was));
}

} // namespace detail
} // namespace ftl
