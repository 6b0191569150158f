// A three-level dependency graph, the shape of a game frame's jobs:
//
//   level A  32 tasks. Each sums one block of input; it splits the block into
//            4 sub-tasks and waits for them, so a task waits inside a task.
//   level B  8 tasks. Each needs 4 results of level A: it waits on level A's
//            counter (8 fibers wait on one counter at once), then combines.
//   level C  1 task. It waits on level B's counter and folds B's results into
//            the frame's answer.
//
// The main thread adds all three levels up front and waits only on C. The
// waits inside the tasks express the dependencies; while a task waits, its
// fiber is parked and its thread runs other tasks. Each frame's answer is
// checked against the same computation done serially.
#include "ftl/task_counter.h"
#include "ftl/task_scheduler.h"

#include <cinttypes>
#include <cstdint>
#include <cstdio>

namespace {

constexpr unsigned kNumA = 32;
constexpr unsigned kPartsPerA = 4;
constexpr std::uint64_t kPartSize = 10000;
constexpr std::uint64_t kBlockSize = kPartsPerA * kPartSize;
constexpr unsigned kAPerB = 4;
constexpr unsigned kNumB = kNumA / kAPerB;
constexpr unsigned kNumFrames = 4;

// The input: a deterministic pseudo-random value in [0, 1000) per position
// and frame (a multiply-xorshift hash, so that no two frames or blocks sum
// alike by accident).
std::uint64_t Input(std::uint64_t position, unsigned frame) {
    std::uint64_t x = position * 0x9E3779B97F4A7C15ull + (frame + 1) * 0xBF58476D1CE4E5B9ull;
    x ^= x >> 31;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 29;
    return x % 1000u;
}

// Level B weights its inputs so that mixing up A's results changes the answer.
std::uint64_t CombineB(std::uint64_t const *aResults) {
    std::uint64_t b = 0;
    for (unsigned k = 0; k < kAPerB; ++k) {
        b += (k + 1) * aResults[k];
    }
    return b;
}

std::uint64_t CombineC(std::uint64_t const *bResults) {
    std::uint64_t c = 0;
    for (unsigned j = 0; j < kNumB; ++j) {
        c += (j + 1) * bResults[j] + (c >> 7);
    }
    return c;
}

struct FrameData {
    unsigned Number;
    std::uint64_t A[kNumA];
    std::uint64_t B[kNumB];
    std::uint64_t C;
    ftl::TaskCounter *ADone;
    ftl::TaskCounter *BDone;
};

// What every task of the graph gets: its frame and its index in its level.
struct Node {
    FrameData *Frame;
    unsigned Index;
};

struct Part {
    std::uint64_t Begin;
    std::uint64_t End;
    unsigned FrameNumber;
    std::uint64_t Sum;
};

void SumPart(ftl::TaskScheduler * /*taskScheduler*/, void *arg) {
    auto *part = static_cast<Part *>(arg);
    std::uint64_t sum = 0;
    for (std::uint64_t position = part->Begin; position < part->End; ++position) {
        sum += Input(position, part->FrameNumber);
    }
    part->Sum = sum;
}

void LevelA(ftl::TaskScheduler *taskScheduler, void *arg) {
    auto *node = static_cast<Node *>(arg);
    std::uint64_t const blockBegin = node->Index * kBlockSize;

    // The parts and the counter live on this task's fiber stack: the fiber
    // stays alive (parked) until the wait below returns.
    Part parts[kPartsPerA];
    ftl::Task tasks[kPartsPerA];
    for (unsigned p = 0; p < kPartsPerA; ++p) {
        std::uint64_t const begin = blockBegin + p * kPartSize;
        parts[p] = Part{begin, begin + kPartSize, node->Frame->Number, 0};
        tasks[p] = ftl::Task{SumPart, &parts[p]};
    }
    ftl::TaskCounter partsDone(taskScheduler);
    taskScheduler->AddTasks(kPartsPerA, tasks, ftl::TaskPriority::High, &partsDone);
    taskScheduler->WaitForCounter(&partsDone);

    std::uint64_t sum = 0;
    for (Part const &part : parts) {
        sum += part.Sum;
    }
    node->Frame->A[node->Index] = sum;
}

void LevelB(ftl::TaskScheduler *taskScheduler, void *arg) {
    auto *node = static_cast<Node *>(arg);
    // Every A result is visible once this returns: whatever a task wrote
    // before its counter reached 0 is visible to the fibers that waited.
    taskScheduler->WaitForCounter(node->Frame->ADone);
    node->Frame->B[node->Index] = CombineB(&node->Frame->A[node->Index * kAPerB]);
}

void LevelC(ftl::TaskScheduler *taskScheduler, void *arg) {
    auto *node = static_cast<Node *>(arg);
    taskScheduler->WaitForCounter(node->Frame->BDone);
    node->Frame->C = CombineC(node->Frame->B);
}

std::uint64_t SerialAnswer(unsigned frameNumber) {
    std::uint64_t a[kNumA] = {};
    for (unsigned i = 0; i < kNumA; ++i) {
        for (std::uint64_t position = i * kBlockSize; position < (i + 1) * kBlockSize; ++position) {
            a[i] += Input(position, frameNumber);
        }
    }
    std::uint64_t b[kNumB];
    for (unsigned j = 0; j < kNumB; ++j) {
        b[j] = CombineB(&a[j * kAPerB]);
    }
    return CombineC(b);
}

} // namespace

