"""`optarena experiment freeze|run|status|compare` and `optarena report`."""

from __future__ import annotations

import json
import shlex
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Group, RenderableType
from rich.live import Live
from rich.table import Table

from optarena.cli._app import app, console, err_console, interrupted
from optarena.cli._experiment_ray import (
    AgentCpusOpt,
    AgentMemoryOpt,
    ExecutorOpt,
    JudgeNodesOpt,
    NodeBoard,
    RayAddressOpt,
    executor_of,
    key_places,
)
from optarena.cli._safe import escape
from optarena.errors import OptarenaError

if TYPE_CHECKING:
    from optarena.experiments import LoadedPlan, ScheduledTrial
    from optarena.ledger import Ledger
    from optarena.records import ExperimentComparison, TrialRecord

experiment_app = typer.Typer(
    help="Run declared conditions x tasks x repetitions and compare them.", no_args_is_help=True
)
app.add_typer(experiment_app, name="experiment")

PlanArg = Annotated[Path, typer.Argument(help="the plan (TOML)")]
LedgerOpt = Annotated[
    Path | None,
    typer.Option("--ledger", help="ledger directory (default: $OPTARENA_LEDGER, else the user's)"),
]


def _home(ledger: Path | None) -> Path:
    """--ledger, else $OPTARENA_LEDGER, else the user's: as every other command resolves it."""
    from optarena.ledger import resolve_home

    return resolve_home(ledger)


def _existing_home(ledger: Path | None) -> Path:
    """The ledger for a command that only reads: one that does not exist is an error (a typo
    in --ledger must not read as an experiment with no trials, nor create a ledger)."""
    from optarena.ledger import DB_NAME

    home = _home(ledger)
    if not (home / DB_NAME).is_file():
        raise OptarenaError(
            f"no ledger at {home} (no {DB_NAME}); check --ledger or $OPTARENA_LEDGER"
        )
    return home


def _again(command: str, plan: Path, ledger: Path | None) -> str:
    """The command to run next, with the ledger it must use when one was named."""
    where = f" --ledger {shlex.quote(str(_home(ledger)))}" if ledger is not None else ""
    return f"optarena {command} {shlex.quote(str(plan))}{where}"


def _checked(plan_path: Path, refreeze: bool = False) -> LoadedPlan:
    from optarena.experiments import drift, freeze, load_plan

    plan = load_plan(plan_path)
    changed = drift(plan)
    if changed and not refreeze:
        raise OptarenaError(
            f"{plan.path}: the plan or what it depends on changed since it was frozen "
            f"({'; '.join(changed)}); run with --refreeze to accept the change"
        )
    if changed:
        freeze(plan)
        err_console.print(f"refrozen: {'; '.join(changed)}")
    return plan


@experiment_app.command("freeze")
def freeze_cmd(plan: PlanArg) -> None:
    """Write PLAN.lock: the plan's hash, task, judge, runtime and agent identities, and the
    full trial schedule. `experiment run` refuses a plan that no longer matches it."""
    from optarena.experiments import freeze, load_plan, schedule

    loaded = load_plan(plan)
    path = freeze(loaded)
    console.print(f"froze {loaded.name}: {len(schedule(loaded))} trials -> {path}")


def _live_table(counts: dict[str, float | int], t0: float) -> Table:
    done, total = int(counts["done"]), int(counts["total"])
    elapsed = time.monotonic() - t0
    rate = elapsed / counts["finished_now"] if counts["finished_now"] else None
    eta = "-" if rate is None else f"{rate * (total - done):.0f} s"
    t = Table(title="experiment", show_header=True)
    cols = ("done", "running", "failed", "metered tokens", "metered USD", "elapsed", "ETA")
    for col in cols:
        t.add_column(col, justify="right")
    t.add_row(
        f"{done}/{total}",
        str(counts["running"]),
        str(counts["failed"]),
        _with_unknown(f"{int(counts['tokens'])}", int(counts["tokens_unknown"])),
        _with_unknown(f"{counts['cost']:.4f}", int(counts["cost_unknown"])),
        f"{elapsed:.0f} s",
        eta,
    )
    return t


def _with_unknown(known: str, unknown: int) -> str:
    """A running sum over the trials whose figure is known, and how many are not (never
    counted as zero): `0.0130 +2 unknown`."""
    return known + (f" +{unknown} unknown" if unknown else "")


def _add_metered(counts: dict[str, float | int], record: TrialRecord) -> None:
    """Add a finished trial's metered tokens and cost to the live counts (an agent's own
    report is never added: not metered is unknown)."""
    u = record.metered_usage
    tokens = u.total_tokens() if u is not None else None
    cost = u.cost_usd if u is not None else None
    if tokens is None:
        counts["tokens_unknown"] = int(counts["tokens_unknown"]) + 1
    else:
        counts["tokens"] = int(counts["tokens"]) + tokens
    if cost is None:
        counts["cost_unknown"] = int(counts["cost_unknown"]) + 1
    else:
        counts["cost"] = float(counts["cost"]) + cost


