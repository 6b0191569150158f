// The trace (TaskSchedulerInitOptions::TraceFile / FTL_TRACE) and the task
// and wait callbacks: each trace is written by a real scheduler, read back as
// JSON, and checked against what the tasks themselves recorded.
#include "ftl/callbacks.h"
#include "ftl/fibtex.h"
#include "ftl/task_graph.h"
#include "json_reader.h"
#include "test_support.h"

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

using ftl_test::Json;
using ftl_test::Options;

namespace {

// A lambda's name as the compiler's mangling spells it, after the function
// it is in: "f()::{lambda()#2}" from GCC, "f()::$_1" from Clang. Anything
// else that mentions a lambda is a wrong name (ftl's invoker, say).
bool IsLambdaName(std::string const &name) {
    std::size_t const gcc = name.find("::{lambda(");
    if (gcc != std::string::npos) {
        return name.back() == '}' && name.find(")#", gcc) != std::string::npos;
    }
    std::size_t const clang = name.rfind("::$_");
    if (clang != std::string::npos) {
        return clang + 4 < name.size() &&
               name.find_first_not_of("0123456789", clang + 4) == std::string::npos;
    }
    if (name.find("lambda") != std::string::npos) {
        FAIL("a lambda named neither as GCC nor as Clang mangles it: " << name);
    }
    return false;
}

// TestProcessId: a RunInChild child names the same file as its parent.
std::string TracePath(char const *name) {
    std::string const file =
        "ftl_trace_test_" + std::to_string(ftl_test::TestProcessId()) + "_" + name + ".json";
    return (std::filesystem::temp_directory_path() / file).string();
}

// Per-thread task counts, as the tasks saw them.
struct Ran {
    std::atomic<unsigned> PerThread[8] = {};
};

void TracedTask(ftl::TaskScheduler *ts, void *arg) {
    static_cast<Ran *>(arg)->PerThread[ts->GetCurrentThreadIndex()].fetch_add(1, std::memory_order_relaxed);
    ftl_test::BusyMicros(2);
}

// Clears the flag once a fiber is seen parked on it (or after 5 s, so that
// a test that never parks fails instead of hanging).
void ReleaseLater(ftl::TaskScheduler *ts, void *arg) {
    auto *flag = static_cast<ftl::AtomicFlag *>(arg);
    for (int i = 0; i < 50000; ++i) {
        bool parked = false;
        for (ftl::WaitingFiber const &fiber : ts->GetWaitingFibers()) {
            parked = parked || fiber.Object == flag;
        }
        if (parked) {
            break;
        }
        ts->SleepFor(std::chrono::microseconds(100));
    }
    flag->Clear();
}

// Waits for a flag that another task clears once it is parked.
void WaitingTask(ftl::TaskScheduler *ts, void *) {
    ftl::AtomicFlag flag(ts, 1);
    ts->AddTask(ftl::Task{ReleaseLater, &flag}, ftl::TaskPriority::Normal);
    ts->WaitForCounter(&flag);
}

std::vector<Json const *> Events(Json const &trace, std::string const &phase, std::string const &name = "") {
    std::vector<Json const *> found;
    for (Json const &event : trace["traceEvents"].Items) {
        if (event["ph"].Text == phase &&
            (name.empty() || (event.Has("name") && event["name"].Text == name))) {
            found.push_back(&event);
        }
    }
    return found;
}

} // namespace

