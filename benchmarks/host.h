// What a run's report says of the host it ran on, and the limits it gives
// each measurement.
#pragma once

#include <string>

namespace bench {

// The CPUs this process may use (at least 1).
unsigned AllowedCpuCount();

// A quarter of the machine's memory (at least 2 GB) as each child's limit:
// far more than any system needs for these workloads (ftl's fiber stacks, at
// most 32k of them, touch a few KB each), and far from what would make the
// kernel kill processes on a shared machine.
unsigned long MemoryLimit();

// "0.52 0.61 0.70": the 1, 5 and 15 minute load averages.
std::string LoadAverage();

// The first CPU's model name.
std::string CpuModel();

// "2026-11-29 05:34:50 UTC": as text, the earliest sorts first.
std::string UtcNow();

} // namespace bench
