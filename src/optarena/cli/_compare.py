"""`optarena compare TASK A_DIR B_DIR`: two candidates under the judge's speed protocol."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from optarena.cli._app import app, console, err_console
from optarena.cli._render import brief
from optarena.cli._safe import escape
from optarena.cli._speed_view import comparison_view, progress_bar
from optarena.errors import OptarenaError
from optarena.judge import JudgeOptions, compare
from optarena.tasks import resolve_task

BudgetOpt = Annotated[
    float | None,
    typer.Option("--budget-s", help="measurement budget in seconds (default: the task's)"),
]
EffectOpt = Annotated[
    float | None,
    typer.Option(
        "--min-effect",
        help=(
            "relative change inside which an interval reads no_difference, and beyond which "
            "it must reach for improved/regressed, e.g. 0.03"
        ),
    ),
]


@app.command("compare")
def compare_cmd(
    task: Annotated[str, typer.Argument(help="built-in task id or path to a task directory")],
    a_dir: Annotated[Path, typer.Argument(help="candidate A (the reference of the ratio)")],
    b_dir: Annotated[Path, typer.Argument(help="candidate B")],
    budget_s: BudgetOpt = None,
    min_effect: EffectOpt = None,
    aa: Annotated[bool, typer.Option("--aa", help="also run the baseline's A/A control")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the result as JSON")] = False,
    seed: Annotated[
        int | None, typer.Option(min=0, max=2**63 - 1, help="replay a comparison's seed")
    ] = None,
) -> None:
    """Time B against A (ratio B/A): exit 0 when measured, 1 when either is wrong, 2 bad input."""
    t = resolve_task(task)
    t.check_workloads()
    for d in (a_dir, b_dir):
        if not d.is_dir():
            raise OptarenaError(f"candidate directory '{d}' does not exist")
    with progress_bar(err_console, not as_json, "checking correctness of both") as progress:
        options = JudgeOptions(
            seed=seed, budget_s=budget_s, min_effect=min_effect, aa=aa, progress=progress
        )
        result = compare(t, a_dir, b_dir, options)
    if as_json:
        print(result.model_dump_json(indent=2))
    else:
        for name, ref in (("A", result.a), ("B", result.b)):
            console.print(f"{name}: {ref.path} ({ref.sha256[:12]}) {ref.verdict}")
            for reason in ref.reasons[:5]:
                console.print(f"  [red]-[/] {escape(brief(reason, 300))}")
        if result.failure:
            console.print(f"[red]not measured:[/] {escape(result.failure[:400])}")
        if result.comparison is not None:
            console.print(comparison_view(result.comparison, title="B against A"))
        if result.aa is not None:
            floor = result.aa.noise_floor
            floor_s = "unknown" if floor is None else f"+-{floor:.1%}"
            console.print(f"A/A control: {result.aa.comparison.overall.verdict}; noise {floor_s}")
    raise typer.Exit(0 if result.comparison is not None else 1)
