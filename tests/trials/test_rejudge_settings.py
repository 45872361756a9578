"""Every setting that can change a verdict is recorded with the trial, and a rejudge uses the
recorded ones unless told otherwise, saying what it changed (a rejudge rebuilt the settings
from defaults: a trial judged with min_effect 0.2 and no measurement was re-judged measured,
at the task's threshold, without a word)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from optarena.errors import OptarenaError
from optarena.judge import JudgeOptions, JudgeResult, judge
from optarena.ledger import Ledger
from optarena.records import AgentLimits, JudgeSettings
from optarena.tasks import Task
from optarena.trials import TrialConfig, rejudge, run_trial


def _spy(seen: list[JudgeOptions]) -> Callable[[Task, Path, JudgeOptions], JudgeResult]:
    def spy(task: Task, cand: Path, options: JudgeOptions) -> JudgeResult:
        seen.append(options)
        return judge(task, cand, options)

    return spy


def test_a_rejudge_keeps_the_trials_settings_unless_told(
    ledger: Ledger, rmsnorm: Task, control: Callable[[str], Path]
) -> None:
    config = TrialConfig(
        task=rmsnorm, agent="replay", agent_args={"source": str(control("optimized"))},
        limits=AgentLimits(wall_s=30), measure=False, budget_s=3.0, min_effect=0.2,
    )  # fmt: skip
    seen: list[JudgeOptions] = []
    rec = run_trial(config, ledger, judge_fn=_spy(seen))
    assert rec.judge_settings == JudgeSettings(measure=False, budget_s=3.0, min_effect=0.2)
    _, again, notes = rejudge(ledger, rec.id, judge_fn=_spy(seen))
    assert again.settings == rec.judge_settings and notes == []
    first, second = seen
    assert (second.measure, second.budget_s, second.min_effect) == (False, 3.0, 0.2)
    assert (first.measure, first.min_effect) == (second.measure, second.min_effect)
    _, changed, notes = rejudge(ledger, rec.id, changes={"min_effect": 0.1}, judge_fn=_spy(seen))
    assert changed.settings.min_effect == 0.1 and seen[-1].min_effect == 0.1
    assert notes == ["min_effect = 0.1 instead of the trial's 0.2"]
    with pytest.raises(OptarenaError, match="unknown judge settings colour"):
        rejudge(ledger, rec.id, changes={"colour": 1})


def test_an_experiments_min_effect_is_in_its_trials_records(tmp_path: Path) -> None:
    from optarena.experiments import freeze, load_plan, run_experiment

    plan = tmp_path / "plan.toml"
    plan.write_text(
        '[experiment]\nname = "e"\nrepetitions = 1\ntasks = ["rmsnorm"]\n'
        "[judge]\nmeasure = false\nmin_effect = 0.25\n"
        '[[conditions]]\nname = "a"\nagent = "command"\ncommand = "true"\n'
    )
    freeze(load_plan(plan))
    state = run_experiment(load_plan(plan), tmp_path / "ledger")
    (record,) = [r for rs in state.rows.values() for r in rs]
    assert record.judge_settings.min_effect == 0.25