TEST_CASE("The trace has one span per task, on the track of the worker that ran it", "[trace]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    std::string const path = TracePath("spans");
    constexpr unsigned kTasks = 3000;
    Ran ran;
    {
        ftl::TaskSchedulerInitOptions options = Options(threads);
        options.TraceFile = path.c_str();
        ftl::TaskScheduler ts;
        REQUIRE(ts.Init(options) == 0);
        std::vector<ftl::Task> tasks(kTasks, ftl::Task{TracedTask, &ran});
        ftl::TaskCounter counter(&ts);
        ts.AddTasks(kTasks, tasks.data(), ftl::TaskPriority::Normal, &counter);
        ts.WaitForCounter(&counter);
    }
    Json const trace = ftl_test::ReadJsonFile(path);
    std::remove(path.c_str());

    std::map<int, unsigned> perTrack;
    for (Json const *span : Events(trace, "X", "(anonymous namespace)::TracedTask")) {
        REQUIRE((*span)["cat"].Text == "task");
        REQUIRE((*span)["dur"].Number >= 0);
        ++perTrack[static_cast<int>((*span)["tid"].Number)];
    }
    unsigned total = 0;
    for (unsigned t = 0; t < threads; ++t) {
        INFO("worker " << t);
        REQUIRE(perTrack[static_cast<int>(t)] == ran.PerThread[t].load());
        total += perTrack[static_cast<int>(t)];
    }
    REQUIRE(total == kTasks);
    REQUIRE(perTrack.size() <= threads);
    // A name per worker track.
    std::set<std::string> names;
    for (Json const *meta : Events(trace, "M", "thread_name")) {
        names.insert((*meta)["args"]["name"].Text);
    }
    for (unsigned t = 0; t < threads; ++t) {
        REQUIRE(names.count("worker " + std::to_string(t)) == 1);
    }
}

TEST_CASE("A task that parks shows as pieces joined by flows, with what it waited for", "[trace]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    std::string const path = TracePath("parked");
    constexpr unsigned kTasks = 4;
    {
        ftl::TaskSchedulerInitOptions options = Options(threads);
        options.TraceFile = path.c_str();
        ftl::TaskScheduler ts;
        REQUIRE(ts.Init(options) == 0);
        std::vector<ftl::Task> tasks(kTasks, ftl::Task{WaitingTask, nullptr});
        ftl::TaskCounter counter(&ts);
        ts.AddTasks(kTasks, tasks.data(), ftl::TaskPriority::Normal, &counter);
        ts.WaitForCounter(&counter);
    }
    Json const trace = ftl_test::ReadJsonFile(path);
    std::remove(path.c_str());

    std::vector<Json const *> const pieces = Events(trace, "X", "(anonymous namespace)::WaitingTask");
    // Each task ran in two pieces at least: up to its wait, and after it.
    REQUIRE(pieces.size() >= 2 * kTasks);
    unsigned waited = 0;
    for (Json const *piece : pieces) {
        if ((*piece).Has("args") && (*piece)["args"].Has("waits for")) {
            ++waited;
            REQUIRE((*piece)["args"]["waits for"].Text.find("counter") == 0);
        }
    }
    REQUIRE(waited >= kTasks);
    // Each flow that starts also finishes, and the ids are the tasks'.
    std::map<double, int> flows;
    for (Json const *start : Events(trace, "s")) {
        ++flows[(*start)["id"].Number];
    }
    for (Json const *finish : Events(trace, "f")) {
        --flows[(*finish)["id"].Number];
        REQUIRE((*finish)["bp"].Text == "e");
    }
    REQUIRE(flows.size() >= kTasks);
    for (auto const &flow : flows) {
        REQUIRE(flow.second == 0);
    }
    // ReleaseLater sleeps while it polls: its last pieces (those that did
    // not end in a wait) are one per task.
    unsigned releases = 0;
    for (Json const *piece : Events(trace, "X", "(anonymous namespace)::ReleaseLater")) {
        releases += (*piece).Has("args") && (*piece)["args"].Has("waits for") ? 0u : 1u;
    }
    REQUIRE(releases == kTasks);
}

namespace {

// A graph node's function object: named after its type.
struct Audio {
    std::atomic<unsigned> *Ran;
    void operator()() const { Ran->fetch_add(1); }
};

} // namespace

