"""`optarena harness run|show|vet|export`: the harness-improvement loop and its registry."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Annotated

import typer

from optarena.cli._app import app, console, err_console, interrupted
from optarena.cli._safe import escape
from optarena.errors import OptarenaError
from optarena.harness import HarnessRun, Registry
from optarena.report import speed_words

harness_app = typer.Typer(
    help="Run the harness-improvement loop; vet, list and export its artifacts.",
    no_args_is_help=True,
)
app.add_typer(harness_app, name="harness")

RunOpt = Annotated[
    str, typer.Argument(help="a run directory (registry.json, run.json) or a run id")
]
LedgerOpt = Annotated[
    Path | None,
    typer.Option("--ledger", help="ledger directory (default: $OPTARENA_LEDGER, else the user's)"),
]
_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(option: str, text: str) -> float:
    """`90`, `90s`, `15m`, `1.5h` -> seconds; anything else is bad input naming the option."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*([smh]?)\s*", text)
    if m is None or float(m.group(1)) <= 0:
        raise OptarenaError(f"{option} '{text}': expected a duration such as 90, 90s, 15m or 1h")
    return float(m.group(1)) * _UNITS[m.group(2)]


def _run_dir(ref: str, ledger_dir: Path | None) -> Path:
    path = Path(ref)
    if (path / "registry.json").is_file() or (path / "run.json").is_file():
        return path
    if re.fullmatch(r"[0-9a-f]{4,10}", ref):
        from optarena.ledger import resolve_home

        root = resolve_home(ledger_dir) / "harness"
        found = sorted(d for d in root.glob(f"{ref}*") if d.is_dir()) if root.is_dir() else []
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise OptarenaError(f"run id '{ref}' is ambiguous: {', '.join(d.name for d in found)}")
    raise OptarenaError(f"{ref}: no registry.json (not a harness run directory or run id)")


def _registry(run: Path) -> Registry:
    from optarena.harness import load_registry

    path = run / "registry.json"
    if not path.is_file():
        raise OptarenaError(f"{run}: no registry.json (not a harness run directory)")
    return load_registry(path)


