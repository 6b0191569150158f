#include "fiber.h"

#include "ftl/assert.h"
#include "ftl/callbacks.h"
#include "platform.h"
#include "scheduler.h"
#include "worker.h"

#include <sys/mman.h>

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

void Fiber::Transition(FiberState from, FiberState to) {
    // Relaxed: each change is ordered by the queue or list hand-off that
    // passes the fiber between threads; the value is for checking only.
    FiberState const was = State.load(std::memory_order_relaxed);
    if (was != from) {
        FTL_FATAL("fiber %u: state change %s -> %s, but it was %s", Index, StateName(from), StateName(to),
                  StateName(was));
    }
    State.store(to, std::memory_order_relaxed);
}

bool CreatePoolFiber(Fiber &fiber, unsigned index, std::size_t stackSize, void (*entry)(ctx::transfer_t)) {
    std::size_t const page = PageSize();
    std::size_t const usable = (stackSize + page - 1) / page * page;
    std::size_t const mappingSize = usable + page; // one guard page below the stack
    void *mapping = mmap(nullptr, mappingSize, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (mapping == MAP_FAILED) {
        return false;
    }
    if (mprotect(mapping, page, PROT_NONE) != 0) {
        munmap(mapping, mappingSize);
        return false;
    }
    fiber.Mapping = mapping;
    fiber.MappingSize = mappingSize;
    fiber.StackLow = static_cast<char *>(mapping) + page;
    fiber.StackSize = usable;
    fiber.StackFloor = reinterpret_cast<std::uintptr_t>(fiber.StackLow);
    fiber.Index = index;
    fiber.IsThreadFiber = false;
    fiber.State.store(FiberState::Free, std::memory_order_relaxed);
    // fcontext stacks grow down from the top address.
    fiber.Context = ctx::make_fcontext(static_cast<char *>(fiber.StackLow) + usable, usable, entry);
#if FTL_TSAN
    fiber.TsanFiber = __tsan_create_fiber(0);
#endif
#if FTL_VALGRIND
    fiber.ValgrindStackId =
        VALGRIND_STACK_REGISTER(fiber.StackLow, static_cast<char *>(fiber.StackLow) + usable);
#endif
    return true;
}

void DestroyPoolFiber(Fiber &fiber) {
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
        munmap(fiber.Mapping, fiber.MappingSize);
        fiber.Mapping = nullptr;
    }
}

void InitThreadFiber(Fiber &fiber, unsigned index, bool reported) {
    fiber.Index = index;
    fiber.IsThreadFiber = true;
    fiber.Reported = reported;
    fiber.StackFloor = ThreadStackFloor();
    fiber.State.store(FiberState::Running, std::memory_order_relaxed);
#if FTL_TSAN
    fiber.TsanFiber = __tsan_get_current_fiber();
#endif
}

void DestroyThreadFiber(Fiber &fiber) {
    fiber.TsanFiber = nullptr;
}

Worker *SwitchFiber(SwitchRecord &record) {
    Fiber *const from = record.From;
    Fiber *const to = record.To;
    EventCallbacks const &callbacks = record.OnWorker->m_scheduler->Callbacks();
    if (callbacks.OnFiberDetached != nullptr && from->Reported) {
        callbacks.OnFiberDetached(callbacks.Context, from->Index, record.Action == AfterSwitch::Park);
    }
#if FTL_ASAN
    // Never nullptr (which would mean "this fiber is finished"): a fiber going
    // back to the pool is only suspended; its loop's frames, and their locals
    // on ASan's fake stack, live on until it is handed out again.
    __sanitizer_start_switch_fiber(&from->AsanFakeStack, to->StackLow, to->StackSize);
#endif
#if FTL_TSAN
    __tsan_switch_to_fiber(to->TsanFiber, 0);
#endif
    ctx::transfer_t const transfer = ctx::jump_fcontext(to->Context, &record);
    // Resumed: possibly much later, possibly on another thread.
    return FinishSwitch(transfer);
}

Worker *FinishSwitch(ctx::transfer_t transfer) {
#if FTL_ASAN
    {
        // First of all: tell ASan which stack we are on now.
        auto *incoming = static_cast<SwitchRecord *>(transfer.data);
        void const *oldLow = nullptr;
        std::size_t oldSize = 0;
        __sanitizer_finish_switch_fiber(incoming->To->AsanFakeStack, &oldLow, &oldSize);
        if (incoming->From->IsThreadFiber && incoming->From->StackLow == nullptr) {
            // A thread's own stack is learned the first time we leave it.
            incoming->From->StackLow = const_cast<void *>(oldLow);
            incoming->From->StackSize = oldSize;
        }
    }
#endif
    // Copy the record: it lives on the stack of the fiber we left, which may
    // run again (elsewhere) as soon as the post-switch step publishes it.
    SwitchRecord const record = *static_cast<SwitchRecord *>(transfer.data);
    Fiber *const self = record.To;
    record.From->Context = transfer.fctx;
    Worker *const worker = record.OnWorker;
    self->CurrentWorker = worker;
    worker->m_currentFiber = self;
    // The attach first: the post-switch step may make this worker count as
    // started, and Init must not return before its first attach is reported.
    EventCallbacks const &callbacks = worker->m_scheduler->Callbacks();
    if (callbacks.OnFiberAttached != nullptr && self->Reported) {
        callbacks.OnFiberAttached(callbacks.Context, self->Index);
    }
    worker->m_scheduler->AfterSwitchStep(record, worker);
    return worker;
}

} // namespace detail
} // namespace ftl
