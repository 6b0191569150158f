// A scheduler's trace session: whether it records (TaskSchedulerInitOptions
// TraceFile and TraceBufferEvents, or FTL_TRACE and FTL_TRACE_EVENTS), one
// buffer per worker, and the file written when the scheduler is destroyed.
#pragma once

#include "trace/trace.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace ftl {
namespace detail {

class TraceSession {
public:
    // Decides whether to record, from the options (`file` may be null) and
    // the environment, which override them; makes the buffers if so.
    void Start(char const *file, std::size_t events, unsigned numWorkers);
    bool On() const { return !m_buffers.empty(); }
    // Worker `index`'s buffer, or nullptr when the session is off.
    TraceBuffer *Buffer(unsigned index) { return On() ? m_buffers[index].get() : nullptr; }
    // Faults worker `index`'s buffer in, on that worker's thread.
    void Populate(unsigned index) {
        if (On()) {
            m_buffers[index]->Populate();
        }
    }
    // The trace's time 0: when Init returns.
    void MarkOrigin() { m_originNs = NowNs(); }
    // After the workers stopped: writes the file, and says on stderr what a
    // full buffer did not record. Never throws.
    void Write() const;

private:
    std::string m_file;
    std::pair<std::uint64_t, std::uint64_t> m_start; // TraceClock::Sample() at Start
    std::uint64_t m_originNs = 0;
    std::vector<std::unique_ptr<TraceBuffer>> m_buffers;
};

} // namespace detail
} // namespace ftl
