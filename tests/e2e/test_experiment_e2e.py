"""An experiment of two conditions run by the real Claude Code against the scripted model
server: with and without an `artifacts` directory holding a CLAUDE.md hint. The hint reaches
the agent (the model is sent its text, in that condition only) and the comparison is computed
from the real trials."""

from __future__ import annotations

from pathlib import Path

import pytest

from optarena.experiments import compare_experiment, freeze, load_plan, run_experiment
from optarena.fakemodel import Conversation, FakeModelServer, Reply, Script, make_script

pytestmark = pytest.mark.e2e

MARKER = "OPTARENA-HINT-7f3a"


class Watching(Script):
    """The optimize script, noting whether the hint's text was in any request."""

    name = "optimize"

    def __init__(self) -> None:
        self.inner = make_script("optimize")
        self.saw_hint = False

    def decide(self, conv: Conversation) -> Reply:
        self.saw_hint = self.saw_hint or MARKER in conv.all_text()
        return self.inner.decide(conv)


def _plan(tmp_path: Path, claude: str, plain_url: str, hint_url: str) -> Path:
    (tmp_path / "hint").mkdir()
    (tmp_path / "hint" / "CLAUDE.md").write_text(
        f"# Project notes\n\nMarker {MARKER}: compute the mean square in one pass.\n"
    )
    common = (
        f'agent = "claude"\nagent_args = {{ bin = "{claude}", model = "claude-sonnet-4-5", '
        'max_retries = "0", upstream = '
    )
    path = tmp_path / "plan.toml"
    path.write_text(
        f"""
[experiment]
name = "claude-hint"
seed = 2
repetitions = 1
tasks = ["rmsnorm"]

[limits]
timeout_s = 90

[judge]
measure = false

[[conditions]]
name = "plain"
{common}"{plain_url}" }}

[[conditions]]
name = "hint"
{common}"{hint_url}" }}
artifacts = "hint"

[compare]
baseline = "plain"
treatments = ["hint"]
"""
    )
    return path


def test_claude_code_experiment_with_and_without_a_hint(
    agent_bins: dict[str, str], tmp_path: Path
) -> None:
    plain_script, hint_script = Watching(), Watching()
    with FakeModelServer(plain_script) as plain, FakeModelServer(hint_script) as hint:
        path = _plan(tmp_path, agent_bins["claude"], plain.url, hint.url)
        freeze(load_plan(path))
        state = run_experiment(load_plan(path), tmp_path / "ledger")
        assert plain.served and hint.served
    assert hint_script.saw_hint and not plain_script.saw_hint
    c = compare_experiment(state)
    assert c.complete == 2
    rows = {r.condition: r for r in c.trials}
    assert rows["plain"].agent_status == rows["hint"].agent_status == "completed"
    assert rows["plain"].verdict == rows["hint"].verdict == "accepted"
    assert rows["hint"].metered_tokens is not None  # metered by the proxy, from real calls
    assert c.comparisons[0].pairs == 1 and c.comparisons[0].verdict == "not_measured"