@harness_app.command("run")
def run_cmd(
    task: Annotated[
        str | None, typer.Option("--task", help="built-in task id or task directory")
    ] = None,
    agent: Annotated[
        str | None, typer.Option("--agent", help="claude, codex or module:Class")
    ] = None,
    demo: Annotated[
        bool,
        typer.Option(
            "--demo",
            help="offline: the real CLI (claude unless --agent codex) against optarena's "
            "scripted model server on rmsnorm; no key, no network, nothing spent",
        ),
    ] = False,
    iterations: Annotated[int, typer.Option("--iterations", help="attempts, at least 1")] = 2,
    agent_arg: Annotated[
        list[str] | None, typer.Option("--agent-arg", help="runner option KEY=VALUE")
    ] = None,
    task_state: Annotated[
        str, typer.Option("--task-state", help="continue (one lineage) or reset (baseline)")
    ] = "continue",
    attempt_timeout: Annotated[
        str, typer.Option("--attempt-timeout", help="wall time of each attempt")
    ] = "30m",
    reflection_timeout: Annotated[
        str, typer.Option("--reflection-timeout", help="wall time of a reflection turn")
    ] = "10m",
    build_timeout: Annotated[
        str, typer.Option("--build-timeout", help="wall time of a build or repair turn")
    ] = "20m",
    repair_attempts: Annotated[
        int, typer.Option("--repair-attempts", help="repair turns after a failed vetting")
    ] = 1,
    stop_when: Annotated[
        str | None, typer.Option("--stop-when", help="'improved' or a speed-up such as 1.2")
    ] = None,
    max_cost_usd: Annotated[
        float | None, typer.Option("--max-cost-usd", min=1e-9, help="spend limit per turn ($)")
    ] = None,
    no_measure: Annotated[
        bool, typer.Option("--no-measure", help="correctness only, no speed measurement")
    ] = False,
    budget_s: Annotated[
        float | None, typer.Option("--budget-s", min=0.1, help="measurement budget (s)")
    ] = None,
    no_final_build: Annotated[
        bool,
        typer.Option(
            "--no-final-build",
            help="no reflection or build after the last attempt (only an export would use it)",
        ),
    ] = False,
    run_dir: Annotated[
        Path | None, typer.Option("--run-dir", help="the run's directory (default: ledger's)")
    ] = None,
    registry: Annotated[
        Path | None, typer.Option("--registry", help="start from this registry's artifacts")
    ] = None,
    ledger_dir: LedgerOpt = None,
) -> None:
    """Attempt, judge, reflect and build in the same session, vet, quarantine, activate
    for the next fresh session; N iterations. Exit 0 when a candidate was accepted, 1 when
    none was, 2 bad input, 130 interrupted. `--demo` runs it offline."""
    from optarena.agents import runner_class
    from optarena.cli._harness_demo import demo_agent
    from optarena.cli._trials import parse_pairs
    from optarena.harness import HarnessConfig, run_harness
    from optarena.ledger import Ledger
    from optarena.records import AgentLimits
    from optarena.tasks import resolve_task

    if iterations < 1:
        raise OptarenaError(f"--iterations {iterations}: expected at least 1")
    if not demo and (task is None or agent is None):
        raise OptarenaError("--task and --agent are required (or --demo for the offline demo)")
    if not demo and agent is not None and not runner_class(agent).can_resume:
        raise OptarenaError(
            f"agent '{agent}' cannot resume a session (reflection and build continue the "
            "attempt's session): use claude or codex; for an offline smoke test of the loop, "
            "`optarena harness run --demo`"
        )
    the_task = resolve_task(task or "rmsnorm")
    args = parse_pairs(agent_arg or [], "--agent-arg")
    with contextlib.ExitStack() as stack:
        if demo:  # the scripted model server runs for the whole loop
            offline = stack.enter_context(demo_agent(agent or "claude", the_task, task_state))
            agent, args = offline.agent, {**offline.agent_args, **args}
            budget_s = budget_s or DEMO_BUDGET_S
        assert agent is not None
        config = HarnessConfig(
            task=the_task,
            agent=agent,
            agent_args=args,
            iterations=iterations,
            task_state=task_state,
            attempt=AgentLimits(
                wall_s=parse_duration("--attempt-timeout", attempt_timeout),
                max_cost_usd=max_cost_usd,
            ),
            reflection_timeout_s=parse_duration("--reflection-timeout", reflection_timeout),
            build_timeout_s=parse_duration("--build-timeout", build_timeout),
            repair_attempts=repair_attempts,
            stop_when=stop_when,
            measure=not no_measure,
            budget_s=budget_s,
            run_dir=run_dir,
            registry=registry,
            final_build=not no_final_build,
        )
        with Ledger.open(ledger_dir) as ledger:
            ledger.reconcile()  # recovery: trials a killed optarena left running, its leftovers
            try:
                run, where = run_harness(config, ledger, progress=lambda m: err_console.print(m))
            except KeyboardInterrupt:
                raise interrupted("harness run interrupted; what it did is recorded") from None
    show_run(run, where)
    accepted = any(it.verdict == "accepted" for it in run.iterations)
    raise typer.Exit(0 if accepted else 1)


DEMO_BUDGET_S = 2.0  # the demo's judge measures briefly: it shows the loop, not a speed-up


def _money(value: float | None, unknown: int = 0) -> str:
    if value is None:
        return f"unknown ({unknown} phase(s) without a cost)" if unknown else "unknown"
    return f"${value:.4f}"


