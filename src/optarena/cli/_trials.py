"""`optarena run`, `optarena trials`, `optarena trial show|rejudge`, and the demo pipeline."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, get_args

import typer

from optarena.agents import known_runners, mcp_runners, runner_class
from optarena.cli._app import app, console, err_console, interrupted
from optarena.cli._compare import EffectOpt
from optarena.cli._render import brief, verdict_markup
from optarena.cli._safe import escape, json_text
from optarena.cli._speed_view import metrics_view, speed_markup
from optarena.cli._trial_views import (
    COST_LEGEND,
    PhaseView,
    artifact_paths,
    judgements_table,
    show_lines,
    trials_table,
)
from optarena.errors import OptarenaError
from optarena.ledger import Ledger
from optarena.records import (
    AgentLimits,
    AgentStatus,
    TrialRecord,
    TrialState,
    TrialVerdict,
    calls_of,
    load_tool_call,
)
from optarena.tasks import Task, resolve_task
from optarena.tasks.external import FrozenExternal
from optarena.trials import TrialConfig, TrialInterrupted, WorkspaceLimits, rejudge, run_trial

if TYPE_CHECKING:
    from optarena.mcp import TaskToolsHook  # imported when used: the MCP SDK is slow to load

trial_app = typer.Typer(help="Inspect and re-judge recorded trials.", no_args_is_help=True)
app.add_typer(trial_app, name="trial")

LedgerOpt = Annotated[
    Path | None,
    typer.Option(
        "--ledger",
        help="ledger directory (default: $OPTARENA_LEDGER, else ~/.local/share/optarena)",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="print JSON")]
NoMeasureOpt = Annotated[
    bool, typer.Option("--no-measure", help="correctness only, no speed measurement")
]
BudgetOpt = Annotated[
    float | None, typer.Option("--budget-s", min=0.1, help="measurement budget (s)")
]


VERDICTS = get_args(TrialVerdict)
STATUSES = (*get_args(AgentStatus), *get_args(TrialState))


def _check_choice(option: str, value: str | None, known: tuple[str, ...]) -> None:
    if value is not None and value not in known:
        raise OptarenaError(f"{option} '{value}': expected one of {', '.join(known)}")


def parse_pairs(values: list[str], option: str) -> dict[str, str]:
    """`k=v` options into a dict; a missing `=` is bad input naming the option."""
    out: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise OptarenaError(f"{option} '{item}': expected KEY=VALUE")
        out[key] = value
    return out


def _agent_and_args(
    agent: str | None, command: str | None, agent_args: list[str]
) -> tuple[str, dict[str, str]]:
    args = parse_pairs(agent_args, "--agent-arg")
    if command is not None:
        if agent not in (None, "command"):
            raise OptarenaError(f"--command is for the 'command' agent, not '{agent}'")
        return "command", {**args, "command": command}
    if agent is None:
        raise OptarenaError(f"pass --agent NAME (known: {', '.join(known_runners())})")
    return agent, args


def _interrupted_trial(e: TrialInterrupted, ledger: Ledger) -> typer.Exit:
    """Ctrl-C or SIGTERM: say where the trial is recorded, what it keeps, what to do next."""
    then = (
        f"judge it with `optarena trial rejudge {e.trial_id}`"
        if e.delivered
        else f"see `optarena trial show {e.trial_id}`"
    )
    return interrupted(
        f"trial {e.trial_id} recorded as interrupted ({escape(e.error)}) in {ledger.db_path}; "
        f"it keeps {e.kept}; {then}"
    )


def _summary(record: TrialRecord, ledger: Ledger) -> None:
    console.print(
        f"trial [bold]{record.id}[/]: agent {record.agent.label} {record.agent_status}; "
        f"verdict {verdict_markup(record.verdict or '-')}"
    )
    for reason in record.reasons[:8]:
        console.print(f"  [red]-[/] {escape(brief(reason, 300))}")
    console.print(f"  speed: {speed_markup(record.metrics, record.verdict)}")
    console.print(f"  recorded in {ledger.db_path}; details: optarena trial show {record.id}")


def _trial_target(task: str) -> Task | FrozenExternal:
    """A task package by id or directory, or a frozen external spec (checked for drift)."""
    from optarena.tasks.external import is_external_spec, load_frozen

    path = Path(task)
    if path.is_file() and is_external_spec(path):
        return load_frozen(path)
    return resolve_task(task)


@app.command("run")
def run_cmd(
    task: Annotated[
        str,
        typer.Option(
            "--task", help="built-in task id, task directory, or a frozen external spec file"
        ),
    ],
    agent: Annotated[
        str | None, typer.Option("--agent", help="runner name or module:Class")
    ] = None,
    command: Annotated[
        str | None, typer.Option("--command", help="template for the 'command' agent")
    ] = None,
    agent_arg: Annotated[
        list[str] | None, typer.Option("--agent-arg", help="runner option KEY=VALUE")
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", min=0.1, help="agent wall time (s)")
    ] = 1800.0,
    max_turns: Annotated[
        int | None, typer.Option("--max-turns", min=1, help="agent turns (claude)")
    ] = None,
    max_cost_usd: Annotated[
        float | None,
        typer.Option("--max-cost-usd", min=1e-9, help="spend limit ($), metered per trial"),
    ] = None,
    max_tokens: Annotated[
        int | None, typer.Option("--max-tokens", min=1, help="token limit, metered per trial")
    ] = None,
    max_calls: Annotated[
        int | None, typer.Option("--max-calls", min=1, help="model-call limit, metered")
    ] = None,
    max_processes: Annotated[
        int | None,
        typer.Option("--max-processes", min=8, help="agent's processes+threads at once"),
    ] = None,
    workspace: Annotated[Path | None, typer.Option("--workspace", help="agent workspace")] = None,
    max_workspace_mb: Annotated[
        float,
        typer.Option(
            "--max-workspace-mb",
            min=1,
            help="a larger delivered workspace (apparent size or disk use) is refused unread",
        ),
    ] = WorkspaceLimits.max_mb,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="replace a non-empty workspace")
    ] = False,
    label: Annotated[
        list[str] | None, typer.Option("--label", help="condition label KEY=VALUE")
    ] = None,
    no_measure: NoMeasureOpt = False,
    budget_s: BudgetOpt = None,
    no_agent_sandbox: Annotated[
        bool,
        typer.Option(
            "--no-agent-sandbox",
            help="run the agent uncontained, as you (debugging only; recorded as such)",
        ),
    ] = False,
    ledger_dir: LedgerOpt = None,
    as_json: JsonOpt = False,
    task_tools: Annotated[
        bool,
        typer.Option(
            "--task-tools",
            help="give the agent optarena's judge as MCP tools (claude, codex); advice only",
        ),
    ] = False,
    tools_budget_s: Annotated[
        float, typer.Option("--tools-budget-s", min=0.5, help="cap on a measure tool call (s)")
    ] = 30.0,
) -> None:
    """Run an agent on a task in a fresh workspace; judge and record what it delivered.
    Exit 0 accepted, 1 rejected, 2 bad input or a tampered judge, 130 interrupted."""
    name, args = _agent_and_args(agent, command, agent_arg or [])
    target = _trial_target(task)
    # the trial enters the hook; the runner turns its server into the agent's own options
    tools = _task_tools(target, task, name, tools_budget_s) if task_tools else None
    config = TrialConfig(
        task=target,
        agent=name,
        agent_args=args,
        limits=AgentLimits(
            wall_s=timeout,
            max_turns=max_turns,
            max_cost_usd=max_cost_usd,
            max_tokens=max_tokens,
            max_calls=max_calls,
            max_processes=max_processes,
        ),
        labels=parse_pairs(label or [], "--label"),
        workspace=workspace,
        overwrite=overwrite,
        measure=not no_measure,
        budget_s=budget_s,
        agent_sandbox=not no_agent_sandbox,
        workspace_limits=WorkspaceLimits(max_mb=max_workspace_mb),
    )
    if no_agent_sandbox:
        err_console.print(
            "[yellow]warning:[/] --no-agent-sandbox: the agent can change the installed "
            "judge, the ledger and other trials, and reach the network"
        )
    record = _run_and_show(config, ledger_dir, tools, as_json)
    raise typer.Exit(0 if record.verdict == "accepted" else 1)


def _task_tools(
    target: Task | FrozenExternal, task: str, agent: str, budget_s: float
) -> TaskToolsHook:
    from optarena.mcp import TaskToolsHook

    if not runner_class(agent).takes_mcp:
        takers = " and ".join(mcp_runners())
        raise OptarenaError(f"--task-tools is for the {takers} agents, not '{agent}'")
    if not isinstance(target, Task):
        raise OptarenaError(
            "--task-tools judges task packages; an external project has its own gate and "
            "benchmark for the agent to run"
        )
    return TaskToolsHook(task, budget_s)


def _run_and_show(
    config: TrialConfig, ledger_dir: Path | None, tools: TaskToolsHook | None, as_json: bool
) -> TrialRecord:
    with Ledger.open(ledger_dir) as ledger:
        ledger.reconcile()  # recovery: trials a killed optarena left running, its leftovers
        t = config.task
        task_id = t.id if isinstance(t, Task) else t.spec.id
        view = PhaseView(err_console, f"{task_id} / {config.agent}")
        try:
            record = run_trial(config, ledger, progress=view, hooks=[tools] if tools else [])
        except TrialInterrupted as e:
            view.stop()
            raise _interrupted_trial(e, ledger) from None
        finally:
            view.stop()
        if as_json:
            print(json_text(record.model_dump(mode="json")))
        else:
            _summary(record, ledger)
    return record


@app.command("trials")
def trials_cmd(
    task: Annotated[str | None, typer.Option("--task", help="only this task id")] = None,
    agent: Annotated[str | None, typer.Option("--agent", help="only this agent name")] = None,
    status: Annotated[
        str | None,
        typer.Option("--status", help="agent status (completed, timeout, ...) or trial state"),
    ] = None,
    verdict: Annotated[str | None, typer.Option("--verdict", help="accepted | rejected")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="newest N trials")] = 50,
    ledger_dir: LedgerOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Recorded trials, newest first."""
    _check_choice("--verdict", verdict, VERDICTS)
    _check_choice("--status", status, STATUSES)
    with Ledger.open(ledger_dir) as ledger:
        records = ledger.trials(task=task, agent=agent, status=status, verdict=verdict, limit=limit)
        if as_json:
            print(json_text([r.model_dump(mode="json") for r in records]))
            return
        if not records:
            console.print(f"no trials match in {ledger.db_path}")
            return
        console.print(trials_table(records, console.width))
        console.print(COST_LEGEND, style="dim", markup=False, soft_wrap=False)


