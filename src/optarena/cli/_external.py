"""`optarena task freeze|show` for external project tasks, and `judge FROZEN CANDIDATE`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from optarena.cli._app import console, err_console, task_app
from optarena.cli._safe import escape
from optarena.errors import OptarenaError

if TYPE_CHECKING:
    from optarena.judge import BrokenTaskError


@task_app.command("freeze")
def freeze_cmd(
    spec: Annotated[Path, typer.Argument(help='an external task spec (kind = "external")')],
    output: Annotated[Path, typer.Option("-o", "--output", help="the frozen spec to write")],
    no_run: Annotated[
        bool, typer.Option("--no-run", help="do not run set-up, gate and benchmark on base")
    ] = False,
) -> None:
    """Resolve the spec's base to a full commit and write the frozen spec with the hashes of
    the spec, the tree at base, the holdout and the declared environment: what `judge` and
    `run` accept. Then set-up, gate and one benchmark run on base, timed (a spec that cannot
    work is refused, and nothing is written)."""
    from optarena.judge import check_base
    from optarena.tasks.external import freeze_external, freeze_warnings

    if not spec.is_file():
        raise OptarenaError(f"{spec}: no such spec file")
    f = freeze_external(spec, output)
    gaps = f.gaps()
    console.print(
        f"froze {f.spec.id} {f.spec.version} at {f.frozen.base_commit[:12]} -> {output}"
        + (f" (gaps: {', '.join(gaps)})" if gaps else "")
    )
    for warning in freeze_warnings(f):
        console.print(f"[yellow]warning:[/] {escape(warning)}")
    if no_run:
        console.print("not run on base (--no-run): set-up, gate and benchmark unchecked")
        return
    try:
        base = check_base(f)
    except OptarenaError:
        output.unlink(missing_ok=True)  # a spec that cannot work is not frozen
        raise
    spent = ", ".join(f"{k} {v:.1f} s" for k, v in base.timings.items())
    tests = "" if base.tests is None else f"; the gate's report lists {base.tests} tests"
    metric = "" if base.metric is None else f"; metric {base.metric:.6g}"
    console.print(f"ran on base: {spent}{tests}{metric}")
    python = base.environment.get("python3")
    console.print(f"python3 in the sandbox: {escape(str(python))}")


def show_external(frozen: Path, as_json: bool) -> None:
    """`task show FROZEN`: a frozen external spec, checked for drift."""
    from optarena.tasks.external import freeze_warnings, load_frozen

    f = load_frozen(frozen)
    if as_json:
        console.print_json(f.model_dump_json(by_alias=True))
        return
    s = f.spec
    console.print(f"{s.id} {s.version}: {s.title}")
    console.print(f"  repository  {f.frozen.repo} at {f.frozen.base_commit}")
    console.print(f"  editable    {', '.join(s.project.editable)}")
    for name, cmd in (("set-up", s.setup), ("gate", s.quality), ("benchmark", s.benchmark)):
        console.print(f"  {name:<11} {cmd.command if cmd else '(none)'}")
    if s.benchmark:
        metric = s.benchmark.metric.model_dump(by_alias=True, exclude_none=True)
        console.print(f"  metric      {metric}, {s.benchmark.direction} is better")
    env = s.environment
    if f.frozen.python:
        console.print(f"  python      {f.frozen.python} ({f.frozen.python_version}), first on PATH")
    if env.wheelhouse:
        console.print(f"  wheelhouse  {env.wheelhouse} ($OPTARENA_WHEELHOUSE)")
    for extra in env.paths:
        console.print(f"  visible     {extra}")
    if f.frozen.environment_sha256:
        console.print(f"  environment sha256 {f.frozen.environment_sha256[:16]}")
    else:
        console.print("  environment (none declared: the commands get the PATH optarena runs with)")
    console.print(f"  gaps        {', '.join(f.gaps()) or 'none'}")
    for warning in freeze_warnings(f):
        console.print(f"  [yellow]warning[/]     {escape(warning)}")
    console.print("  drift       none (repository, base tree and holdout match)")


def broken_task_json(e: BrokenTaskError) -> dict[str, object]:
    return {
        "error": "broken_task",
        "field": e.field,
        "message": str(e).splitlines()[0],
        "output_tail": e.output_tail,
        "log": None if e.log is None else str(e.log),
    }


def judge_external_cmd(
    frozen_path: Path, candidate: Path, as_json: bool, seed: int | None, no_measure: bool
) -> NoReturn:
    from optarena.judge import BrokenTaskError, judge_external, verify_judge
    from optarena.tasks.external import load_frozen

    f = load_frozen(frozen_path)
    if not candidate.exists():
        raise OptarenaError(f"candidate '{candidate}' does not exist (a patch file or a directory)")
    verify_judge()
    if not as_json:
        err_console.print(f"judging {candidate} on {f.spec.id} (external: gate, then benchmark)")
    try:
        result = judge_external(f, candidate, measure=not no_measure, seed=seed)
    except BrokenTaskError as e:
        if as_json:  # the failure as data too: the field, the output's end, the whole log
            print(json.dumps(broken_task_json(e), indent=2))
        raise
    if as_json:
        print(result.model_dump_json(indent=2))
    else:
        console.print(f"{result.verdict}" + (f" ({', '.join(result.gaps)})" if result.gaps else ""))
        for reason in result.reasons:
            console.print(f"  - {escape(reason[:400])}")
        found = result.environment
        if found:
            version = f" ({found.get('python3_version')})" if found.get("python3_version") else ""
            console.print(f"  python3: {escape(str(found.get('python3')))}{version}")
        if result.timings:
            spent = ", ".join(f"{k} {v:.1f} s" for k, v in result.timings.items())
            console.print(f"  time: {spent}")
        if result.setup:
            console.print("  set-up: " + ", ".join(f"{k} {v}" for k, v in result.setup.items()))
        m = result.metrics
        if m is not None:
            o = m.overall
            ci = o.ratio_ci
            span = f", interval {ci[0]:.3f}..{ci[1]:.3f}" if ci else ""
            ratio = "-" if o.ratio is None else f"{o.ratio:.3f}"
            console.print(f"  speed: {ratio}x baseline{span}, {o.verdict} ({escape(o.why)})")
            if m.os_check is not None and m.os_check.outcome != "not_needed":
                c = m.os_check
                console.print(f"  OS check: {c.outcome} ({c.basis}): {escape(c.why)}")
                if c.advice:
                    console.print(f"  to resolve it: {escape(c.advice)}")
    raise typer.Exit(0 if result.verdict == "accepted" else 1)
