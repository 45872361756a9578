"""`optarena tasks`, `optarena task show|init|qualify`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from optarena.cli._app import app, console, err_console, task_app
from optarena.cli._render import task_table, verdict_markup
from optarena.errors import OptarenaError
from optarena.qualify import QUALIFY_AA_BUDGET_S, qualify_task
from optarena.tasks import builtin_task_ids, resolve_task, unmet_requirements


@app.command("tasks")
def tasks_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """List the built-in task library, with whether this machine can run each task and why not."""
    tasks = [resolve_task(t) for t in builtin_task_ids()]
    if as_json:
        rows = []
        for t in tasks:
            unmet = unmet_requirements(t.spec.requirements)
            rows.append(
                {
                    "id": t.id,
                    "version": t.spec.version,
                    "sha256": t.sha256,
                    "title": t.spec.title,
                    "device": t.spec.requirements.device,
                    "runnable": not unmet,
                    "unmet": unmet,
                }
            )
        console.print_json(json.dumps(rows))
        return
    console.print(task_table(tasks))


@task_app.command("show")
def show_cmd(
    task: Annotated[str, typer.Argument(help="built-in id or path to a task directory")],
    as_json: Annotated[bool, typer.Option("--json", help="print the spec as JSON")] = False,
) -> None:
    """Everything a task declares, with its identity hash (or a frozen external spec)."""
    from optarena.tasks.external import is_external_spec

    if is_external_spec(Path(task)):
        from optarena.cli._external import show_external

        show_external(Path(task), as_json)
        return
    t = resolve_task(task)
    if as_json:
        data = {"spec": t.spec.model_dump(), "sha256": t.sha256, "root": str(t.root)}
        console.print_json(json.dumps(data))
        return
    s = t.spec
    console.print(f"[bold]{s.id}[/] {s.version}  {s.title}")
    console.print(f"sha256     {t.sha256}")
    console.print(f"root       {t.root}")
    console.print(f"entry      {s.entry.file}:{s.entry.function}")
    console.print(f"editable   {', '.join(s.editable)}")
    console.print(f"tolerance  atol {s.tolerance.atol:g}, rtol {s.tolerance.rtol:g}")
    console.print(
        f"requires   {s.requirements.device}, python {s.requirements.python}, "
        f"{', '.join(s.requirements.packages) or 'no packages'}"
    )
    m = s.measurement
    console.print(f"measure    min effect {m.min_effect:.1%}, budget {m.budget_s:g} s")
    table = Table("workload", "role", "params", "description", header_style="bold")
    for w in s.workloads:
        table.add_row(w.name, w.role, json.dumps(w.params), w.description)
    console.print(table)
    controls = Table("control", "expect", "reason", header_style="bold")
    for c in s.controls:
        controls.add_row(c.name, c.expect, c.reason or "-")
    console.print(controls)


@task_app.command("init")
def init_cmd(
    task: Annotated[str, typer.Argument(help="built-in id or path to a task directory")],
    directory: Annotated[Path, typer.Argument(help="the workspace to create")],
    force: Annotated[
        bool, typer.Option("--force", help="write into a non-empty directory")
    ] = False,
) -> None:
    """Write a starter workspace: the baseline's editable files plus TASK.md."""
    t = resolve_task(task)
    if directory.exists() and not directory.is_dir():
        raise OptarenaError(f"{directory} exists and is not a directory")
    if directory.is_dir() and any(directory.iterdir()) and not force:
        raise OptarenaError(f"{directory} is not empty; pass --force to write into it")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for rel in t.editable_files(t.baseline_dir):
            (directory / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(t.baseline_dir / rel, directory / rel)
        shutil.copyfile(t.prompt_path, directory / "TASK.md")
    except OSError as e:  # read-only, a file in the way, no space: the user's to fix
        where = e.filename or directory
        raise OptarenaError(
            f"{directory}: cannot write the workspace: {where}: {e.strerror}"
        ) from None
    console.print(f"wrote {directory}: TASK.md and {', '.join(t.editable_files(t.baseline_dir))}")


@task_app.command("qualify")
def qualify_cmd(
    task: Annotated[str, typer.Argument(help="built-in id or path to a task directory")],
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
    aa_budget_s: Annotated[
        float, typer.Option("--aa-budget-s", min=0.1, help="budget of the A/A run (s)")
    ] = QUALIFY_AA_BUDGET_S,
    no_aa: Annotated[bool, typer.Option("--no-aa", help="skip the A/A run")] = False,
) -> None:
    """Run every control and an A/A comparison; fail if a correct control is rejected, a wrong
    one accepted, or the baseline against itself reads improved/regressed."""
    t = resolve_task(task)
    t.check_workloads()
    with err_console.status(f"qualifying {t.id}: {len(t.spec.controls)} controls, A/A"):
        report = qualify_task(t, aa=not no_aa, aa_budget_s=aa_budget_s)
    if as_json:
        console.print_json(report.model_dump_json())
    else:
        table = Table("control", "expected", "got", "reasons", "ok", header_style="bold")
        for row in report.controls:
            table.add_row(
                row.name,
                row.expect + (f" ({row.reason})" if row.reason else ""),
                verdict_markup(row.verdict),
                ", ".join(row.reason_codes) or "-",
                "[green]yes[/]" if row.ok else "[bold red]NO[/]",
            )
        console.print(table)
        if report.aa is not None:
            a = report.aa
            ci = f"{a.ratio_ci[0]:.3f} .. {a.ratio_ci[1]:.3f}" if a.ratio_ci else "no interval"
            console.print(
                f"A/A: {a.verdict} ({ci}; {a.pairs} pairs, {a.used_s:.1f} s) "
                + ("[green]ok[/]" if a.ok else "[bold red]NOT ok[/]")
            )
            if a.ratio_ci is None:
                console.print(
                    f"  [yellow]note:[/] {a.pairs} pairs gave no interval: the A/A read no "
                    "false verdict, but says nothing about the noise; a larger --aa-budget-s "
                    f"(e.g. {4 * a.budget_s:g}) would"
                )
        status = "[green]qualified[/]" if report.qualified else "[bold red]NOT qualified[/]"
        console.print(f"{t.id}@{t.spec.version}: {status}")
        for problem in report.problems:
            console.print(f"  [red]-[/] {problem}")
    if not report.qualified:
        raise typer.Exit(1)
