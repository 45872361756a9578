"""An experiment's trial rows keep the metered figures and the agents' own reports apart: a
trial run with `meter=false` has no metered cost (unknown, never its agent's claim)."""

from __future__ import annotations

from ledger.conftest import running_record

# private: the comparison's pure steps, tested on literal trials
from optarena.experiments._compare import summarize_condition, trial_row
from optarena.records import Usage

AGENT_SAYS = Usage(source="agent-reported", input_tokens=100, output_tokens=10, cost_usd=0.0123)


def test_an_unmetered_trial_has_no_metered_cost_only_its_agents_claim() -> None:
    rec = running_record("t1").model_copy(
        update={"state": "complete", "usage": AGENT_SAYS, "labels": {"condition": "plain"}}
    )
    row = trial_row(rec)
    assert (row.metered_tokens, row.metered_cost_usd) == (None, None)
    assert (row.reported_tokens, row.reported_cost_usd) == (110, 0.0123)
    metered = Usage(source="metered", input_tokens=900, output_tokens=90, cost_usd=0.05)
    both = trial_row(rec.model_copy(update={"metered_usage": metered}))
    assert (both.metered_tokens, both.metered_cost_usd) == (990, 0.05)
    assert both.reported_cost_usd == 0.0123
    s = summarize_condition("plain", [row, both], pending=0, seed=0)
    assert (s.metered_cost_usd.value, s.metered_cost_usd.unknown) == (0.05, 1)
    assert (s.reported_cost_usd.value, s.reported_cost_usd.unknown) == (0.0246, 0)
    assert s.cost_per_accepted is None  # a metered cost is unknown: no per-accepted figure
