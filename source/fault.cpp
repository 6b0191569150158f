#include "fault.h"

#include "fiber.h"
#include "platform.h"
#include "worker.h"

#include <atomic>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sys/mman.h>
#include <unistd.h>

namespace ftl {
namespace detail {

namespace {

static_assert(sizeof(stack_t) <= 32, "AltSignalStack keeps a stack_t in 32 bytes");

constexpr std::size_t kAltStackSize = 64 * 1024;
// Faults this far below the guard page still count as an overflow: a frame
// larger than a page can jump over the guard page's start.
constexpr std::size_t kBelowGuardSlack = 64 * 1024;
// The same for a thread's own stack, whose guard (the kernel's stack guard
// gap for the main thread, glibc's guard page otherwise) lies below its floor.
constexpr std::size_t kThreadGuardSlack = 1024 * 1024 + kBelowGuardSlack;

std::mutex g_installMutex;
unsigned g_installCount = 0;
struct sigaction g_previousSegv;
struct sigaction g_previousBus;

// Async-signal-safe output.
void Write(char const *text) {
    ssize_t const ignored = write(STDERR_FILENO, text, std::strlen(text));
    (void)ignored;
}
void WriteNumber(unsigned long long value) {
    char digits[24];
    int n = 0;
    do {
        digits[n++] = static_cast<char>('0' + value % 10);
        value /= 10;
    } while (value != 0 && n < 24);
    char text[25];
    for (int i = 0; i < n; ++i) {
        text[i] = digits[n - 1 - i];
    }
    text[n] = '\0';
    Write(text);
}

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
    Worker *worker = CurrentWorker();
    Fiber *fiber = worker != nullptr ? worker->m_currentFiber : nullptr;
    if (isFault && fiber != nullptr && !fiber->IsThreadFiber && fiber->Mapping != nullptr) {
        auto const address = reinterpret_cast<std::uintptr_t>(info->si_addr);
        auto const guardEnd = reinterpret_cast<std::uintptr_t>(fiber->StackLow);
        auto const mappingStart = reinterpret_cast<std::uintptr_t>(fiber->Mapping);
        std::uintptr_t const lowest = mappingStart > kBelowGuardSlack ? mappingStart - kBelowGuardSlack : 0;
        if (address >= lowest && address < guardEnd) {
            Write("ftl: fatal error: stack overflow in fiber ");
            WriteNumber(fiber->Index);
            Write(" on worker thread ");
            WriteNumber(worker->m_index);
            Write(": its stack is ");
            WriteNumber(fiber->StackSize);
            Write(" bytes (TaskSchedulerInitOptions::FiberStackSize)\n");
            AbortNow();
        }
    }
    if (isFault && fiber != nullptr && fiber->IsThreadFiber && fiber->InlineDepth != 0 &&
        fiber->StackFloor != 0) {
        // A worker thread's own stack, running a task inline while it waits.
        auto const address = reinterpret_cast<std::uintptr_t>(info->si_addr);
        std::uintptr_t const floor = fiber->StackFloor;
        if (address < floor && address >= floor - (floor > kThreadGuardSlack ? kThreadGuardSlack : floor)) {
            Write("ftl: fatal error: stack overflow on worker thread ");
            WriteNumber(worker->m_index);
            Write("'s own stack, in a task it ran while waiting\n");
            AbortNow();
        }
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

void InstallFaultHandler() {
    std::lock_guard<std::mutex> lock(g_installMutex);
    if (g_installCount++ != 0) {
        return;
    }
    struct sigaction action;
    std::memset(&action, 0, sizeof(action));
    action.sa_sigaction = &OnFault;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, &g_previousSegv);
    sigaction(SIGBUS, &action, &g_previousBus);
}

void RemoveFaultHandler() {
    std::lock_guard<std::mutex> lock(g_installMutex);
    if (g_installCount == 0 || --g_installCount != 0) {
        return;
    }
    sigaction(SIGSEGV, &g_previousSegv, nullptr);
    sigaction(SIGBUS, &g_previousBus, nullptr);
}

void AltSignalStack::Enter() {
    void *memory = mmap(nullptr, kAltStackSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) {
        return; // overflows will then be plain SIGSEGVs
    }
    stack_t stack;
    stack.ss_sp = memory;
    stack.ss_size = kAltStackSize;
    stack.ss_flags = 0;
    stack_t previous;
    if (sigaltstack(&stack, &previous) != 0) {
        munmap(memory, kAltStackSize);
        return;
    }
    m_memory = memory;
    m_active = true;
    m_hadPrevious = (previous.ss_flags & SS_DISABLE) == 0;
    std::memcpy(m_previous, &previous, sizeof(previous));
}

void AltSignalStack::Leave() {
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
    munmap(m_memory, kAltStackSize);
    m_memory = nullptr;
    m_active = false;
}

} // namespace detail
} // namespace ftl
