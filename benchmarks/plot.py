#!/usr/bin/env python3
"""Turns ftl_bench's JSON into a chart: one panel per figure, one bar per system
(the median, with a line from the minimum to the maximum).

    python3 benchmarks/plot.py results.json results.svg [--asciidoc tables.adoc]

--asciidoc also writes the run's tables (medians with the ratio to ftl, and the
--features table when the run has one) as AsciiDoc, for the README.
Needs matplotlib (Debian: python3-matplotlib; bash third_party/deps.sh bench).
"""
import argparse
import json
import math
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


def fastest_probe(data):
    probes = [p for key in ("results", "features") for cell in data.get(key, [])
              if cell.get("status") == "ok" for p in cell.get("cross_core_ns", []) if p > 0]
    return min(probes) if probes else 0


def cell_text(cell, reference, ratio, fast_probe):
    status = cell.get("status") if cell else "not implemented"
    if status == "ok" and "median" in cell:
        text = fmt(cell["median"])
        if ratio and reference and reference.get("status") == "ok" and reference.get("median", 0) > 0 \
                and cell is not reference:
            ratio_value = cell["median"] / reference["median"]
            text += f" ({ratio_value:.0f}x)" if ratio_value >= 100 else f" ({ratio_value:.2f}x)"
        if fast_probe and max(cell.get("cross_core_ns", [0])) > SLOW_PLACEMENT * fast_probe:
            text += "*"
        return text
    return {"failed": "FAILED", "not built": "n/a"}.get(status, "-")


def asciidoc_table(data, results, first_column, fast_probe):
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
        texts = [cell_text(cells.get(system), reference, ratio, fast_probe) for system in systems]
        lines.append(f"| {figure_id} | {unit} | " + " | ".join(texts))
    lines.append("|===")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", help="ftl_bench --json output")
    parser.add_argument("chart", help="the chart to write (.svg or .png)")
    parser.add_argument("--asciidoc", help="also write the tables as AsciiDoc to this file")
    args = parser.parse_args()
    with open(args.json, encoding="utf-8") as file:
        data = json.load(file)
    if data.get("sanitized"):
        sys.exit("plot.py: a sanitizer build's run has no figures to draw")
    if args.asciidoc:
        fast_probe = fastest_probe(data)
        text = asciidoc_table(data, data["results"], "ftl", fast_probe)
        if "features" in data:
            text += "\n" + asciidoc_table(data, data["features"], "all on", fast_probe)
        with open(args.asciidoc, "w", encoding="utf-8") as file:
            file.write(text)
        print(f"plot.py: wrote {args.asciidoc}")
    draw(data, args.chart)


if __name__ == "__main__":
    main()
