#include "trace/trace.h"

#include "ftl/callbacks.h"
#include "platform/symbols.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cxxabi.h>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace ftl {
namespace detail {

TraceBuffer::TraceBuffer(std::size_t capacity) : m_events(nullptr), m_capacity(capacity) {
    if (capacity > kMaxTraceEvents) {
        m_capacity = capacity = kMaxTraceEvents;
    }
    m_events = static_cast<TraceEvent *>(MapPages(capacity * sizeof(TraceEvent)));
    if (m_events == nullptr) {
        m_capacity = 0; // every event counts as not recorded, and is reported
    }
}

void TraceBuffer::Populate() {
    // Recording then never takes a page fault: on a VM, first touching a
    // page cost 60-80 ns per event measured, more than the rest of the
    // recording. Huge pages, where the system gives them, make it cheaper.
    std::size_t const bytes = m_capacity * sizeof(TraceEvent);
    if (m_events == nullptr || bytes == 0) {
        return;
    }
    PopulatePages(m_events, bytes);
}

TraceBuffer::~TraceBuffer() {
    if (m_events != nullptr) {
        UnmapPages(m_events, m_capacity * sizeof(TraceEvent));
    }
}

// ---- Names: the symbol tables of the loaded objects ----

namespace {

bool EndsWith(std::string const &text, std::size_t end, char const *suffix) {
    std::size_t const n = std::strlen(suffix);
    return end >= n && text.compare(end - n, n, suffix) == 0;
}

// "void ns::f<A, B>(int) const" -> "ns::f<A, B>": drops a demangled name's
// clone suffixes, qualifiers and parameter list (matched from the end, so
// parentheses inside template arguments or lambda names stay), and a leading
// return type (the text up to the last space outside any brackets, unless
// that space follows ')' -- "operator()() const::{lambda()#1}" -- or belongs
// to "operator bool").
std::string StripSignature(std::string const &demangled) {
    std::size_t end = demangled.size();
    for (bool more = true; more;) {
        more = false;
        if (end > 0 && demangled[end - 1] == ']') {
            std::size_t const clone = demangled.rfind(" [clone ", end);
            if (clone != std::string::npos) {
                end = clone;
                more = true;
            }
        }
        for (char const *qualifier : {" const", " volatile", " &&", " &", " noexcept"}) {
            if (EndsWith(demangled, end, qualifier)) {
                end -= std::strlen(qualifier);
                more = true;
            }
        }
    }
    if (end > 0 && demangled[end - 1] == ')') {
        int depth = 0;
        for (std::size_t i = end; i-- > 0;) {
            depth += demangled[i] == ')' ? 1 : (demangled[i] == '(' ? -1 : 0);
            if (depth == 0) {
                end = i;
                break;
            }
        }
    }
    std::string const name = demangled.substr(0, end);
    std::size_t start = 0;
    int depth = 0;
    for (std::size_t i = 0; i < name.size(); ++i) {
        char const c = name[i];
        depth += (c == '<' || c == '(' || c == '{' || c == '[')   ? 1
                 : (c == '>' || c == ')' || c == '}' || c == ']') ? -1
                                                                  : 0;
        if (c == ' ' && depth == 0 && i > 0 && name[i - 1] != ')' && !EndsWith(name, i, "operator")) {
            start = i + 1;
        }
    }
    return start < name.size() ? name.substr(start) : demangled;
}

// The last template argument of "f<A, B>", or "" when there is none.
std::string LastTemplateArgument(std::string const &name) {
    if (name.empty() || name.back() != '>') {
        return {};
    }
    int depth = 0;
    std::size_t last = std::string::npos;
    for (std::size_t i = name.size(); i-- > 0;) {
        char const c = name[i];
        if (c == '>' || c == ')' || c == '}') {
            ++depth;
        } else if (c == '<' || c == '(' || c == '{') {
            if (--depth == 0) {
                last = i;
                break;
            }
        } else if (c == ',' && depth == 1) {
            last = i;
            break;
        }
    }
    if (last == std::string::npos) {
        return {};
    }
    std::string const argument = name.substr(last + 1, name.size() - last - 2);
    std::size_t const first = argument.find_first_not_of(' ');
    if (first == std::string::npos) {
        return {};
    }
    return argument.substr(first, argument.find_last_not_of(' ') - first + 1);
}

} // namespace

std::string CodeName(void const *code) {
    std::string name = SymbolName(code);
    if (name.empty()) {
        char text[32];
        std::snprintf(text, sizeof text, "0x%" PRIxPTR, reinterpret_cast<std::uintptr_t>(code));
        return text;
    }
    int status = 0;
    char *demangled = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
    if (status == 0 && demangled != nullptr) {
        name = StripSignature(demangled);
    }
    std::free(demangled);
    // A closure's invoker is named after the closure it runs.
    for (char const *invoker : {"ftl::detail::Invoke", "ftl::TaskGraph::InvokeKept"}) {
        if (name.compare(0, std::strlen(invoker), invoker) == 0) {
            std::string closure = LastTemplateArgument(name);
            if (!closure.empty()) {
                return closure;
            }
        }
    }
    return name;
}

// ---- The writer ----

namespace {

class JsonOut {
public:
    explicit JsonOut(std::FILE *file) : m_file(file) {}

