#!/usr/bin/env python3
"""Turns ftl_bench's JSON into the chart and the results document.

    python3 benchmarks/plot.py results.json results.svg [--results-doc docs/results.adoc]
                                                        [--readme README.asciidoc]
                                                        [--pair pair.json]

The chart has one panel per figure, one bar per system (the median, with a
line from the minimum to the maximum). --results-doc writes the whole run as
AsciiDoc: the run's conditions, the table of medians with ratios to ftl, each
performance target's verdict (as ftl_bench judged it), the --features table,
and every measurement with its spread and cross-core probe. --readme replaces
the block between "// results:begin" and "// results:end" in the README with
the run's table and verdict count, and the block between "// targets:begin"
and "// targets:end" with the table of performance targets (read from
benchmarks/targets.h) and the run's verdict on each. --pair adds the run of
`ftl_bench --threads-pair R --json` to both: ftl at 1 worker against ftl at
every core, per host state. Both are regenerated, never edited by hand.
Needs matplotlib (Debian: python3-matplotlib; bash third_party/deps.sh bench).
"""
import argparse
import json
import math
import os
import re
import sys

COLOURS = {
    "ftl": "#1f77b4",
    "oneTBB": "#ff7f0e",
    "OpenMP": "#2ca02c",
    "Boost.Fiber": "#d62728",
    "reference": "#7f7f7f",
}


def fmt(value):
    """3-4 significant digits, like ftl_bench's tables."""
    if value == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(value)))
    decimals = min(max(2 - magnitude, 0), 6)
    return f"{value:.{decimals}f}"


def cells_by_figure(results):
    table = {}
    for cell in results:
        table.setdefault(cell["figure"], {})[cell["system"]] = cell
    return table


def figure_order(data):
    return [(figure["id"], figure["unit"], workload["id"])
            for workload in data["workloads"] for figure in workload["figures"]]


