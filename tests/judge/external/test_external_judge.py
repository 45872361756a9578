"""External project tasks end to end on examples/external (a real little project with its own
tests and benchmark): freeze, drift, and judging by the project's gate and benchmark."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from external_example import EXAMPLE, make_project
from optarena.cli import main
from optarena.errors import OptarenaError, SpecError
from optarena.judge.external import BrokenTaskError, judge_external
from optarena.tasks.external import freeze_external, load_frozen


def _candidate(tmp_path: Path, name: str) -> Path:
    d = tmp_path / f"cand-{name}"
    shutil.copytree(EXAMPLE / "candidates" / name, d)
    return d


@pytest.fixture
def frozen(tmp_path: Path) -> Path:
    out = tmp_path / "frozen.toml"
    freeze_external(make_project(tmp_path), out)
    return out


@pytest.mark.slow
def test_the_known_optimization_is_accepted_and_improved(tmp_path: Path, frozen: Path) -> None:
    r = judge_external(load_frozen(frozen), _candidate(tmp_path, "sieve"), seed=1)
    assert r.verdict == "accepted" and r.gaps == []
    assert r.metrics is not None and r.metrics.verdict == "improved"
    assert r.metrics.overall.ratio < 0.2
    assert r.candidate["changed"] == ["primes.py"]
    assert r.metrics.crosscheck == []  # the OS's CPU time agrees on the direction
    assert r.metrics.os_check is not None and r.metrics.os_check.outcome == "confirmed"
    assert r.metrics.os_check.basis == "process"  # no scale declared: whole runs
    assert all(x.baseline_cpu_s is not None and x.candidate_wall_s > 0 for x in r.metrics.rounds)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("cc") is None, reason="the stencil example needs a C compiler")
def test_an_improvement_that_is_a_small_part_of_the_process_reads_improved(
    tmp_path: Path,
) -> None:
    """The stencil example: each benchmark run builds the kernel and starts two processes,
    far more than the kernel's calls cost, so whole runs barely move for a kernel many times
    faster. Its spec declares a scale: the OS's time of the difference between the two sizes
    confirms it, and the ratio is the metric's."""
    out = tmp_path / "frozen.toml"
    freeze_external(
        make_project(tmp_path, {"max_rounds = 8": "max_rounds = 4\nmin_rounds = 4"}, "stencil"), out
    )
    r = judge_external(load_frozen(out), _candidate(tmp_path, "stencil-interior"), seed=1)
    assert r.verdict == "accepted", r.reasons
    m = r.metrics
    assert m is not None and m.verdict == "improved", (m.overall if m else None, r.reasons)
    assert m.scale == [1, 192] and all(x.low is not None for x in m.rounds)
    assert m.os_check is not None and m.os_check.outcome == "confirmed", m.os_check
    assert m.os_check.basis == "scaled_difference" and m.os_check.clock == "cpu"
    per_round = sorted(math.exp(x.log_ratio) for x in m.rounds)
    assert m.overall.ratio is not None and m.overall.ratio < 0.3
    assert per_round[0] <= m.overall.ratio <= per_round[-1]  # the metric's ratio, as reported


def test_a_scale_the_command_does_not_use_is_refused(tmp_path: Path) -> None:
    """A declared scale that the command has no {scale} for would run the same command
    twice; a {scale} without a scale would run it literally. Both are errors at freeze."""
    spec = make_project(tmp_path, project="stencil")
    text = spec.read_text()
    cases = {
        "--repeat {scale}": ("--repeat 4", r"'benchmark': .*no \{scale\}"),
        "scale = { low = 1, high = 192 }": ("", r"'benchmark': .*no scale is declared"),
        "low = 1": ("low = 192", r"'benchmark\.scale': high \(192\) must be larger than low"),
    }
    for old, (new, message) in cases.items():
        spec.write_text(text.replace(old, new))
        with pytest.raises(SpecError, match=message):
            freeze_external(spec, tmp_path / "o.toml")


SLOW_CLOCK = '''"""The hot path, really 2x slower; the clock the benchmark reads runs 100x slow."""
import time

_real = time.perf_counter
_start = _real()
time.perf_counter = lambda: _start + (_real() - _start) / 100

'''

