// The choices TaskSchedulerInitOptions (ftl/task_scheduler.h) offers that
// the scheduler's parts read on their own: what an idle worker does, and
// what happens when the fiber pool runs dry.
#pragma once

namespace ftl {

// What a worker does when it finds no work.
enum class EmptyQueueBehavior {
    Spin,  // keep looking, never yield the core: lowest latency, one core busy per worker
    Yield, // keep looking, yielding the core between searches
    Sleep, // look briefly, then park until work arrives: an idle scheduler costs ~0% CPU
};

// What happens when a fiber must be taken from the pool and none is free.
enum class FiberPoolPolicy {
    Grow,  // allocate more fibers and report it through EventCallbacks::OnFiberPoolGrown, up to
           // 64 x FiberPoolSize (at least 65,536) or, on Linux, what vm.max_map_count allows
           // (two mappings a fiber, 28,669 fibers at its default), then abort with a message
    Fatal, // abort with a message naming the pool size
};

} // namespace ftl