def show_run(run: HarnessRun, where: Path) -> None:
    """Iterations, scores, artifacts and their status, what each phase cost."""
    s = run.settings
    console.print(
        f"harness run [bold]{run.id}[/]: {s.task} / {s.agent}, {len(run.iterations)} of "
        f"{s.iterations} iteration(s), task state {s.task_state}; status {run.status}"
        + (f" ({escape(run.stopped_because)})" if run.stopped_because else "")
    )
    for it in run.iterations:
        speed = speed_words(1 / it.speed_ratio) if it.speed_ratio else "no speed"
        console.print(
            f" it{it.iteration} trial {it.trial_id or '-'} from {it.started_from}: verdict "
            f"{it.verdict or '-'} {','.join(it.reason_codes)} {speed}"
            f"{' ' + it.speed_verdict if it.speed_verdict else ''}"
        )
        if it.active:
            active = ", ".join(f"{a.kind}:{a.name}" for a in it.active)
            console.print(f"    active: {escape(active)}")
        for c in it.tool_calls:
            tool = escape(f"{c.server}.{c.tool}")
            console.print(f"    tool calls: {tool} x{c.calls} ({c.errors} errors)")
        if it.claimed_files:
            console.print(f"    ignored (never evidence): {escape(', '.join(it.claimed_files))}")
        for p in it.phases:
            cost = _money(p.cost_usd)
            console.print(
                f"    {p.phase:<8} {p.status:<10} {p.wall_s or 0:7.1f} s  "
                f"{p.tokens if p.tokens is not None else '?':>8} tok  {cost} ({p.cost_source})"
            )
        for a in it.built:
            first = escape(a.report.splitlines()[0] if a.report else "")
            console.print(
                f"    built {a.status:<11} {a.kind} {escape(a.name)} {a.sha256[:12]}: {first}"
            )
        if it.error:
            console.print(f"    [yellow]{escape(it.error)}[/]")
    for t in run.totals():
        if t.count:
            console.print(
                f" total {t.phase:<8} x{t.count}: {t.wall_s:.1f} s, "
                f"{t.tokens if t.tokens is not None else 'unknown'} tokens, "
                f"{_money(t.cost_usd, t.unknown_cost)} ({t.cost_source})"
            )
    if run.best_dir:
        console.print(f" best: iteration {run.best_iteration}, restored in {run.best_dir}")
    else:
        console.print(" best: none (no candidate was accepted)")
    console.print(f" run directory {where}")


@harness_app.command("vet")
@harness_app.command("qualify", hidden=True)  # its name before `vet`
def vet_cmd(
    area: Annotated[Path, typer.Argument(help="an artifact area (.harness/: skills/, mcp/, ...)")],
    run: Annotated[Path, typer.Option(help="the run directory to record into")],
    iteration: Annotated[int, typer.Option(min=0, help="the iteration that built them")] = 0,
    workspace: Annotated[Path | None, typer.Option(help="files of the replay workspace")] = None,
) -> None:
    """Vet every new or changed artifact in AREA (each declared command contained) and
    record it; what fails is quarantined by content hash and never activated."""
    from optarena.harness import save_registry, scan_area

    if not area.is_dir():
        raise OptarenaError(f"{area}: not a directory")
    run.mkdir(parents=True, exist_ok=True)
    reg = _registry(run) if (run / "registry.json").exists() else Registry(run=run.name)
    added = scan_area(reg, area, run / "snapshots", iteration, workspace)
    save_registry(reg, run / "registry.json")
    for a in added:
        name, report = escape(a.name), escape(a.report)
        console.print(f"{a.status:<11} {a.kind} {name} ({a.sha256[:12]}): {report}")
    console.print(f"{len(added)} new version(s); registry {run / 'registry.json'}")


@harness_app.command("show")
def show_cmd(run: RunOpt, ledger_dir: LedgerOpt = None) -> None:
    """A run's iterations, scores and phase costs (when it was a loop run), then every
    artifact version with its status and report."""
    from optarena.harness import load_run

    where = _run_dir(run, ledger_dir)
    reg = _registry(where)
    if (where / "run.json").is_file():
        show_run(load_run(where / "run.json"), where)  # lists each iteration's artifacts
    for a in [] if (where / "run.json").is_file() else reg.artifacts:
        name = escape(a.name)
        console.print(f"it{a.iteration} {a.status:<11} {a.kind:<8} {name} {a.sha256[:12]}")
        console.print(f"    {escape(a.report.splitlines()[0]) if a.report else ''}")
    active = ", ".join(f"{a.kind}:{a.name}" for a in reg.qualified()) or "none"
    console.print(f"active: {escape(active)}")


@harness_app.command("export")
def export_cmd(
    run: RunOpt,
    output: Annotated[Path, typer.Option("-o", "--output", help="a new directory")],
    ledger_dir: LedgerOpt = None,
) -> None:
    """The qualified artifacts as an experiment condition's `artifacts` directory."""
    from optarena.harness import export_artifacts

    where = _run_dir(run, ledger_dir)
    written = export_artifacts(_registry(where), where / "snapshots", output)
    console.print(f"exported {len(written)} item(s) to {output}")
