#include "trace/session.h"

#include <cstdio>
#include <cstdlib>
#include <exception>

namespace ftl {
namespace detail {

void TraceSession::Start(char const *file, std::size_t events, unsigned numWorkers) {
    if (file == nullptr) {
        file = std::getenv("FTL_TRACE");
    }
    if (char const *text = std::getenv("FTL_TRACE_EVENTS"); text != nullptr && *text != '\0') {
        events = std::strtoull(text, nullptr, 10);
    }
    if (file == nullptr || *file == '\0' || events == 0) {
        return;
    }
    m_file = file;
    m_start = TraceClock::Sample();
    for (unsigned i = 0; i < numWorkers; ++i) {
        m_buffers.push_back(std::make_unique<TraceBuffer>(events));
    }
}

namespace {

// The tick rate from two samples, as far apart as the trace is long.
TraceClock ClockBetween(std::pair<std::uint64_t, std::uint64_t> start,
                        std::pair<std::uint64_t, std::uint64_t> end) {
    TraceClock clock;
    clock.Ticks0 = start.first;
    clock.Ns0 = start.second;
    if (end.first > start.first && end.second > start.second) {
        clock.NsPerTick =
            static_cast<double>(end.second - start.second) / static_cast<double>(end.first - start.first);
    }
    return clock;
}

} // namespace

void TraceSession::Write() const {
    if (!On()) {
        return;
    }
#if defined(__cpp_exceptions)
    try {
#endif
        std::vector<TraceBuffer const *> buffers;
        for (auto const &buffer : m_buffers) {
            buffers.push_back(buffer.get());
            if (buffer->Lost() != 0) {
                std::fprintf(
                    stderr,
                    "ftl: trace: worker %u's buffer of %zu events filled; it did not record %llu more "
                    "(raise TaskSchedulerInitOptions::TraceBufferEvents or FTL_TRACE_EVENTS)\n",
                    static_cast<unsigned>(buffers.size() - 1), buffer->Capacity(),
                    static_cast<unsigned long long>(buffer->Lost()));
            }
        }
        TraceClock const clock = ClockBetween(m_start, TraceClock::Sample());
        std::string error;
        if (!WriteChromeTrace(m_file, buffers.data(), static_cast<unsigned>(buffers.size()), clock,
                              m_originNs, error)) {
            std::fprintf(stderr, "ftl: trace: cannot write %s: %s\n", m_file.c_str(), error.c_str());
        }
#if defined(__cpp_exceptions)
    } catch (std::exception const &e) {
        // In a scheduler's destructor: report it, and go on destroying.
        std::fprintf(stderr, "ftl: trace: not written: %s\n", e.what());
    }
#endif
}

} // namespace detail
} // namespace ftl