    // Starts an event object: {"ph":"X","pid":1,"tid":T,"ts":...
    // Times are nanoseconds, written as microseconds with three decimals
    // (no floating point: the C locale's decimal point is not assumed).
    void Begin(char const *phase, unsigned tid, std::uint64_t ns) {
        std::fputs(m_first ? "\n" : ",\n", m_file);
        m_first = false;
        std::fprintf(m_file, "{\"ph\":\"%s\",\"pid\":1,\"tid\":%u,\"ts\":", phase, tid);
        Micros(ns);
    }
    void Micros(std::uint64_t ns) {
        std::fprintf(m_file, "%" PRIu64 ".%03u", ns / 1000, static_cast<unsigned>(ns % 1000));
    }
    void Duration(std::uint64_t ns) {
        std::fputs(",\"dur\":", m_file);
        Micros(ns);
    }
    void Field(char const *key, std::string const &value) {
        std::fprintf(m_file, ",\"%s\":", key);
        String(value);
    }
    void Integer(char const *key, std::uint64_t value) {
        std::fprintf(m_file, ",\"%s\":%" PRIu64, key, value);
    }
    void Raw(char const *text) { std::fputs(text, m_file); }
    void String(std::string const &value) {
        std::fputc('"', m_file);
        for (char const c : value) {
            if (c == '"' || c == '\\') {
                std::fputc('\\', m_file);
                std::fputc(c, m_file);
            } else if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x80) {
                // Control characters, and bytes that may not be UTF-8
                // (names are bytes): as the code points of those bytes.
                std::fprintf(m_file, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
            } else {
                std::fputc(c, m_file);
            }
        }
        std::fputc('"', m_file);
    }
    void End() { std::fputc('}', m_file); }

private:
    std::FILE *m_file;
    bool m_first = true;
};

// A run of one fiber's events on one worker, between a resume and a park.
struct Segment {
    unsigned Worker;
    std::size_t First;
    std::size_t Last; // inclusive
};

// A task or span open on a fiber's stack.
struct Open {
    TraceEvent const *Start;
    bool Span;
    char const *Name; // a given name, or null
    std::uint64_t PieceNs;
    unsigned Worker;
    std::uint64_t Id; // the flow id joining its pieces
    unsigned Pieces = 0;
};

class Writer {
public:
    Writer(JsonOut &out, TraceBuffer const *const *buffers, TraceClock const &clock, std::uint64_t originNs)
        : m_out(out), m_buffers(buffers), m_clock(clock), m_origin(originNs) {}

    // A tick count as nanoseconds since the origin.
    std::uint64_t Ns(std::uint64_t ticks) const {
        std::uint64_t const ns = m_clock.Ns(ticks);
        return ns > m_origin ? ns - m_origin : 0;
    }

    std::string const &NameOf(Open const &open) {
        if (open.Name != nullptr) {
            m_given = open.Name;
            return m_given;
        }
        void const *code = open.Start->A;
        auto it = m_names.find(code);
        if (it == m_names.end()) {
            it = m_names.emplace(code, CodeName(code)).first;
        }
        return it->second;
    }

