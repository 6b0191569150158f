// The fiber switch on the Win32 fiber API: CreateFiberEx makes each pool
// fiber and its stack, ConvertThreadToFiberEx makes a thread's own stack a
// fiber, SwitchToFiber switches. The backend of Windows builds without
// Boost.Context (FTL_FIBER_BACKEND=win32), such as MinGW-w64 cross builds.
//
// A system fiber may resume on another thread than the one it left: the
// system keeps the stack bounds and the exception chain in the fiber and
// loads them into the thread at each switch.
#include "fiber/fiber.h"

#include "ftl/assert.h"
#include "platform/fault.h"
#include "platform/platform.h"

#include "platform/windows/win32.h"

namespace ftl {
namespace detail {

namespace {

// Whether the calling thread was made a fiber here (and is turned back at
// the end); a thread that already was one stays one.
thread_local bool t_convertedThread = false;

// The message of the switch that resumed `self`. The system fiber saves and
// loads the rest (the left fiber's context needs no saving here).
void *Arrive(Fiber *self) {
    return self->Incoming;
}

// Where every pool fiber starts: learns its stack's bounds, then runs the
// entry with the first switch's message.
void WINAPI FiberStart(void *parameter) {
    LoadNewFiberFpControl();
    auto *const self = static_cast<Fiber *>(parameter);
    MEMORY_BASIC_INFORMATION region{};
    if (VirtualQuery(&region, &region, sizeof(region)) != 0) {
        auto const base = reinterpret_cast<std::uintptr_t>(region.AllocationBase);
        self->StackLow = region.AllocationBase;
        self->StackFloor = base + kSystemStackGuardBytes;
    }
    ReserveFaultHandlerStack();
    void *const message = Arrive(self);
    self->Entry(message);
    FTL_FATAL("fiber %u: its entry function returned", self->Index);
}

} // namespace

bool MakeFiberStack(Fiber &fiber, unsigned index, std::size_t stackSize, std::size_t /*guardSize*/,
                    FiberEntry entry) {
    // Reserved in full, committed as it grows; the system rounds the
    // reservation up to its allocation granularity. The guard pages and the
    // guarantee come out of the reservation, so it gets room for them on top.
    // The system's guard is what guards these stacks: Windows compilers probe
    // every page of a frame larger than one (__chkstk), so no frame steps
    // over it, and FiberStackGuardSize is not used.
    void *handle =
        CreateFiberEx(0, stackSize + kSystemStackGuardBytes, FIBER_FLAG_FLOAT_SWITCH, &FiberStart, &fiber);
    if (handle == nullptr) {
        return false;
    }
    fiber.Mapping = handle;
    fiber.Context = handle;
    fiber.StackLow = nullptr; // learned when it first runs (FiberStart)
    fiber.StackSize = stackSize;
    fiber.StackFloor = 0;
    DescribePoolFiber(fiber, index, entry);
    return true;
}

void UnmakeFiberStack(Fiber &fiber) {
    if (fiber.Mapping != nullptr) {
        DeleteFiber(fiber.Mapping);
        fiber.Mapping = nullptr;
        fiber.Context = nullptr;
    }
}

void AdoptThreadStack(Fiber &fiber, unsigned index, bool reported) {
    DescribeThreadFiber(fiber, index, reported);
    if (IsThreadAFiber()) {
        // GetCurrentFiber reads the TEB through a gs-relative load that
        // GCC 12's -Warray-bounds takes for an access to address 0x20.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Warray-bounds"
        fiber.Context = GetCurrentFiber();
#pragma GCC diagnostic pop
        t_convertedThread = false;
    } else {
        fiber.Context = ConvertThreadToFiberEx(&fiber, FIBER_FLAG_FLOAT_SWITCH);
        if (fiber.Context == nullptr) {
            FTL_FATAL("ConvertThreadToFiberEx failed (error %lu)", GetLastError());
        }
        t_convertedThread = true;
    }
}

void ReleaseThreadStack(Fiber &fiber) {
    if (t_convertedThread) {
        ConvertFiberToThread();
        t_convertedThread = false;
    }
    fiber.Context = nullptr;
}

void *SwitchFiber(Fiber *from, Fiber *to, void *message) {
    // `to` is not running (the scheduler publishes a fiber only after its
    // switch away completed), so nothing else reads or writes its Incoming.
    to->Incoming = message;
    // The floating-point control state belongs to a fiber. Windows switches
    // it with FIBER_FLAG_FLOAT_SWITCH; Wine does not, so it is carried here
    // too (a few cycles).
    FpControl const fp = SaveFpControl();
    SwitchToFiber(to->Context);
    LoadFpControl(fp);
    // Resumed: possibly much later, possibly on another thread.
    return Arrive(from);
}

StackFault ClassifyFault(Fiber const &fiber, std::uintptr_t address) {
    // A frame larger than a page can jump past the guard's start: faults this
    // far below still count.
    constexpr std::uintptr_t kBelowGuardSlack = 64 * 1024;
    std::uintptr_t const floor = fiber.StackFloor;
    if (floor == 0 || address >= floor) {
        return StackFault::None;
    }
    std::uintptr_t const lowest = floor > kSystemStackGuardBytes + kBelowGuardSlack
                                      ? floor - kSystemStackGuardBytes - kBelowGuardSlack
                                      : 0;
    if (address < lowest) {
        return StackFault::None;
    }
    return fiber.IsThreadFiber ? StackFault::ThreadGuard : StackFault::PoolGuard;
}

} // namespace detail
} // namespace ftl