TEST_CASE("The trace names closures by type and graph nodes by their given name", "[trace]") {
    std::string const path = TracePath("names");
    std::atomic<unsigned> ran{0};
    {
        ftl::TaskSchedulerInitOptions options = Options(2);
        options.TraceFile = path.c_str();
        ftl::TaskScheduler ts;
        REQUIRE(ts.Init(options) == 0);
        ftl::TaskCounter counter(&ts);
        ts.AddTask([&ran] { ran.fetch_add(1); }, ftl::TaskPriority::Normal, &counter);
        ts.WaitForCounter(&counter);

        ftl::TaskGraph graph(&ts);
        ftl::TaskGraph::Node physics = graph.Add([&ran] { ran.fetch_add(1); });
        physics.Name("physics");
        ftl::TaskGraph::Node unnamed = graph.Add([&ran] { ran.fetch_add(1); });
        ftl::TaskGraph::Node functor = graph.Add(Audio{&ran});
        physics.Precede(unnamed);
        unnamed.Precede(functor);
        graph.Run(&counter);
        ts.WaitForCounter(&counter);
    }
    REQUIRE(ran.load() == 4);
    Json const trace = ftl_test::ReadJsonFile(path);
    std::remove(path.c_str());

    std::vector<Json const *> const named = Events(trace, "X", "physics");
    REQUIRE(named.size() == 1);
    REQUIRE((*named[0])["cat"].Text == "span");
    // The AddTask closure and the unnamed node: named after the lambda's
    // type, "<enclosing function>::{lambda()#N}", not after ftl's invoker.
    unsigned lambdas = 0;
    for (Json const *span : Events(trace, "X")) {
        std::string const &name = (*span)["name"].Text;
        if (IsLambdaName(name)) {
            INFO(name);
            REQUIRE(name.find("ftl::") == std::string::npos);
            ++lambdas;
        }
    }
    REQUIRE(lambdas == 2);
    std::vector<Json const *> const audio = Events(trace, "X", "(anonymous namespace)::Audio");
    REQUIRE(audio.size() == 1);
    REQUIRE((*audio[0])["cat"].Text == "span");
}

TEST_CASE("The trace shows idle and parked stretches of each worker", "[trace]") {
    std::string const path = TracePath("idle");
    {
        ftl::TaskSchedulerInitOptions options = Options(2);
        options.TraceFile = path.c_str();
        ftl::TaskScheduler ts;
        REQUIRE(ts.Init(options) == 0);
        ts.SleepFor(std::chrono::milliseconds(30)); // worker 1 has nothing to do
    }
    Json const trace = ftl_test::ReadJsonFile(path);
    std::remove(path.c_str());
    double parkedUs = 0;
    for (Json const *span : Events(trace, "X", "parked")) {
        if ((*span)["tid"].Number == 1) {
            REQUIRE((*span)["cat"].Text == "idle");
            parkedUs += (*span)["dur"].Number;
        }
    }
    REQUIRE(parkedUs >= 20000);
}

TEST_CASE("A full trace buffer stops recording, and the trace and stderr say so", "[trace]") {
    std::string const path = TracePath("full");
    ftl_test::ChildResult const child = ftl_test::RunInChild([&path] {
        ftl::TaskSchedulerInitOptions options = Options(1);
        options.TraceFile = path.c_str();
        options.TraceBufferEvents = 50;
        ftl::TaskScheduler ts;
        if (ts.Init(options) != 0) {
            std::_Exit(3);
        }
        Ran ran;
        std::vector<ftl::Task> tasks(100, ftl::Task{TracedTask, &ran});
        ftl::TaskCounter counter(&ts);
        ts.AddTasks(100, tasks.data(), ftl::TaskPriority::Normal, &counter);
        ts.WaitForCounter(&counter);
    });
    REQUIRE(child.Exited);
    REQUIRE(child.ExitCode == 0);
    INFO(child.Stderr);
    REQUIRE(child.StderrHas("buffer of 50 events filled"));
    Json const trace = ftl_test::ReadJsonFile(path);
    std::remove(path.c_str());
    std::vector<Json const *> const full = Events(trace, "i", "trace buffer full");
    REQUIRE(full.size() == 1);
    REQUIRE((*full[0])["args"]["events not recorded"].Number >= 100);
    // Two events a task: the 25 tasks recorded before the buffer filled.
    REQUIRE(Events(trace, "X", "(anonymous namespace)::TracedTask").size() == 25);
}

TEST_CASE("FTL_TRACE names the trace file when the options do not", "[trace]") {
    std::string const path = TracePath("env");
    ftl_test::ChildResult const child = ftl_test::RunInChild([&path] {
        ftl_test::SetEnv("FTL_TRACE", path.c_str());
        ftl::TaskScheduler ts;
        if (ts.Init(Options(2)) != 0) {
            std::_Exit(3);
        }
        Ran ran;
        std::vector<ftl::Task> tasks(10, ftl::Task{TracedTask, &ran});
        ftl::TaskCounter counter(&ts);
        ts.AddTasks(10, tasks.data(), ftl::TaskPriority::Normal, &counter);
        ts.WaitForCounter(&counter);
    });
    REQUIRE(child.Exited);
    REQUIRE(child.ExitCode == 0);
    Json const trace = ftl_test::ReadJsonFile(path);
    std::remove(path.c_str());
    REQUIRE(Events(trace, "X", "(anonymous namespace)::TracedTask").size() == 10);
}

