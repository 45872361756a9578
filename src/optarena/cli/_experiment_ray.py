"""What `experiment run --executor ray` and `experiment status` add for a cluster: the options
checked into one `RayOptions`, the live table per node, and where each key is."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Annotated, Literal

import typer
from rich.table import Table

from optarena.cli._safe import escape
from optarena.errors import OptarenaError

if TYPE_CHECKING:
    from optarena.experiments import ExperimentState, LoadedPlan, RayOptions, ScheduledTrial
    from optarena.records import TrialRecord

ExecutorOpt = Annotated[
    str | None,
    typer.Option(help="local (this machine) or ray (a Ray cluster); default: the plan's"),
]
RayAddressOpt = Annotated[
    str | None,
    typer.Option(
        "--ray-address",
        help="the cluster to join (default: $RAY_ADDRESS, else the one `ray start` began here)",
    ),
]
JudgeNodesOpt = Annotated[
    str | None,
    typer.Option(
        "--judge-nodes",
        help="ray: dedicated (default: a node judges or runs agents, never both) or shared",
    ),
]
AgentCpusOpt = Annotated[
    float | None, typer.Option("--agent-cpus", min=0, help="ray: CPUs each agent task asks for")
]
AgentMemoryOpt = Annotated[
    int | None, typer.Option("--agent-memory-mb", min=1, help="ray: memory each agent asks for")
]


def executor_of(
    plan: LoadedPlan,
    executor: str | None,
    *,
    address: str | None,
    judge_nodes: str | None,
    agent_cpus: float | None,
    agent_memory_mb: int | None,
    max_parallel: int | None,
) -> tuple[Literal["local", "ray"], RayOptions | None]:
    """The executor and, for Ray, its options; a cluster option given to the local executor,
    or an unknown value, is bad input (exit 2), never ignored."""
    from optarena.experiments import RayOptions, import_ray

    chosen = executor or plan.plan.experiment.executor
    if chosen not in ("local", "ray"):
        raise OptarenaError(f"--executor {chosen}: expected local or ray")
    given = {
        "--ray-address": address,
        "--judge-nodes": judge_nodes,
        "--agent-cpus": agent_cpus,
        "--agent-memory-mb": agent_memory_mb,
    }
    if chosen == "local":
        stray = [name for name, value in given.items() if value is not None]
        if stray:
            raise OptarenaError(f"{', '.join(stray)}: only for --executor ray")
        return "local", None
    if judge_nodes not in (None, "dedicated", "shared"):
        raise OptarenaError(f"--judge-nodes {judge_nodes}: expected dedicated or shared")
    import_ray()  # not installed: one line saying how, before anything starts
    options = RayOptions(
        address=address,
        judge_nodes="shared" if judge_nodes == "shared" else "dedicated",
        agent_cpus=1.0 if agent_cpus is None else agent_cpus,
        agent_memory_mb=agent_memory_mb,
        max_parallel=max_parallel,
    )
    return "ray", options


class NodeBoard:
    """Per node: the keys running there, trials finished, and its rate since its first
    trial began; the cluster's rate and the time left at that rate."""

    def __init__(self, remaining: int) -> None:
        self.remaining = remaining
        self.where: dict[str, str] = {}
        self.running: dict[str, list[str]] = {}
        self.done: dict[str, int] = {}
        self.since: dict[str, float] = {}

    def on_event(self, kind: str, s: ScheduledTrial, record: TrialRecord | None, msg: str) -> None:
        now = time.monotonic()
        if kind == "node":
            self.where[s.key] = msg
            self.running.setdefault(msg, []).append(s.key)
            self.since.setdefault(msg, now)
            self.done.setdefault(msg, 0)
        elif kind in ("end", "error"):
            node = self.where.pop(s.key, None)
            if node is not None and s.key in self.running.get(node, []):
                self.running[node].remove(s.key)
                self.done[node] += kind == "end"
        if kind in ("end", "failed"):
            self.remaining -= 1

    def rate(self) -> float:
        """Trials per hour of the whole cluster: each node's since its first trial began."""
        now = time.monotonic()
        return sum(self.done[n] / (max(now - t, 1.0) / 3600) for n, t in self.since.items())

    def eta(self) -> str:
        rate = self.rate()
        return f"{self.remaining / rate * 3600:.0f} s" if rate > 0 else "-"

    def table(self) -> Table:
        now = time.monotonic()
        t = Table(title=f"nodes (ETA {self.eta()})", show_header=True)
        for col in ("node", "running"):
            t.add_column(col)
        for col in ("done", "trials/hour"):
            t.add_column(col, justify="right")
        for node in sorted(self.since):
            rate = self.done[node] / (max(now - self.since[node], 1.0) / 3600)
            keys = self.running.get(node, [])
            shown = ", ".join(keys[:3]) + (f" +{len(keys) - 3}" if len(keys) > 3 else "")
            t.add_row(escape(node), escape(shown) or "-", str(self.done[node]), f"{rate:.1f}")
        running = sum(len(k) for k in self.running.values())
        t.add_row("all", f"{running} running", str(sum(self.done.values())), f"{self.rate():.1f}")
        return t


def key_places(state: ExperimentState, every: bool) -> list[str]:
    """One line per key that is running (where, since when), and with `every` per key."""
    lines = []
    for s in state.schedule:
        running = next((r for r in state.rows.get(s.key, []) if r.state == "running"), None)
        if running is not None:
            node = running.labels.get("node") or f"{running.host} (pid {running.pid})"
            where = f"running on {node} since {running.created_at[:19]}"
            lines.append(f"{s.key}: {escape(where)}")
        elif every:
            lines.append(f"{s.key}: {state.outcome(s.key)}")
    return lines
