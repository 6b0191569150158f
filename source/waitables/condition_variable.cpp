// ConditionVariable.
//
// Why a notify cannot slip between giving the Fibtex up and waiting: the
// waiter's node goes on the list first and the Fibtex is released after, in
// one step (for a fiber: in its post-switch step, once it is off its stack;
// for a thread: before it blocks). A notifier that changed the state under
// the Fibtex took it after that release, so it finds the node on the list.
// A notify takes nodes off under the list's lock and then wakes them; a
// timed-out waiter's Cancel takes its node off under the same lock, so
// exactly one of them ends each wait (the timers' rule, scheduler/timers.h).
#include "ftl/condition_variable.h"

#include "ftl/assert.h"
#include "scheduler/scheduler.h"
#include "scheduler/timers.h"
#include "scheduler/wait.h"
#include "wait/wait_list.h"
#include "waitables/fibtex_ops.h"

namespace ftl {
namespace detail {

class ConditionVariableOps {
public:
    // What a waiter's registration needs: on the waiter's stack, which stays
    // put until the node is on the list.
    struct Wait {
        ConditionVariable *Variable;
        Fibtex *Mutex;
    };

    static bool Register(void *waitPtr, WaitNode *node) {
        auto *wait = static_cast<Wait *>(waitPtr);
        // Copied out: once the node is on the list, a notify may end the wait
        // and the waiter's stack (with *wait) moves on.
        Fibtex *const mutex = wait->Mutex;
        bool linked;
        {
            WaitListGuard guard(wait->Variable->m_waiters);
            node->Registered = true;
            linked = !node->Expired;
            if (linked) {
                Append(wait->Variable->m_waiters, node);
            } else {
                node->TimedOut = true; // the deadline passed while we were switching away
            }
        }
        FibtexOps::ReleaseFor(*mutex);
        return linked;
    }

    static bool Cancel(void *variablePtr, WaitNode *node) {
        auto *variable = static_cast<ConditionVariable *>(variablePtr);
        WaitListGuard guard(variable->m_waiters);
        if (Remove(variable->m_waiters, node)) {
            node->TimedOut = true;
            return true;
        }
        if (!node->Registered) {
            node->Expired = true; // the registration, still to come, ends the wait
        }
        return false;
    }

    static void Wake(ConditionVariable &variable, bool all) {
        WaitNode *chain = nullptr;
        {
            WaitListGuard guard(variable.m_waiters);
            if (all) {
                chain = variable.m_waiters.Head;
                for (WaitNode *node = chain; node != nullptr; node = node->Next) {
                    node->Linked = false;
                }
                variable.m_waiters.Head = nullptr;
                variable.m_waiters.Tail = nullptr;
            } else {
                chain = PopFront(variable.m_waiters);
            }
        }
        if (chain == nullptr) {
            return; // nobody waits: the variable is not touched again
        }
        Scheduler *scheduler = Scheduler::Of(variable.m_taskScheduler);
        while (chain != nullptr) {
            // Read before the wake: the node lives on the waiter's stack.
            WaitNode *next = chain->Next;
            WakeWaiter(scheduler, chain, Readier::TaskThatGoesOn);
            chain = next;
        }
    }
};

} // namespace detail

ConditionVariable::ConditionVariable(TaskScheduler *taskScheduler) : m_taskScheduler(taskScheduler) {
    if (taskScheduler == nullptr) {
        FTL_FATAL("ConditionVariable needs a TaskScheduler");
    }
}

ConditionVariable::~ConditionVariable() {
    detail::WaitListGuard guard(m_waiters);
    if (m_waiters.Head != nullptr) {
        FTL_FATAL("a ConditionVariable was destroyed while tasks or threads wait on it");
    }
}

std::uint64_t ConditionVariable::DeadlineAfter(std::chrono::nanoseconds timeout) {
    return detail::DeadlineAfter(timeout);
}

void ConditionVariable::notify_one() {
    detail::ConditionVariableOps::Wake(*this, false);
}

void ConditionVariable::notify_all() {
    detail::ConditionVariableOps::Wake(*this, true);
}

void ConditionVariable::wait(std::unique_lock<Fibtex> &lock) {
    WaitUntil(lock, 0);
}

bool ConditionVariable::WaitUntil(std::unique_lock<Fibtex> &lock, std::uint64_t deadline) {
    Fibtex *const mutex = lock.mutex();
    if (mutex == nullptr || !lock.owns_lock() || !detail::FibtexOps::HeldByCaller(*mutex)) {
        FTL_FATAL("ConditionVariable::wait needs a unique_lock holding a Fibtex the caller locked");
    }
    detail::Scheduler *scheduler = detail::Scheduler::Of(m_taskScheduler);
    if (scheduler == nullptr) {
        FTL_FATAL("ConditionVariable::wait on a scheduler that is not initialized");
    }
    // The registration releases it for us, after the switch (on another
    // fiber); the lock below takes it again, and counts it again.
    detail::FibtexOps::Disown(*mutex);
    detail::ConditionVariableOps::Wait wait{this, mutex};
    detail::WaitNode node;
    node.Deadline = deadline;
    node.Waitable = this;
    node.Cancel = &detail::ConditionVariableOps::Cancel;
    node.Kind = WaitKind::ConditionVariable;
    node.Object = this;
    detail::Worker *worker = scheduler->CurrentWorkerOfThis();
    bool notified;
    if (worker != nullptr) {
        detail::Park(worker, node, false, &detail::ConditionVariableOps::Register, &wait);
        notified = !node.TimedOut;
    } else {
        notified = detail::WaitOnThread(node, &detail::ConditionVariableOps::Register, &wait);
    }
    // The registration gave the Fibtex up for us; the unique_lock still
    // says it owns it, and now it does again.
    mutex->lock();
    return notified;
}

} // namespace ftl