TWICE = """

_count_once = count_primes


def count_primes(n: int) -> int:
    _count_once(n)
    return _count_once(n)
"""


@pytest.mark.slow
def test_a_candidate_that_edits_the_benchmark_clock_is_never_improved(
    tmp_path: Path, frozen: Path
) -> None:
    """The metric is printed by a process running the candidate's code, so it can be edited:
    a 50x 'speed-up' of a candidate the OS's CPU count shows slower is not a verdict."""
    d = tmp_path / "cand-clock"
    d.mkdir()
    hot_path = (EXAMPLE / "primes" / "primes.py").read_text()
    (d / "primes.py").write_text(SLOW_CLOCK + hot_path + TWICE)
    r = judge_external(load_frozen(frozen), d, seed=2)
    assert r.verdict == "accepted"  # it is correct; its speed is what is not believed
    assert r.metrics is not None and r.metrics.overall.ratio < 0.05  # what the metric claims
    assert r.metrics.verdict == "inconclusive"
    assert r.metrics.crosscheck and "does not confirm" in r.metrics.crosscheck[0]
    assert r.metrics.os_check is not None and r.metrics.os_check.outcome == "contradicted"
    assert r.metrics.overall.why.startswith("not confirmed by the OS")


FAKE_BENCHMARK = "print('{\"seconds\": 1e-06}')\n"  # no work, a fine metric


def _rewrites_benchmark(when: str) -> str:
    """The hot path as it was; run by `when`, it rewrites the project's benchmark script."""
    return (
        f"import sys\nif sys.argv[0].endswith({when!r}):\n"
        f"    with open('benchmark.py', 'w') as f:\n        f.write({FAKE_BENCHMARK!r})\n\n"
    )


@pytest.mark.parametrize(
    ("when", "command"), [("verify.py", "verify.py"), ("measure.py", "benchmark.py")]
)
def test_a_candidate_that_rewrites_the_project_benchmark_is_rejected(
    tmp_path: Path, frozen: Path, when: str, command: str
) -> None:
    """Its code runs with its worktree writable: rewritten during the gate, a benchmark that
    does no work would agree with the OS's count. Every command starts from the tree as
    prepared, and the change itself rejects the candidate."""
    d = tmp_path / "cand-rewrite"
    d.mkdir()
    cheat = _rewrites_benchmark(when)
    (d / "primes.py").write_text(cheat + (EXAMPLE / "primes" / "primes.py").read_text())
    r = judge_external(load_frozen(frozen), d, seed=4)
    assert r.verdict == "rejected" and r.reason_codes == ["project_modified"], r.reasons
    assert f"benchmark.py (during `python3 {command}`)" in r.reasons[0]
    assert r.metrics is None


@pytest.mark.slow
def test_a_tracked_file_both_arms_change_is_the_project_s_doing(tmp_path: Path) -> None:
    """Negative control: a benchmark that appends to a tracked file does so for the baseline
    too, so the candidate is judged as usual (each run still starts from the prepared tree)."""
    out = tmp_path / "frozen.toml"
    edits = {'"python3 benchmark.py"': '"python3 benchmark.py && echo run >> TASK.md"'}
    freeze_external(make_project(tmp_path, edits), out)
    r = judge_external(load_frozen(out), _candidate(tmp_path, "sieve"), seed=5)
    assert r.verdict == "accepted", r.reasons
    m = r.metrics
    assert m is not None and m.overall.ratio is not None and m.overall.ratio < 0.2, m
    # Judged as usual: improved where the OS's time of the whole runs confirms the metric; a
    # loaded machine can leave that unresolved (the shell and its `echo` are more of each
    # run), and then the verdict says so, as for any candidate, never rejected for the file.
    assert m.os_check is not None
    if m.verdict != "improved":
        assert m.verdict == "inconclusive" and m.os_check.outcome == "unresolved", m.os_check


