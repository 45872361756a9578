"""Claude Code and Codex CLI, the real pinned binaries, driven through optarena's metering
proxy to the scripted model server on the rmsnorm task: the agent edits solution.py with its
own tools, the trial is judged and recorded, and the ledger's metered tokens equal the
scripted ones and agree with what the CLI reported. Then: a token budget that cuts the agent
off, an upstream that fails, and an agent killed by the trial timeout."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

import pytest

from optarena.fakemodel import FakeModelServer, make_script
from optarena.ledger import Ledger
from optarena.processes import is_zombie
from optarena.records import AgentLimits, CallRecord, TrialRecord
from optarena.tasks import resolve_task
from optarena.trials import TrialConfig, run_trial

pytestmark = pytest.mark.e2e

MODELS = {"claude": "claude-sonnet-4-5", "codex": "gpt-5.5"}
AGENTS = list(MODELS)
TASK = resolve_task("rmsnorm")
OPTIMIZED = (TASK.root / "controls" / "optimized" / "solution.py").read_text()


def trial(
    agent: str, bins: dict[str, str], fake: FakeModelServer, ledger: Ledger, **limits: float
) -> TrialRecord:
    args = {"bin": bins[agent], "upstream": fake.url, "model": MODELS[agent], "max_retries": "0"}
    config = TrialConfig(
        task=TASK,
        agent=agent,
        agent_args=args,
        limits=AgentLimits(**{"wall_s": 60.0, **limits}),
        measure=False,
    )
    return run_trial(config, ledger)


def totals(calls: list[CallRecord]) -> dict[str, int | None]:
    answered = [c for c in calls if c.api != "other" and c.status == 200]
    out: dict[str, int | None] = {}
    for f in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"):
        vals = [getattr(c, f) for c in answered]
        out[f] = None if None in vals else sum(v or 0 for v in vals)
    return out


def served_totals(fake: FakeModelServer) -> dict[str, int | None]:
    served = [s.tokens for s in fake.served if s.tokens is not None]
    out: dict[str, int | None] = {}
    for f, key in (
        ("input_tokens", "input"),
        ("output_tokens", "output"),
        ("cache_read_tokens", "cache_read"),
        ("cache_write_tokens", "cache_write"),
    ):
        vals = [t[key] for t in served]
        out[f] = None if None in vals else sum(v or 0 for v in vals)
    return out  # fmt: skip


@pytest.mark.parametrize("agent", AGENTS)
def test_agent_edits_the_task_and_every_token_is_accounted(
    agent: str, agent_bins: dict[str, str], ledger: Ledger
) -> None:
    with FakeModelServer(make_script("optimize")) as fake:
        record = trial(agent, agent_bins, fake, ledger)
    assert [s.rule for s in fake.served] == ["read", "write", "check", "finish"]
    assert record.agent_status == "completed", record.agent_detail
    # contained all along: own uid (as root), a read-only mount namespace, and a network
    # namespace where the metering proxy is the one address (the fake model is not)
    sandbox = record.agent_sandbox
    assert sandbox is not None and sandbox["enabled"] is True, sandbox
    assert sandbox["mounts"].startswith(("private root", "read-only")) and sandbox["notes"] == []
    assert sandbox["network"].startswith("netns, reachable: 127.0.0.1:")
    assert str(fake.url.rsplit(":", 1)[1]) not in sandbox["network"]
    if os.geteuid() == 0:
        assert sandbox["user"].startswith("uid ") and sandbox["cleanup"] == "cgroup"
    assert record.verdict == "accepted", record.reasons
    assert Path(record.workspace, "solution.py").read_text() == OPTIMIZED
    assert [c.path for c in record.changed] == ["solution.py"]

    stored = ledger.get(record.id)
    calls = ledger.calls(record.id)
    metered, reported = stored.metered_usage, stored.usage
    assert metered is not None and metered.calls == 4
    # the ledger's metered tokens equal the scripted ones (literal: tests/.../USAGE)...
    want_cache_write = 2000 if agent == "claude" else None  # OpenAI has no cache writes
    assert (
        totals(calls)
        == served_totals(fake)
        == {
            "input_tokens": 1600,
            "output_tokens": 1060,
            "cache_read_tokens": 8300,
            "cache_write_tokens": want_cache_write,
        }
    )
    assert (metered.input_tokens, metered.output_tokens) == (1600, 1060)
    # ... and agree with what the CLI itself reported
    assert (reported.input_tokens, reported.output_tokens) == (1600, 1060)
    assert reported.cache_read_tokens == metered.cache_read_tokens == 8300
    if agent == "claude":
        assert reported.cache_write_tokens == metered.cache_write_tokens == 2000
        assert reported.tool_calls == {"Read": 1, "Write": 1, "Bash": 1}
        assert metered.cost_usd == pytest.approx(reported.cost_usd)  # same prices, same tokens
    else:
        assert reported.reasoning_tokens == metered.reasoning_tokens == 100
        assert reported.tool_calls == {"command_execution": 2, "file_change": 1}  # apply_patch
        assert reported.cost_usd is None and metered.cost_usd is None  # gpt-5.5: no price
    assert all(c.request_id and c.latency_s is not None for c in calls if c.api != "other")


@pytest.mark.parametrize("agent", AGENTS)
def test_token_budget_cuts_the_agent_off_and_its_files_are_judged(
    agent: str, agent_bins: dict[str, str], ledger: Ledger
) -> None:
    with FakeModelServer(make_script("budget-hog")) as fake:
        record = trial(agent, agent_bins, fake, ledger, max_tokens=30_000)
    assert record.agent_status == "budget_exceeded", record.agent_detail
    assert "token budget exhausted" in record.agent_detail
    calls = ledger.calls(record.id)
    refused = [c for c in calls if c.refused]
    assert refused and refused[0].status == 400
    assert [s.rule for s in fake.served][:3] == ["read", "write", "check"]
    assert len(fake.served) == len([c for c in calls if c.api != "other" and not c.refused])
    assert record.verdict == "accepted"  # the delivered files were still judged
    assert record.metered_usage is not None and (record.metered_usage.input_tokens or 0) > 0


@pytest.mark.parametrize("agent", AGENTS)
def test_upstream_errors_fail_the_agent_and_are_recorded(
    agent: str, agent_bins: dict[str, str], ledger: Ledger
) -> None:
    with FakeModelServer(make_script("upstream-error")) as fake:
        record = trial(agent, agent_bins, fake, ledger)
    assert record.agent_status == "failed", record.agent_detail
    calls = [c for c in ledger.calls(record.id) if c.api != "other"]
    assert calls and all(c.status == 500 for c in calls)
    assert all(c.error and "scripted upstream failure" in c.error for c in calls)
    assert record.metered_usage is not None and record.metered_usage.cost_usd == 0
    assert record.state == "complete" and record.verdict is not None


def _of_trial(record: TrialRecord) -> list[int]:
    """The live processes of this trial's agent: those whose environment or command line
    names one of its writable directories (its workspace, its config home: every process
    the agent starts inherits HOME). Found by what is the trial's own, not by the scripted
    hang's marker, which a stray agent of an earlier test could carry as well."""
    sandbox = record.agent_sandbox or {}
    mine = [w.encode() for w in sandbox.get("writable", [record.workspace])]
    out = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            seen = (proc / "environ").read_bytes() + (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if any(m in seen for m in mine) and not is_zombie(int(proc.name)):
            out.append(int(proc.name))
    return out


def _describe(pid: int) -> str:
    """A leftover's command, state, parent, uid, signals, cgroups and where it sleeps: which
    of the sandbox's kills should have reached it, and whether it could act on them."""
    proc = Path("/proc") / str(pid)
    try:
        status = (proc / "status").read_text().splitlines()
        groups = (proc / "cgroup").read_text().split()
        cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        wchan = (proc / "wchan").read_text()
    except OSError as e:
        return f"gone ({e.strerror})"
    keep = ("State:", "PPid:", "Uid:", "NSpid:", "SigPnd:", "ShdPnd:", "SigBlk:")
    lines = [cmd[:200], *(ln for ln in status if ln.startswith(keep)), f"wchan {wchan}"]
    return "; ".join([*lines, *groups])


@pytest.mark.parametrize("agent", AGENTS)
def test_trial_timeout_kills_the_agent_tree(
    agent: str, agent_bins: dict[str, str], ledger: Ledger
) -> None:
    with FakeModelServer(make_script("hang")) as fake:
        record = trial(agent, agent_bins, fake, ledger, wall_s=10.0)
    rules = [s.rule for s in fake.served]
    # Codex's exec_command yields after 10 s with the command still running; the script,
    # seeing no result yet, asks to wait again
    assert rules[:3] == ["read", "write", "hang"] and set(rules[3:]) <= {"hang"}
    assert record.agent_status == "timeout", record.agent_detail
    left = _of_trial(record)
    described = {pid: _describe(pid) for pid in left}  # read before the kill below
    for pid in left:  # a failure here must not leave a ten-minute sleep behind
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    assert not left, f"the agent's processes outlived the trial: {described}"
    assert record.agent_sandbox is not None and record.agent_sandbox["survivors"] == []
    assert record.verdict == "accepted"  # written before the hang, judged after the kill
    assert record.agent_wall_s is not None and record.agent_wall_s < 40
    assert os.path.exists(record.workspace)
