// ftl::Fiber, the lineage's bare fiber (ftl/fiber.h), on the same backends
// as the scheduler's fibers (switch_boost.cpp, switch_win32.cpp): their
// stacks, guards and sanitizer annotations.
#include "ftl/fiber.h"

#include "fiber/fiber.h"
#include "fiber/fiber_pool.h"
#include "ftl/assert.h"
#include "ftl/task_scheduler.h"
#include "platform/platform.h"

#include <utility>

namespace ftl {

struct Fiber::State {
    detail::Fiber Context;
    FiberStartRoutine Routine = nullptr;
    void *Arg = nullptr;
    // The floating-point control state of the thread that made it, which it
    // starts with.
    detail::FpControl Fp{};
    std::size_t StackSize = 0; // 0: a thread's own stack
};

namespace {

// The guard below each stack: the scheduler's default.
constexpr std::size_t kGuardSize = TaskSchedulerInitOptions().FiberStackGuardSize;

// Where a fiber with a stack starts; the message of the first switch into
// it is its State.
[[noreturn]] void LineageEntry(void *message) {
    auto *state = static_cast<Fiber::State *>(message);
    detail::LoadFpControl(state->Fp);
    state->Routine(state->Arg);
    FTL_FATAL("ftl::Fiber: a start routine returned (it must end by switching to another fiber for good)");
}

void MakeStack(Fiber::State &state, std::size_t stackSize) {
    if (!detail::FiberPool::ValidSizes(stackSize, kGuardSize)) {
        FTL_FATAL("ftl::Fiber: a stack of %zu bytes (it must be between %zu and %zu)", stackSize,
                  detail::FiberPool::kMinStackSize, detail::FiberPool::kMaxStackSize);
    }
    state.Fp = detail::SaveFpControl();
    if (!detail::MakeFiberStack(state.Context, 0, stackSize, kGuardSize, &LineageEntry)) {
        FTL_FATAL("ftl::Fiber: the system refused a stack of %zu bytes", stackSize);
    }
    state.StackSize = stackSize;
}

} // namespace

Fiber::Fiber(std::size_t stackSize, FiberStartRoutine startRoutine, void *arg) : m_state(new State) {
    m_state->Routine = startRoutine;
    m_state->Arg = arg;
    MakeStack(*m_state, stackSize);
}

Fiber::Fiber(Fiber &&other) noexcept : m_state(std::exchange(other.m_state, nullptr)) {}

Fiber &Fiber::operator=(Fiber &&other) noexcept {
    std::swap(m_state, other.m_state);
    return *this;
}

Fiber::~Fiber() {
    if (m_state == nullptr) {
        return;
    }
    if (m_state->StackSize != 0) {
        detail::UnmakeFiberStack(m_state->Context);
    } else {
        detail::ReleaseThreadStack(m_state->Context);
    }
    delete m_state;
}

void Fiber::SwitchToFiber(Fiber *fiber) {
    if (fiber == nullptr || fiber->m_state == nullptr) {
        FTL_FATAL("ftl::Fiber::SwitchToFiber: to a fiber with no stack that never ran (%s)",
                  fiber == nullptr ? "nullptr" : "default-constructed");
    }
    if (m_state == nullptr) {
        // A thread's own stack, left for the first time: it becomes this
        // fiber, which can only be resumed on this thread.
        m_state = new State;
        detail::AdoptThreadStack(m_state->Context, 0, false);
    }
    detail::SwitchFiber(&m_state->Context, &fiber->m_state->Context, fiber->m_state);
}

void Fiber::Reset(FiberStartRoutine startRoutine, void *arg) {
    if (m_state == nullptr || m_state->StackSize == 0) {
        FTL_FATAL("ftl::Fiber::Reset on a fiber with no stack of its own");
    }
    m_state->Routine = startRoutine;
    m_state->Arg = arg;
    // A fresh context on a fresh stack: the backends make a context only
    // with its stack.
    detail::UnmakeFiberStack(m_state->Context);
    MakeStack(*m_state, m_state->StackSize);
}

} // namespace ftl
