"""Fixtures for trial tests: a private ledger, scripted shell agents, ledger consistency checks."""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from optarena.judge import JudgeResult
from optarena.ledger import Ledger
from optarena.processes import is_zombie
from optarena.records import AgentLimits, TrialRecord
from optarena.tasks import BUILTIN_DIR, Task, resolve_task
from optarena.trials import TrialConfig, run_trial


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger(tmp_path / "ledger") as led:
        yield led


@pytest.fixture(scope="session")
def rmsnorm() -> Task:
    return resolve_task("rmsnorm")


@pytest.fixture
def control(rmsnorm: Task) -> Callable[[str], Path]:
    """The directory of an rmsnorm control by name ('optimized', 'missing-eps', ...)."""
    dirs = {c.name: rmsnorm.root / c.dir for c in rmsnorm.spec.controls}
    return lambda name: dirs[name]


def _in_tasks(path: str) -> bool:
    return Path(path).resolve().is_relative_to(BUILTIN_DIR.resolve())


@pytest.fixture
def agent(tmp_path: Path) -> Callable[[str], str]:
    """A scripted shell agent: the body becomes a script; returns the --command template."""
    counter = itertools.count()

    def make(body: str) -> str:
        script = tmp_path / f"agent-{next(counter)}.sh"
        script.write_text("set -e\n" + body + "\n")
        # Task-package files the body reads are passed (unused) on the command line too: the
        # command runner keeps paths named there readable, and a checkout under /tmp is
        # otherwise hidden by the agent's private /tmp.
        named = sorted(
            {p for p in re.findall(r"/[^\s'\"]+", body) if _in_tasks(p) and Path(p).exists()}
        )
        return " ".join(["sh", str(script), *named])

    return make


@pytest.fixture
def trial(ledger: Ledger, rmsnorm: Task) -> Callable[..., TrialRecord]:
    """Run a `command` trial (correctness only) and check the ledger agrees with its record
    (`check=False`: a delivery refused before judging has no judge artifact to check)."""

    def run(command: str, wall_s: float = 30.0, check: bool = True, **kw: Any) -> TrialRecord:
        config = TrialConfig(
            task=kw.pop("task", rmsnorm),
            agent="command",
            agent_args={"command": command, **kw.pop("agent_args", {})},
            limits=AgentLimits(wall_s=wall_s),
            measure=False,
            **kw,
        )
        record = run_trial(config, ledger)
        if check:
            check_recorded(ledger, record)
        return record

    return run


@pytest.fixture
def check() -> Callable[[Ledger, TrialRecord], None]:
    return check_recorded


def check_recorded(ledger: Ledger, record: TrialRecord) -> None:
    """The ledger holds exactly this complete record, its judgement and its artifacts."""
    assert record.state == "complete"
    assert ledger.get(record.id) == record
    (judgement,) = ledger.judgements(record.id)
    assert (judgement.kind, judgement.verdict) == ("trial", record.verdict)
    assert judgement.reason_codes == record.reason_codes
    rows = ledger._conn.execute(
        "SELECT name, sha256 FROM trial_artifacts WHERE trial_id = ?", (record.id,)
    ).fetchall()
    assert {r["name"]: r["sha256"] for r in rows} == record.artifacts
    for sha in record.artifacts.values():
        ledger.store.read_bytes(sha)  # present and intact
    result = JudgeResult.model_validate_json(ledger.store.read_bytes(record.artifacts["judge"]))
    assert result.candidate.sha256 == record.candidate_sha256
    assert set(record.phases_s) == {"setup", "agent", "capture", "judge"}
    row = ledger._conn.execute("SELECT * FROM trials WHERE id = ?", (record.id,)).fetchone()
    assert (row["state"], row["verdict"], row["agent_status"]) == (
        "complete",
        record.verdict,
        record.agent_status,
    )


def host_pids(marker: str) -> list[int]:
    """Live host pids whose command line holds `marker`. An agent's own `$$` or `$!` is its
    pid inside its sandbox's PID namespace, which names nothing on the host."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if marker.encode() in cmd and not is_zombie(int(name)):
            out.append(int(name))
    return out


@pytest.fixture
def find_pids() -> Callable[[str], list[int]]:
    return host_pids
