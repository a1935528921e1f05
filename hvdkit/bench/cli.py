"""``hvdkit bench`` / ``python -m hvdkit.bench``."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from hvdkit.bench import priority, report
from hvdkit.bench.launch import BenchError
from hvdkit.bench.suites import SUITES


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add the ``hvdkit bench`` options to ``parser``."""
    p.add_argument("suites", nargs="*", default=["all"], help=f"any of {', '.join(SUITES)}, or all (default)")
    p.add_argument("--out", default="bench-results", help="folder for results.json, plots and report.md")
    p.add_argument("--quick", action="store_true", help="smaller sizes and fewer steps (a smoke run)")
    p.add_argument("--rounds", type=int, default=None,
                   help="rounds of every comparison, the implementations alternating A B B A ... (default 5, "
                        "with --quick 2; at least 2, so that each result has a spread); comparisons that alternate "
                        "epochs or saves inside one job take 3x as many")
    p.add_argument("--nice", type=int, default=priority.DEFAULT_NICE,
                   help=f"nice value (-20 to 0) for the benchmark and every job it starts (default "
                        f"{priority.DEFAULT_NICE}: other work on the machine keeps about a hundredth of a core "
                        "the jobs need; needs CAP_SYS_NICE, else the run goes on at normal priority and says so); 0 "
                        "measures at normal priority, sharing the machine with whatever else runs")


def run(args: argparse.Namespace, argv: list[str]) -> int:
    """Run the suites ``args`` names, print the tables and write results, report and plots."""
    chosen = list(SUITES) if args.suites in (["all"], []) else args.suites
    bad = [s for s in chosen if s not in SUITES]
    if bad:
        print(f"hvdkit bench: suites must be among {', '.join(SUITES)} or all, got {', '.join(bad)}", file=sys.stderr)
        return 2
    rounds = args.rounds if args.rounds is not None else 2 if args.quick else 5
    if rounds < 2:
        print(f"hvdkit bench: --rounds must be at least 2 (a spread needs two rounds), got {rounds}", file=sys.stderr)
        return 2
    try:
        priority.check_nice(args.nice)
    except ValueError as exc:
        print(f"hvdkit bench: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    prio = priority.raise_priority(args.nice)
    suites: dict[str, Any] = {}
    load: dict[str, Any] = {"before": report.load()}
    results: dict[str, Any] = {"date": dt.date.today().isoformat(), "machine": report.machine(),
                               "command": "hvdkit bench " + " ".join(shlex.quote(a) for a in argv),
                               "rounds": rounds, "priority": prio, "load": load, "suites": suites}

    def log(msg: str) -> None:
        print(f"[bench] {msg}", file=sys.stderr, flush=True)

    log(report.priority_line(prio))  # what was asked for; the report also counts what the jobs got
    for name in chosen:
        before = report.load()
        log(f"{name}: load average {before['load1']:.2f} on {before['cpus']} CPUs")
        try:
            suites[name] = SUITES[name](args.quick, rounds, log)
        except BenchError as exc:
            print(f"hvdkit bench: suite {name} failed: {exc}", file=sys.stderr)
            return 1
        suites[name]["load"] = {"before": before, "after": report.load()}
        (out / "results.json").write_text(json.dumps(results, indent=2))
    load["after"] = report.load()
    (out / "results.json").write_text(json.dumps(results, indent=2))
    report.print_tables(results)
    plots = report.plot(results, out)
    (out / "report.md").write_text(report.markdown(results, plots))
    print(f"results: {out / 'results.json'}; report: {out / 'report.md'}; plots: {', '.join(map(str, plots))}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m hvdkit.bench``: parse ``argv`` and run."""
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(prog="hvdkit bench", description=__doc__)
    add_arguments(p)
    return run(p.parse_args(argv), argv)
