"""`optarena run --task FROZEN`: an agent on a clone of an external project, its delivered diff
judged by the project's own gate (with the holdout the agent never saw) and benchmark, in the
same ledger as any trial; rejudged from the stored diff."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from optarena.cli import main
from optarena.ledger import Ledger
from optarena.records import ExternalMetrics
from optarena.tasks.external import freeze_external

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "external"
SECRET = "holdout-marker-5000-669"
HOLDOUT_TEST = f'''import unittest

from primes import count_primes


class Holdout(unittest.TestCase):
    """{SECRET}: a value no visible test checks."""

    def test_unseen_bound(self) -> None:
        self.assertEqual(count_primes(5000), 669)
'''
# Fits the visible tests by lookup: passes tests/, fails the holdout.
OVERFIT = """KNOWN = {100: 25, 10_000: 1229, 7919: 1000}
SMALL = [0, 0, 1, 2, 2, 3, 3, 4, 4, 4, 4, 5]


def count_primes(n: int) -> int:
    return SMALL[n] if n < len(SMALL) else KNOWN.get(n, 0)
"""
# The agent: writes what it was told to write, tries to read the holdout and to forge a result.
AGENT = """
import pathlib, sys
ws, holdout, mode = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3]
try:
    print("saw:", (holdout / "tests" / "test_holdout.py").read_text())
except OSError as e:
    print("holdout unreadable:", type(e).__name__)
print("task:", (ws / "TASK.md").is_file(), "tests:", (ws / "tests" / "test_primes.py").is_file())
(ws / "result.json").write_text('{"verdict": "accepted", "speedup": 1000}')
if mode in ("overfit", "sieve"):
    (ws / "primes.py").write_text(pathlib.Path(sys.argv[4]).read_text())
elif mode == "edit-test":
    (ws / "tests" / "test_primes.py").write_text("")