GATE_CHEATS = {
    # the exit status is set by the candidate's code: an atexit handler ends the process with 0
    "exit-status": ("import atexit, os\natexit.register(os._exit, 0)\n", "lists failing tests"),
    # ... and the report too: a symlink to an endless device (read as root, it would hang)
    "report-to-dev-zero": (
        "import atexit, os\n"
        "def _forge():\n"
        "    os.unlink('report.xml')\n"
        "    os.symlink('/dev/zero', 'report.xml')\n"
        "    os._exit(0)\n"
        "atexit.register(_forge)\n",
        "no readable JUnit report",
    ),
    # ... or fewer tests run: suites are emptied once the tests have imported the candidate
    "no-tests-run": (
        "import atexit, os, unittest\n"
        "unittest.TestSuite.run = lambda self, result, debug=False: result\n"
        "atexit.register(os._exit, 0)\n",
        "lists 0 tests where the baseline's lists 3; missing: "
        "test_primes.CountPrimes.test_a_prime_bound_counts_itself, ",
    ),
    # ... or the test cases it fails deleted while the gate runs: the report names which
    "failing-tests-deleted": (
        "import atexit, os, sys, unittest\n"
        "_run = unittest.TestSuite.run\n"
        "def _skip_one(self, result, debug=False):\n"
        "    self._tests = [\n"
        "        t for t in self._tests\n"
        "        if not isinstance(t, unittest.TestCase) or 'known' in t.id()\n"
        "    ]\n"
        "    return _run(self, result, debug)\n"
        "unittest.TestSuite.run = _skip_one\n"
        "atexit.register(os._exit, 0)\n",
        "lists 1 tests where the baseline's lists 3; missing: "
        "test_primes.CountPrimes.test_a_prime_bound_counts_itself, "
        "test_primes.CountPrimes.test_small",
    ),
}


@pytest.mark.parametrize("cheat", sorted(GATE_CHEATS))
def test_a_broken_candidate_that_forges_the_gate_is_rejected(
    tmp_path: Path, frozen: Path, cheat: str
) -> None:
    """The gate's process runs the candidate's code, so its exit status alone is not believed:
    the JUnit report must agree (exist as a plain file, list no failure, and as many tests)."""
    prefix, message = GATE_CHEATS[cheat]
    d = tmp_path / "cand-forge"
    d.mkdir()
    (d / "primes.py").write_text(
        prefix + (EXAMPLE / "candidates" / "broken" / "primes.py").read_text()
    )
    r = judge_external(load_frozen(frozen), d, measure=False)
    assert r.verdict == "rejected" and r.reason_codes == ["quality_gate_failed"], r.reasons
    assert message in r.reasons[0]


def test_a_gate_that_writes_no_report_on_the_baseline_is_a_broken_task(tmp_path: Path) -> None:
    out = tmp_path / "frozen.toml"
    spec = make_project(tmp_path, {'junit = "report.xml"': 'junit = "elsewhere.xml"'})
    freeze_external(spec, out)
    with pytest.raises(BrokenTaskError, match=r"field 'quality\.junit'.*no readable JUnit report"):
        judge_external(load_frozen(out), _candidate(tmp_path, "sieve"), measure=False)


def test_a_candidate_that_breaks_a_test_is_rejected_with_the_test_names(
    tmp_path: Path, frozen: Path
) -> None:
    r = judge_external(load_frozen(frozen), _candidate(tmp_path, "broken"), measure=False)
    assert r.verdict == "rejected" and r.reason_codes == ["quality_gate_failed"]
    assert r.metrics is None
    assert "test_a_prime_bound_counts_itself" in r.reasons[0]


def test_editing_a_test_file_is_out_of_scope_and_new_scratch_files_are_ignored(
    tmp_path: Path, frozen: Path
) -> None:
    d = _candidate(tmp_path, "sieve")
    (d / "tests").mkdir()
    (d / "tests" / "test_primes.py").write_text("def test_nothing():\n    pass\n")
    r = judge_external(load_frozen(frozen), d, measure=False)
    assert r.verdict == "rejected" and r.reason_codes == ["out_of_scope"]
    assert "tests/test_primes.py" in r.reasons[0]
    scratch = _candidate(tmp_path, "broken")
    (scratch / "primes.py").unlink()  # a no-op on primes.py, plus a scratch file
    (scratch / "bench_notes.txt").write_text("tried a sieve")
    r2 = judge_external(load_frozen(frozen), scratch, measure=False)
    assert r2.verdict == "accepted" and r2.ignored == ["bench_notes.txt"]


