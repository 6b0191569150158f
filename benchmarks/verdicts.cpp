// The verdicts on the performance targets of targets.h: one judge per kind
// of target, each given the target's figures, threshold and wording.
#include "verdicts.h"

#include "targets.h"

#include <algorithm>

namespace bench {

double CellMedian(Table const &table, std::string const &figure, std::string const &column) {
    Cell const *cell = table.Find(figure, column);
    return cell != nullptr && cell->Status == Cell::State::Measured ? cell->Figure.Median : -1;
}

PeerBest BestPeer(Table const &table, std::vector<std::string> const &figures,
                  std::function<bool(Cell const &)> const &eligible) {
    PeerBest best;
    for (std::string const &figure : figures) {
        for (char const *peer : kPeers) {
            double const median = CellMedian(table, figure, peer);
            if (median >= 0 && eligible && !eligible(*table.Find(figure, peer))) {
                continue;
            }
            if (median >= 0 && (best.Median < 0 || median < best.Median)) {
                Cell const *cell = table.Find(figure, peer);
                best = PeerBest{median, std::string(peer) + " (" + cell->Primitive + ")", peer, cell};
            }
        }
    }
    return best;
}

bool OneThreadCell(Cell const *cell, unsigned threads) {
    return threads >= 2 && cell != nullptr && cell->Status == Cell::State::Measured &&
           cell->BusiestShare >= kOneThreadShare;
}

std::string PeerKey(std::string const &figure, std::string const &peer) {
    return figure + " " + peer;
}

std::string TogetherState(Together const &together) {
    return Format("measured together, run by run, in the %s state",
                  together.Probe > kSlowProbeNs ? "slow" : "fast");
}

namespace {

// The host's state while a cell was measured.
char const *StateOf(Cell const *cell) {
    return std::max(cell->ProbeBefore, cell->ProbeAfter) > kSlowProbeNs ? "slow" : "fast";
}

// " (ftl measured in the fast state, the peer in the slow state)": a target
// that compares two cells holds in both host states, one run usually sees
// one, and a cell from a slow or noisy minute explains a miss.
std::string MeasuredIn(Cell const *first, char const *firstName, Cell const *second, char const *secondName) {
    return Format(" (%s measured in the %s state, %s in the %s state)", firstName, StateOf(first), secondName,
                  StateOf(second));
}

std::string MeasuredIn(Cell const *ftl, Cell const *other, char const *otherName) {
    return MeasuredIn(ftl, "ftl", other, otherName);
}

// " (measured together, run by run, in the fast state)"
std::string TogetherIn(Together const &together) {
    return " (" + TogetherState(together) + ")";
}

// The figures of a TargetFigures, without the unused entries.
std::vector<char const *> Listed(TargetFigures const &figures) {
    std::vector<char const *> listed;
    for (char const *figure : figures) {
        if (figure != nullptr) {
            listed.push_back(figure);
        }
    }
    return listed;
}

// What a run's verdicts rest on.
struct Evidence {
    Table const &Cells;
    unsigned Threads;
    TogetherMap const &Pairs;
    PeerTogetherMap const &PeerPairs;

