"""How well does the judge's speed protocol tell code apart? A benchmark, not a timed test.

For each built-in task it runs, several times each:
- A/A: the baseline against a copy of itself (any improved/regressed verdict is false);
- planted slowdowns: a correct candidate that does a known extra fraction of work (after the
  baseline's computation it spins on its thread's CPU clock for FRACTION x the CPU time that
  computation took, so each call costs 1 + FRACTION of the baseline's);
and measures the same pairs with two protocols:
- paired: the judge's protocol (fresh process pairs, ABBA/BAAB, intervals over pairs);
- naive: separate sequential runs, one process per arm, best of 5 timed calls per workload,
  ratio of the bests, a verdict when it exceeds +-min_effect (what a one-off script reports).

It prints, per task and protocol: the A/A false-verdict rate, the median |A/A ratio - 1|, the
detection rate (verdict `regressed`) of each planted slowdown, and seconds per comparison.

    python benchmarks/judge_noise.py                 # 20 runs per condition, task budgets
    python benchmarks/judge_noise.py --runs 3 --budget-s 10   # a few minutes
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from optarena.judge.client._worker import WorkerClient
from optarena.judge.correctness._phase import area_sizes, array_inputs, derive_seed
from optarena.judge.speed._arms import copy_arm
from optarena.judge.speed._measure import Measurement, MeasurePlan
from optarena.judge.speed._stats import mean_rows
from optarena.tasks import Task, resolve_task

PLANTED = """

# --- planted slowdown (benchmarks/judge_noise.py) ---
import time as _time

_FRACTION = {fraction!r}
_thread_cpu = _time.thread_time_ns
_baseline_entry = {entry}


def {entry}(*args, **kwargs):
    start = _thread_cpu()
    out = _baseline_entry(*args, **kwargs)
    end = _thread_cpu() + int((_thread_cpu() - start) * _FRACTION)
    while _thread_cpu() < end:
        pass
    return out
"""


@dataclass
class Run:
    protocol: str
    condition: str
    ratio: float | None
    verdict: str
    seconds: float
    pairs: int = 0
    stop: str = ""
    ci: list[float] | None = None  # the ratio's 95% interval (paired protocol only)
    cross: str = ""  # the other clock's verdict, ratio and interval (paired protocol only)
    # per process pair, the mean log-ratio over timed workloads on the verdict clock (what the
    # overall interval is over; paired protocol only)
    pair_log_ratios: list[float] = field(default_factory=list)


@dataclass
class TaskReport:
    task: str
    runs: list[Run] = field(default_factory=list)


def planted_candidate(task: Task, fraction: float, dest: Path) -> Path:
    """The baseline's files, with the entry wrapped to do `fraction` extra work per call."""
    copy_arm(task, task.baseline_dir, dest)
    entry = dest / task.spec.entry.file
    fn = task.spec.entry.function
    entry.write_text(entry.read_text() + PLANTED.format(fraction=fraction, entry=fn))
    return dest


def paired(
    task: Task,
    dirs: tuple[Path, Path],
    budget: float | None,
    seed: int,
    work: Path,
    min_effect: float | None = None,
) -> Run:
    plan = MeasurePlan.from_task(task, budget_s=budget, min_effect=min_effect)
    t0 = time.monotonic()
    m = Measurement(task, dirs, plan, seed, stream=0, log_dir=work)
    out = m.run({"a": "a", "b": "b"})
    seconds = time.monotonic() - t0
    if out.comparison is None:
        return Run("paired", "", None, f"failed: {out.failure}", seconds)
    c = out.comparison
    x = c.crosscheck
    cross = "" if x is None else f"{x.verdict} {x.ratio} {x.ratio_ci}"
    per_workload = [[p.log_ratio for p in w.pairs] for w in c.workloads]
    return Run(
        "paired", "", c.overall.ratio, c.overall.verdict, seconds, c.stop.pairs, c.stop.reason,
        c.overall.ratio_ci, cross, mean_rows(list(zip(*per_workload, strict=True))),
    )  # fmt: skip


def _best_of(task: Task, workdir: Path, inputs: dict[str, list[Any]], log: Path) -> dict[str, int]:
    """One fresh process: per workload one warm-up call, then the best of the timed calls (the
    judge's wall clock around each call, as a one-off script would time them)."""
    spec = task.spec
    best: dict[str, int] = {}
    every = [array_inputs(c["args"], c["kwargs"]) for calls in inputs.values() for c in calls]
    with WorkerClient(
        workdir, spec.limits, log, protect=[task.root], arena_bytes=area_sizes(every)
    ) as w:
        w.request({"op": "hello"}, timeout=spec.limits.load_timeout_s)
        load = {"op": "load", "file": spec.entry.file, "function": spec.entry.function}
        if not w.request(load, timeout=spec.limits.load_timeout_s).get("ok"):
            raise RuntimeError(f"{workdir} did not load")
        for name, calls in inputs.items():
            walls = [
                w.call(c["args"], c["kwargs"], timeout=spec.limits.call_timeout_s).wall_ns
                for c in calls
            ]
            best[name] = min(walls[1:])  # the first call is a warm-up
    return best


