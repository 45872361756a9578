"""`optarena judge` and `optarena demo` (the demo pipeline lives in `_trials.run_demo`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from optarena.cli._app import app, console, err_console
from optarena.cli._compare import BudgetOpt, EffectOpt
from optarena.cli._render import brief, judge_summary
from optarena.cli._safe import escape
from optarena.cli._speed_view import metrics_view, progress_bar
from optarena.judge import JudgeOptions, judge, verify_judge
from optarena.tasks import resolve_task


@app.command("judge")
def judge_cmd(
    task: Annotated[str, typer.Argument(help="built-in task id or path to a task directory")],
    candidate: Annotated[Path, typer.Argument(help="directory holding the candidate's files")],
    as_json: Annotated[bool, typer.Option("--json", help="print the verdict as JSON")] = False,
    seed: Annotated[
        int | None,
        typer.Option(min=0, max=2**63 - 1, help="replay a judgement's seed (debugging)"),
    ] = None,
    budget_s: BudgetOpt = None,
    min_effect: EffectOpt = None,
    aa: Annotated[
        bool, typer.Option("--aa", help="also run an A/A control and report the noise floor")
    ] = False,
    no_measure: Annotated[
        bool, typer.Option("--no-measure", help="correctness only, no speed measurement")
    ] = False,
    instructions: Annotated[
        bool, typer.Option("--instructions", help="also count instructions (valgrind)")
    ] = False,
) -> None:
    """Judge a candidate, then time it against the baseline: exit 0 accepted, 1 rejected, 2 bad
    input."""
    from optarena.tasks.external import is_external_spec

    if is_external_spec(Path(task)):  # a frozen external project task
        from optarena.cli._external import judge_external_cmd

        judge_external_cmd(Path(task), candidate, as_json, seed, no_measure)
    t = resolve_task(task)
    t.check_workloads()
    if not candidate.is_dir():
        from optarena.errors import OptarenaError

        raise OptarenaError(f"candidate directory '{candidate}' does not exist")
    verify_judge()  # exit 2 (judge_tampered) when optarena's files differ from the install
    with progress_bar(err_console, not as_json, f"judging {candidate} on {t.id}") as progress:
        options = JudgeOptions(
            seed=seed,
            measure=not no_measure,
            budget_s=budget_s,
            min_effect=min_effect,
            aa=aa,
            progress=progress,
            instructions=instructions,
        )
        result = judge(t, candidate, options)
    if as_json:
        print(result.model_dump_json(indent=2))
    else:
        console.print(judge_summary(result))
        for reason in result.reasons:
            console.print(f"  [red]-[/] {escape(brief(reason))}")
        if result.metrics is not None:
            console.print(metrics_view(result.metrics))
    raise typer.Exit(0 if result.verdict == "accepted" else 1)


@app.command("demo")
def demo_cmd(
    ledger_dir: Annotated[
        Path | None,
        typer.Option("--ledger", help="ledger directory (default: a new temporary one)"),
    ] = None,
    budget_s: Annotated[
        float, typer.Option("--budget-s", min=0.1, help="measurement budget per trial (s)")
    ] = 2.0,
) -> None:
    """Offline demo of the whole pipeline: replay trials of rmsnorm's reference candidate and
    of a wrong control (missing eps), both judged and recorded in a ledger of their own (a new
    temporary directory unless --ledger is given; never your default ledger)."""
    import tempfile

    from optarena.cli._trials import run_demo

    if ledger_dir is None:
        ledger_dir = Path(tempfile.mkdtemp(prefix="optarena-demo-"))
        err_console.print(
            f"demo ledger: {ledger_dir} (a new one; your own ledger is untouched)",
            soft_wrap=True,
        )
    run_demo(ledger_dir, budget_s)