    // One piece of an open task: [PieceNs, endNs] on its worker. `wait`: what
    // the piece ended waiting for ("" when it did not wait); `cut`: why the
    // trace has no end for it (null: it ended).
    void Piece(Open &open, std::uint64_t endNs, std::string const &wait, char const *cut = nullptr) {
        std::uint64_t const startNs = open.PieceNs;
        std::uint64_t const dur = endNs > startNs ? endNs - startNs : 0;
        std::string const &name = NameOf(open);
        m_out.Begin("X", open.Worker, startNs);
        m_out.Field("name", name);
        m_out.Field("cat", open.Span ? "span" : "task");
        m_out.Duration(dur);
        if (open.Pieces != 0 || !wait.empty() || cut != nullptr) {
            m_out.Raw(",\"args\":{");
            m_out.Raw("\"piece\":");
            m_out.String(std::to_string(open.Pieces + 1));
            if (!wait.empty()) {
                m_out.Raw(",\"waits for\":");
                m_out.String(wait);
            }
            if (cut != nullptr) {
                m_out.Raw(",\"unfinished\":");
                m_out.String(cut);
            }
            m_out.Raw("}");
        }
        m_out.End();
        // Flow arrows: from the end of the piece before into this one, and
        // from the end of this one to the next (1 ns inside the piece, so
        // that the viewer binds each to it).
        std::uint64_t const inside = dur > 2 ? 1 : 0;
        if (open.Pieces != 0) {
            m_out.Begin("f", open.Worker, startNs + inside);
            m_out.Field("name", name);
            m_out.Field("cat", "resume");
            m_out.Integer("id", open.Id);
            m_out.Raw(",\"bp\":\"e\"");
            m_out.End();
        }
        if (!wait.empty()) {
            m_out.Begin("s", open.Worker, startNs + dur - inside);
            m_out.Field("name", name);
            m_out.Field("cat", "resume");
            m_out.Integer("id", open.Id);
            m_out.End();
        }
        ++open.Pieces;
    }