"""


def _frozen(tmp_path: Path, gate: bool = True) -> Path:
    """The example project as a git repository, with a holdout beside its spec; frozen."""
    shutil.copytree(EXAMPLE / "primes", tmp_path / "primes")
    ident = ["-c", "user.name=t", "-c", "user.email=t@t"]
    for cmd in (["init", "-q"], ["add", "-A"], [*ident, "commit", "-q", "-m", "base"]):
        subprocess.run(["git", *cmd], cwd=tmp_path / "primes", check=True)
    (tmp_path / "holdout" / "tests").mkdir(parents=True)
    (tmp_path / "holdout" / "tests" / "test_holdout.py").write_text(HOLDOUT_TEST)
    text = (EXAMPLE / "primes.toml").read_text()
    text = text.replace('junit = "report.xml"', 'junit = "report.xml"\nholdout = "holdout"')
    text = text.replace("budget_s = 60", "budget_s = 30")
    if not gate:
        start, end = text.index("[quality]"), text.index("[benchmark]")
        text = text[:start] + text[end:]
    (tmp_path / "primes.toml").write_text(text)
    out = tmp_path / "frozen.toml"
    freeze_external(tmp_path / "primes.toml", out)
    return out


def _run(frozen: Path, led: Path, tmp: Path, mode: str, *extra: str) -> int:
    script = tmp / "agent.py"
    script.write_text(AGENT)
    (tmp / "overfit.py").write_text(OVERFIT)
    payload = {
        "overfit": tmp / "overfit.py",
        "sieve": EXAMPLE / "candidates" / "sieve" / "primes.py",
    }
    cmd = (
        f"{sys.executable} {script} {{workspace}} {tmp / 'holdout'} {mode} {payload.get(mode, '-')}"
    )
    argv = ["run", "--task", str(frozen), "--agent", "command", "--command", cmd]
    return main([*argv, "--ledger", str(led), "--json", *extra])


def test_an_external_trial_is_judged_by_the_project_with_its_holdout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    frozen, led = _frozen(tmp_path), tmp_path / "L"

    # fits the visible tests, claims success in result.json: the holdout rejects it
    assert _run(frozen, led, tmp_path, "overfit", "--no-measure") == 1
    overfit = json.loads(capsys.readouterr().out)
    assert overfit["verdict"] == "rejected" and overfit["task"]["kind"] == "external"
    assert overfit["reason_codes"] == ["quality_gate_failed"]
    assert any("test_unseen_bound" in r for r in overfit["reasons"]), overfit["reasons"]
    ignored = {c["path"]: c["in_scope"] for c in overfit["changed"]}
    assert ignored == {"primes.py": True, "result.json": False}  # the forged result: ignored

    with Ledger(led) as ledger:
        record = ledger.get(overfit["id"])
        stdout = ledger.store.read_text(record.artifacts["logs/stdout.log"])
        judge_json = json.loads(ledger.store.read_text(record.artifacts["judge"]))
    assert SECRET not in stdout and "holdout unreadable" in stdout  # hidden from the agent
    assert "task: True tests: True" in stdout  # the whole project, and the prompt as TASK.md
    assert judge_json["gaps"] == [] and judge_json["task"]["base_commit"]
    assert record.baseline_commit == judge_json["task"]["base_commit"]

    # a tracked file outside the scope: rejected before any command runs
    assert _run(frozen, led, tmp_path, "edit-test", "--no-measure") == 1
    edited = json.loads(capsys.readouterr().out)
    assert edited["reason_codes"] == ["out_of_scope"] and edited["out_of_scope"] == [
        "tests/test_primes.py"
    ]

    # the known optimization: accepted and improved, by the project's benchmark
    assert _run(frozen, led, tmp_path, "sieve") == 0
    sieve = json.loads(capsys.readouterr().out)
    assert sieve["verdict"] == "accepted" and sieve["metrics"]["kind"] == "external_benchmark"
    assert sieve["metrics"]["verdict"] == "improved"

    # the same ledger and views as any trial; rejudged from the stored diff
    assert main(["trials", "--ledger", str(led)]) == 0
    listed = capsys.readouterr().out
    assert all(t["id"] in listed for t in (overfit, edited, sieve))
    assert main(["trial", "show", sieve["id"], "--ledger", str(led)]) == 0
    shown = capsys.readouterr().out
    assert "the project's benchmark" in shown and "external project, frozen:" in shown
    assert "cpu b / c" in shown  # the kernel's count beside what the benchmark printed
    assert main(["trial", "rejudge", overfit["id"], "--ledger", str(led), "--no-measure"]) == 1
    capsys.readouterr()
    with Ledger(led) as ledger:
        (_, again) = ledger.judgements(overfit["id"])
        assert again.kind == "rejudge" and again.reason_codes == ["quality_gate_failed"]
        accepted = ledger.get(sieve["id"])
        assert isinstance(accepted.metrics, ExternalMetrics)
        assert accepted.task.sha256 == ledger.get(overfit["id"]).task.sha256


def test_external_runs_refuse_what_does_not_apply(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    frozen = _frozen(tmp_path)
    led = str(tmp_path / "L")
    base = ["run", "--agent", "command", "--command", "true", "--ledger", led]
    assert main([*base, "--task", str(tmp_path / "primes.toml")]) == 2  # not frozen
    assert "freeze it first" in capsys.readouterr().err
    assert main([*base, "--task", str(frozen), "--budget-s", "5"]) == 2
    assert "frozen in its spec" in capsys.readouterr().err
    (tmp_path / "holdout" / "tests" / "test_holdout.py").write_text("changed")
    assert main([*base, "--task", str(frozen)]) == 2  # drift: the holdout changed
    assert "holdout" in capsys.readouterr().err
    with Ledger(Path(led)) as ledger:
        assert ledger.trials(limit=None) == []  # bad input records nothing


def test_an_experiment_over_an_external_task(tmp_path: Path) -> None:
    """A frozen external spec is a task of an experiment plan like a package; the lock holds
    its frozen identity; a plan budget that cannot apply to it is refused, naming the field."""
    from optarena.errors import SpecError
    from optarena.experiments import compare_experiment, freeze, load_plan, run_experiment

    frozen = _frozen(tmp_path)
    sieve = EXAMPLE / "candidates" / "sieve" / "primes.py"
    plan = tmp_path / "plan.toml"
    text = f"""
