"""Compare two ``hvdkit bench`` runs target by target: do the verdicts agree, and do the medians lie
within each other's IQR?

    python -m hvdkit.bench.compare quiet/results.json burner/results.json [--names quiet burner]

Prints a Markdown table (one row per target found in both runs), a summary line, each run's priority and
the targets only one of them has; exits 0 when every verdict agrees, 1 otherwise (also when the runs share
no target). This is how
docs/benchmarks.md checks that a run on a quiet machine and a run beside a CPU burner say the same
thing.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from hvdkit.bench.report import job_sessions, priority_line, targets


def _within(value: float, iqr: list[float]) -> bool:
    return iqr[0] <= value <= iqr[1]


def overlap(a: dict[str, Any], b: dict[str, Any]) -> str:
    """How two targets' medians relate to each other's IQR: both, one way, IQRs overlap, or no."""
    if a["measured"] is None or b["measured"] is None:
        return "-"
    ab, ba = _within(a["measured"], b["iqr"]), _within(b["measured"], a["iqr"])
    if ab and ba:
        return "both"
    if ab or ba:
        return "one way"
    return "IQRs overlap" if a["iqr"][0] <= b["iqr"][1] and b["iqr"][0] <= a["iqr"][1] else "no"


def compare(first: dict[str, Any], second: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per target present in both runs' results (matched by its text), in the first run's order."""
    theirs = {t["target"]: t for t in targets(second)}
    rows = []
    for a in targets(first):
        b = theirs.get(a["target"])
        if b is not None:
            rows.append({"target": a["target"], "goal": a["goal"], "lower_is_better": a.get("lower_is_better", False),
                         "first": a, "second": b, "medians": overlap(a, b), "agree": a["verdict"] == b["verdict"]})
    return rows


def unmatched(run: dict[str, Any], other: dict[str, Any]) -> list[str]:
    """The targets of ``run`` that ``other`` does not have (a target renamed between versions, a suite not run)."""
    theirs = {t["target"] for t in targets(other)}
    return [t["target"] for t in targets(run) if t["target"] not in theirs]


def _cell(t: dict[str, Any]) -> str:
    if t["measured"] is None:
        return "-"
    return f"{t['measured']:.3f} ({t['iqr'][0]:.3f}-{t['iqr'][1]:.3f})"


def markdown(rows: list[dict[str, Any]], names: tuple[str, str]) -> str:
    """The comparison as a Markdown table and a summary line."""
    a, b = names
    out = [f"| target | goal | {a}: median (IQR) | {b}: median (IQR) | medians within the other's IQR? | verdicts |",
           "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        goal = "-" if r["goal"] is None else f"{'<=' if r['lower_is_better'] else '>='} {r['goal']:g}"
        same = "same" if r["agree"] else "DIFFER"
        out.append(f"| {r['target']} | {goal} | {_cell(r['first'])} | {_cell(r['second'])} | {r['medians']} | "
                   f"{r['first']['verdict']} / {r['second']['verdict']} ({same}) |")
    agree = sum(r["agree"] for r in rows)
    out += ["", f"Verdicts agree on {agree} of {len(rows)} targets."]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Print the comparison; 0 when every verdict agrees, 1 when one differs, 2 on bad input."""
    p = argparse.ArgumentParser(prog="python -m hvdkit.bench.compare", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("first", type=Path, help="results.json of one run")
    p.add_argument("second", type=Path, help="results.json of the other")
    p.add_argument("--names", nargs=2, default=["first", "second"], metavar=("FIRST", "SECOND"))
    args = p.parse_args(argv)
    runs = []
    for path in (args.first, args.second):
        try:
            runs.append(json.loads(path.read_text()))
        except (OSError, ValueError) as exc:
            print(f"hvdkit bench compare: {path} must be an hvdkit bench results.json, got: {exc}", file=sys.stderr)
            return 2
        if not isinstance(runs[-1], dict) or "suites" not in runs[-1]:
            print(f"hvdkit bench compare: {path} must be an hvdkit bench results.json (no 'suites' in it)",
                  file=sys.stderr)
            return 2
    rows = compare(*runs)
    print(markdown(rows, (args.names[0], args.names[1])), end="")
    for name, run, other in ((args.names[0], runs[0], runs[1]), (args.names[1], runs[1], runs[0])):
        print(f"\n{name}: {priority_line(run.get('priority'), job_sessions(run))}.", end="")
        only = unmatched(run, other)
        if only:
            print(f" Targets only in {name}, not compared: " + "; ".join(only) + ".", end="")
    print()
    return 0 if rows and all(r["agree"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
