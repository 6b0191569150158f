#include "ftl/assert.h"

#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace ftl {
namespace detail {

void Fatal(char const *file, int line, char const *format, ...) {
    // One report per process: a second thread failing at the same moment
    // waits for the first one's abort instead of interleaving its message.
    static std::atomic<bool> reporting{false};
    if (reporting.exchange(true)) {
        for (;;) {
            std::this_thread::sleep_for(std::chrono::hours(1));
        }
    }
    // One fprintf per part, unbuffered stderr: the message must get out even
    // when the process is in a bad state.
    std::fprintf(stderr, "ftl: fatal error: ");
    va_list args;
    va_start(args, format);
    std::vfprintf(stderr, format, args);
    va_end(args);
    std::fprintf(stderr, "\n  (at %s:%d)\n", file, line);
    std::fflush(stderr);
    std::abort();
}

} // namespace detail
} // namespace ftl