@trial_app.command("show")
def show_cmd(
    trial: Annotated[str, typer.Argument(help="trial id or a unique prefix")],
    ledger_dir: LedgerOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Everything recorded about one trial, with the paths of its logs and artifacts."""
    with Ledger.open(ledger_dir) as ledger:
        record = ledger.get(trial)
        judgements = ledger.judgements(record.id)
        paths = artifact_paths(ledger, record)
        if as_json:
            data = {
                "trial": record.model_dump(mode="json"),
                "judgements": [j.model_dump(mode="json") for j in judgements],
                "artifact_paths": paths,
            }
            print(json_text(data))
            return
        for line in show_lines(record):
            console.print(line)
        if record.metrics:
            console.print(metrics_view(record.metrics))
        if judgements:
            console.print(judgements_table(judgements, console.width))
        for line in tool_call_lines(ledger, record):
            console.print(line, markup=False)
        for name, path in paths.items():
            console.print(f"  {escape(name):<18} {escape(path)}")


def tool_call_lines(ledger: Ledger, record: TrialRecord) -> list[str]:
    """The task-tool calls the agent made (`--task-tools`), from the log optarena's server
    wrote: advice the agent got, never part of the verdict. A call the server never ended
    (the agent quit mid-call) shows as cut off."""
    sha = record.artifacts.get("logs/tool_calls.jsonl")
    if not sha or not ledger.store.has(sha):
        return []
    calls = calls_of(
        load_tool_call(line, f"trial {record.id}: logs/tool_calls.jsonl:{i}")
        for i, line in enumerate(ledger.store.read_text(sha).splitlines(), 1)
        if line.strip()
    )
    total = sum(c.duration_s or 0.0 for c in calls)
    out = [f"task-tool calls: {len(calls)}, {total:.1f} s (advice to the agent, not evidence)"]
    for c in calls:
        verdict = f" -> {c.verdict}" if c.verdict else ""
        error = f" ({c.error})" if c.error else ""
        took = "     ?" if c.duration_s is None else f"{c.duration_s:6.2f}"
        out.append(f"  {c.started_at[11:19]} {c.tool:<18} {took} s {c.status}{verdict}{error}")
    return out


@trial_app.command("rejudge")
def rejudge_cmd(
    trial: Annotated[str, typer.Argument(help="trial id or a unique prefix")],
    measure: Annotated[
        bool | None,
        typer.Option("--measure/--no-measure", help="override the trial's: measure speed or not"),
    ] = None,
    budget_s: BudgetOpt = None,
    min_effect: EffectOpt = None,
    ledger_dir: LedgerOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Judge a trial's stored candidate again, with the settings it was judged with (each
    option given overrides one, and is noted); adds a judgement, keeps the earlier ones."""
    given = {"measure": measure, "budget_s": budget_s, "min_effect": min_effect}
    with Ledger.open(ledger_dir) as ledger:
        try:
            with err_console.status(f"re-judging {trial}") as status:
                record, judgement, notes = rejudge(
                    ledger,
                    trial,
                    changes={k: v for k, v in given.items() if v is not None},
                    progress=lambda msg, _f: status.update(f"re-judging {trial}: {msg}"),
                )
        except KeyboardInterrupt:
            raise interrupted(
                f"no judgement was added to trial {trial}; its earlier ones are unchanged"
            ) from None
        if as_json:
            print(json_text(judgement.model_dump(mode="json")))
        else:
            for note in notes:
                err_console.print(f"[yellow]note:[/] {note}")
            console.print(
                f"judgement {judgement.id}: {verdict_markup(judgement.verdict)}; speed: "
                + speed_markup(judgement.metrics, judgement.verdict)
            )
            console.print(judgements_table(ledger.judgements(record.id), console.width))
    raise typer.Exit(0 if judgement.verdict == "accepted" else 1)


def run_demo(ledger_dir: Path | None = None, budget_s: float = 2.0) -> list[TrialRecord]:
    """The offline pipeline: replay trials of rmsnorm's reference candidate and of a wrong
    control, judged and recorded in the ledger; then the two rows."""
    task = resolve_task("rmsnorm")
    controls = {c.name: c for c in task.spec.controls}
    records = []
    with Ledger.open(ledger_dir) as ledger:
        for name in ("optimized", "missing-eps"):
            config = TrialConfig(
                task=task,
                agent="replay",
                agent_args={"source": str(task.root / controls[name].dir)},
                labels={"demo": name},
                budget_s=budget_s,
            )
            err_console.print(f"[bold]replay of control '{name}'[/] (not an agent)")
            view = PhaseView(err_console, f"rmsnorm / {name}")
            try:
                records.append(run_trial(config, ledger, progress=view))
            except TrialInterrupted as e:
                view.stop()
                raise _interrupted_trial(e, ledger) from None
            finally:
                view.stop()
        console.print(trials_table(records, console.width))
        console.print(COST_LEGEND, style="dim", markup=False, soft_wrap=False)
        for r in records:
            codes = f" ({', '.join(r.reason_codes)})" if r.reason_codes else ""
            console.print(
                f"  {r.id}  {r.labels['demo']:<12} {escape(r.agent.label)}: "
                f"{verdict_markup(r.verdict or '-')}{codes}; speed: "
                + speed_markup(r.metrics, r.verdict)
            )
        console.print(
            f"recorded in {ledger.db_path}; `optarena trials --ledger {ledger.home}` lists them"
        )
    return records