int main() {
    ftl::TaskScheduler taskScheduler;
    if (int const error = taskScheduler.Init(); error != 0) {
        std::fprintf(stderr, "dependency_graph: Init failed: %s\n", ftl::InitErrorString(error));
        return 1;
    }

    int failures = 0;
    for (unsigned frameNumber = 0; frameNumber < kNumFrames; ++frameNumber) {
        FrameData frame{};
        frame.Number = frameNumber;
        ftl::TaskCounter aDone(&taskScheduler);
        ftl::TaskCounter bDone(&taskScheduler);
        ftl::TaskCounter cDone(&taskScheduler);
        frame.ADone = &aDone;
        frame.BDone = &bDone;

        Node aNodes[kNumA];
        ftl::Task aTasks[kNumA];
        for (unsigned i = 0; i < kNumA; ++i) {
            aNodes[i] = Node{&frame, i};
            aTasks[i] = ftl::Task{LevelA, &aNodes[i]};
        }
        Node bNodes[kNumB];
        ftl::Task bTasks[kNumB];
        for (unsigned j = 0; j < kNumB; ++j) {
            bNodes[j] = Node{&frame, j};
            bTasks[j] = ftl::Task{LevelB, &bNodes[j]};
        }
        Node cNode{&frame, 0};

        // Order matters here: AddTasks raises a counter before any of its tasks
        // can run, so adding A before B guarantees that no B task can find
        // aDone at 0 before level A was even added. Level A gets high priority
        // so that workers take it before the B and C tasks, which would only
        // park.
        taskScheduler.AddTasks(kNumA, aTasks, ftl::TaskPriority::High, &aDone);
        taskScheduler.AddTasks(kNumB, bTasks, ftl::TaskPriority::Normal, &bDone);
        taskScheduler.AddTask(ftl::Task{LevelC, &cNode}, ftl::TaskPriority::Normal, &cDone);

        // C waited for B, and each B for A, so this one wait covers the frame.
        taskScheduler.WaitForCounter(&cDone);

        std::uint64_t const expected = SerialAnswer(frameNumber);
        std::printf("dependency_graph: frame %u: %" PRIu64 " (expected %" PRIu64 ")%s\n", frameNumber,
                    frame.C, expected, frame.C == expected ? "" : "  WRONG");
        if (frame.C != expected) {
            ++failures;
        }
    }

    if (failures != 0) {
        std::fprintf(stderr, "dependency_graph: %d of %u frames gave a wrong answer\n", failures, kNumFrames);
        return 1;
    }
    return 0;
}