@experiment_app.command("run")
def run_cmd(
    plan: PlanArg,
    ledger: LedgerOpt = None,
    max_parallel: Annotated[int | None, typer.Option(min=1, help="agents at once")] = None,
    refreeze: Annotated[bool, typer.Option(help="accept a changed plan and re-freeze")] = False,
    executor: ExecutorOpt = None,
    ray_address: RayAddressOpt = None,
    judge_nodes: JudgeNodesOpt = None,
    agent_cpus: AgentCpusOpt = None,
    agent_memory_mb: AgentMemoryOpt = None,
) -> None:
    """Run every pending trial of the plan (resumes: complete trials are kept, interrupted
    ones run again, nothing is duplicated), here or on a Ray cluster (docs/scale-out.md)."""
    from optarena.experiments import experiment_state, run_experiment
    from optarena.ledger import Ledger

    loaded = _checked(plan, refreeze)
    chosen, ray = executor_of(
        loaded, executor, address=ray_address, judge_nodes=judge_nodes, agent_cpus=agent_cpus,
        agent_memory_mb=agent_memory_mb, max_parallel=max_parallel,
    )  # fmt: skip
    home = _home(ledger)
    with Ledger.open(home) as led:
        before = experiment_state(loaded, led)
    counts: dict[str, float | int] = {
        "done": before.counts()["complete"] + before.counts()["failed"],
        "total": len(before.schedule),
        "running": 0,
        "failed": 0,
        "tokens": 0,
        "tokens_unknown": 0,
        "cost": 0.0,
        "cost_unknown": 0,
        "finished_now": 0,
    }
    t0 = time.monotonic()
    board = NodeBoard(len(before.pending)) if ray is not None else None

    def shown() -> RenderableType:
        table = _live_table(counts, t0)
        return table if board is None else Group(table, board.table())

    with Live(shown(), console=err_console, transient=False) as live:

        def on_event(
            kind: str, s: ScheduledTrial, record: TrialRecord | None, message: str
        ) -> None:
            if kind == "start":
                counts["running"] = int(counts["running"]) + 1
            elif kind in ("end", "error"):
                counts["running"] = int(counts["running"]) - 1
            if kind == "end" and record is not None:
                _count_end(counts, record)
                live.console.print(
                    f"{s.key}: {record.agent_status}, {record.verdict or record.state}"
                )
            elif kind == "error":
                live.console.print(f"{s.key}: error, recorded: {escape(message)}")
            elif kind == "retry":
                live.console.print(f"{s.key}: runs again ({message})")
            elif kind == "failed":
                counts["failed"] = int(counts["failed"]) + 1
                counts["done"] = int(counts["done"]) + 1
                live.console.print(f"{s.key}: counted as a failure ({escape(message)})")
            if board is not None:
                board.on_event(kind, s, record, message)
            live.update(shown())

        try:
            state = run_experiment(
                loaded, home, max_parallel=max_parallel, on_event=on_event, executor=chosen,
                ray=ray,
            )  # fmt: skip
        except KeyboardInterrupt:
            raise interrupted(
                "finished trials are recorded, the interrupted one is marked; run "
                f"`{_again('experiment run', plan, ledger)}` to resume"
            ) from None
    c = state.counts()
    console.print(
        f"{loaded.name}: {c['complete']}/{c['scheduled']} trials complete, {c['failed']} "
        f"failed (no result after their retries, counted as failures), {c['pending']} pending"
    )


def _count_end(counts: dict[str, float | int], record: TrialRecord) -> None:
    counts["done"] = int(counts["done"]) + 1
    counts["finished_now"] = int(counts["finished_now"]) + 1
    if record.verdict != "accepted":
        counts["failed"] = int(counts["failed"]) + 1
    _add_metered(counts, record)


@experiment_app.command("status")
def status_cmd(
    plan: PlanArg,
    ledger: LedgerOpt = None,
    keys: Annotated[bool, typer.Option("--keys", help="every key's outcome, one a line")] = False,
) -> None:
    """How many trials of the plan are complete, failed, pending, interrupted; where each
    running key runs (its node on a cluster)."""
    from optarena.experiments import experiment_state, load_plan
    from optarena.ledger import Ledger

    loaded = load_plan(plan)
    with Ledger.open(_existing_home(ledger)) as led:
        state = experiment_state(loaded, led)
    c = state.counts()
    console.print(
        f"{loaded.name}: {c['complete']}/{c['scheduled']} complete, {c['failed']} failed "
        f"(counted as failures), {c['pending']} pending, {c['interrupted_rows']} interrupted "
        "rows on record"
    )
    for line in key_places(state, keys):
        console.print(line)
    if c["pending"]:
        console.print(f"to run the rest: {_again('experiment run', plan, ledger)}")


