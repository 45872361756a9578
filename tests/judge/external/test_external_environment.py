"""An external project's declared environment (`[environment]`): an interpreter of its own
(a venv outside the repository, under /tmp here, which the sandbox's private /tmp would hide),
checked at freeze, hashed into the frozen identity, visible to every command, and named in
every judgement."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from external_example import EXAMPLE, make_project
from optarena.cli import main
from optarena.errors import OptarenaError, SpecError
from optarena.judge import BrokenTaskError, judge_external
from optarena.tasks.external import freeze_external, load_frozen

GATE = {'"python3 verify.py"': "\"python3 -c 'import needed_dep' && python3 verify.py\""}


def _venv(tmp_path: Path) -> Path:
    """A venv holding a module the interpreter optarena runs with does not have."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python*/site-packages"))
    (site / "needed_dep.py").write_text("VALUE = 42\n")
    (site / "needed_dep-1.0.dist-info").mkdir()
    return venv


def test_a_declared_interpreter_is_the_one_every_command_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    venv = _venv(tmp_path)
    spec = make_project(tmp_path, GATE)
    out = tmp_path / "frozen.toml"
    # undeclared: the commands' python3 lacks the project's dependency, and the message says so
    freeze_external(spec, out)
    with pytest.raises(BrokenTaskError, match="No module named 'needed_dep'"):
        judge_external(load_frozen(out), EXAMPLE / "candidates" / "sieve", measure=False)
    # declared: a venv under /tmp, which the sandbox's private /tmp would hide
    spec.write_text(spec.read_text() + '\n[environment]\npython = "venv/bin/python3"\n')
    f = freeze_external(spec, out)
    assert f.frozen.python == str(venv / "bin" / "python3")
    assert f.frozen.python_version == sys.version.split()[0] and f.frozen.environment_sha256
    r = judge_external(load_frozen(out), EXAMPLE / "candidates" / "sieve", measure=False)
    assert r.verdict == "accepted", r.reasons
    assert r.environment["python3"] == str(venv / "bin" / "python3")
    assert r.environment["python3_version"] == sys.version.split()[0]
    assert {"setup.baseline", "gate.baseline", "gate.candidate"} <= set(r.timings)
    capsys.readouterr()
    assert main(["task", "show", str(out)]) == 0
    shown = capsys.readouterr().out
    assert f"python      {venv / 'bin' / 'python3'}" in shown and "environment sha256" in shown
    # a distribution installed into it after freezing: drift, never a silent difference
    site = next(venv.glob("lib/python*/site-packages"))
    (site / "another-2.0.dist-info").mkdir()
    with pytest.raises(OptarenaError, match="declared environment changed"):
        load_frozen(out)


def test_a_declared_environment_that_is_not_there_is_refused_at_freeze(tmp_path: Path) -> None:
    spec = make_project(tmp_path)
    text = spec.read_text()
    cases = {
        'python = "no-venv/bin/python3"': r"environment\.python.*not an executable",
        'wheelhouse = "no-wheels"': r"environment\.wheelhouse.*not a directory",
        'paths = ["primes", "nowhere"]': r"environment\.paths\.1.*not a directory",
        'pyton = "x"': r"environment\.pyton.*not a known field",
    }
    for line, message in cases.items():
        spec.write_text(text + f"\n[environment]\n{line}\n")
        with pytest.raises(SpecError, match=message):
            freeze_external(spec, tmp_path / "o.toml")


def test_a_wheelhouse_is_visible_hashed_and_named_to_the_commands(tmp_path: Path) -> None:
    """An offline set-up installs from the wheelhouse ($OPTARENA_WHEELHOUSE, also pip's
    find-links); a changed wheel is drift."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "dep-1.0-py3-none-any.whl").write_bytes(b"not really a wheel")
    gate = {'"python3 verify.py"': '"test -f $OPTARENA_WHEELHOUSE/dep-1.0-py3-none-any.whl '
            '&& python3 verify.py"'}  # fmt: skip
    spec = make_project(tmp_path, gate)
    spec.write_text(spec.read_text() + '\n[environment]\nwheelhouse = "wheels"\n')
    out = tmp_path / "frozen.toml"
    freeze_external(spec, out)
    r = judge_external(load_frozen(out), EXAMPLE / "candidates" / "sieve", measure=False)
    assert r.verdict == "accepted", r.reasons
    (wheels / "dep-1.0-py3-none-any.whl").write_bytes(b"another wheel")
    with pytest.raises(OptarenaError, match="declared environment changed"):
        load_frozen(out)
