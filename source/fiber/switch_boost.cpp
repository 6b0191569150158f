// The fiber switch on Boost.Context: stacks from MapStack (a guard below
// each), fcontext jumps, and the sanitizer and valgrind annotations of
// each switch. The backend wherever Boost.Context is installed.
#include "fiber/fiber.h"

#include "ftl/assert.h"
#include "platform/platform.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define FTL_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#define FTL_TSAN 1
#endif

// Valgrind learns each fiber stack, so memcheck does not take a switch for a
// wild stack-pointer move. The client requests cost a few instructions when
// not running under valgrind; without the header they compile to nothing.
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define FTL_VALGRIND 1
#endif
#endif

namespace ctx = boost::context::detail;

namespace ftl {
namespace detail {

namespace {

// What a switch leaves on the stack of the fiber it leaves, for the fiber
// switched to.
struct Jump {
    Fiber *From;
    Fiber *To;
    void *Message;
};

// The receiving half of a switch: tells the sanitizers which stack runs now,
// saves the left fiber's context, returns the message.
void *Arrive(ctx::transfer_t transfer) {
    auto *jump = static_cast<Jump *>(transfer.data);
#if FTL_ASAN
    {
        void const *oldLow = nullptr;
        std::size_t oldSize = 0;
        __sanitizer_finish_switch_fiber(jump->To->AsanFakeStack, &oldLow, &oldSize);
        if (jump->From->IsThreadFiber && jump->From->StackLow == nullptr) {
            // A thread's own stack is learned the first time we leave it.
            jump->From->StackLow = const_cast<void *>(oldLow);
            jump->From->StackSize = oldSize;
        }
    }
#endif
    // Copied before the context is saved: the Jump lives on the left fiber's
    // stack, which may run again once the scheduler publishes that fiber.
    void *const message = jump->Message;
    jump->From->Context = transfer.fctx;
    return message;
}

// The floating-point control state belongs to a fiber. On x86-64 the fcontext
// jump saves and loads it; the arm64 jump keeps only the callee-saved
// registers, so there FPCR is carried here.
#if defined(__aarch64__)
constexpr bool kCarryFpControl = true;
#else
constexpr bool kCarryFpControl = false;
#endif

// Where every pool fiber's context starts.
[[noreturn]] void Trampoline(ctx::transfer_t transfer) {
    // Not the state make_fcontext saw, which is that of whichever fiber
    // happened to make this one.
    LoadNewFiberFpControl();
    Fiber *const self = static_cast<Jump *>(transfer.data)->To;
    void *const message = Arrive(transfer);
    self->Entry(message);
    FTL_FATAL("fiber %u: its entry function returned", self->Index);
}

} // namespace

bool MakeFiberStack(Fiber &fiber, unsigned index, std::size_t stackSize, std::size_t guardSize,
                    FiberEntry entry) {
    StackMemory stack;
    if (!MapStack(stackSize, guardSize, stack)) {
        return false;
    }
    std::size_t const usable = stack.Size;
    fiber.Mapping = stack.Mapping;
    fiber.MappingSize = stack.MappingSize;
    fiber.StackLow = stack.Low;
    fiber.StackSize = usable;
    fiber.StackFloor = reinterpret_cast<std::uintptr_t>(fiber.StackLow);
    DescribePoolFiber(fiber, index, entry);
    // fcontext stacks grow down from the top address.
    fiber.Context = ctx::make_fcontext(static_cast<char *>(fiber.StackLow) + usable, usable, &Trampoline);
#if FTL_TSAN
    fiber.TsanFiber = __tsan_create_fiber(0);
#endif
#if FTL_VALGRIND
    fiber.ValgrindStackId =
        VALGRIND_STACK_REGISTER(fiber.StackLow, static_cast<char *>(fiber.StackLow) + usable);
#endif
    return true;
}

void UnmakeFiberStack(Fiber &fiber) {
#if FTL_TSAN
    if (fiber.TsanFiber != nullptr) {
        __tsan_destroy_fiber(fiber.TsanFiber);
        fiber.TsanFiber = nullptr;
    }
#endif
    if (fiber.Mapping != nullptr) {
#if FTL_VALGRIND
        VALGRIND_STACK_DEREGISTER(fiber.ValgrindStackId);
#endif
#if FTL_ASAN
        // A fiber freed while suspended leaves its frames' redzones poisoned;
        // a later mapping at the same address must not inherit them.
        __asan_unpoison_memory_region(fiber.StackLow, fiber.StackSize);
#endif
        UnmapStack(fiber.Mapping, fiber.MappingSize);
        fiber.Mapping = nullptr;
    }
}

void AdoptThreadStack(Fiber &fiber, unsigned index, bool reported) {
    DescribeThreadFiber(fiber, index, reported);
#if FTL_TSAN
    fiber.TsanFiber = __tsan_get_current_fiber();
#endif
}

void ReleaseThreadStack(Fiber &fiber) {
    fiber.TsanFiber = nullptr;
}

void *SwitchFiber(Fiber *from, Fiber *to, void *message) {
    Jump jump{from, to, message};
#if FTL_ASAN
    // Never nullptr (which would mean "this fiber is finished"): a fiber going
    // back to the pool is only suspended; its loop's frames, and their locals
    // on ASan's fake stack, live on until it is handed out again.
    __sanitizer_start_switch_fiber(&from->AsanFakeStack, to->StackLow, to->StackSize);
#endif
#if FTL_TSAN
    __tsan_switch_to_fiber(to->TsanFiber, 0);
#endif
    FpControl const fp = kCarryFpControl ? SaveFpControl() : FpControl{};
    ctx::transfer_t const transfer = ctx::jump_fcontext(to->Context, &jump);
    if (kCarryFpControl) {
        LoadFpControl(fp);
    }
    // Resumed: possibly much later, possibly on another thread.
    return Arrive(transfer);
}

StackFault ClassifyFault(Fiber const &fiber, std::uintptr_t address) {
    // Below a pool fiber's guard lies the gap above another stack, or memory
    // nobody mapped: a fault there is a frame that stepped over the whole
    // guard, so faults this far below the mapping still count.
    constexpr std::uintptr_t kBelowGuardSlack = 64 * 1024;
    // A thread's guard (the kernel's stack guard gap for the main thread,
    // glibc's guard page otherwise) lies below its floor.
    constexpr std::uintptr_t kThreadGuardSlack = 1024 * 1024 + kBelowGuardSlack;
    if (!fiber.IsThreadFiber && fiber.Mapping != nullptr) {
        // The guard is [Mapping, StackLow), of any size (MapStack).
        auto const guardEnd = reinterpret_cast<std::uintptr_t>(fiber.StackLow);
        auto const mappingStart = reinterpret_cast<std::uintptr_t>(fiber.Mapping);
        std::uintptr_t const lowest = mappingStart > kBelowGuardSlack ? mappingStart - kBelowGuardSlack : 0;
        return address >= lowest && address < guardEnd ? StackFault::PoolGuard : StackFault::None;
    }
    std::uintptr_t const floor = fiber.StackFloor;
    if (fiber.IsThreadFiber && floor != 0 && address < floor &&
        address >= floor - (floor > kThreadGuardSlack ? kThreadGuardSlack : floor)) {
        return StackFault::ThreadGuard;
    }
    return StackFault::None;
}

} // namespace detail
} // namespace ftl
