// Fiber: the lineage's bare fiber, a stack and a saved context, for code
// that switches between its own fibers by hand (FiberTaskingLib's
// ftl::Fiber). The TaskScheduler does not use or need it: its fibers are its
// own.
//
// Contract
// - Fiber() stands for the calling thread's own stack: nothing is allocated
//   until it is first switched away from, and it can only be switched back
//   to on that thread.
// - Fiber(stackSize, startRoutine, arg) maps a stack of at least stackSize
//   bytes with an inaccessible guard below it; startRoutine(arg) runs on it
//   the first time a fiber switches to it. The routine must never return:
//   it ends by switching to another fiber for good (a return is a fatal
//   error).
// - from.SwitchToFiber(&to) saves the running context in `from` (which must
//   be the fiber running now) and runs `to` from where it last left off.
// - Reset(startRoutine, arg) makes a fiber with a stack start anew at
//   startRoutine(arg) on its next switch; the fiber must not be running.
// - Moves transfer the stack; copies are not allowed. Destroying a fiber
//   frees its stack: it must not be running, nor be switched to afterwards.
// - The floating-point control state (rounding mode, flush-to-zero) belongs
//   to each fiber: a switch saves and restores it. A new fiber starts with
//   the state of the thread that made it.
// - The sanitizers and valgrind are told of every switch, as for the
//   scheduler's own fibers.
#pragma once

#include <cstddef>

namespace ftl {

// The function a fiber starts at, with the arg given to its constructor.
using FiberStartRoutine = void (*)(void *arg);

class Fiber {
public:
    Fiber() noexcept = default;
    Fiber(std::size_t stackSize, FiberStartRoutine startRoutine, void *arg);
    Fiber(Fiber const &) = delete;
    Fiber &operator=(Fiber const &) = delete;
    Fiber(Fiber &&other) noexcept;
    Fiber &operator=(Fiber &&other) noexcept;
    ~Fiber();

    // Saves the running context in this fiber and runs `fiber`. Returns when
    // another fiber switches back to this one.
    void SwitchToFiber(Fiber *fiber);
    // Starts this fiber anew at startRoutine(arg) on its next switch.
    void Reset(FiberStartRoutine startRoutine, void *arg);

    struct State; // the library's

private:
    State *m_state = nullptr;
};

} // namespace ftl