@pytest.mark.slow
def test_a_no_op_patch_is_not_improved(tmp_path: Path, frozen: Path) -> None:
    patch = tmp_path / "noop.patch"
    patch.write_text("")
    empty = tmp_path / "empty"
    empty.mkdir()
    r = judge_external(load_frozen(frozen), empty, seed=2)
    assert r.verdict == "accepted" and r.metrics is not None
    assert r.metrics.verdict != "improved"


def test_a_patch_candidate_applies_against_base(tmp_path: Path, frozen: Path) -> None:
    repo = tmp_path / "primes"
    shutil.copyfile(EXAMPLE / "candidates" / "sieve" / "primes.py", repo / "primes.py")
    diff = subprocess.run(["git", "diff"], cwd=repo, capture_output=True, text=True, check=True)
    subprocess.run(["git", "checkout", "--", "primes.py"], cwd=repo, check=True)
    patch = tmp_path / "sieve.patch"
    patch.write_text(diff.stdout)
    r = judge_external(load_frozen(frozen), patch, measure=False)
    assert r.verdict == "accepted" and r.candidate["kind"] == "patch"
    bad = tmp_path / "bad.patch"
    bad.write_text("--- a/nope.py\n+++ b/nope.py\n@@ -1 +1 @@\n-x\n+y\n")
    r2 = judge_external(load_frozen(frozen), bad, measure=False)
    assert r2.verdict == "rejected" and r2.reason_codes == ["patch_does_not_apply"]


@pytest.mark.slow
def test_without_a_gate_the_verdict_is_unverified_and_never_improved(tmp_path: Path) -> None:
    gate = '[quality]\ncommand = "python3 verify.py"\ntimeout_s = 120\njunit = "report.xml"\n'
    out = tmp_path / "frozen.toml"
    freeze_external(make_project(tmp_path, {gate: ""}), out)
    r = judge_external(load_frozen(out), _candidate(tmp_path, "sieve"), seed=3)
    assert r.verdict == "unverified" and r.gaps == ["no_quality_gate"]
    assert r.metrics is not None and r.metrics.verdict != "improved"
    assert "no quality gate" in r.metrics.overall.why
    assert main(["judge", str(out), str(_candidate(tmp_path / "x", "sieve"))]) == 1


def test_a_gate_that_fails_on_the_baseline_is_a_broken_task(tmp_path: Path) -> None:
    out = tmp_path / "frozen.toml"
    freeze_external(
        make_project(tmp_path, {'"python3 verify.py"': "\"python3 -c 'raise SystemExit(3)'\""}), out
    )
    with pytest.raises(BrokenTaskError, match=r"field 'quality\.command': on the baseline") as e:
        judge_external(load_frozen(out), _candidate(tmp_path, "sieve"), measure=False)
    assert str(e.value).startswith(f"{out}: ")


