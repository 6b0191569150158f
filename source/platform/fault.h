// Turning a fault into a clear message: the handler for SIGSEGV and SIGBUS.
//
// A fault is offered to the explainer the scheduler registers. If the
// explainer recognises it (a fiber's stack overflowing into its guard page),
// it writes its report with the async-signal-safe writers below, and the
// process aborts. Any other fault is handed to the handler that was installed
// before ours. The handler runs on an alternate signal stack (AltSignalStack):
// the faulting stack has no room left.
#pragma once

#include <cstdint>

namespace ftl {
namespace detail {

// Called in the signal handler with the faulting address (si_addr); returns
// true, having written its report, when the fault is its to report.
using FaultExplainer = bool (*)(std::uintptr_t address);

// Process-wide; reference-counted across live schedulers, which all register
// the same explainer.
void InstallFaultHandler(FaultExplainer explainer);
void RemoveFaultHandler();

// Async-signal-safe output to stderr, for explainers.
void FaultWrite(char const *text);
void FaultWriteNumber(unsigned long long value);

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
