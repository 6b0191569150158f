// Fibtex's thread state: each thread's LockThreadState (t_lockThread), which
// the inlined lock and unlock (ftl/detail/lock_thread.h) find at one offset
// from the thread pointer, and the identity of the task that runs on the
// thread, which the scheduler sets at every switch and inline loop.
#pragma once

#include "ftl/detail/lock_thread.h"

namespace ftl {
namespace detail {

#if FTL_INLINE_LOCK_THREAD && !defined(FTL_SHARED_BUILD)
#define FTL_LOCK_THREAD_AT_OFFSET 1
#else
#define FTL_LOCK_THREAD_AT_OFFSET 0
#endif

// t_lockThread is initial-exec where Fibtex's lock finds it from the thread
// pointer: at one offset from it on every thread. Not in a shared library
// (FTL_SHARED_BUILD): one that a plugin loads with dlopen may find no room
// left for initial-exec TLS and fail to load, so there it has the default
// model and the lock calls in for it (unless CheckLockThread finds it in
// static TLS after all). Defined here, so that every user knows it needs no
// dynamic initialization.
#if FTL_LOCK_THREAD_AT_OFFSET
inline thread_local LockThreadState t_lockThread __attribute__((tls_model("initial-exec")));
#else
inline thread_local LockThreadState t_lockThread;
#endif

// Checks, on a thread about to become a worker, that its LockThreadState is
// where Fibtex's inlined lock looks for it (fatal if not), and sets the
// offset the first time.
void CheckLockThread();

// Identifies the running task (or, outside any task, the thread), for
// Fibtex's owner check. Opaque to the optimizer: never kept across a switch.
void const *CurrentTaskIdentity();
// Sets the calling thread's task identity (LockThreadState::Identity): a
// worker's at each switch and inline loop, nullptr when the thread stops
// being a worker. Opaque, like CurrentTaskIdentity.
void SetTaskIdentity(void const *identity);

} // namespace detail
} // namespace ftl
