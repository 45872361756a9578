"""`optarena harness qualify|show|export`: the harness loop's artifact registry by hand."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from optarena.cli._app import app, console
from optarena.errors import OptarenaError
from optarena.harness import Registry

harness_app = typer.Typer(help="Qualify, list and export harness artifacts.", no_args_is_help=True)
app.add_typer(harness_app, name="harness")

RunOpt = Annotated[Path, typer.Argument(help="the run directory (registry.json, snapshots/)")]


def _registry(run: Path) -> Registry:
    from optarena.harness import load_registry

    path = run / "registry.json"
    if not path.is_file():
        raise OptarenaError(f"{run}: no registry.json (not a harness run directory)")
    return load_registry(path)


@harness_app.command("qualify")
def qualify_cmd(
    area: Annotated[Path, typer.Argument(help="an artifact area (.harness/: skills/, mcp/, ...)")],
    run: Annotated[Path, typer.Option(help="the run directory to record into")],
    iteration: Annotated[int, typer.Option(min=0, help="the iteration that built them")] = 0,
    workspace: Annotated[Path | None, typer.Option(help="files of the replay workspace")] = None,
) -> None:
    """Qualify every new or changed artifact in AREA (each declared command contained) and
    record it; what fails is quarantined by content hash and never activated."""
    from optarena.harness import save_registry, scan_area

    if not area.is_dir():
        raise OptarenaError(f"{area}: not a directory")
    run.mkdir(parents=True, exist_ok=True)
    reg = _registry(run) if (run / "registry.json").exists() else Registry(run=run.name)
    added = scan_area(reg, area, run / "snapshots", iteration, workspace)
    save_registry(reg, run / "registry.json")
    for a in added:
        console.print(f"{a.status:<11} {a.kind} {a.name} ({a.sha256[:12]}): {a.report}")
    console.print(f"{len(added)} new version(s); registry {run / 'registry.json'}")


@harness_app.command("show")
def show_cmd(run: RunOpt) -> None:
    """Every artifact version of the run, with its status and report."""
    reg = _registry(run)
    for a in reg.artifacts:
        console.print(f"it{a.iteration} {a.status:<11} {a.kind:<8} {a.name} {a.sha256[:12]}")
        console.print(f"    {a.report.splitlines()[0] if a.report else ''}")
    console.print(f"active: {', '.join(f'{a.kind}:{a.name}' for a in reg.qualified()) or 'none'}")


@harness_app.command("export")
def export_cmd(
    run: RunOpt,
    output: Annotated[Path, typer.Option("-o", "--output", help="a new directory")],
) -> None:
    """The qualified artifacts as an experiment condition's `artifacts` directory."""
    from optarena.harness import export_artifacts

    written = export_artifacts(_registry(run), run / "snapshots", output)
    console.print(f"exported {len(written)} item(s) to {output}")