def test_a_failing_baseline_shows_its_output_and_keeps_the_whole_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The cause of a failing gate is in its output ('No module named pytest'): the message
    quotes the end of it, `--json` prints it as data, and the whole output is kept where the
    message says. It once said only 'exited 1', and `--json` printed nothing."""
    out = tmp_path / "frozen.toml"
    gate = "\"python3 -c 'print(*range(5000), flush=True); import no_such_test_runner'\""
    freeze_external(make_project(tmp_path, {'"python3 verify.py"': gate}), out)
    logs = tmp_path / "logs"
    with pytest.raises(BrokenTaskError) as e:
        judge_external(load_frozen(out), _candidate(tmp_path, "sieve"), measure=False, logs=logs)
    message = str(e.value)
    assert "field 'quality.command': on the baseline, the gate fails" in message
    assert "No module named 'no_such_test_runner'" in message and "exited 1" in message
    assert e.value.log is not None and e.value.log.parent == logs
    assert f"full output: {e.value.log}" in message
    whole = e.value.log.read_text()
    assert whole.startswith("0 1 2 3") and "no_such_test_runner" in whole  # not just the tail
    capsys.readouterr()
    xdg = tmp_path / "cache"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(xdg))
        code = main(["judge", str(out), str(_candidate(tmp_path / "x", "sieve")), "--json"])
    assert code == 2
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert data["error"] == "broken_task" and data["field"] == "quality.command"
    assert "no_such_test_runner" in data["output_tail"]
    assert Path(data["log"]).is_file() and Path(data["log"]).is_relative_to(xdg)
    assert captured.err.startswith("error: ") and "No module named" in captured.err
    assert "src/optarena" not in captured.err  # the command's traceback, quoted; not ours


def test_a_metric_the_output_lacks_is_a_broken_task_not_a_number(tmp_path: Path) -> None:
    out = tmp_path / "frozen.toml"
    freeze_external(make_project(tmp_path, {'json = "seconds"': 'json = "seconds.best"'}), out)
    with pytest.raises(BrokenTaskError, match=r"field 'benchmark\.metric'.*absent from the output"):
        judge_external(load_frozen(out), _candidate(tmp_path, "sieve"))


@pytest.mark.parametrize(
    ("edits", "field", "message"),
    [
        (
            {'"python3 benchmark.py"': '"no-such-benchmark"'},
            "benchmark.command",
            "benchmark `no-such-benchmark` exited 127",
        ),
        (
            {'"python3 verify.py"': '"no-such-verifier"'},
            "quality.command",
            "`no-such-verifier` exited 127",
        ),
        (
            {'"python3 benchmark.py"': '"python3 -c \'print(1 + 1, \\"s\\")\'"'},
            "benchmark.metric",
            "printed no JSON",
        ),
    ],
    ids=["benchmark-not-found", "gate-not-found", "benchmark-prints-no-json"],
)
def test_a_command_that_cannot_serve_is_a_broken_task_never_a_number(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    edits: dict[str, str],
    field: str,
    message: str,
) -> None:
    """Found on the baseline, so the task is at fault (exit 2; the spec file, the field, the
    command and its output named), not the candidate, and no metric is ever read from it."""
    out = tmp_path / "frozen.toml"
    freeze_external(make_project(tmp_path, edits), out)
    with pytest.raises(BrokenTaskError, match=re.escape(message)) as e:
        judge_external(load_frozen(out), _candidate(tmp_path, "sieve"))
    assert str(e.value).startswith(f"{out}: field '{field}': on the baseline, ")
    capsys.readouterr()
    assert main(["judge", str(out), str(_candidate(tmp_path / "x", "sieve"))]) == 2
    err = capsys.readouterr().err
    assert f"field '{field}'" in err and str(out) in err and "Traceback" not in err


def test_freeze_and_drift_and_bad_specs(tmp_path: Path) -> None:
    spec = make_project(tmp_path)
    assert main(["judge", str(spec), str(tmp_path)]) == 2  # unfrozen: freeze it first
    with pytest.raises(OptarenaError, match="freeze it first"):
        load_frozen(spec)
    out = tmp_path / "frozen.toml"
    f = freeze_external(spec, out)
    assert len(f.frozen.base_commit) == 40
    assert main(["task", "show", str(out)]) == 0
    repo = tmp_path / "primes"
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
                    "--amend", "-m", "rewritten"], cwd=repo, check=True)  # fmt: skip
    subprocess.run(["git", "reflog", "expire", "--expire=now", "--all"], cwd=repo, check=True)
    subprocess.run(["git", "gc", "-q", "--prune=now"], cwd=repo, check=True)
    with pytest.raises(OptarenaError, match="drift"):
        load_frozen(out)
    bad = tmp_path / "bad.toml"
    bad.write_text(spec.read_text().replace('base = "HEAD"', 'base = "no-such-rev"'))
    with pytest.raises(SpecError, match=r"project\.base"):
        freeze_external(bad, tmp_path / "o.toml")
    bad.write_text(spec.read_text().replace('repo = "primes"', 'repo = "."'))
    (tmp_path / "sub").mkdir()
    moved = tmp_path / "sub" / "s.toml"
    moved.write_text(bad.read_text())
    with pytest.raises((SpecError, OptarenaError)):
        freeze_external(moved, tmp_path / "o.toml")
    bad.write_text(spec.read_text() + "\ncolour = 1\n")
    with pytest.raises(SpecError, match="colour"):
        freeze_external(bad, tmp_path / "o.toml")
    # a misspelt limit was once kept and ignored: the commands then ran without it
    bad.write_text(spec.read_text() + "\n[limits]\nmemory_MB = 100\n")
    with pytest.raises(SpecError, match=r"limits\.memory_MB"):
        freeze_external(bad, tmp_path / "o.toml")
    bad.write_text(spec.read_text() + "\n[limits]\nprocesses = 0\n")
    with pytest.raises(SpecError, match=r"limits\.processes"):
        freeze_external(bad, tmp_path / "o.toml")


def test_a_holdout_tracked_in_the_repository_is_refused(tmp_path: Path) -> None:
    """Every clone the agent gets would contain it: not a holdout."""
    spec = make_project(tmp_path)
    inside = tmp_path / "primes" / "tests"  # tracked at base
    text = spec.read_text().replace(
        'junit = "report.xml"', 'junit = "report.xml"\nholdout = "primes/tests"'
    )
    spec.write_text(text)
    assert inside.is_dir()
    with pytest.raises(SpecError, match=r"quality\.holdout.*tracked in the repository"):
        freeze_external(spec, tmp_path / "o.toml")


def test_too_few_rounds_for_a_verdict_are_refused(tmp_path: Path) -> None:
    spec = make_project(tmp_path, {"max_rounds = 6": "max_rounds = 3"})
    with pytest.raises(SpecError, match=r"measurement.*max_rounds"):
        freeze_external(spec, tmp_path / "o.toml")


LATIN1_NAME = os.fsdecode(b"caf\xe9.txt")  # a file name that is not UTF-8


def _latin1_project(tmp_path: Path) -> Path:
    """The example with a latin-1 source file and a tracked file whose name is not UTF-8 at
    base, and a holdout holding one too: git's output about any of them is not UTF-8."""
    spec = make_project(tmp_path)
    repo = tmp_path / "primes"
    (repo / "latin.py").write_bytes(b"# r\xe9sum\xe9 of the project\nX = 1\n")
    (repo / LATIN1_NAME).write_bytes(b"notes\n")
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    ident = ["-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", *ident, "commit", "-q", "-m", "latin-1"], cwd=repo, check=True)
    holdout = tmp_path / "holdout"
    holdout.mkdir()
    (holdout / os.fsdecode(b"extra-\xff.txt")).write_bytes(b"\xff\n")
    spec.write_text(
        spec.read_text().replace(
            'junit = "report.xml"', 'junit = "report.xml"\nholdout = "holdout"'
        )
    )
    return spec


