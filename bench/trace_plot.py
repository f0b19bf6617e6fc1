#!/usr/bin/env python3
"""Plot one optimizer step of a `ds-run --trace` file as a PNG (docs/tracing.md).

  trace_plot.py TRACE.rank0.json [--step N] [-o step.png]

Draws the step's slices as horizontal bars: one row per depth of the `ops` track (steps, parts,
ops, ops inside branches) and one row per collectives track, coloured by kind, time in ms from
the step's start. Needs matplotlib, which the project's .venv does not install: `pip install
matplotlib` into it first (the script says so when it is missing).
"""

import argparse
import json
import sys


def depth_rows(slices):
    """The nesting depth of each slice of one track (slices nest by time)."""
    stack, rows = [], []
    for s in sorted(slices, key=lambda s: (s["ts"], -s["dur"])):
        while stack and s["ts"] >= stack[-1]["ts"] + stack[-1]["dur"]:
            stack.pop()
        rows.append((s, len(stack)))
        stack.append(s)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("trace")
    parser.add_argument("--step", type=int, default=2, help="the optimizer step (default 2)")
    parser.add_argument("-o", "--output", default="step.png")
    args = parser.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("trace_plot: matplotlib is not installed (.venv/bin/pip install matplotlib)")

    with open(args.trace) as f:
        events = json.load(f)["traceEvents"]
    slices = [e for e in events if e.get("ph") == "X"]
    step = next((e for e in slices if e.get("cat") == "step" and e["name"] == "step %d" % args.step),
                None)
    if step is None:
        sys.exit("trace_plot: no 'step %d' in %s" % (args.step, args.trace))
    t0, t1 = step["ts"], step["ts"] + step["dur"]
    inside = [e for e in slices if e["ts"] >= t0 and e["ts"] + e["dur"] <= t1 + 1e-3]
    names = {e["tid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e["name"] == "thread_name"}

    rows, labels = [], []
    ops = depth_rows([e for e in inside if e["tid"] == 0])
    depth = max((d for _, d in ops), default=0) + 1
    for s, d in ops:
        rows.append((s, d))
    labels += ["ops" if d == 0 else "ops %d" % d for d in range(depth)]
    for tid in sorted({e["tid"] for e in inside if e["tid"] != 0}):
        for s in (e for e in inside if e["tid"] == tid):
            rows.append((s, depth))
        labels.append(names.get(tid, "tid %d" % tid))
        depth += 1

    kinds = sorted({s.get("cat", "") for s, _ in rows})
    cmap = plt.get_cmap("tab20")
    colour = {k: cmap(i % 20) for i, k in enumerate(kinds)}
    fig, ax = plt.subplots(figsize=(14, 0.5 * depth + 1.5))
    for s, row in rows:
        ax.barh(depth - 1 - row, s["dur"] / 1000.0, left=(s["ts"] - t0) / 1000.0, height=0.8,
                color=colour[s.get("cat", "")], edgecolor="none")
    ax.set_yticks(range(depth))
    ax.set_yticklabels(list(reversed(labels)))
    ax.set_xlabel("ms since the start of step %d" % args.step)
    ax.set_title("%s: step %d (%.1f ms)" % (args.trace, args.step, step["dur"] / 1000.0))
    handles = [plt.Rectangle((0, 0), 1, 1, color=colour[k]) for k in kinds]
    ax.legend(handles, kinds, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    fig.tight_layout()
    fig.savefig(args.output, dpi=120)
    print("trace_plot: wrote %s" % args.output)


if __name__ == "__main__":
    main()
