#!/usr/bin/env python3
"""Draws an ftl trace (FTL_TRACE=<file>, or TaskSchedulerInitOptions::TraceFile)
as a per-worker timeline: one row per worker, time across.

    python3 benchmarks/timeline.py trace.json timeline.svg [--from MS] [--to MS]
    python3 benchmarks/timeline.py trace.json --summary

Tasks are coloured by name (the most frequent names get a legend entry) and
labelled where the label fits; a task run inline by a waiting task sits
inside it, drawn thinner. Idle stretches (looking for work) are light grey,
parked ones (asleep until woken) darker and hatched; the pieces of a task
that parked are joined by grey lines from where it left one worker to where
it resumed. The file type follows the extension (.svg, .png, .pdf).

--summary prints, per worker, the task pieces it ran (a task that parked
counts once per piece) and the time busy, idle and parked, and needs no
matplotlib. Drawing needs matplotlib (Debian:
python3-matplotlib; bash third_party/deps.sh bench).
"""
import argparse
import collections
import json
import sys


def load(path):
    with open(path) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    workers = {}
    spans = []  # (tid, start, duration, name, category, depth)
    idle = []  # (tid, start, duration, parked)
    flows = collections.defaultdict(lambda: {"s": [], "f": []})  # id -> starts and finishes, in time order
    for event in events:
        phase = event.get("ph")
        if phase == "M" and event.get("name") == "thread_name":
            workers[event["tid"]] = event["args"]["name"]
        elif phase == "X" and event.get("cat") in ("task", "span"):
            spans.append([event["tid"], event["ts"], event["dur"], event["name"], event["cat"], 0])
        elif phase == "X" and event.get("cat") == "idle":
            idle.append((event["tid"], event["ts"], event["dur"], event["name"] == "parked"))
        elif phase in ("s", "f"):
            flows[event["id"]][phase].append((event["ts"], event["tid"]))
    # Nesting depth on each track: a span inside another (an inline task).
    by_track = collections.defaultdict(list)
    for span in spans:
        by_track[span[0]].append(span)
    for track in by_track.values():
        track.sort(key=lambda s: (s[1], -s[2]))
        open_ends = []
        for span in track:
            while open_ends and open_ends[-1] <= span[1]:
                open_ends.pop()
            span[5] = len(open_ends)
            open_ends.append(span[1] + span[2])
    return workers, spans, idle, flows


def summary(workers, spans, idle):
    print("worker   pieces   busy ms   idle ms   parked ms")
    for tid in sorted(workers):
        outer = [s for s in spans if s[0] == tid and s[5] == 0]
        pieces = sum(1 for s in spans if s[0] == tid and s[4] == "task")
        busy = sum(s[2] for s in outer) / 1000
        idle_ms = sum(d for t, _, d, parked in idle if t == tid and not parked) / 1000
        parked_ms = sum(d for t, _, d, parked in idle if t == tid and parked) / 1000
        print(f"{tid:6} {pieces:8} {busy:9.2f} {idle_ms:9.2f} {parked_ms:11.2f}")


def draw(workers, spans, idle, flows, out, start_ms, end_ms):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("timeline.py: matplotlib is missing: install python3-matplotlib "
                 "(bash third_party/deps.sh bench), or use --summary")
    matplotlib.rcParams["svg.hashsalt"] = "ftl_timeline"
    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: smaller, searchable
    ends = [s[1] + s[2] for s in spans] + [i[1] + i[2] for i in idle]
    starts = [s[1] for s in spans] + [i[1] for i in idle]
    lo = start_ms * 1000 if start_ms is not None else (min(starts) if starts else 0.0)
    hi = end_ms * 1000 if end_ms is not None else (max(ends) if ends else 1.0)
    visible = lambda ts, dur: ts + dur >= lo and ts <= hi

    counts = collections.Counter(s[3] for s in spans)
    palette = plt.get_cmap("tab10").colors
    colour = {name: palette[i % len(palette)] for i, (name, _) in enumerate(counts.most_common())}
    tids = sorted(workers) or sorted({s[0] for s in spans})
    row = {tid: i for i, tid in enumerate(reversed(tids))}
    fig, ax = plt.subplots(figsize=(14, 1.0 + 0.8 * len(tids)))
    for tid, ts, dur, parked in idle:
        if visible(ts, dur) and tid in row:
            ax.broken_barh([(ts / 1000, dur / 1000)], (row[tid] - 0.3, 0.6),
                           facecolors="#bbbbbb" if parked else "#e6e6e6",
                           hatch="//" if parked else None, edgecolor="#999999" if parked else "none", linewidth=0)
    width_ms = (hi - lo) / 1000
    bars = collections.defaultdict(list)  # one draw call per (track, depth, name)
    for tid, ts, dur, name, category, depth in spans:
        if not visible(ts, dur) or tid not in row:
            continue
        bars[(tid, depth, name)].append((ts / 1000, max(dur / 1000, width_ms / 4000)))
        if dur / 1000 > width_ms / 12:
            ax.text((ts + dur / 2) / 1000, row[tid], name.split("::")[-1], ha="center", va="center",
                    fontsize=7, clip_on=True, color="white")
    for (tid, depth, name), ranges in bars.items():
        height = 0.6 * (0.75 ** depth)
        ax.broken_barh(ranges, (row[tid] - height / 2, height), facecolors=colour[name], edgecolor="none",
                       linewidth=0, zorder=2 + depth)
    for flow in flows.values():
        # The n-th start (a piece ending in a wait) goes to the n-th finish.
        for (s0, t0), (s1, t1) in zip(sorted(flow["s"]), sorted(flow["f"])):
            if t0 in row and t1 in row and visible(s0, s1 - s0):
                ax.plot([s0 / 1000, s1 / 1000], [row[t0], row[t1]], color="#555555", linewidth=0.6, alpha=0.6)
    ax.set_yticks([row[t] for t in tids])
    ax.set_yticklabels([workers.get(t, f"thread {t}") for t in tids])
    ax.set_xlim(lo / 1000, hi / 1000)
    ax.set_ylim(-0.7, len(tids) - 0.3)
    ax.set_xlabel("ms since Init returned")
    handles = [matplotlib.patches.Patch(color=colour[name], label=f"{name} ({count})")
               for name, count in counts.most_common(8)]
    handles.append(matplotlib.patches.Patch(facecolor="#e6e6e6", label="idle"))
    handles.append(matplotlib.patches.Patch(facecolor="#bbbbbb", hatch="//", edgecolor="#999999", label="parked"))
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.18 - 0.05 / max(len(tids), 1)),
              ncol=min(len(handles), 4), fontsize=8, frameon=False)
    fig.tight_layout()
    fig.savefig(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace")
    parser.add_argument("output", nargs="?")
    parser.add_argument("--from", dest="start", type=float, help="start of the window, ms since Init")
    parser.add_argument("--to", dest="end", type=float, help="end of the window, ms since Init")
    parser.add_argument("--summary", action="store_true", help="print per-worker totals instead of drawing")
    args = parser.parse_args()
    workers, spans, idle, flows = load(args.trace)
    if args.summary:
        summary(workers, spans, idle)
        return
    if args.output is None:
        parser.error("an output file is needed (or --summary)")
    draw(workers, spans, idle, flows, args.output, args.start, args.end)


if __name__ == "__main__":
    main()
