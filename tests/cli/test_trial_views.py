"""Tables of trials fit the terminal: cells wrap between words; only a word too long for any
column is folded, in the column that gives way, never a reason code or a trial id. Costs are
labelled with whose figure they are: metered by optarena, or the agent's own report."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from ledger.conftest import running_record
from optarena.cli import main

# private: the command line's trial tables, tested on built records
from optarena.cli._trial_views import fitted_table, trials_table
from optarena.ledger import Ledger, utc_now
from optarena.records import Usage
from optarena.report import render_trial_markdown


def _render(table: object, width: int) -> list[str]:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(table)
    return [line.rstrip() for line in console.export_text().splitlines()]


HEADS = ["trial", "when", "task", "agent", "verdict", "speed or reasons", "agent s", "cost"]


def _row(agent: str, result: str) -> list[str]:
    return ["094277dc16", "12-03 13:07", "rmsnorm", agent, "rejected", result, "0.0", "?"]


def test_a_long_label_folds_its_own_column_and_nothing_else() -> None:
    cells = [
        _row("replay (not an agent) demo=missing-eps", "out_of_tolerance, non_finite"),
        _row("command", "0.80x (-20%) improved"),
    ]
    lines = _render(fitted_table(HEADS, cells, wrap={3: 1, 5: 2}, width=80), 80)
    assert all(len(line) <= 80 for line in lines)
    words = {w.strip(",") for line in lines for w in line.split()}
    assert {"094277dc16", "12-03", "13:07", "rmsnorm", "rejected"} <= words
    assert {"out_of_tolerance", "non_finite", "0.80x", "(-20%)", "improved"} <= words
    assert "…" not in "".join(lines)  # nothing cropped


def test_short_cells_are_not_wrapped() -> None:
    cells = [_row("command", "out_of_scope")]
    lines = _render(fitted_table(HEADS, cells, wrap={3: 1, 5: 2}, width=80), 80)
    assert len(lines) == 2 and "command" in lines[1] and "out_of_scope" in lines[1]


# --- which cost is which ----------------------------------------------------------------------

AGENT_SAYS = Usage(source="agent-reported", input_tokens=100, output_tokens=10, cost_usd=0.0123)
METERED = Usage(source="metered", calls=1, input_tokens=900, output_tokens=90, cost_usd=0.05)
CUT = Usage(
    source="metered", calls=2, tokens_at_least=1201, cost_usd_at_least=0.0013
)  # a stream cut before its final usage: unknown, with what it reported as a lower bound


def _ledger_with(home: Path, usages: dict[str, tuple[Usage, Usage | None]]) -> None:
    with Ledger(home) as ledger:
        for tid, (usage, metered) in usages.items():
            rec = running_record(tid)
            ledger.begin_trial(rec)
            done = {"state": "complete", "finished_at": utc_now(), "verdict": "rejected"}
            done |= {"agent_status": "completed", "usage": usage, "metered_usage": metered}
            ledger.finish_trial(rec.model_copy(update=done))


def _cells(out: str, tid: str) -> list[str]:
    [line] = [ln for ln in out.splitlines() if ln.startswith(tid)]
    return line.split()


def test_listings_never_show_the_agents_own_claim_as_the_metered_cost(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`meter=false`: the listing showed the agent's own claim as "cost". Each figure has its
    own labelled column; not metered is `-`, unknown `?`, a lower bound `≥`."""
    home = tmp_path / "L"
    _ledger_with(
        home,
        {
            "t-unmetered": (AGENT_SAYS, None),
            "t-metered": (AGENT_SAYS, METERED),
            "t-cut": (Usage(source="agent-reported"), CUT),
        },
    )
    assert main(["trials", "--ledger", str(home)]) == 0
    out = capsys.readouterr().out
    legend = " ".join(out.split())  # wrapped to the terminal's width
    assert "metered by optarena's proxy" in legend and "agent's: the agent's own claim" in legend
    assert _cells(out, "t-unmetered")[-2:] == ["-", "$0.0123"]
    assert _cells(out, "t-metered")[-2:] == ["$0.0500", "$0.0123"]
    assert _cells(out, "t-cut")[-2:] == ["≥$0.0013", "?"]
    with Ledger(home) as ledger:  # a listing where no agent reported a cost: no column of ?
        table = trials_table([ledger.get("t-cut")], 80)
    assert [c.header for c in table.columns][-2:] == ["agent s", "metered"]

    assert main(["trial", "show", "t-unmetered", "--ledger", str(home)]) == 0
    show = capsys.readouterr().out
    assert "metered    not metered (no proxy ran)" in show
    assert (
        "reported   in 100, out 10" in show and "cost $0.0123  (agent-reported, unchecked)" in show
    )
    assert main(["trial", "show", "t-cut", "--ledger", str(home)]) == 0
    show = capsys.readouterr().out
    assert "metered    in ?, out ?, cache r/w ?/? (tokens unknown, at least 1201)" in show
    assert "cost ≥$0.0013  (by optarena's proxy)" in show

    assert main(["trial", "show", "t-unmetered", "--json", "--ledger", str(home)]) == 0
    trial = json.loads(capsys.readouterr().out)["trial"]
    assert trial["metered_usage"] is None
    assert (trial["usage"]["source"], trial["usage"]["cost_usd"]) == ("agent-reported", 0.0123)


def test_the_trial_report_labels_each_figure() -> None:
    rec = running_record("t1").model_copy(update={"usage": AGENT_SAYS, "metered_usage": None})
    md = render_trial_markdown(rec, {})
    assert "| metered cost USD | not metered |" in md
    assert "| agent-reported cost USD (unchecked) | $0.0123 |" in md
    rec = rec.model_copy(update={"metered_usage": CUT})
    md = render_trial_markdown(rec, {})
    assert "| metered cost USD | ≥$0.0013 |" in md
    assert "| metered tokens in/out, all | unknown / unknown, ≥1201 |" in md


def test_an_experiment_trial_is_listed_by_its_condition_and_repetition_not_its_hashes() -> None:
    """An experiment labels each trial with its key, cell and plan hashes, attempt, executor and
    node; in a list they say nothing at a glance and folded 80-column rows into columns of
    single letters. The list shows the condition and repetition (the task has its column), a
    repeated attempt, and the user's own labels; `trial show` keeps every label."""
    labels = {
        "experiment": "hint-vs-plain", "experiment_key": "rmsnorm/hint/2", "condition": "hint",
        "repetition": "2", "plan_sha256": "94846eb472a97558", "cell_sha256": "65d9ae626cf39102",
        "attempt": "2", "executor": "ray", "node": "vm/12dfc15b", "judge_node": "vm/ce450a93",
        "cond": "mine",
    }  # fmt: skip
    listed = running_record("0f798744db").model_copy(update={"labels": labels})
    plain = running_record("210cd732a5").model_copy(update={"labels": {"cond": "a"}})
    text = "\n".join(_render(trials_table([listed, plain], width=120), 120))
    assert all(words in text for words in ("command hint #2", "attempt 2", "cond=mine")), text
    for hidden in ("sha256", "94846eb4", "65d9ae62", "vm/", "ray", "hint-vs-plain"):
        assert hidden not in text, text
    assert "command cond=a" in text  # outside an experiment every label is shown
    narrow = [line for line in _render(trials_table([listed, plain]), 80) if line.strip()]
    assert len(narrow) <= 9, "\n".join(narrow)  # the hashes made a row of 20 lines