    // Replays one fiber's runs in time order. `cutoff`: when a buffer
    // filled (UINT64_MAX: none did).
    void Fiber(std::vector<Segment> &segments, std::uint64_t cutoff) {
        auto const first = [&](Segment const &s) { return (*m_buffers[s.Worker])[s.First].Ticks; };
        auto const last = [&](Segment const &s) { return (*m_buffers[s.Worker])[s.Last].Ticks; };
        auto const resumes = [&](Segment const &s) {
            return (*m_buffers[s.Worker])[s.First].Kind() == TraceKind::Resume;
        };
        std::stable_sort(segments.begin(), segments.end(), [&](Segment const &a, Segment const &b) {
            if (first(a) != first(b)) {
                return first(a) < first(b);
            }
            if (last(a) != last(b)) {
                return last(a) < last(b);
            }
            return !resumes(a) && resumes(b);
        });
        std::vector<Open> stack;
        std::string wait;
        for (Segment const &segment : segments) {
            TraceBuffer const &buffer = *m_buffers[segment.Worker];
            for (std::size_t i = segment.First; i <= segment.Last; ++i) {
                TraceEvent const &event = buffer[i];
                switch (event.Kind()) {
                case TraceKind::TaskBegin:
                case TraceKind::SpanBegin:
                    stack.push_back(Open{
                        &event, event.Kind() == TraceKind::SpanBegin,
                        event.Kind() == TraceKind::SpanBegin ? static_cast<char const *>(event.B) : nullptr,
                        Ns(event.Ticks), segment.Worker, ++m_nextId});
                    break;
                case TraceKind::TaskEnd:
                case TraceKind::SpanEnd:
                    if (!stack.empty()) {
                        Piece(stack.back(), Ns(event.Ticks), std::string());
                        stack.pop_back();
                    }
                    break;
                case TraceKind::Suspend: {
                    char text[96];
                    std::snprintf(text, sizeof text, "%s 0x%" PRIxPTR ", target %u",
                                  static_cast<char const *>(event.B),
                                  reinterpret_cast<std::uintptr_t>(event.A), event.Aux);
                    wait = text;
                    for (Open &open : stack) {
                        Piece(open, Ns(event.Ticks), wait);
                    }
                    break;
                }
                case TraceKind::Resume:
                    for (Open &open : stack) {
                        open.PieceNs = Ns(event.Ticks);
                        open.Worker = segment.Worker;
                    }
                    break;
                default:
                    break;
                }
            }
        }
        // Open at the end: a buffer filled, or the task never finished.
        std::uint64_t const end = cutoff != UINT64_MAX ? cutoff : last(segments.back());
        for (Open &open : stack) {
            Piece(open, Ns(end), std::string(),
                  cutoff != UINT64_MAX ? "a trace buffer filled" : "the trace ended");
        }
    }

private:
    JsonOut &m_out;
    TraceBuffer const *const *m_buffers;
    TraceClock m_clock;
    std::uint64_t m_origin;
    std::unordered_map<void const *, std::string> m_names;
    std::string m_given;
    std::uint64_t m_nextId = 0;
};

} // namespace

bool WriteChromeTrace(std::string const &path, TraceBuffer const *const *buffers, unsigned count,
                      TraceClock const &clock, std::uint64_t originNs, std::string &error) {
    std::FILE *file = std::fopen(path.c_str(), "w");
    if (file == nullptr) {
        error = std::strerror(errno);
        return false;
    }
    JsonOut out(file);
    std::fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[", file);
    out.Begin("M", 0, 0);
    out.Field("name", "process_name");
    out.Raw(",\"args\":{\"name\":\"ftl\"}");
    out.End();
    for (unsigned w = 0; w < count; ++w) {
        out.Begin("M", w, 0);
        out.Field("name", "thread_name");
        out.Raw(",\"args\":{\"name\":");
        out.String("worker " + std::to_string(w));
        out.Raw("}");
        out.End();
        out.Begin("M", w, 0);
        out.Field("name", "thread_sort_index");
        out.Raw(",\"args\":{\"sort_index\":");
        out.Raw(std::to_string(w).c_str());
        out.Raw("}");
        out.End();
    }
    // When a buffer filled, every worker's events after that moment are left
    // out: up to it, every worker recorded everything, so each fiber's
    // stack of open tasks is whole; the tasks open then end there.
    std::uint64_t cutoff = UINT64_MAX;
    for (unsigned w = 0; w < count; ++w) {
        if (buffers[w]->Lost() != 0) {
            cutoff = std::min(cutoff, buffers[w]->FullTicks());
        }
    }
    Writer writer(out, buffers, clock, originNs);
    // Each fiber's runs (a run: its consecutive events on one worker, ended
    // by a park or by another fiber's event), and each worker's own events.
    std::map<std::uint32_t, std::vector<Segment>> fibers;
    for (unsigned w = 0; w < count; ++w) {
        TraceBuffer const &buffer = *buffers[w];
        bool open = false; // the fiber of the last event has a run open
        std::uint32_t lastFiber = 0;
        for (std::size_t i = 0; i < buffer.Size() && buffer[i].Ticks <= cutoff; ++i) {
            TraceEvent const &event = buffer[i];
            TraceKind const kind = event.Kind();
            if (kind == TraceKind::Idle) {
                std::uint64_t const start = writer.Ns(event.Ticks);
                std::uint64_t const end = writer.Ns(reinterpret_cast<std::uintptr_t>(event.A));
                out.Begin("X", w, start);
                out.Field("name", (event.Aux & 1) != 0 ? "parked" : "idle");
                out.Field("cat", "idle");
                out.Duration(end > start ? end - start : 0);
                out.Raw((event.Aux & 2) != 0 ? ",\"args\":{\"woken\":true}" : ",\"args\":{\"woken\":false}");
                out.End();
                continue;
            }
            if (kind == TraceKind::Steal) {
                out.Begin("i", w, writer.Ns(event.Ticks));
                out.Field("name", "steal");
                out.Field("cat", "steal");
                out.Raw(",\"s\":\"t\",\"args\":{\"from worker\":");
                out.Raw(std::to_string(event.Aux).c_str());
                out.Raw("}");
                out.End();
                continue;
            }
            std::vector<Segment> &segments = fibers[event.Fiber()];
            if (!open || event.Fiber() != lastFiber || kind == TraceKind::Resume) {
                segments.push_back(Segment{w, i, i});
            } else {
                segments.back().Last = i;
            }
            lastFiber = event.Fiber();
            open = kind != TraceKind::Suspend;
        }
        if (buffer.Lost() != 0) {
            out.Begin("i", w, writer.Ns(buffer.FullTicks()));
            out.Field("name", "trace buffer full");
            out.Field("cat", "trace");
            out.Raw(",\"s\":\"t\",\"args\":{\"events not recorded\":");
            out.Raw(std::to_string(buffer.Lost()).c_str());
            out.Raw("}");
            out.End();
        }
    }
    for (auto &fiber : fibers) {
        writer.Fiber(fiber.second, cutoff);
    }
    std::fputs("\n]}\n", file);
    bool const ok = std::ferror(file) == 0;
    if (std::fclose(file) != 0 || !ok) {
        error = "write error";
        return false;
    }
    return true;
}

} // namespace detail

char const *WaitKindName(WaitKind kind) {
    switch (kind) {
    case WaitKind::Counter:
        return "counter";
    case WaitKind::Fibtex:
        return "fibtex";
    case WaitKind::ConditionVariable:
        return "condition variable";
    case WaitKind::Sleep:
        return "sleep";
    case WaitKind::Yield:
        return "yield";
    }
    return "unknown";
}

char const *FunctionName(void const *function) {
    // Interned: a node-based map keeps every string where it is.
    static std::mutex &lock = *new std::mutex;
    static auto &names = *new std::map<void const *, std::string>;
    std::lock_guard<std::mutex> const guard(lock);
    auto it = names.find(function);
    if (it == names.end()) {
        it = names.emplace(function, detail::CodeName(function)).first;
    }
    return it->second.c_str();
}

} // namespace ftl