[experiment]
name = "ext"
repetitions = 1
tasks = ["{frozen.name}"]

[judge]
measure = false

[[conditions]]
name = "noop"
agent = "command"
command = "true"

[[conditions]]
name = "sieve"
agent = "command"
command = "cp {sieve} {{workspace}}/primes.py"
"""
    plan.write_text(text.replace("measure = false", "measure = false\nbudget_s = 5"))
    with pytest.raises(SpecError) as e:
        load_plan(plan)
    assert e.value.field == "judge.budget_s" and "frozen in its spec" in str(e.value)
    plan.write_text(text)
    loaded = load_plan(plan)
    lock = freeze(loaded)
    assert json.loads(lock.read_text())["tasks"]["primes"]["version"] == "1.0.0"
    state = run_experiment(loaded, tmp_path / "L")
    c = compare_experiment(state)
    assert {s.name: s.accepted for s in c.conditions} == {"noop": 1, "sieve": 1}
    assert {r.task for r in c.trials} == {"primes"}


def test_without_a_gate_an_external_trial_is_unverified_and_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    frozen, led = _frozen(tmp_path, gate=False), tmp_path / "L"
    assert _run(frozen, led, tmp_path, "sieve", "--no-measure") == 1
    record = json.loads(capsys.readouterr().out)
    assert record["verdict"] == "unverified" and record["reason_codes"] == []
    assert any(r.startswith("no_quality_gate: ") for r in record["reasons"]), record["reasons"]


def test_the_agents_clone_holds_no_commit_after_base(tmp_path: Path) -> None:
    """A task frozen at an older commit: the later commits (which may be the very optimization
    asked for), branches and tags are not in the agent's workspace, objects included."""
    frozen = _frozen(tmp_path)
    repo = tmp_path / "primes"
    ident = ["-c", "user.name=t", "-c", "user.email=t@t"]
    (repo / "primes.py").write_text("# FUTURE-SIEVE-7731: the optimization, committed later\n")
    subprocess.run(["git", *ident, "commit", "-q", "-am", "the answer"], cwd=repo, check=True)
    subprocess.run(["git", "tag", "v2"], cwd=repo, check=True)
    subprocess.run(["git", "branch", "solution"], cwd=repo, check=True)
    led = tmp_path / "L"
    argv = ["run", "--task", str(frozen), "--agent", "command", "--command", "true"]
    assert main([*argv, "--ledger", str(led), "--no-measure", "--json"]) == 0
    with Ledger(led) as ledger:
        [record] = ledger.trials()
    ws = Path(record.workspace)

    def git(*args: str) -> str:
        out = subprocess.run(["git", *args], cwd=ws, check=True, capture_output=True).stdout
        return out.decode("utf-8", "replace")

    everything = git("cat-file", "--batch-all-objects", "--batch")  # every object, any ref
    assert "FUTURE-SIEVE-7731" not in everything and "def count_primes" in everything
    assert git("tag") == "" and "solution" not in git("branch", "-a")
    assert git("rev-parse", "HEAD").strip() == record.baseline_commit


SNOOP = (
    "cat .git/FETCH_HEAD; git config --list --show-origin; git reflog; "
    "repo=$(sed -n 's/.* of //p' .git/FETCH_HEAD 2>/dev/null); "
    'git -C "${repo:-REPO}" log --all -p; cat "${repo:-REPO}/primes.py"; echo snooped'
)