def draw(data, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot.py: matplotlib is missing: install python3-matplotlib "
                 "(bash third_party/deps.sh bench)")
    matplotlib.rcParams["svg.hashsalt"] = "ftl_bench"  # the same run gives the same file

    systems = [system["name"] for system in data["systems"]]
    table = cells_by_figure(data["results"])
    figures = [f for f in figure_order(data) if f[0] in table]
    columns = 4
    rows = math.ceil(len(figures) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 3.3 * rows), squeeze=False)
    for index, (figure_id, unit, _) in enumerate(figures):
        ax = axes[index // columns][index % columns]
        cells = table[figure_id]
        names, medians, lows, highs, colours = [], [], [], [], []
        for system in systems:
            cell = cells.get(system)
            if cell is None or cell.get("status") != "ok" or "median" not in cell:
                continue
            names.append(system)
            medians.append(cell["median"])
            lows.append(cell["median"] - cell["min"])
            highs.append(cell["max"] - cell["median"])
            colours.append(COLOURS.get(system, "#9467bd"))
        positions = range(len(names))
        ax.bar(positions, medians, color=colours, yerr=[lows, highs], capsize=3,
               error_kw={"elinewidth": 0.8, "ecolor": "#333333"})
        ax.set_xticks(list(positions))
        ax.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
        positive = [m for m in medians if m > 0]
        tops = [m + h for m, h in zip(medians, highs)]
        if len(positive) == len(medians) and positive and max(positive) / min(positive) > 20:
            ax.set_yscale("log")
            if tops:
                ax.set_ylim(top=max(tops) * 3)  # room for the labels and the notes
        elif tops:
            ax.set_ylim(bottom=0, top=max(tops) * 1.25)
        ax.set_title(f"{figure_id} ({unit}, lower is better)", fontsize=9)
        ax.tick_params(axis="y", labelsize=8)
        for position, median in zip(positions, medians):
            ax.annotate(fmt(median), (position, median), textcoords="offset points", xytext=(3, 2),
                        ha="left", va="bottom", fontsize=7)
        notes = []
        for status, label in (("failed", "FAILED"), ("not built", "n/a")):
            names_with = [s for s in systems if s in cells and cells[s]["status"] == status]
            if names_with:
                notes.append(f"{label}: " + ", ".join(names_with))
        if notes:
            ax.text(0.99, 0.97, "\n".join(notes), transform=ax.transAxes, ha="right",
                    va="top", fontsize=7, color="#aa0000" if "FAILED" in notes[0] else "#666666")
    for index in range(len(figures), rows * columns):
        axes[index // columns][index % columns].axis("off")
    title = (f"ftl_bench, {data['started']}: {data['cpu']}, {data['threads']} workers per system; "
             f"medians of {data['repetitions']} runs, bars from min to max")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.savefig(path, metadata={"Date": None})
    print(f"plot.py: wrote {path}")


SLOW_PLACEMENT = 2.5  # as kSlowPlacement in harness.h


def probe_base(data):
    """The probe the * is relative to: the lower quartile of the run's (as LowerQuartile in harness.h)."""
    probes = sorted(p for key in ("results", "features") for cell in data.get(key, [])
                    if cell.get("status") == "ok" for p in cell.get("cross_core_ns", []) if p > 0)
    return probes[(len(probes) - 1) // 4] if probes else 0


def cell_text(cell, reference, ratio, probe_base_ns):
    status = cell.get("status") if cell else "not implemented"
    if status == "ok" and "median" in cell:
        text = fmt(cell["median"])
        # A cell measured beside the first column's system in one process
        # (--features on a timed workload) is compared with that measurement.
        base = cell.get("paired_reference")
        if base is None and reference and reference.get("status") == "ok" and reference.get("median", 0) > 0:
            base = reference["median"]
        if ratio and base and cell is not reference:
            ratio_value = cell["median"] / base
            text += f" ({ratio_value:.0f}x)" if ratio_value >= 100 else f" ({ratio_value:.2f}x)"
        if probe_base_ns and max(cell.get("cross_core_ns", [0])) > SLOW_PLACEMENT * probe_base_ns:
            text += "*"
        return text
    return {"failed": "FAILED", "not built": "n/a"}.get(status, "-")


def asciidoc_table(data, results, first_column, probe_base_ns):
    table = cells_by_figure(results)
    systems = []
    for cell in results:
        if cell["system"] not in systems:
            systems.append(cell["system"])
    lines = [f'[cols="2,2,{",".join(["3"] * len(systems))}",options="header"]', "|==="]
    lines.append("| Figure | Unit | " + " | ".join(systems))
    for figure_id, unit, _ in figure_order(data):
        if figure_id not in table:
            continue
        cells = table[figure_id]
        ratio = not unit.startswith("cpu-s")
        reference = cells.get(first_column)
        texts = [cell_text(cells.get(system), reference, ratio, probe_base_ns) for system in systems]
        lines.append(f"| {figure_id} | {unit} | " + " | ".join(texts))
    lines.append("|===")
    return "\n".join(lines) + "\n"


def run_line(data):
    return (f"{data['started']} to {data['finished']}; {data['cpu']}, {data['cores']} cores, "
            f"{data['threads']} workers per system; medians of {data['repetitions']} runs"
            f"{' (--short sizes)' if data.get('short') else ''}; load average {data['load_before']} before, "
            f"{data['load_after']} after")


def probe_summary(data, probe_base_ns):
    probes = [p for key in ("results", "features") for cell in data.get(key, [])
              if cell.get("status") == "ok" for p in cell.get("cross_core_ns", []) if p > 0]
    if not probes:
        return "no cross-core probe (one CPU)"
    slow = sum(1 for key in ("results", "features") for cell in data.get(key, [])
               if cell.get("status") == "ok" and max(cell.get("cross_core_ns", [0])) > SLOW_PLACEMENT * probe_base_ns)
    return (f"cross-core probe (a cache-line round trip between the first two cores) {fmt(min(probes))} to {fmt(max(probes))} ns; "
            f"{slow} cell(s) measured in the slow state (probe above {SLOW_PLACEMENT}x the run's lower quartile), marked *")


def target_lines(data):
    return [f"* {t['text']}: {'met' if t['met'] else '*not met*'}" for t in data.get("targets", [])]


def details(data, results):
    lines = ['[cols="1,2,2,2,3,4",options="header"]', "|===",
             "| Figure | System | Median | Min .. max | Probe before / after (ns) | What it used"]
    for cell in results:
        if cell.get("status") == "ok":
            probe = " / ".join(fmt(p) for p in cell.get("cross_core_ns", []))
            lines.append(f"| {cell['figure']} | {cell['system']} | {fmt(cell['median'])} {cell['unit']} | "
                         f"{fmt(cell['min'])} .. {fmt(cell['max'])} | {probe} | {cell.get('primitive', '')}")
        elif cell.get("status") == "failed":
            lines.append(f"| {cell['figure']} | {cell['system']} | FAILED | | | {cell.get('error', '')}")
    lines.append("|===")
    return "\n".join(lines) + "\n"


def pair_section(pair):
    """The --threads-pair run: each figure's median ratio (more workers over one) per
    host state, then every round."""
    workers = pair["workers"]
    # A merge (ftl_bench --pair-merge) lists its runs; a single run is its own.
    runs = pair.get("runs", [pair])
    several = len(runs) > 1  # rounds are numbered within their runs
    factor = pair.get("serial_slow_factor")
    quartiles = ", ".join(f"{fmt(run['serial_base_ns'])} ns" for run in runs if "serial_base_ns" in run)
    serial_note = "" if factor is None else (
        f" A round marked * ran while the single-thread probe (a locked increment on one core) read above "
        f"{factor:g}x its run's lower quartile ({quartiles}): the host ran single-thread code "
        "slower, which inflates the 1-worker figure more than the other, so the round stays out of the medians.")
    def library(run):
        # The source revision the run measured (runs before ftl_bench named it: none).
        return f", library {run['library']}" if run.get("library") else ""

    if several:
        # A run given --filter measured only some workloads: say which.
        measured = {}
        for row in pair["rows"]:
            measured.setdefault(row.get("run", 1), set()).add(row["figure"].split(" ")[0])
        every = set().union(*measured.values())

        def only(i):
            mine = measured.get(i, set())
            return f", {', '.join(sorted(mine))} only" if mine and mine != every else ""

        listed = "; ".join(f"run {i}: {run['started']} to {run['finished']}{library(run)}, {run['rounds']} rounds"
                           f"{only(i)}, medians of {run['repetitions']} repetitions"
                           + ("" if run.get("kept_samples", True) else ", its file without samples")
                           for i, run in enumerate(runs, 1))
        source = (f"{len(runs)} runs of `ftl_bench --threads-pair`, reported as one by `ftl_bench --pair-merge` "
                  f"({pair['rounds']} rounds in all; {listed}; a round keeps the host state and the single-thread "
                  "mark of its own run, and the figures from samples, W8, W8b, T1 and M1, pool them over the runs; "
                  "where a run's file has none, such a figure's state ratio is the median of its rounds' ratios)")
    else:
        run = runs[0]
        source = (f"`ftl_bench --threads-pair {run['rounds']}` ({run['started']} to {run['finished']}"
                  f"{library(run)}; medians of {run['repetitions']} repetitions)")
    passes = sorted({run.get("passes", 1) for run in runs})

    def state_cell(entry):
        if entry is None:
            return "-"
        text = f"{entry['ratio']:.3f}"
        text = f"*{text}*" if entry["slower"] else text
        if "interval" in entry:
            low, high = entry["interval"]
            text += f" ({low:.2f}-{high:.2f})"
        return text

    lines = [
        f"== A second worker: ftl at 1 worker and at {workers}",
        "",
        f"{source}: ftl alone, at 1 worker and at {workers}, in rounds that alternate "
        "which goes first; a round runs every workload once, so each workload's rounds spread over the run. "
        "Within a round both pools run in one process and take their runs in turn (W8 and W8b: their "
        "samples), so that drift falls on both alike, and such a workload takes "
        f"{' or '.join(str(p) for p in passes)} rounds of its own in each round of the run (the idle and timer figures, "
        "W7, W7s, W7t, T1, M1 and S1, take a process per pool size, and one round); every pool lives on a "
        "thread of its own. A timed workload's 1-worker "
        "figure comes from a 1-worker pool on each of the first two CPUs, in the same turns: the host can run "
        "one vCPU up to 1.5 times slower than the other for seconds at a time, so the two figures are weighed "
        "by the share of its tasks the larger pool ran on the first CPU (W1's runs nearly all of them there, "
        "W5's about half; one half each where the pool has more workers or ran too few tasks to tell). "
        "The state is the host's, from the cross-core probe around each pair (slow above "
        f"{pair['slow_probe_ns']:g} ns). Median ratio per state, {workers} workers over 1 (above 1: slower "
        "with more workers; in bold: slower than the target allows), with its 95% interval from resampling the "
        "state's rounds in brackets. W8 and W8b have a median and a p99 of "
        "samples: a row's are those of all the samples of the round's runs, and a state's ratio that of all "
        "its rounds' runs, with its 95% interval from resampling whole runs in brackets. A p99 of one run's 200 "
        "samples is their third highest, and W8's ratio of the two pools' p99s read 0.57 to 1.62 over 60 "
        "runs of one build (10th to 90th percentile)." + serial_note,
        "",
        '[cols="2,2,2,2",options="header"]',
        "|===",
        "| Figure | Unit | Fast state | Slow state",
    ]
    for entry in pair["medians"]:
        lines.append(f"| {entry['figure']} | {entry['unit']} | {state_cell(entry['fast'])} | "
                     f"{state_cell(entry['slow'])}")
    lines += ["|===", "", f"Target: {pair['target']['text']}.", "",
              '[cols="2,1,2,2,2,2,2,1,2",options="header"]', "|===",
              f"| Figure | {'Run/round' if several else 'Round'} | 1 worker | {workers} workers | Ratio | Probe (ns) | 1-thread probe (ns) | State "
              "| Tasks on the 1st CPU"]
    for row in pair["rows"]:
        ratio = row["more"] / row["one"] if row["one"] > 0 else 0
        serial = fmt(row["serial_ns"]) if "serial_ns" in row else "-"
        mark = "*" if row.get("serial_slow") else ""
        share = f"{100 * row['first_cpu_share']:.0f}%" if "first_cpu_share" in row else "-"
        round_ = f"{row['run']}/{row['round']}" if several else f"{row['round']}"
        lines.append(f"| {row['figure']} | {round_} | {fmt(row['one'])} {row['unit']} | "
                     f"{fmt(row['more'])} | {ratio:.3f} | {fmt(row['probe_ns'])} | {serial} | {row['state']}{mark} "
                     f"| {share}")
    lines += ["|===", ""]
    return lines


def results_doc(data, chart_name, pair=None):
    probe_base_ns = probe_base(data)
    met = sum(1 for t in data.get("targets", []) if t["met"])
    parts = [
        "= ftl_bench results",
        "",
        "// Written by benchmarks/plot.py from benchmarks/results.json (the `bench` workflow).",
        "// Do not edit: run `bash third_party/deps.sh bench && cmake --workflow --preset bench`.",
        "",
        "The latest full run of the benchmark suite. The README's \"Performance\" section",
        "describes the systems, the workloads and how the suite measures.",
        "",
        "== The run",
        "",
        f"* {run_line(data)}.",
        f"* {probe_summary(data, probe_base_ns)}.",
        "",
        "== Medians",
        "",
        "In parentheses each system's median over ftl's (above 1: ftl is faster); n/a: the peer is not",
        "in this build; -: the system has no such workload.",
        "",
        asciidoc_table(data, data["results"], "ftl", probe_base_ns),
        "== Performance targets",
        "",
        f"{met} of {len(data.get('targets', []))} met in this run:",
        "",
    ] + target_lines(data) + [""]
    if "features" in data:
        parts += [
            "== Each mechanism's part",
            "",
            "ftl once more per scheduling mechanism, with that one switched off (`ftl_bench --features`);",
            "in parentheses each configuration's median over \"all on\" (above 1: the mechanism helps).",
            "On a timed workload the switched-off pool runs beside an all-on pool in one process, their",
            "runs in turn, and the ratio is over that all-on pool's median (the \"all on\" column is the",
            "main table's cell, from a process of its own); the idle, timer and wake figures take a process",
            "per configuration.",
            "",
            asciidoc_table(data, data["features"], "all on", probe_base_ns),
        ]
    if pair is not None:
        parts += pair_section(pair)
    parts += [
        "== Every measurement",
        "",
        details(data, data["results"] + data.get("features", [])),
        f"image::../benchmarks/{chart_name}[ftl_bench: medians per workload and system, with min and max,width=100%]",
        "",
    ]
    return "\n".join(parts)


def readme_block(data, pair=None):
    probe_base_ns = probe_base(data)
    met = sum(1 for t in data.get("targets", []) if t["met"])
    total = len(data.get("targets", []))
    if pair is not None:
        met += 1 if pair["target"]["met"] else 0
        total += 1
    lines = [
        f"The latest full run ({data['started']}, {data['threads']} workers per system, medians of "
        f"{data['repetitions']} runs): each system's median, and in parentheses over ftl's (above 1: ftl "
        f"is faster). `*`: measured in the host's slow state. {met} of {total} "
        "performance targets met; `docs/results.adoc` has the verdicts, every measurement, each "
        "mechanism's part" + (" and ftl at 1 worker against ftl at every core." if pair is not None else "."),
        "",
        asciidoc_table(data, data["results"], "ftl", probe_base_ns).rstrip("\n"),
    ]
    return "\n".join(lines)


TARGETS_H = os.path.join(os.path.dirname(os.path.abspath(__file__)), "targets.h")


def parse_initializer(tokens, at):
    """One value of a C++ braced initializer from `at`: a list for {...}, a str for
    adjacent string literals (joined), else the token's text. Returns it and the next index."""
    if tokens[at] == "{":
        items, at = [], at + 1
        while tokens[at] != "}":
            value, at = parse_initializer(tokens, at)
            items.append(value)
            if tokens[at] == ",":
                at += 1
        return items, at + 1
    if tokens[at].startswith('"'):
        parts = []
        while at < len(tokens) and tokens[at].startswith('"'):
            parts.append(json.loads(tokens[at]))  # the literals use no escape JSON lacks
            at += 1
        return "".join(parts), at
    return tokens[at], at + 1


def read_targets(path=TARGETS_H):
    """The performance targets, in ftl_bench's order: kTargets of targets.h, each entry's first
    five fields (name, kind, figures, threshold, text)."""
    with open(path, encoding="utf-8") as file:
        text = file.read()
    if "kTargets[] = {" not in text:
        sys.exit(f"plot.py: {path} has no kTargets[] = {{...}}")
    body = text.split("kTargets[] = ", 1)[1]
    tokens = [t for t in re.findall(r'"(?:\\.|[^"\\])*"|//[^\n]*|[{},;]|[^\s{},;"]+', body)
              if not t.startswith("//")]
    entries, _ = parse_initializer(tokens, 0)
    targets = []
    for entry in entries:
        if len(entry) < 5 or not isinstance(entry[2], list) or not entry[1].startswith("TargetKind::"):
            sys.exit(f"plot.py: {path}: a kTargets entry plot.py cannot read: {entry}")
        targets.append({"name": entry[0], "kind": entry[1].split("::")[-1], "figures": entry[2],
                        "threshold": float(entry[3]), "text": entry[4]})
    return targets


def verdict_figure(verdict):
    """The figure a verdict line judges ("W1: ..."), or its first words for a target over every figure."""
    return verdict["text"].split(":", 1)[0]


def verdict_cell(verdicts):
    if not verdicts:
        return "not measured"
    missed = [verdict_figure(v) for v in verdicts if not v["met"]]
    if not missed:
        return "met"
    return "*not met*" if len(verdicts) == 1 else "*not met*: " + ", ".join(missed)


def targets_block(targets, data, pair=None):
    """The README's table of targets: each one in words, and the run's verdict on it. A verdict
    belongs to the target that lists its figure; the one target over every figure (no peer
    faster) takes the verdicts no figure names; the second worker's is --threads-pair's."""
    verdicts = data.get("targets", [])
    named = {figure for target in targets for figure in target["figures"]}
    source = f"the latest full run ({data['started']})"
    if pair is not None:
        source += f" and, for the second worker, `ftl_bench --threads-pair` ({pair['started']} to {pair['finished']})"
    lines = [
        f"Verdicts of {source}; `docs/results.adoc` has the figures behind each.",
        "",
        '[cols="2,6,2",options="header"]',
        "|===",
        "| Target | What ftl holds itself to | Latest verdict",
    ]
    for target in targets:
        if target["kind"] == "SecondWorkerNoSlower":
            mine = [pair["target"]] if pair is not None else []
        elif target["figures"]:
            mine = [v for v in verdicts if verdict_figure(v) in target["figures"]]
        else:
            mine = [v for v in verdicts if verdict_figure(v) not in named]
        lines.append(f"| {target['name']} | {target['text']} | {verdict_cell(mine)}")
    lines.append("|===")
    return "\n".join(lines)


def replace_block(path, name, block):
    """Rewrites the lines between "// <name>:begin" and "// <name>:end" of the file at `path`."""
    with open(path, encoding="utf-8") as file:
        text = file.read()
    begin, end = f"// {name}:begin\n", f"// {name}:end"
    if begin not in text or end not in text:
        sys.exit(f"plot.py: {path} has no '// {name}:begin' / '// {name}:end' block")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    with open(path, "w", encoding="utf-8") as file:
        file.write(head + begin + block + "\n" + end + tail)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", help="ftl_bench --json output")
    parser.add_argument("chart", help="the chart to write (.svg or .png)")
    parser.add_argument("--results-doc", help="also write the results document (AsciiDoc) to this file")
    parser.add_argument("--readme", help="also rewrite the results and targets blocks of this README")
    parser.add_argument("--pair", help="ftl_bench --threads-pair --json output to add to both")
    args = parser.parse_args()
    with open(args.json, encoding="utf-8") as file:
        data = json.load(file)
    pair = None
    if args.pair:
        with open(args.pair, encoding="utf-8") as file:
            pair = json.load(file)
    if data.get("sanitized"):
        sys.exit("plot.py: a sanitizer build's run has no figures to draw")
    if args.results_doc:
        with open(args.results_doc, "w", encoding="utf-8") as file:
            file.write(results_doc(data, os.path.basename(args.chart), pair))
        print(f"plot.py: wrote {args.results_doc}")
    if args.readme:
        replace_block(args.readme, "results", readme_block(data, pair))
        replace_block(args.readme, "targets", targets_block(read_targets(), data, pair))
        print(f"plot.py: rewrote the results and targets blocks of {args.readme}")
    draw(data, args.chart)


if __name__ == "__main__":
    main()
