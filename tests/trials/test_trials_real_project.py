"""Acceptance: a real project from the package registry as an external task, as a new user
would set it up (docs/external-tasks.md, "Setting up a real project"): humanize 4.9.0's sdist
as published (src layout, 219 tests and doctests, 33 compiled translations tracked although
its own .gitignore matches them), with a benchmark in the shape a candidate cannot forge.
`task freeze` runs it on base, `judge` tells the optimization from a wrong change, and `run`
with a command agent captures and judges a delivery on that repository."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from optarena.cli import main

DATA = Path(__file__).resolve().parents[1] / "data" / "external"
SDIST = DATA / "humanize-4.9.0.tar.gz"  # pip download --no-deps --no-binary :all: humanize==4.9.0
FAST = DATA / "humanize-intcomma-fast.patch"  # intcomma groups digits in one pass
WRONG = DATA / "humanize-intcomma-wrong.patch"  # ... and forgets the separator

# The package asks importlib.metadata for its own version: a src-layout project run from its
# tree (PYTHONPATH=src) needs that metadata; set-up writes it, without any build backend.
METADATA = "Metadata-Version: 2.1\\nName: humanize\\nVersion: 4.9.0\\n"
SPEC = f"""
kind = "external"
id = "humanize-intcomma"
version = "1.0.0"
title = "A faster humanize.intcomma"
prompt = "TASK.md"

[project]
repo = "humanize"
base = "HEAD"
editable = ["src/humanize/number.py"]

[setup]
command = "mkdir -p .meta/humanize-4.9.0.dist-info && printf '{METADATA}' > .meta/humanize-4.9.0.dist-info/METADATA"
cache = true

[quality]
command = "python3 -m pytest -q -p no:cacheprovider tests/test_number.py tests/test_filesize.py --doctest-modules src/humanize/number.py --junitxml=report.xml"
junit = "report.xml"
timeout_s = 300

[benchmark]
command = "python3 bench/intcomma_bench.py"
metric = {{ json = "seconds" }}
timeout_s = 300

[measurement]
budget_s = 40
min_effect = 0.05
max_rounds = 10

[env]
PYTHONPATH = "src:.meta"

[environment]
python = "{sys.executable}"
"""  # noqa: E501


def _project(tmp_path: Path) -> Path:
    """The sdist as a git repository, as its upstream keeps it (translations tracked though
    ignored), plus what the user adds: the prompt and the benchmark."""
    with tarfile.open(SDIST) as tar:
        tar.extractall(tmp_path, filter="data")
    repo = tmp_path / "humanize"
    (tmp_path / "humanize-4.9.0").rename(repo)
    shutil.copytree(DATA / "humanize", repo, dirs_exist_ok=True)
    ident = ["-c", "user.name=t", "-c", "user.email=t@t"]
    for cmd in (["init", "-q"], ["add", "-A"], ["add", "-f", "src/humanize/locale"]):
        subprocess.run(["git", *cmd], cwd=repo, check=True)
    subprocess.run(["git", *ident, "commit", "-q", "-m", "humanize 4.9.0"], cwd=repo, check=True)
    spec = tmp_path / "humanize.toml"
    spec.write_text(SPEC)
    return spec


@pytest.mark.slow
def test_a_real_project_from_the_registry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    spec, frozen = _project(tmp_path), tmp_path / "frozen.toml"
    tracked = subprocess.run(["git", "ls-files"], cwd=tmp_path / "humanize", check=True,
                             capture_output=True, text=True).stdout.split()  # fmt: skip
    assert sum(p.endswith(".mo") for p in tracked) == 33

    assert main(["task", "freeze", str(spec), "-o", str(frozen)]) == 0
    said = capsys.readouterr().out
    assert "ran on base" in said and "the gate's report lists 219 tests" in said, said
    assert "warning" not in said  # the benchmark's parent never imports the project
    assert f"python3 in the sandbox: {sys.executable}" in said

    assert main(["judge", str(frozen), str(FAST), "--json", "--seed", "1"]) == 0
    fast = json.loads(capsys.readouterr().out)
    assert fast["verdict"] == "accepted" and fast["candidate"]["changed"] == [
        "src/humanize/number.py"
    ]
    assert fast["metrics"]["verdict"] == "improved", fast["metrics"]["overall"]
    assert fast["metrics"]["os_check"]["outcome"] == "confirmed"
    assert fast["setup"] == {"baseline": "cached", "candidate": "ran"}  # freeze ran base's

    assert main(["judge", str(frozen), str(WRONG), "--json", "--no-measure"]) == 1
    wrong = json.loads(capsys.readouterr().out)
    assert wrong["reason_codes"] == ["quality_gate_failed"]
    assert "test_intcomma" in wrong["reasons"][0]

    # the patch named as an argument: the agent's sandbox shows files named on its command line
    cmd = f"sh -c 'cd {{workspace}} && git apply $0' {FAST}"
    argv = ["run", "--task", str(frozen), "--agent", "command", "--command", cmd]
    assert main([*argv, "--ledger", str(tmp_path / "L"), "--no-measure", "--json"]) == 0
    trial = json.loads(capsys.readouterr().out)
    assert trial["verdict"] == "accepted", trial["reasons"]
    assert [c["path"] for c in trial["changed"]] == ["src/humanize/number.py"]
    assert trial["out_of_scope"] == []  # the 33 tracked-but-ignored translations untouched
