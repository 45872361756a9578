"""`optarena judge` and `optarena demo`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from optarena.cli._app import app, console, err_console
from optarena.cli._render import judge_summary, verdict_markup
from optarena.judge import JudgeOptions, judge
from optarena.tasks import resolve_task


@app.command("judge")
def judge_cmd(
    task: Annotated[str, typer.Argument(help="built-in task id or path to a task directory")],
    candidate: Annotated[Path, typer.Argument(help="directory holding the candidate's files")],
    as_json: Annotated[bool, typer.Option("--json", help="print the verdict as JSON")] = False,
    seed: Annotated[int | None, typer.Option(help="replay a judgement's seed (debugging)")] = None,
) -> None:
    """Judge a candidate: exit 0 accepted, 1 rejected, 2 bad input."""
    t = resolve_task(task)
    if not candidate.is_dir():
        from optarena.errors import OptarenaError

        raise OptarenaError(f"candidate directory '{candidate}' does not exist")
    with err_console.status(f"judging {candidate} on {t.id}"):
        result = judge(t, candidate, JudgeOptions(seed=seed))
    if as_json:
        print(result.model_dump_json(indent=2))
    else:
        console.print(judge_summary(result))
        for reason in result.reasons:
            console.print(f"  [red]-[/] {reason[:400]}")
    raise typer.Exit(0 if result.verdict == "accepted" else 1)


@app.command("demo")
def demo_cmd() -> None:
    """Offline demo: judge a correct and a wrong built-in candidate of rmsnorm."""
    t = resolve_task("rmsnorm")
    for name in ("optimized", "missing-eps"):
        control = next(c for c in t.spec.controls if c.name == name)
        with err_console.status(f"judging control '{name}'"):
            result = judge(t, t.root / control.dir)
        console.print(f"\n[bold]rmsnorm / {name}[/]: {verdict_markup(result.verdict)}")
        console.print(judge_summary(result))
        for reason in result.reasons[:5]:
            console.print(f"  [red]-[/] {reason[:300]}")
