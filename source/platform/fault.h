// Turning a fault into a clear message: the handler for SIGSEGV and SIGBUS
// (linux/fault.cpp), or a vectored exception handler for access violations
// and stack overflows (windows/fault.cpp).
//
// A fault is offered to the explainer the scheduler registers. If the
// explainer recognises it (a fiber's stack overflowing into its guard),
// it writes its report with the async-signal-safe writers below, and the
// process aborts (on Linux with abort(), so the program's SIGABRT handler
// runs). Any other fault is handed on: to the handler that was installed
// before ours on Linux, to the next handler on Windows. Removing ours puts
// that handler back only while ours is the one installed. The
// handler needs stack of its own (FaultHandlerStack): the faulting stack has
// no room left.
#pragma once

#include <cstdint>

namespace ftl {
namespace detail {

// Called in the handler with the faulting address (si_addr; on Windows the
// address of the access, or the stack pointer for a stack overflow); returns
// true, having written its report, when the fault is its to report.
using FaultExplainer = bool (*)(std::uintptr_t address);

// Process-wide; reference-counted across live schedulers, which all register
// the same explainer.
void InstallFaultHandler(FaultExplainer explainer);
void RemoveFaultHandler();

// Each OS's half (linux/fault.cpp, windows/fault.cpp): puts its handler in
// place and takes it out, under the reference count above; the handler asks
// RegisteredExplainer().
void InstallOsFaultHandler();
void RemoveOsFaultHandler();
FaultExplainer RegisteredExplainer();

// Async-signal-safe output to stderr, for explainers.
void FaultWrite(char const *text);
void FaultWriteNumber(unsigned long long value);

// Per thread: room for the handler to run when the thread's stack is full.
// On Linux an alternate signal stack (Leave restores the thread's previous
// one); on Windows the stack guarantee, the part of a stack the system keeps
// back for the handler of a stack overflow (SetThreadStackGuarantee).
class FaultHandlerStack {
public:
    void Enter();
    void Leave();

private:
    void *m_memory = nullptr;
    bool m_active = false;
    bool m_hadPrevious = false;
    char m_previous[32] = {}; // Linux: a stack_t, kept opaque here
};

// Windows only: the stack guarantee of the running system fiber, which keeps
// its own; switch_win32.cpp calls it as each pool fiber starts.
void ReserveFaultHandlerStack();

} // namespace detail
} // namespace ftl
