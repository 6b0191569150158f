// Faults on Linux: a SIGSEGV/SIGBUS handler on an alternate signal stack.
#include "platform/fault.h"

#include "platform/platform.h"

#include <atomic>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace ftl {
namespace detail {

namespace {

static_assert(sizeof(stack_t) <= 32, "FaultHandlerStack keeps a stack_t in 32 bytes");

constexpr std::size_t kAltStackSize = 64 * 1024;

struct sigaction g_previousSegv;
struct sigaction g_previousBus;

[[noreturn]] void AbortNow() {
    // Default SIGABRT action, even if the program replaced it.
    struct sigaction abortAction;
    std::memset(&abortAction, 0, sizeof(abortAction));
    abortAction.sa_handler = SIG_DFL;
    sigaction(SIGABRT, &abortAction, nullptr);
    std::abort();
}

void OnFault(int signal, siginfo_t *info, void *context) {
    // si_code > 0: raised by the kernel for a fault (si_addr is meaningful);
    // <= 0: sent by kill/raise/sigqueue.
    bool const isFault = info->si_code > 0;
    FaultExplainer const explainer = RegisteredExplainer();
    if (isFault && explainer != nullptr && explainer(reinterpret_cast<std::uintptr_t>(info->si_addr))) {
        AbortNow();
    }
    // Not ours: hand it to the previous handler. A handler function is
    // called directly; a disposition (default, ignore) is put back, and then a
    // fault happens again when we return, while a sent signal is sent again.
    struct sigaction const &previous = signal == SIGBUS ? g_previousBus : g_previousSegv;
    if ((previous.sa_flags & SA_SIGINFO) != 0 && previous.sa_sigaction != nullptr) {
        previous.sa_sigaction(signal, info, context);
        return;
    }
    if ((previous.sa_flags & SA_SIGINFO) == 0 && previous.sa_handler != SIG_DFL &&
        previous.sa_handler != SIG_IGN) {
        previous.sa_handler(signal);
        return;
    }
    sigaction(signal, &previous, nullptr);
    if (!isFault) {
        raise(signal);
    }
}

} // namespace

void InstallOsFaultHandler() {
    struct sigaction action;
    std::memset(&action, 0, sizeof(action));
    action.sa_sigaction = &OnFault;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, &g_previousSegv);
    sigaction(SIGBUS, &action, &g_previousBus);
}

void RemoveOsFaultHandler() {
    sigaction(SIGSEGV, &g_previousSegv, nullptr);
    sigaction(SIGBUS, &g_previousBus, nullptr);
}

void FaultHandlerStack::Enter() {
    void *memory = MapPages(kAltStackSize);
    if (memory == nullptr) {
        return; // overflows will then be plain SIGSEGVs
    }
    stack_t stack;
    stack.ss_sp = memory;
    stack.ss_size = kAltStackSize;
    stack.ss_flags = 0;
    stack_t previous;
    if (sigaltstack(&stack, &previous) != 0) {
        UnmapPages(memory, kAltStackSize);
        return;
    }
    m_memory = memory;
    m_active = true;
    m_hadPrevious = (previous.ss_flags & SS_DISABLE) == 0;
    std::memcpy(m_previous, &previous, sizeof(previous));
}

void FaultHandlerStack::Leave() {
    if (!m_active) {
        return;
    }
    stack_t restore;
    if (m_hadPrevious) {
        std::memcpy(&restore, m_previous, sizeof(restore));
    } else {
        std::memset(&restore, 0, sizeof(restore));
        restore.ss_flags = SS_DISABLE;
    }
    sigaltstack(&restore, nullptr);
    UnmapPages(m_memory, kAltStackSize);
    m_memory = nullptr;
    m_active = false;
}

} // namespace detail
} // namespace ftl