def _comparison(plan: Path, ledger: Path | None) -> ExperimentComparison:
    """The comparison of a plan's trials as frozen; says on stderr when it is incomplete."""
    from optarena.experiments import compare_experiment, experiment_state, load_plan
    from optarena.ledger import Ledger

    loaded = load_plan(plan)
    with Ledger.open(_existing_home(ledger)) as led:
        comparison = compare_experiment(experiment_state(loaded, led))
    if comparison.pending:
        err_console.print(
            f"[bold yellow]incomplete:[/] {len(comparison.pending)} of {comparison.scheduled} "
            "trials have no outcome yet; no treatment touching them gets a verdict. Run "
            f"`{_again('experiment run', plan, ledger)}`",
            highlight=False,
        )
    return comparison


@experiment_app.command("compare")
def compare_cmd(
    plan: PlanArg,
    ledger: LedgerOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Per condition and treatment vs baseline. Every scheduled trial counts: one that ended
    without a result after its retries is a failure; while any is pending the experiment is
    flagged incomplete and its comparisons are undecided."""
    from optarena.report import render_markdown

    comparison = _comparison(plan, ledger)
    if as_json:
        console.print_json(comparison.model_dump_json())
    else:
        console.print(render_markdown(comparison), markup=False)


@app.command("report")
def report_cmd(
    plan: Annotated[str, typer.Argument(help="an experiment plan (TOML), or a trial id")],
    output: Annotated[Path, typer.Option("-o", "--output", help="file to write")],
    fmt: Annotated[str, typer.Option("--format", help="html, md or json")] = "html",
    ledger: LedgerOpt = None,
) -> None:
    """A report of an experiment: one self-contained HTML file, Markdown, or JSON."""
    from optarena.ledger import Ledger
    from optarena.report import render_html, render_markdown

    if fmt not in ("html", "md", "json"):
        raise OptarenaError(f"--format {fmt!r}: expected html, md or json")
    _check_output(output)
    home = _existing_home(ledger)
    if not Path(plan).is_file():
        if plan.endswith(".toml") or "/" in plan:
            raise OptarenaError(f"{plan}: no such plan file (a trial id has neither '/' nor .toml)")
        _trial_report(plan, home, fmt, output)  # a trial id (or a unique prefix of one)
        return
    comparison = _comparison(Path(plan), ledger)
    if fmt == "html":
        with Ledger.open(home) as led:
            details = {r.trial_id: _trial_texts(led, r.trial_id) for r in comparison.trials}
        text = render_html(comparison, details)
    elif fmt == "md":
        text = render_markdown(comparison)
    else:
        text = json.dumps(json.loads(comparison.model_dump_json()), indent=1)
    _write(output, text)


def _check_output(output: Path) -> None:
    """Refuse an output that cannot be written before any work (exit 2, not a traceback)."""
    parent = output.absolute().parent
    if output.is_dir():
        raise OptarenaError(f"-o {output}: is a directory; name a file")
    if not parent.is_dir():
        raise OptarenaError(f"-o {output}: the directory {parent} does not exist")


def _write(output: Path, text: str) -> None:
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as e:
        raise OptarenaError(f"-o {output}: cannot write: {e.strerror or e}") from None
    console.print(f"wrote {output} ({len(text)} bytes)")


TAIL_CHARS = 20_000


def _trial_texts(led: Ledger, trial_id: str) -> dict[str, str]:
    """What the report shows of one trial: reasons, diff and log tails, from the ledger."""
    r = led.get(trial_id)
    out = {"verdict": f"{r.verdict or r.state}: " + ("; ".join(r.reasons) or "no reasons")}
    for name in ("diff", "logs/stdout.log", "logs/stderr.log"):
        sha = r.artifacts.get(name)
        if sha and led.store.has(sha):
            text = led.store.read_bytes(sha).decode("utf-8", errors="replace")
            out[name] = text[-TAIL_CHARS:] or "(empty)"
    return out


def _trial_report(ref: str, home: Path, fmt: str, output: Path) -> None:
    from optarena.ledger import Ledger
    from optarena.report import render_trial_html, render_trial_markdown

    with Ledger.open(home) as led:
        record = led.get(ref)
        texts = _trial_texts(led, record.id)
    texts.pop("verdict", None)  # the facts table says it
    if fmt == "html":
        text = render_trial_html(record, texts)
    elif fmt == "md":
        text = render_trial_markdown(record, texts)
    else:
        text = record.model_dump_json(indent=1)
    _write(output, text)