def test_the_agent_finds_no_trace_of_the_source_repository(tmp_path: Path) -> None:
    """A world-readable project (a home directory's, not /tmp): FETCH_HEAD named it, and from
    there `git log --all` showed the later commit holding the optimization. Nothing in the
    workspace names it, and by its path it is not there."""
    base = Path(tempfile.mkdtemp(prefix=".external-test-", dir=EXAMPLE.parents[1]))
    try:
        base.chmod(0o755)
        frozen = _frozen(base)
        repo = base / "primes"
        ident = ["-c", "user.name=t", "-c", "user.email=t@t"]
        (repo / "primes.py").write_text("# FUTURE-SIEVE-7731: the optimization, committed later\n")
        subprocess.run(["git", *ident, "commit", "-q", "-am", "the answer"], cwd=repo, check=True)
        led = tmp_path / "L"
        script = tmp_path / "snoop.sh"
        script.write_text(SNOOP.replace("REPO", str(repo)))
        command = f"sh {script}"
        argv = ["run", "--task", str(frozen), "--agent", "command", "--command", command]
        assert main([*argv, "--ledger", str(led), "--no-measure", "--json"]) in (0, 1)
        with Ledger(led) as ledger:
            [record] = ledger.trials()
            out = ledger.store.read_text(record.artifacts["logs/stdout.log"])
            err = ledger.store.read_text(record.artifacts["logs/stderr.log"])
        assert "snooped" in out, (out, err)
        assert "FUTURE-SIEVE-7731" not in out + err and str(repo) not in out, (out, err)
        ws_git = Path(record.workspace) / ".git"
        assert not (ws_git / "FETCH_HEAD").exists() and not (ws_git / "logs").exists()
    finally:
        shutil.rmtree(base)


def test_files_tracked_although_ignored_are_not_deliveries(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A project that tracks files its own .gitignore matches (compiled translations, say):
    the capture must see what the agent changed relative to base, whatever .gitignore says.
    From an empty index, every such file read as deleted: every delivery was out_of_scope."""
    repo = tmp_path / "primes"
    shutil.copytree(EXAMPLE / "primes", repo)
    (repo / "locale").mkdir()
    (repo / "locale" / "fr.mo").write_bytes(b"\x95\x04\x12\xde compiled")
    (repo / ".gitignore").write_text("*.mo\nbuild/\n")
    ident = ["-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "add", "-f", "locale/fr.mo"], cwd=repo, check=True)
    subprocess.run(["git", *ident, "commit", "-q", "-m", "base"], cwd=repo, check=True)
    shutil.copyfile(EXAMPLE / "primes.toml", tmp_path / "primes.toml")
    frozen = tmp_path / "frozen.toml"
    freeze_external(tmp_path / "primes.toml", frozen)
    sieve = EXAMPLE / "candidates" / "sieve" / "primes.py"
    # the sieve, an ignored build output (never a delivery), and the tracked .mo left alone
    # (the sieve named as an argument: the agent's sandbox shows files named on its command line)
    cmd = f"sh -c 'cp $0 {{workspace}}/primes.py && mkdir -p {{workspace}}/build/x' {sieve}"
    argv = ["run", "--task", str(frozen), "--agent", "command", "--command", cmd]
    assert main([*argv, "--ledger", str(tmp_path / "L"), "--no-measure", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["verdict"] == "accepted", record["reasons"]
    assert [c["path"] for c in record["changed"]] == ["primes.py"], record
    # ... and a change to the ignored-but-tracked file is seen, as any tracked file's is
    cmd = "sh -c 'echo changed > {workspace}/locale/fr.mo'"
    argv = ["run", "--task", str(frozen), "--agent", "command", "--command", cmd]
    assert main([*argv, "--ledger", str(tmp_path / "L"), "--no-measure", "--json"]) == 1
    record = json.loads(capsys.readouterr().out)
    assert record["out_of_scope"] == ["locale/fr.mo"]
