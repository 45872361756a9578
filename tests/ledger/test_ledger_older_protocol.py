"""Upgrading never hides history: a trial whose speed was measured by the first release's
protocol (metrics format 1) lists and shows, its speed marked as an older protocol and kept out
of comparisons with newer ones (`trials` exited 2: "speed metrics of format version 1 ...
cannot be read")."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from optarena.cli import main
from optarena.records import LegacyMetrics, load_trial

FIXTURE = Path(__file__).parent / "data" / "ledger-v2.db"
OLD_ID = "f1f1f1f1f1"


def _first_release_metrics(metrics: dict[str, object]) -> dict[str, object]:
    """The measured trial's metrics as the first release wrote them: format 1."""
    old = {k: v for k, v in metrics.items() if k not in ("kind", "schema_version")}
    old["schema_version"] = 1
    return old


@pytest.fixture
def old_ledger(tmp_path: Path) -> Path:
    home = tmp_path / "ledger"
    home.mkdir()
    shutil.copyfile(FIXTURE, home / "ledger.db")
    db = sqlite3.connect(home / "ledger.db")
    row = db.execute("SELECT * FROM trials WHERE verdict = 'accepted' AND record LIKE '%overall%'")
    names = [d[0] for d in row.description]
    values = dict(zip(names, row.fetchone(), strict=True))
    record = json.loads(values["record"])
    record["id"] = OLD_ID
    record["metrics"] = _first_release_metrics(record["metrics"])
    values.update(id=OLD_ID, record=json.dumps(record), created_at="2020-01-01T00:00:00.000+00:00")
    marks = ", ".join("?" for _ in names)
    db.execute(f"INSERT INTO trials ({', '.join(names)}) VALUES ({marks})", list(values.values()))
    db.commit()
    db.close()
    return home


def test_first_release_metrics_read_as_an_older_protocol(old_ledger: Path) -> None:
    raw = sqlite3.connect(old_ledger / "ledger.db").execute(
        "SELECT record FROM trials WHERE id = ?", (OLD_ID,)
    )
    r = load_trial(raw.fetchone()[0])
    assert isinstance(r.metrics, LegacyMetrics) and r.metrics.protocol_version == 1
    assert r.metrics.overall is not None and r.metrics.verdict in (
        "improved", "regressed", "no_difference", "inconclusive",
    )  # fmt: skip
    assert r.metrics.data["schema_version"] == 1  # kept verbatim


def test_trials_and_trial_show_list_it_marked(
    old_ledger: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["trials", "--ledger", str(old_ledger)]) == 0
    out = capsys.readouterr().out
    row = out[out.index(OLD_ID) :]  # its cell may wrap in a narrow table: read its words
    assert "older" in row and "protoc" in row, out
    assert main(["trial", "show", OLD_ID, "--ledger", str(old_ledger)]) == 0
    out = capsys.readouterr().out
    assert "older protocol (v1)" in out and "never compared" in out


def test_an_older_protocols_speed_stays_out_of_comparisons() -> None:
    # private: the comparison's step for one condition, on an old ledger's trials
    from optarena.experiments._compare import OLDER_PROTOCOL, summarize_condition
    from optarena.records import TrialRow

    def row(rep: int, speedup: float | None, verdict: str | None) -> TrialRow:
        return TrialRow(
            trial_id=str(rep), task="t", condition="c", repetition=rep, outcome="complete",
            attempts=1, agent_status="completed", verdict="accepted", speedup=speedup,
            speed_verdict=verdict, effective_speedup=speedup or 1.0, metered_tokens=None,
            metered_cost_usd=None, reported_tokens=None, reported_cost_usd=None,
            agent_wall_s=None, wall_s=None, identity="x",
        )  # fmt: skip

    rows = [row(0, 1.5, "improved"), row(1, 1.4, "improved"), row(2, None, OLDER_PROTOCOL)]
    s = summarize_condition("c", rows, 0, 0)
    assert s.effective_median == pytest.approx(1.45)  # the older trial's 1.0 is not counted
    assert s.accepted == 3  # its correctness counts: that protocol did not change
