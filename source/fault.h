// Turning a fiber stack overflow into a clear message.
//
// Every pool fiber's stack has a PROT_NONE guard page below it. A SIGSEGV or
// SIGBUS whose address lies in (or just below) the running fiber's guard page
// is reported on an alternate signal stack (the faulting stack has no room
// left) with the fiber's index and stack size, and the process aborts. Any
// other fault is handed to the handler that was installed before ours.
#pragma once

namespace ftl {
namespace detail {

class Worker;

// Process-wide handler; reference-counted across live schedulers.
void InstallFaultHandler();
void RemoveFaultHandler();

// Per thread: an alternate signal stack for the handler. Restores the
// thread's previous one on Leave.
class AltSignalStack {
public:
    void Enter();
    void Leave();

private:
    void *m_memory = nullptr;
    bool m_active = false;
    bool m_hadPrevious = false;
    char m_previous[32] = {}; // a stack_t, kept opaque here
};

} // namespace detail
} // namespace ftl
