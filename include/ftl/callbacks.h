// Event callbacks, for profilers and for tests that count what the scheduler
// did. Every callback is optional (nullptr means "not interested") and gets
// EventCallbacks::Context as its first argument. Callbacks run on scheduler
// threads, inside the scheduler: they must not add tasks or wait.
#pragma once

namespace ftl {

using ThreadCreationCallback = void (*)(void *context, unsigned threadCount);
using FiberCreationCallback = void (*)(void *context, unsigned fiberCount);
using ThreadEventCallback = void (*)(void *context, unsigned threadIndex);
using FiberAttachedCallback = void (*)(void *context, unsigned fiberIndex);
using FiberDetachedCallback = void (*)(void *context, unsigned fiberIndex, bool isMidTask);

struct EventCallbacks {
    void *Context = nullptr;

    // Once in Init, after the worker threads were created: the thread count,
    // the thread that called Init included.
    ThreadCreationCallback OnThreadsCreated = nullptr;
    // Once in Init, after the fiber pool was created: the pool's size.
    FiberCreationCallback OnFibersCreated = nullptr;

    // Once per worker thread other than the one that called Init, on that
    // thread, when it starts and when it ends.
    ThreadEventCallback OnWorkerThreadStarted = nullptr;
    ThreadEventCallback OnWorkerThreadEnded = nullptr;

    // A fiber starts or stops running on a thread. Every attach is matched by
    // one detach by the time the scheduler is destroyed. isMidTask is true when
    // the fiber leaves because its task waits (a counter, a Fibtex) and parks.
    // Indices are in [0, fiber count), so a profiler can index arrays by them:
    // the thread that called Init runs as fiber 0 (attached in Init, detached
    // in the destructor); each other worker thread attaches one pool fiber
    // when it starts and detaches the fiber it runs when it ends. A wait that
    // finishes without parking (it ran the counter's own tasks itself while
    // it waited) reports nothing.
    FiberAttachedCallback OnFiberAttached = nullptr;
    FiberDetachedCallback OnFiberDetached = nullptr;

    // Not in the lineage: the fiber pool ran dry and grew to fiberCount fibers
    // (FiberPoolPolicy::Grow).
    FiberCreationCallback OnFiberPoolGrown = nullptr;
};

} // namespace ftl
