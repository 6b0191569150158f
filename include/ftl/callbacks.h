// Event callbacks, for profilers and for tests that count what the scheduler
// did. Every callback is optional (nullptr means "not interested") and gets
// EventCallbacks::Context as its first argument. Callbacks run on scheduler
// threads, inside the scheduler: they must not add tasks or wait.
#pragma once

namespace ftl {

class TaskCounter;

using ThreadCreationCallback = void (*)(void *context, unsigned threadCount);
using FiberCreationCallback = void (*)(void *context, unsigned fiberCount);
using ThreadEventCallback = void (*)(void *context, unsigned threadIndex);
using FiberAttachedCallback = void (*)(void *context, unsigned fiberIndex);
using FiberDetachedCallback = void (*)(void *context, unsigned fiberIndex, bool isMidTask);

// A task as the task callbacks see it.
struct TaskInfo {
    // The task's function: the Task's function pointer, or for a closure the
    // function that calls it (FunctionName names either).
    void const *Function;
    void *Arg;            // the Task's argument, or the closure's packed state
    TaskCounter *Counter; // the counter it was added with, or nullptr
    unsigned ThreadIndex; // the worker running it now
    unsigned FiberIndex;  // the fiber running it now
};
using TaskCallback = void (*)(void *context, TaskInfo const &task);

// What a parked fiber waits for.
enum class WaitKind {
    Counter,           // a TaskCounter, AtomicFlag or FullAtomicCounter to reach Target
    Fibtex,            // a Fibtex to be unlocked
    ConditionVariable, // a ConditionVariable's notification
    Sleep,             // SleepFor's deadline
    Yield,             // its turn after the work queued on its worker (Yield)
};
// "counter", "fibtex", "condition variable", "sleep", "yield".
char const *WaitKindName(WaitKind kind);

struct WaitInfo {
    WaitKind Kind;
    void const *Object; // the counter, Fibtex or condition variable (null for Sleep and Yield)
    unsigned Target;    // Counter: the value waited for
    unsigned ThreadIndex;
    unsigned FiberIndex;
};
using WaitCallback = void (*)(void *context, WaitInfo const &wait);

// The name of the function at `function` (a TaskInfo's Function, any
// function of the program): demangled, without its parameters; for a
// closure, the closure's type. The string lives as long as the process.
// Reads the program's symbol table the first time: call it from a profiler's
// callback once per function, not once per task, or cache the result.
char const *FunctionName(void const *function);

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
    // when it starts and detaches the fiber it runs when it ends. With
    // either installed, a wait never runs its counter's tasks on its own
    // fiber: it parks, and pool fibers run them, so every fiber that runs a
    // task is reported (it costs a task that waits: the benchmark's W3e).
    FiberAttachedCallback OnFiberAttached = nullptr;
    FiberDetachedCallback OnFiberDetached = nullptr;

    // Not in the lineage: the fiber pool ran dry and grew to fiberCount fibers
    // (FiberPoolPolicy::Grow).
    FiberCreationCallback OnFiberPoolGrown = nullptr;

    // Not in the lineage: a task starts and ends, on the thread running it.
    // A task that waits and resumes on another thread ends there. A task run
    // by a waiting fiber (a wait runs its counter's own tasks) begins and
    // ends inside the waiting task's begin and end.
    TaskCallback OnTaskBegin = nullptr;
    TaskCallback OnTaskEnd = nullptr;
    // A fiber parks in a wait, and runs again (OnWaitEnd, on the thread it
    // resumes on). A wait that never parks (its condition held, or the
    // waiting fiber ran the counter's tasks itself) reports nothing.
    WaitCallback OnWaitBegin = nullptr;
    WaitCallback OnWaitEnd = nullptr;
};

} // namespace ftl
