// Faults on Linux: a SIGSEGV/SIGBUS handler on an alternate signal stack.
#include "platform/fault.h"

#include "platform/platform.h"

#include <atomic>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <pthread.h>

namespace ftl {
namespace detail {

namespace {

static_assert(sizeof(stack_t) <= 32, "FaultHandlerStack keeps a stack_t in 32 bytes");

constexpr std::size_t kAltStackSize = 64 * 1024;

// The handlers in place when ours was installed: every fault that is not
// ours goes to them, and they are put back when ours is removed.
struct sigaction g_previousSegv;
struct sigaction g_previousBus;

// sa_flags is an int, and some SA_ constants are unsigned.
bool HasFlag(struct sigaction const &action, unsigned long flag) {
    return (static_cast<unsigned long>(static_cast<unsigned>(action.sa_flags)) & flag) != 0;
}

bool IsHandlerFunction(struct sigaction const &action) {
    if (HasFlag(action, SA_SIGINFO)) {
        return action.sa_sigaction != nullptr;
    }
    return action.sa_handler != SIG_DFL && action.sa_handler != SIG_IGN;
}

// Hands a signal that is not ours to the handler installed before ours, as
// the kernel would have delivered it: under that handler's own mask, and
// after resetting the disposition when it is a one-shot handler
// (SA_RESETHAND). A disposition (default, ignore) is put back instead; a
// fault then happens again when we return, and a sent signal is sent again.
void Chain(int signal, siginfo_t *info, void *context, struct sigaction const &previous, bool isFault) {
    if (!IsHandlerFunction(previous)) {
        if (!isFault && previous.sa_handler == SIG_IGN) {
            return; // a sent signal the program ignores
        }
        sigaction(signal, &previous, nullptr);
        if (!isFault) {
            raise(signal);
        }
        return;
    }
    if (HasFlag(previous, SA_RESETHAND)) {
        struct sigaction reset;
        std::memset(&reset, 0, sizeof(reset));
        reset.sa_handler = SIG_DFL;
        sigemptyset(&reset.sa_mask);
        sigaction(signal, &reset, nullptr);
    }
    sigset_t mask = previous.sa_mask;
    sigset_t saved;
    pthread_sigmask(SIG_BLOCK, &mask, &saved);
    if (HasFlag(previous, SA_NODEFER)) {
        sigemptyset(&mask);
        sigaddset(&mask, signal);
        pthread_sigmask(SIG_UNBLOCK, &mask, nullptr);
    }
    if (HasFlag(previous, SA_SIGINFO)) {
        previous.sa_sigaction(signal, info, context);
    } else {
        previous.sa_handler(signal);
    }
    pthread_sigmask(SIG_SETMASK, &saved, nullptr);
}

void OnFault(int signal, siginfo_t *info, void *context) {
    // si_code > 0: raised by the kernel for a fault (si_addr is meaningful);
    // <= 0: sent by kill/raise/sigqueue.
    bool const isFault = info->si_code > 0;
    FaultExplainer const explainer = RegisteredExplainer();
    if (isFault && explainer != nullptr && explainer(reinterpret_cast<std::uintptr_t>(info->si_addr))) {
        // Ends as every fatal error of ftl does (FTL_FATAL): abort, which
        // runs the program's SIGABRT handler (a crash reporter) if it has
        // one, on this alternate stack, and kills the process if that
        // handler returns.
        std::abort();
    }
    Chain(signal, info, context, signal == SIGBUS ? g_previousBus : g_previousSegv, isFault);
}

// Puts `previous` back for `signal` if our handler is still the one in
// place. A handler the program installed after ours stays: it is the
// program's now (and it may chain to ours, which then chains on to
// `previous`, kept for that).
void RestoreIfOurs(int signal, struct sigaction const &previous) {
    struct sigaction current;
    if (sigaction(signal, nullptr, &current) != 0) {
        return;
    }
    if (HasFlag(current, SA_SIGINFO) && current.sa_sigaction == &OnFault) {
        sigaction(signal, &previous, nullptr);
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
    RestoreIfOurs(SIGSEGV, g_previousSegv);
    RestoreIfOurs(SIGBUS, g_previousBus);
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