namespace {

struct Observed {
    std::mutex Lock;
    std::vector<std::string> Names;
    unsigned Begins = 0;
    unsigned Ends = 0;
    bool Unbalanced = false;
    std::vector<ftl::WaitInfo> WaitBegins;
    std::vector<ftl::WaitInfo> WaitEnds;
};

void OnTaskBegin(void *context, ftl::TaskInfo const &task) {
    auto *observed = static_cast<Observed *>(context);
    std::lock_guard<std::mutex> const guard(observed->Lock);
    ++observed->Begins;
    observed->Names.push_back(ftl::FunctionName(task.Function));
}

void OnTaskEnd(void *context, ftl::TaskInfo const &) {
    auto *observed = static_cast<Observed *>(context);
    std::lock_guard<std::mutex> const guard(observed->Lock);
    ++observed->Ends;
    if (observed->Ends > observed->Begins) {
        observed->Unbalanced = true;
    }
}

void OnWaitBegin(void *context, ftl::WaitInfo const &wait) {
    auto *observed = static_cast<Observed *>(context);
    std::lock_guard<std::mutex> const guard(observed->Lock);
    observed->WaitBegins.push_back(wait);
}

void OnWaitEnd(void *context, ftl::WaitInfo const &wait) {
    auto *observed = static_cast<Observed *>(context);
    std::lock_guard<std::mutex> const guard(observed->Lock);
    observed->WaitEnds.push_back(wait);
}

} // namespace

TEST_CASE("Task callbacks see each task begin and end, named by FunctionName", "[trace][callbacks]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    Observed observed;
    Ran ran;
    constexpr unsigned kTasks = 500;
    {
        ftl::TaskSchedulerInitOptions options = Options(threads);
        options.Callbacks.Context = &observed;
        options.Callbacks.OnTaskBegin = OnTaskBegin;
        options.Callbacks.OnTaskEnd = OnTaskEnd;
        ftl::TaskScheduler ts;
        REQUIRE(ts.Init(options) == 0);
        std::vector<ftl::Task> tasks(kTasks, ftl::Task{TracedTask, &ran});
        ftl::TaskCounter counter(&ts);
        ts.AddTasks(kTasks, tasks.data(), ftl::TaskPriority::Normal, &counter);
        ts.AddTask([] {}, ftl::TaskPriority::Normal, &counter);
        ts.WaitForCounter(&counter);
    }
    REQUIRE(observed.Begins == kTasks + 1);
    REQUIRE(observed.Ends == kTasks + 1);
    REQUIRE_FALSE(observed.Unbalanced);
    unsigned traced = 0;
    unsigned lambdas = 0;
    for (std::string const &name : observed.Names) {
        traced += name == "(anonymous namespace)::TracedTask" ? 1u : 0u;
        if (IsLambdaName(name)) {
            ++lambdas;
        }
    }
    REQUIRE(traced == kTasks);
    REQUIRE(lambdas == 1);
}

TEST_CASE("Wait callbacks report each parked wait with its kind and object", "[trace][callbacks]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    Observed observed;
    ftl::AtomicFlag const *flagSeen = nullptr;
    {
        ftl::TaskSchedulerInitOptions options = Options(threads);
        options.Callbacks.Context = &observed;
        options.Callbacks.OnWaitBegin = OnWaitBegin;
        options.Callbacks.OnWaitEnd = OnWaitEnd;
        ftl::TaskScheduler ts;
        REQUIRE(ts.Init(options) == 0);
        // A flag wait that parks: the task that clears it waits for that.
        ftl::AtomicFlag flag(&ts, 1);
        flagSeen = &flag;
        ts.AddTask(ftl::Task{ReleaseLater, &flag}, ftl::TaskPriority::Normal);
        ts.WaitForCounter(&flag);
        ts.SleepFor(std::chrono::milliseconds(1));
    }
    std::lock_guard<std::mutex> const guard(observed.Lock);
    REQUIRE(observed.WaitBegins.size() == observed.WaitEnds.size());
    bool sawFlag = false;
    bool sawSleep = false;
    for (std::size_t i = 0; i < observed.WaitBegins.size(); ++i) {
        ftl::WaitInfo const &begin = observed.WaitBegins[i];
        if (begin.Kind == ftl::WaitKind::Counter && begin.Object == flagSeen) {
            sawFlag = true;
            REQUIRE(begin.Target == 0);
        }
        sawSleep = sawSleep || begin.Kind == ftl::WaitKind::Sleep;
    }
    REQUIRE(sawFlag);
    REQUIRE(sawSleep);
    REQUIRE(std::string(ftl::WaitKindName(ftl::WaitKind::Fibtex)) == "fibtex");
}