def naive(task: Task, dirs: tuple[Path, Path], calls: int, seed: int, work: Path) -> Run:
    """Separate sequential runs, best-of-N wall time per workload, ratio of the bests."""
    t0 = time.monotonic()
    timed = [(wi, w) for wi, w in enumerate(task.spec.workloads) if w.role == "timed"]
    inputs: dict[str, list[Any]] = {}
    for wi, w in timed:
        rows = []
        for c in range(calls + 1):
            args, kwargs = task.generator(w, derive_seed(seed, 0x4E, wi, c))
            rows.append({"args": args, "kwargs": kwargs})
        inputs[w.name] = rows
    a = _best_of(task, dirs[0], inputs, work / "naive-a.log")
    b = _best_of(task, dirs[1], inputs, work / "naive-b.log")
    ratio = math.exp(statistics.fmean(math.log(b[n] / a[n]) for n in a))
    m = task.spec.measurement.min_effect
    verdict = (
        "regressed" if ratio > 1 + m else "improved" if ratio < 1 / (1 + m) else "no_difference"
    )
    return Run("naive", "", ratio, verdict, time.monotonic() - t0)


def run_task(task: Task, args: argparse.Namespace, console: Console) -> TaskReport:
    report = TaskReport(task.id)
    with tempfile.TemporaryDirectory(prefix="optarena-noise-") as tmp:
        root = Path(tmp)
        base = copy_arm(task, task.baseline_dir, root / "base")
        conditions: list[tuple[str, Path]] = [
            ("A/A", copy_arm(task, task.baseline_dir, root / "copy"))
        ]
        for f in args.fractions:
            conditions.append((f"+{f:.0%}", planted_candidate(task, f, root / f"planted{f}")))
        for cond, other in conditions:
            for i in range(args.runs):
                seed = derive_seed(args.seed, len(report.runs), i)
                work = root / f"w{len(report.runs)}"
                work.mkdir()
                for run in (
                    paired(task, (base, other), args.budget_s, seed, work),
                    naive(task, (base, other), args.naive_calls, seed, work),
                ):
                    run.condition = cond
                    report.runs.append(run)
                    console.log(
                        f"{task.id} {cond} #{i + 1} {run.protocol}: {run.verdict} "
                        f"ratio {run.ratio or float('nan'):.4f} ({run.seconds:.1f} s, "
                        f"{run.pairs} pairs {run.stop})"
                    )
    return report


def summarize(report: TaskReport, fractions: list[float]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for proto in ("paired", "naive"):
        runs = [r for r in report.runs if r.protocol == proto]
        aa = [r for r in runs if r.condition == "A/A"]
        row: dict[str, Any] = {
            "aa_false": sum(r.verdict in ("improved", "regressed") for r in aa),
            "aa_runs": len(aa),
            "aa_median_abs": statistics.median(abs(r.ratio - 1) for r in aa if r.ratio)
            if aa
            else None,
            "seconds": statistics.fmean(r.seconds for r in runs) if runs else None,
        }
        for f in fractions:
            planted = [r for r in runs if r.condition == f"+{f:.0%}"]
            row[f"+{f:.0%}"] = (
                sum(r.verdict == "regressed" for r in planted),
                len(planted),
                statistics.median(r.ratio for r in planted if r.ratio) if planted else None,
            )
        out[proto] = row
    return out


def render(summaries: dict[str, dict[str, dict[str, Any]]], fractions: list[float]) -> Table:
    table = Table(title="judge noise: paired protocol vs naive best-of-5", header_style="bold")
    for col in (
        "task",
        "protocol",
        "A/A false verdicts",
        "median |A/A-1|",
        *[f"detects +{f:.0%} (median ratio)" for f in fractions],
        "s / comparison",
    ):
        table.add_column(col, justify="right")
    for task, protos in summaries.items():
        for proto, row in protos.items():
            cells = [
                task,
                proto,
                f"{row['aa_false']}/{row['aa_runs']}",
                "-" if row["aa_median_abs"] is None else f"{row['aa_median_abs']:.2%}",
            ]
            for f in fractions:
                hit, n, med = row[f"+{f:.0%}"]
                cells.append(f"{hit}/{n}" + ("" if med is None else f" ({med:.3f})"))
            cells.append("-" if row["seconds"] is None else f"{row['seconds']:.1f}")
            table.add_row(*cells)
    return table


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--runs", type=int, default=20, help="runs per condition (default 20)")
    p.add_argument("--tasks", default="rmsnorm,softmax", help="comma-separated task ids")
    p.add_argument("--budget-s", type=float, default=None, help="paired budget (default: task's)")
    p.add_argument("--fractions", default="0.03,0.05,0.10", help="planted slowdowns")
    p.add_argument("--naive-calls", type=int, default=5, help="best-of-N for the naive protocol")
    p.add_argument("--seed", type=int, default=20240601)
    p.add_argument("--json", type=Path, default=None, help="also write every run here")
    args = p.parse_args(argv)
    args.fractions = [float(f) for f in args.fractions.split(",") if f]
    if args.runs < 1:
        p.error("--runs must be >= 1")
    console = Console(stderr=True)
    load = os.getloadavg()
    console.log(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, {os.cpu_count()} CPUs")
    summaries, reports = {}, []
    for tid in args.tasks.split(","):
        report = run_task(resolve_task(tid), args, console)
        reports.append(report)
        summaries[tid] = summarize(report, args.fractions)
    Console().print(render(summaries, args.fractions))
    end = os.getloadavg()
    print(
        f"load average at start {load[0]:.2f}, at end {end[0]:.2f} (1 min); runs per condition "
        f"{args.runs}; paired budget {args.budget_s or 'task default'} s"
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {"summaries": summaries, "runs": [asdict(r) for rep in reports for r in rep.runs]},
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