    // The pair measured together whose first figure is `id`, or nullptr.
    Together const *MeasuredTogether(char const *id) const {
        auto const found = Pairs.find(id);
        return found != Pairs.end() && found->second.Ok ? &found->second : nullptr;
    }
    // ftl and `peer` measured together on `figure`, or nullptr.
    Together const *MeasuredWithPeer(std::string const &figure, std::string const &peer) const {
        auto const found = PeerPairs.find(PeerKey(figure, peer));
        return found != PeerPairs.end() && found->second.Ok ? &found->second : nullptr;
    }
};

using Verdicts = std::vector<TargetVerdict>;

// FasterThanBestPeer (W1-W3), on ftl and the best peer measured together
// when they were.
void JudgeFasterThanBestPeer(Target const &target, Evidence const &evidence, Verdicts &verdicts) {
    for (char const *figure : Listed(target.Figures)) {
        double const ftlCell = CellMedian(evidence.Cells, figure, "ftl");
        PeerBest const best = BestPeer(evidence.Cells, {figure});
        if (ftlCell <= 0 || best.Median < 0) {
            continue; // not measured in this run (needs ftl and a peer)
        }
        Together const *both = evidence.MeasuredWithPeer(figure, best.Column);
        double const ftl = both != nullptr ? both->First : ftlCell;
        double const peer = both != nullptr ? both->Second : best.Median;
        verdicts.push_back(TargetVerdict{
            Format("%s: best peer %s %s, ftl %s: ftl %.2fx faster%s; target >= %gx", figure,
                   best.Name.c_str(), FormatValue(peer).c_str(), FormatValue(ftl).c_str(), peer / ftl,
                   both != nullptr ? TogetherIn(*both).c_str() : "", target.Threshold),
            peer / ftl >= target.Threshold});
    }
}

// NsAboveOwn (W1c and W3c over W1 and W3).
void JudgeNsAboveOwn(Target const &target, Evidence const &evidence, Verdicts &verdicts) {
    std::vector<char const *> const figures = Listed(target.Figures);
    std::vector<char const *> const against = Listed(target.Against);
    TargetWording const &words = target.Wording;
    for (std::size_t i = 0; i < figures.size() && i < against.size(); ++i) {
        Together const *both = evidence.MeasuredTogether(figures[i]);
        double const first = both != nullptr ? both->First : CellMedian(evidence.Cells, figures[i], "ftl");
        double const second = both != nullptr ? both->Second : CellMedian(evidence.Cells, against[i], "ftl");
        if (first > 0 && second > 0) {
            verdicts.push_back(TargetVerdict{
                Format("%s: %s %s ns, %s (%s) %s ns: %+.2f ns%s; target <= %+g ns", figures[i], words.Subject,
                       FormatValue(first).c_str(), words.Other, against[i], FormatValue(second).c_str(),
                       first - second,
                       both != nullptr ? TogetherIn(*both).c_str()
                                       : MeasuredIn(evidence.Cells.Find(figures[i], "ftl"), figures[i],
                                                    evidence.Cells.Find(against[i], "ftl"), against[i])
                                             .c_str(),
                       target.Threshold),
                first - second <= target.Threshold});
        }
    }
}

// TimesOwn (G1 over W1, P1 over P1h).
void JudgeTimesOwn(Target const &target, Evidence const &evidence, Verdicts &verdicts) {
    std::vector<char const *> const figures = Listed(target.Figures);
    std::vector<char const *> const against = Listed(target.Against);
    TargetWording const &words = target.Wording;
    for (std::size_t i = 0; i < figures.size() && i < against.size(); ++i) {
        Together const *both = evidence.MeasuredTogether(figures[i]);
        double const a = both != nullptr ? both->First : CellMedian(evidence.Cells, figures[i], "ftl");
        double const b = both != nullptr ? both->Second : CellMedian(evidence.Cells, against[i], "ftl");
        if (a > 0 && b > 0) {
            verdicts.push_back(TargetVerdict{
                Format("%s: %s %s %s, %s %s %s = %.*fx%s; target <= %.2fx", figures[i], words.Subject,
                       FormatValue(a).c_str(), words.Unit, words.Other, FormatValue(b).c_str(), words.Unit,
                       words.RatioDecimals, a / b,
                       both != nullptr ? TogetherIn(*both).c_str()
                                       : MeasuredIn(evidence.Cells.Find(figures[i], "ftl"), figures[i],
                                                    evidence.Cells.Find(against[i], "ftl"), against[i])
                                             .c_str(),
                       target.Threshold),
                a <= target.Threshold * b});
        }
    }
}

// TimesBestPeer (W4).
void JudgeTimesBestPeer(Target const &target, Evidence const &evidence, Verdicts &verdicts) {
    char const *const unit = target.Wording.Unit;
    for (char const *figure : Listed(target.Figures)) {
        PeerBest const best = BestPeer(evidence.Cells, {figure});
        Together const *both = evidence.MeasuredWithPeer(figure, best.Column);
        double const ftl = both != nullptr ? both->First : CellMedian(evidence.Cells, figure, "ftl");
        double const peer = both != nullptr ? both->Second : best.Median;
        if (ftl > 0 && peer >= 0) {
            verdicts.push_back(TargetVerdict{
                Format("%s: best peer %s %s %s, ftl %s %s = %.*f of it%s; target <= %.2f", figure,
                       best.Name.c_str(), FormatValue(peer).c_str(), unit, FormatValue(ftl).c_str(), unit,
                       target.Wording.RatioDecimals, ftl / peer,
                       both != nullptr
                           ? TogetherIn(*both).c_str()
                           : MeasuredIn(evidence.Cells.Find(figure, "ftl"), best.Cell, "the peer").c_str(),
                       target.Threshold),
                ftl <= target.Threshold * peer});
        }
    }
}

// " [left out: W5 Boost.Fiber (...), whose busiest thread ran 97% of the
// tasks]": the peer cells of a lock target that measured no contention.
std::string LeftOutLocks(Target const &target, Evidence const &evidence) {
    std::string leftOut;
    for (char const *figure : Listed(target.Against)) {
        for (char const *peer : kPeers) {
            Cell const *cell = evidence.Cells.Find(figure, peer);
            if (OneThreadCell(cell, evidence.Threads)) {
                leftOut += Format("%s%s %s (%s), whose busiest thread ran %.0f%% of the tasks",
                                  leftOut.empty() ? "" : "; ", figure, peer, cell->Primitive.c_str(),
                                  100 * cell->BusiestShare);
            }
        }
    }
    return leftOut.empty() ? leftOut : " [left out: " + leftOut + "]";
}

// ContendedLock (W5). With 2 or more threads the target is about a
// contended lock: a cell whose busiest thread ran (nearly) every task
// measured none, and a peer's such cell is left out, said so.
void JudgeContendedLock(Target const &target, Evidence const &evidence, Verdicts &verdicts) {
    unsigned const threads = evidence.Threads;
    auto const spread = [threads](Cell const &cell) { return !OneThreadCell(&cell, threads); };
    std::string const leftOut = LeftOutLocks(target, evidence);
    char const *const figure = target.Figures[0];
    std::vector<char const *> const against = Listed(target.Against);
    double const ftl = CellMedian(evidence.Cells, figure, "ftl");
    Cell const *ftlCell = evidence.Cells.Find(figure, "ftl");
    std::vector<std::string> const lockFigures(against.begin(), against.end());
    PeerBest const best = BestPeer(evidence.Cells, lockFigures, spread);
    double const peer = best.Median;
    if (ftl > 0 && !spread(*ftlCell)) {
        verdicts.push_back(TargetVerdict{
            Format("%s: ftl's busiest worker ran %.0f%% of the tasks, so its %s ns measured no contention; "
                   "target: Fibtex no slower than the fastest peer mutex, both contended",
                   figure, 100 * ftlCell->BusiestShare, FormatValue(ftl).c_str()),
            false});
    } else if (ftl > 0 && peer >= 0) {
        verdicts.push_back(TargetVerdict{
            Format("%s: fastest peer mutex %s %s ns, ftl Fibtex %s ns = %.2fx%s%s; target <= %.2fx", figure,
                   best.Name.c_str(), FormatValue(peer).c_str(), FormatValue(ftl).c_str(), ftl / peer,
                   MeasuredIn(ftlCell, best.Cell, "the peer").c_str(), leftOut.c_str(), target.Threshold),
            ftl <= target.Threshold * peer});
    } else if (ftl > 0 && !leftOut.empty()) {
        verdicts.push_back(TargetVerdict{
            Format("%s: no peer mutex was measured contended%s; target: Fibtex no slower than the fastest "
                   "peer mutex",
                   figure, leftOut.c_str()),
            false});
    }
}

// TimesReference (W6 with the std::thread loop, W8 with the raw futex).
void JudgeTimesReference(Target const &target, Evidence const &evidence, Verdicts &verdicts) {
    TargetWording const &words = target.Wording;
    for (char const *figure : Listed(target.Figures)) {
        Together const *both = evidence.MeasuredTogether(figure);
        double const ftl = both != nullptr ? both->First : CellMedian(evidence.Cells, figure, "ftl");
        double const reference =
            both != nullptr ? both->Second : CellMedian(evidence.Cells, figure, "reference");
        if (ftl > 0 && reference > 0) {
            verdicts.push_back(
                TargetVerdict{Format("%s: %s %s %s, ftl %s %s = %.*fx%s; target <= %gx", figure, words.Other,
                                     FormatValue(reference).c_str(), words.Unit, FormatValue(ftl).c_str(),
                                     words.Unit, words.RatioDecimals, ftl / reference,
                                     both != nullptr ? TogetherIn(*both).c_str()
                                                     : MeasuredIn(evidence.Cells.Find(figure, "ftl"),
                                                                  evidence.Cells.Find(figure, "reference"),
                                                                  words.OtherState)
                                                           .c_str(),
                                     target.Threshold),
                              ftl <= target.Threshold * reference});
        }
    }
}

// Below (W7, W7s, W7t).
void JudgeBelow(Target const &target, Evidence const &evidence, Verdicts &verdicts) {
    for (char const *figure : Listed(target.Figures)) {
        double const ftl = CellMedian(evidence.Cells, figure, "ftl");
        if (ftl >= 0) {
            verdicts.push_back(
                TargetVerdict{Format("%s: ftl %s %s; target < %g", figure, FormatValue(ftl).c_str(),
                                     target.Wording.Unit, target.Threshold),
                              ftl < target.Threshold});
        }
    }
}

// LateAtMost (T1, with its p99 beside it).
void JudgeLateAtMost(Target const &target, Evidence const &evidence, Verdicts &verdicts) {
    std::vector<char const *> const figures = Listed(target.Figures);
    std::vector<char const *> const against = Listed(target.Against);
    TargetWording const &words = target.Wording;
    for (std::size_t i = 0; i < figures.size() && i < against.size(); ++i) {
        double const median = CellMedian(evidence.Cells, figures[i], "ftl");
        double const p99 = CellMedian(evidence.Cells, against[i], "ftl");
        if (median >= 0) {
            verdicts.push_back(
                TargetVerdict{Format("%s: %s %s %s late at the median (p99 %s %s); target <= %g %s",
                                     figures[i], words.Subject, FormatValue(median).c_str(), words.Unit,
                                     FormatValue(p99).c_str(), words.Unit, target.Threshold, words.Unit),
                              median <= target.Threshold});
        }
    }
}

// "a; b; c"
std::string JoinWithSemicolons(std::vector<std::string> const &items) {
    std::string list;
    for (std::string const &item : items) {
        list += (list.empty() ? "" : "; ") + item;
    }
    return list;
}

// NoPeerFaster (lower is better for every figure). A pair measured together
// (see PeerTogetherMap) is judged on that.
void JudgeNoPeerFaster(Target const &target, Evidence const &evidence, Verdicts &verdicts) {
    Table const &table = evidence.Cells;
    std::vector<std::string> slower;
    std::vector<std::string> cleared; // a peer's cell beat ftl's, not when measured together
    unsigned compared = 0;
    for (Table::Row const &row : table.Rows()) {
        double const ftlCell = CellMedian(table, row.Fig.Id, "ftl");
        if (ftlCell < 0) {
            continue;
        }
        for (char const *peer : kPeers) {
            double const median = CellMedian(table, row.Fig.Id, peer);
            if (OneThreadCell(table.Find(row.Fig.Id, peer), evidence.Threads)) {
                continue; // a lock that one thread took alone: see the W5 verdict
            }
            compared += median >= 0 ? 1 : 0;
            double const tie = row.Fig.Unit.rfind("cpu-s", 0) == 0 ? kIdleCpuNoise : 0;
            if (median < 0 || median >= target.Threshold * ftlCell - tie) {
                continue;
            }
            Together const *both = evidence.MeasuredWithPeer(row.Fig.Id, peer);
            if (both == nullptr) {
                slower.push_back(row.Fig.Id + " (" + peer + " " + FormatValue(median) + " vs ftl " +
                                 FormatValue(ftlCell) + " " + row.Fig.Unit + ")");
                continue;
            }
            if (evidence.Threads >= 2 && both->SecondShare >= kOneThreadShare) {
                continue; // beside ftl, the peer took the lock on one thread
            }
            std::string const pair = row.Fig.Id + " (" + peer + " " + FormatValue(both->Second) + " vs ftl " +
                                     FormatValue(both->First) + " " + row.Fig.Unit + ", " +
                                     TogetherState(*both) + ")";
            (both->Second < both->First ? slower : cleared).push_back(pair);
        }
    }
    if (compared == 0) {
        return;
    }
    std::string text = "no figure where a peer beats ftl";
    if (!slower.empty()) {
        text += ": " + JoinWithSemicolons(slower);
    }
    if (!cleared.empty()) {
        text += " [a peer's cell beat ftl's, but not beside it: " + JoinWithSemicolons(cleared) + "]";
    }
    verdicts.push_back(TargetVerdict{text, slower.empty()});
}

} // namespace

std::vector<TargetVerdict> JudgeTargets(Table const &table, unsigned threads, TogetherMap const &together,
                                        PeerTogetherMap const &peerTogether) {
    Evidence const evidence{table, threads, together, peerTogether};
    Verdicts verdicts;
    for (Target const &target : kTargets) {
        switch (target.Kind) {
        case TargetKind::FasterThanBestPeer:
            JudgeFasterThanBestPeer(target, evidence, verdicts);
            break;
        case TargetKind::NsAboveOwn:
            JudgeNsAboveOwn(target, evidence, verdicts);
            break;
        case TargetKind::TimesOwn:
            JudgeTimesOwn(target, evidence, verdicts);
            break;
        case TargetKind::TimesBestPeer:
            JudgeTimesBestPeer(target, evidence, verdicts);
            break;
        case TargetKind::ContendedLock:
            JudgeContendedLock(target, evidence, verdicts);
            break;
        case TargetKind::TimesReference:
            JudgeTimesReference(target, evidence, verdicts);
            break;
        case TargetKind::Below:
            JudgeBelow(target, evidence, verdicts);
            break;
        case TargetKind::LateAtMost:
            JudgeLateAtMost(target, evidence, verdicts);
            break;
        case TargetKind::NoPeerFaster:
            JudgeNoPeerFaster(target, evidence, verdicts);
            break;
        case TargetKind::SecondWorkerNoSlower:
            break; // judged by ftl_bench --threads-pair
        }
    }
    return verdicts;
}

void PrintTargets(std::FILE *out, std::vector<TargetVerdict> const &verdicts) {
    std::fprintf(out, "\nPerformance targets (README), on this run's medians:\n");
    if (verdicts.empty()) {
        std::fprintf(out, "  (no figure with both ftl and a peer in this run)\n");
    }
    for (TargetVerdict const &verdict : verdicts) {
        std::fprintf(out, "  %s: %s\n", verdict.Text.c_str(), verdict.Met ? "met" : "NOT met");
    }
}

} // namespace bench