namespace {

struct Parked {
    ftl::AtomicFlag *Flag;
    ftl::Fibtex *Lock;
};

void WaitOnFlag(ftl::TaskScheduler *ts, void *arg) {
    ts->WaitForCounter(static_cast<Parked *>(arg)->Flag);
}

void WaitOnFibtex(ftl::TaskScheduler *, void *arg) {
    std::lock_guard<ftl::Fibtex> const guard(*static_cast<Parked *>(arg)->Lock);
}

void Sleeper(ftl::TaskScheduler *ts, void *) {
    ts->SleepFor(std::chrono::milliseconds(300));
}

} // namespace

TEST_CASE("GetWaitingFibers lists each parked fiber with what it waits for and its task", "[trace]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);
    REQUIRE(ts.GetWaitingFibers().empty());
    ftl::AtomicFlag flag(&ts, 1);
    ftl::Fibtex lock(&ts);
    Parked parked{&flag, &lock};
    lock.lock(); // held by the Init thread until the fibers are listed
    ftl::TaskCounter counter(&ts);
    ts.AddTask(ftl::Task{WaitOnFlag, &parked}, ftl::TaskPriority::Normal, &counter);
    ts.AddTask(ftl::Task{WaitOnFibtex, &parked}, ftl::TaskPriority::Normal, &counter);
    ts.AddTask(ftl::Task{Sleeper, nullptr}, ftl::TaskPriority::Normal, &counter);
    // Park the Init thread briefly so that a single worker runs them too.
    std::vector<ftl::WaitingFiber> fibers;
    for (int i = 0; i < 200 && fibers.size() < 3; ++i) {
        ts.SleepFor(std::chrono::milliseconds(1));
        fibers = ts.GetWaitingFibers();
    }
    std::map<std::string, ftl::WaitingFiber> byTask;
    for (ftl::WaitingFiber const &fiber : fibers) {
        byTask[ftl::FunctionName(fiber.Function)] = fiber;
    }
    lock.unlock();
    flag.Clear();
    ts.WaitForCounter(&counter);
    REQUIRE(ts.GetWaitingFibers().empty());

    INFO(ftl::FormatWaitingFibers(fibers));
    REQUIRE(fibers.size() == 3);
    ftl::WaitingFiber const &onFlag = byTask["(anonymous namespace)::WaitOnFlag"];
    REQUIRE(onFlag.Kind == ftl::WaitKind::Counter);
    REQUIRE(onFlag.Object == &flag);
    REQUIRE(onFlag.Target == 0);
    ftl::WaitingFiber const &onLock = byTask["(anonymous namespace)::WaitOnFibtex"];
    REQUIRE(onLock.Kind == ftl::WaitKind::Fibtex);
    REQUIRE(onLock.Object == &lock);
    ftl::WaitingFiber const &sleeping = byTask["(anonymous namespace)::Sleeper"];
    REQUIRE(sleeping.Kind == ftl::WaitKind::Sleep);
    REQUIRE(sleeping.Object == nullptr);
    std::set<unsigned> indices;
    for (ftl::WaitingFiber const &fiber : fibers) {
        indices.insert(fiber.FiberIndex);
    }
    REQUIRE(indices.size() == 3);
    std::string const text = ftl::FormatWaitingFibers(fibers);
    REQUIRE(text.find("waits for fibtex 0x") != std::string::npos);
    REQUIRE(text.find("in (anonymous namespace)::Sleeper") != std::string::npos);
}
