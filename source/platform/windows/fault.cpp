// Faults on Windows: a vectored exception handler for access violations and
// stack overflows, which runs on the faulting stack in the part the system
// keeps back for it (the stack guarantee).
#include "platform/fault.h"

#include "platform/windows/win32.h"

namespace ftl {
namespace detail {

namespace {

// Room for the handler and the explainer's report (WriteFile) once a stack
// has overflowed.
constexpr ULONG kStackGuarantee = 32 * 1024;

void *g_handler = nullptr;

// The address the explainer is asked about: the access for a violation, the
// stack pointer for an overflow (which the system raises at the guard page,
// near where the stack pointer is).
bool FaultAddress(EXCEPTION_POINTERS const *info, std::uintptr_t &address) {
    EXCEPTION_RECORD const *record = info->ExceptionRecord;
    switch (record->ExceptionCode) {
    case EXCEPTION_STACK_OVERFLOW:
#if defined(_M_ARM64) || defined(__aarch64__)
        address = static_cast<std::uintptr_t>(info->ContextRecord->Sp);
#else
        address = static_cast<std::uintptr_t>(info->ContextRecord->Rsp);
#endif
        return true;
    case EXCEPTION_ACCESS_VIOLATION:
    case EXCEPTION_GUARD_PAGE:
        if (record->NumberParameters >= 2) {
            address = static_cast<std::uintptr_t>(record->ExceptionInformation[1]);
            return true;
        }
        return false;
    default:
        return false;
    }
}

LONG WINAPI OnException(EXCEPTION_POINTERS *info) {
    std::uintptr_t address = 0;
    FaultExplainer const explainer = RegisteredExplainer();
    if (explainer != nullptr && FaultAddress(info, address) && explainer(address)) {
        // The exit code of abort(), without abort's own handlers: the stack
        // has no room for them.
        TerminateProcess(GetCurrentProcess(), 3);
    }
    // Not ours: the next handler, then the program's own, decide.
    return EXCEPTION_CONTINUE_SEARCH;
}

} // namespace

void InstallOsFaultHandler() {
    g_handler = AddVectoredExceptionHandler(1, &OnException);
}

void RemoveOsFaultHandler() {
    if (g_handler != nullptr) {
        RemoveVectoredExceptionHandler(g_handler);
        g_handler = nullptr;
    }
}

void FaultHandlerStack::Enter() {
    // For the thread's own stack; each pool fiber sets its own when it starts
    // (the guarantee belongs to the running fiber).
    ULONG guarantee = kStackGuarantee;
    m_active = SetThreadStackGuarantee(&guarantee) != 0;
}

void FaultHandlerStack::Leave() {
    // A guarantee cannot be lowered again; it stays with the thread.
    m_active = false;
}

void ReserveFaultHandlerStack() {
    ULONG guarantee = kStackGuarantee;
    SetThreadStackGuarantee(&guarantee);
}

} // namespace detail
} // namespace ftl