def test_names_and_contents_that_are_not_utf8_are_judged_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """git's output is bytes: a latin-1 source file or a non-UTF-8 file name once raised
    UnicodeDecodeError out of `optarena judge`. They are judged like any other file, and a
    name is shown with its bytes as \\xNN wherever a record or message holds it."""
    out = tmp_path / "frozen.toml"
    freeze_external(_latin1_project(tmp_path), out)
    frozen = load_frozen(out)
    d = _candidate(tmp_path, "sieve")
    with (d / "primes.py").open("ab") as f:
        f.write(b"# r\xe9sum\xe9\n")  # latin-1 in the candidate's own file
    (d / os.fsdecode(b"notes-\xff.txt")).write_bytes(b"scratch")
    r = judge_external(frozen, d, measure=False)
    assert r.verdict == "accepted", r.reasons
    assert r.ignored == ["notes-\\xff.txt"] and r.candidate["changed"] == ["primes.py"]
    # the same change as a patch (its bytes are latin-1)
    repo = tmp_path / "primes"
    shutil.copyfile(d / "primes.py", repo / "primes.py")
    patch = tmp_path / "latin1.patch"
    patch.write_bytes(subprocess.run(["git", "diff"], cwd=repo, capture_output=True).stdout)
    subprocess.run(["git", "checkout", "--", "primes.py"], cwd=repo, check=True)
    r2 = judge_external(frozen, patch, measure=False)
    assert r2.verdict == "accepted" and r2.candidate["sha256"] == r.candidate["sha256"]
    # a tracked file with a non-UTF-8 name, changed: out of scope, named readably
    (d / LATIN1_NAME).write_bytes(b"changed\n")
    r3 = judge_external(frozen, d, measure=False)
    assert r3.verdict == "rejected" and r3.reason_codes == ["out_of_scope"]
    assert "caf\\xe9.txt" in r3.reasons[0]
    capsys.readouterr()
    assert main(["judge", str(out), str(d), "--no-measure", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["reason_codes"] == ["out_of_scope"]
