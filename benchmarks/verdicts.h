// The verdicts on the performance targets (targets.h), from a run's table
// and the pairs of figures measured once more together, and what both the
// verdicts and the run's planning read from the table: cells' medians, the
// best peer, a lock cell that one thread took alone.
#pragma once

#include "harness.h"

#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace bench {

// The peers' columns of the main table.
inline constexpr char const *kPeers[] = {"oneTBB", "OpenMP", "Boost.Fiber"};

// A W5 cell whose busiest thread ran at least this share of the tasks
// measured one thread taking an uncontended lock, not a contended one.
constexpr double kOneThreadShare = 0.95;

// The median of a measured cell; -1 when the cell is missing or was not measured.
double CellMedian(Table const &table, std::string const &figure, std::string const &column);

// The peer with the lowest median on one of `figures`.
struct PeerBest {
    double Median = -1;                // -1: no peer measured
    std::string Name;                  // "oneTBB (its primitive)"
    std::string Column;                // "oneTBB"
    bench::Cell const *Cell = nullptr; // its cell
};

// Only cells `eligible` takes, when it is given.
PeerBest BestPeer(Table const &table, std::vector<std::string> const &figures,
                  std::function<bool(Cell const &)> const &eligible = nullptr);

// Whether a measured cell of a lock workload, with a pool of `threads`,
// had one thread take the lock alone (kOneThreadShare).
bool OneThreadCell(Cell const *cell, unsigned threads);

// A target that compares two figures (W8 with the raw futex, W6 with the
// std::thread loop, G1 with W1, W1c and W3c with W1 and W3) would compare
// two table cells measured in two processes seconds or minutes apart, and
// the host's drift (2x within seconds for a wake, 1.5x for whole seconds of
// W1; ftl's W6 read 10.7 to 17.4 ms in the processes of one full run) can
// put them on either side of the target whatever ftl does. So such a verdict
// rests on a measurement of its own: the two fixtures in one process, their
// runs in turn. The table keeps both cells as measured.
struct Together {
    bool Ok = false;
    double First = 0;
    double Second = 0;
    double Probe = 0; // the higher of the two probes around it
    // The second pool's busiest thread's share of the tasks (W5; -1: not counted).
    double SecondShare = -1;
};

// The together measurements, by the first figure's id.
using TogetherMap = std::map<std::string, Together>;

// The figures ftl is compared with a peer on (W1-W4 and W8: the best peer; any
// figure: a peer whose cell beat ftl's) measured together as well: ftl's and
// a peer's cells, from two processes, moved as much as the host (W3: 1.48x
// and 2.09x the best peer in two full runs an hour apart). By PeerKey.
using PeerTogetherMap = std::map<std::string, Together>;

std::string PeerKey(std::string const &figure, std::string const &peer);

// "measured together, run by run, in the fast state"
std::string TogetherState(Together const &together);

// One target's verdict on this run: what was compared, and whether it holds.
struct TargetVerdict {
    std::string Text;
    bool Met;
};

// The verdicts on every target of kTargets that a run of the main table
// judges, in their order, on the figures this run measured (a target with
// none of its figures measured has no verdict).
std::vector<TargetVerdict> JudgeTargets(Table const &table, unsigned threads, TogetherMap const &together,
                                        PeerTogetherMap const &peerTogether);

void PrintTargets(std::FILE *out, std::vector<TargetVerdict> const &verdicts);

} // namespace bench
