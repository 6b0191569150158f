// ftl at one worker against ftl at more, to judge the target that a second
// worker never makes a workload slower (targets.h): --threads-pair measures
// such a run, --pair-merge reports several as one.
#pragma once

#include "harness.h"

#include <string>
#include <vector>

namespace bench {

// --threads-pair: ftl alone, at 1 worker and at `more`, in `rounds` rounds of
// every paired workload, then the report of each figure's ratio per host
// state and the target's verdict (to jsonPath too, when given). Returns the
// exit code.
int RunThreadsPair(Config const &config, Sizes sizes, unsigned more, unsigned rounds,
                   std::vector<Workload> const &workloads, std::string const &jsonPath);

// --pair-merge: the rounds of several --threads-pair runs (their JSON) in
// one report, so that a host state a single run missed, or visited for a
// round or two, can be counted over runs taken hours apart. Each round keeps
// the state and the single-thread mark of its own run; the figures from
// samples (W8, W8b, T1, M1) pool those of every run in the state. The runs
// must come from one host (their CPU) and one worker count. Returns the exit
// code.
int RunPairMerge(std::vector<std::string> const &files, std::string const &jsonPath);

} // namespace bench
