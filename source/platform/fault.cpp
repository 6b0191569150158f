// What the fault handler does the same on every OS: the reference count of
// the schedulers that use it, and the writers.
#include "platform/fault.h"

#include "platform/platform.h"

#include <atomic>
#include <cstring>
#include <mutex>

namespace ftl {
namespace detail {

namespace {

std::mutex g_installMutex;
unsigned g_installCount = 0;
// Read by the handler, which may run on any thread at any moment.
std::atomic<FaultExplainer> g_explainer{nullptr};

} // namespace

void InstallFaultHandler(FaultExplainer explainer) {
    std::lock_guard<std::mutex> lock(g_installMutex);
    if (g_installCount++ != 0) {
        return;
    }
    g_explainer.store(explainer, std::memory_order_release);
    InstallOsFaultHandler();
}

void RemoveFaultHandler() {
    std::lock_guard<std::mutex> lock(g_installMutex);
    if (g_installCount == 0 || --g_installCount != 0) {
        return;
    }
    RemoveOsFaultHandler();
}

FaultExplainer RegisteredExplainer() {
    return g_explainer.load(std::memory_order_acquire);
}

void FaultWrite(char const *text) {
    WriteStderr(text, std::strlen(text));
}

void FaultWriteNumber(unsigned long long value) {
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
    FaultWrite(text);
}

} // namespace detail
} // namespace ftl
