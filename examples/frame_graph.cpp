// A game frame as a TaskGraph, built once and run every frame:
//
//   input ──> simulate[0..kBodies) ──> broadphase ──> present (main thread)
//        └──> audio ─────────────────────────────────┘
//
// `simulate` moves kBodies bodies, one node each; `broadphase` counts the
// pairs of bodies that overlap; `present` is pinned to the thread that
// called Init, as a graphics API bound to one thread would need. After each
// frame a task writes the frame's log entry under a Fibtex, and the main loop
// waits for it on a ConditionVariable. Every frame's result is checked
// against the same computation done serially.
#include "ftl/condition_variable.h"
#include "ftl/fibtex.h"
#include "ftl/task_counter.h"
#include "ftl/task_graph.h"
#include "ftl/task_scheduler.h"

#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

namespace {

constexpr unsigned kBodies = 256;
constexpr unsigned kFrames = 60;

struct Body {
    double X;
    double V;
};

double Step(Body &body) {
    body.X += body.V * 0.016;
    if (body.X < 0 || body.X > 100) {
        body.V = -body.V;
    }
    return body.X;
}

unsigned CountOverlaps(std::vector<Body> const &bodies) {
    unsigned overlaps = 0;
    for (unsigned i = 0; i < bodies.size(); ++i) {
        for (unsigned j = i + 1; j < bodies.size(); ++j) {
            double const d = bodies[i].X - bodies[j].X;
            overlaps += d * d < 0.25 ? 1u : 0u;
        }
    }
    return overlaps;
}

std::vector<Body> InitialBodies() {
    std::vector<Body> bodies(kBodies);
    for (unsigned i = 0; i < kBodies; ++i) {
        bodies[i] = Body{static_cast<double>(i % 100), static_cast<double>(i % 7) - 3.0};
    }
    return bodies;
}

} // namespace

int main() {
    ftl::TaskScheduler taskScheduler;
    if (taskScheduler.Init() != 0) {
        std::fprintf(stderr, "TaskScheduler::Init failed\n");
        return 1;
    }

    std::vector<Body> bodies = InitialBodies();
    unsigned frame = 0;
    unsigned overlaps = 0;
    unsigned audioFrames = 0;
    std::vector<unsigned> presented; // written by present, on the main thread only
    unsigned wrongThread = 0;

    ftl::TaskGraph graph(&taskScheduler);
    ftl::TaskGraph::Node input = graph.Add([&frame] { ++frame; });
    ftl::TaskGraph::Node audio = graph.Add([&audioFrames] { ++audioFrames; });
    ftl::TaskGraph::Node broadphase = graph.Add([&] { overlaps = CountOverlaps(bodies); });
    ftl::TaskGraph::Node present = graph.Add([&](ftl::TaskScheduler *ts) {
        if (ts->GetCurrentThreadIndex() != 0) {
            ++wrongThread;
        }
        presented.push_back(overlaps);
    });
    present.PinTo(0);
    input.Precede(audio);
    audio.Precede(present);
    for (unsigned i = 0; i < kBodies; ++i) {
        ftl::TaskGraph::Node simulate = graph.Add([&bodies, i] { Step(bodies[i]); });
        input.Precede(simulate);
        simulate.Precede(broadphase);
    }
    broadphase.Precede(present);

    // The frame log, written by a task after each frame.
    ftl::Fibtex logMutex(&taskScheduler);
    ftl::ConditionVariable logWritten(&taskScheduler);
    unsigned framesLogged = 0; // guarded by logMutex

    ftl::TaskCounter done(&taskScheduler);
    auto const start = std::chrono::steady_clock::now();
    for (unsigned f = 0; f < kFrames; ++f) {
        graph.Run(&done);
        taskScheduler.WaitForCounter(&done); // runs `present` here, on the main thread
        taskScheduler.AddTask(
            [&] {
                std::lock_guard<ftl::Fibtex> lock(logMutex);
                ++framesLogged;
                logWritten.notify_one();
            },
            ftl::TaskPriority::Normal);
        std::unique_lock<ftl::Fibtex> lock(logMutex);
        logWritten.wait(lock, [&] { return framesLogged == f + 1; });
    }
    double const ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

    // The same frames, serially.
    std::vector<Body> check = InitialBodies();
    std::vector<unsigned> expected;
    for (unsigned f = 0; f < kFrames; ++f) {
        for (Body &body : check) {
            Step(body);
        }
        expected.push_back(CountOverlaps(check));
    }
    bool const ok = presented == expected && frame == kFrames && audioFrames == kFrames && wrongThread == 0;
    std::printf(
        "frame_graph: %u frames of a %u-node graph in %.2f ms (%.1f us per frame), %u overlaps in the "
        "last frame, present on the main thread: %s: %s\n",
        kFrames, graph.Size(), ms, 1000.0 * ms / kFrames, presented.empty() ? 0u : presented.back(),
        wrongThread == 0 ? "yes" : "no", ok ? "correct" : "WRONG");
    return ok ? 0 : 1;
}
