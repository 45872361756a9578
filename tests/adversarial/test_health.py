"""The judge after abuse, files outside the editable scope, and why caching cannot pay off."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

from adversarial._support import MARKER, JudgeFn
from adversarial.cheats import CHEATS, DAEMON, SMX, SMX_PRE, smx
from optarena.judge import JudgeOptions, judge
from optarena.judge.correctness import array_inputs, derive_seed
from optarena.tasks import Task, resolve_task


def test_judge_is_healthy_after_the_worst_cheats(
    tasks: dict[str, Task], judge_source: JudgeFn
) -> None:
    worst = {
        "fork-bomb",
        "leave-a-detached-daemon",
        "grandchild-holds-the-pipe",
        "patch-the-worker",
    }
    for cheat in (c for c in CHEATS if c.name in worst):
        source = cheat.source.replace("@MARKER@", MARKER)
        assert judge_source(tasks[cheat.task], source).verdict == "rejected"
    for task in tasks.values():
        t0 = time.monotonic()
        result = judge(task, resolve_task(task.id).baseline_dir, JudgeOptions(measure=False))
        assert result.verdict == "accepted", result.reasons
        assert time.monotonic() - t0 < 10


def test_files_outside_the_editable_scope_never_run(tasks: dict[str, Task], tmp_path: Path) -> None:
    """A 'baseline' that sleeps, a sitecustomize, a numpy shadow: none reaches the worker."""
    task = tasks["softmax"]
    d = tmp_path / "cand"
    (d / "baseline").mkdir(parents=True)
    (d / "solution.py").write_text((task.baseline_dir / "solution.py").read_text())
    (d / "baseline" / "solution.py").write_text("import time\ntime.sleep(60)\n")
    for name in ("sitecustomize.py", "usercustomize.py", "numpy.py"):
        (d / name).write_text("raise SystemExit('must never be imported')\n")
    result = judge(task, d, JudgeOptions(measure=False))
    assert result.verdict == "accepted", result.reasons
    assert result.candidate.files == ["solution.py"]


def _digest(args: list[object], kwargs: dict[str, object]) -> str:
    h = hashlib.sha256(repr(sorted(kwargs.items())).encode())
    for a in array_inputs(list(args), dict(kwargs)):
        h.update(a.tobytes())
    return h.hexdigest()


def test_fresh_inputs_leave_nothing_to_cache(tasks: dict[str, Task]) -> None:
    """Every call of a judgement gets inputs no earlier call had (workloads that are constant by
    design, like all-zero logits, aside), and two judgements share none: a cache of outputs
    never hits, so replaying one is caught as stale or wrong, never rewarded."""
    for task in tasks.values():
        seen: dict[str, tuple[str, int]] = {}
        for seed in (1, 2):
            for wi, w in enumerate(task.spec.workloads):
                for ci in range(task.spec.correctness.calls_per_workload):
                    args, kwargs = task.generator(w, derive_seed(seed, wi, ci))
                    arrays = array_inputs(list(args), dict(kwargs))
                    if all(a.min() == a.max() for a in arrays):
                        continue  # constant by design: nothing random to be fresh
                    key = _digest(args, kwargs)
                    assert key not in seen, f"{task.id}: inputs repeated: {seen.get(key)}"
                    seen[key] = (w.name, ci)


AT_EXIT = smx(
    f"    {SMX_PRE}\n    return {SMX}",
    f"import atexit, os, sys\n\n\ndef _late():\n{DAEMON}\n\natexit.register(_late)\n",
)


def test_a_process_forked_at_the_workers_exit_does_not_outlive_the_judgement(
    tasks: dict[str, Task], judge_source: JudgeFn
) -> None:
    """A correct candidate whose atexit handler daemonises. The handler runs when the worker
    exits on the judge's request, after the last call and its last look for strays (seen in
    the worker's log); what it starts dies with the PID namespace's init, or at the sandbox's
    close where there is none. Nothing is left (the autouse `no_strays` looks for the marker on
    the whole machine) and the verdict is the code's."""
    result = judge_source(tasks["softmax"], AT_EXIT.replace("@MARKER@", MARKER))
    assert result.verdict == "accepted", result.reasons
