"""The `replay` runner end to end: candidate directories and patches, labelled not an agent."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from optarena.ledger import Ledger
from optarena.records import TrialRecord
from optarena.tasks import Task
from optarena.trials import TrialConfig, run_trial


def _replay(ledger: Ledger, task: Task, source: Path) -> TrialRecord:
    """A replay trial, checked against the ledger (the same checks as the `check` fixture)."""
    config = TrialConfig(
        task=task, agent="replay", agent_args={"source": str(source)}, measure=False
    )
    record = run_trial(config, ledger)
    assert ledger.get(record.id) == record
    assert [j.verdict for j in ledger.judgements(record.id)] == [record.verdict]
    return record


def test_replaying_a_candidate_directory(
    ledger: Ledger, rmsnorm: Task, control: Callable[[str], Path]
) -> None:
    good = _replay(ledger, rmsnorm, control("optimized"))
    bad = _replay(ledger, rmsnorm, control("missing-eps"))
    assert (good.verdict, bad.verdict) == ("accepted", "rejected")
    for rec in (good, bad):
        assert rec.agent.is_agent is False
        assert rec.agent.label == "replay (not an agent)"
        assert rec.agent_cpu_s is None  # no agent process, nothing measured
    row = ledger._conn.execute("SELECT agent_label, is_agent FROM trials WHERE id = ?", (good.id,))
    assert tuple(row.fetchone()) == ("replay (not an agent)", 0)


def test_replaying_a_recorded_diff_delivers_the_same_candidate(
    ledger: Ledger, rmsnorm: Task, control: Callable[[str], Path], tmp_path: Path
) -> None:
    first = _replay(ledger, rmsnorm, control("optimized"))
    patch = tmp_path / "change.patch"
    patch.write_bytes(ledger.store.read_bytes(first.artifacts["diff"]))
    again = _replay(ledger, rmsnorm, patch)
    assert again.agent.flags["kind"] == "patch"
    assert again.candidate_sha256 == first.candidate_sha256
    assert again.verdict == "accepted"


def test_a_patch_that_does_not_apply_is_a_failed_replay(
    ledger: Ledger, rmsnorm: Task, tmp_path: Path
) -> None:
    patch = tmp_path / "bad.patch"
    patch.write_text(
        "diff --git a/nope.py b/nope.py\n--- a/nope.py\n+++ b/nope.py\n@@ -1 +1 @@\n-a\n+b\n"
    )
    rec = _replay(ledger, rmsnorm, patch)
    assert rec.agent_status == "failed" and "git apply failed" in rec.agent_detail
    assert rec.changed == [] and rec.verdict == "accepted"  # the untouched baseline
