"""`task freeze` of an external spec refuses what cannot work and says what it can tell: scope
patterns that match nothing, a base whose own commands fail (run once, timed), and a
benchmark that loads the project into the process printing its metric."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from external_example import EXAMPLE, make_project
from optarena.cli import main
from optarena.errors import SpecError
from optarena.tasks.external import freeze_external, freeze_warnings

# private: the spec's shape checker, fed hostile TOML directly
from optarena.tasks.external._shape import loads_project

# The example's benchmark as it was: one process draws n, imports the project, checks, prints.
SINGLE_PROCESS = (
    (EXAMPLE / "primes" / "measure.py")
    .read_text()
    .replace("n = int(sys.stdin.readline())", "import random\nn = random.randrange(59_500, 60_500)")
)


def test_an_editable_scope_that_matches_nothing_is_refused(tmp_path: Path) -> None:
    """It froze cleanly once, and every candidate's change there was out of scope. One
    pattern of several that matches nothing may name a file to create: a warning."""
    spec = make_project(tmp_path, {'editable = ["primes.py"]': 'editable = ["src/primes.py"]'})
    with pytest.raises(SpecError, match=r"project\.editable.*'src/primes\.py'.*match no file"):
        freeze_external(spec, tmp_path / "o.toml")
    edit = {'editable = ["primes.py"]': 'editable = ["primes.py", "src/*.py"]'}
    spec = make_project(tmp_path / "two", edit)
    (warning,) = freeze_warnings(freeze_external(spec, tmp_path / "o.toml"))
    assert warning.startswith("project.editable.1: 'src/*.py' matches no file")


def test_a_benchmark_importing_the_project_is_warned_about(tmp_path: Path) -> None:
    spec = make_project(tmp_path)
    out = tmp_path / "frozen.toml"
    assert freeze_warnings(freeze_external(spec, out)) == []  # the example's parent never imports
    (tmp_path / "primes" / "bench_one.py").write_text(SINGLE_PROCESS)
    ident = ["-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "add", "-A"], cwd=tmp_path / "primes", check=True)
    subprocess.run(["git", *ident, "commit", "-qm", "one"], cwd=tmp_path / "primes", check=True)
    spec.write_text(spec.read_text().replace('"python3 benchmark.py"', '"python3 bench_one.py"'))
    (warning,) = freeze_warnings(freeze_external(spec, out))
    assert "bench_one.py imports primes.py" in warning and "parent process" in warning


def test_imports_are_followed_through_the_project_s_own_modules() -> None:
    files = {
        "bench/run.py": b"import helpers\nimport json\n",
        "bench/helpers.py": b"from mylib.core import fast\n",
        "src/mylib/__init__.py": b"",
        "src/mylib/core.py": b"def fast(): pass\n",
        "other.py": b"import mylib\n",
    }
    found = loads_project("python3 bench/run.py --repeat {scale}", ["src/mylib/core.py"],
                          list(files), files.get)  # fmt: skip
    assert found == [("bench/run.py", "src/mylib/core.py")]
    assert loads_project("python3 -m pytest", ["src/mylib/core.py"], list(files), files.get) == []
    assert loads_project("python3 other.py", ["x.py"], list(files), files.get) == []


def test_freeze_runs_the_commands_on_base_and_refuses_a_spec_that_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = make_project(tmp_path)
    out = tmp_path / "frozen.toml"
    assert main(["task", "freeze", str(spec), "-o", str(out)]) == 0
    said = capsys.readouterr().out
    assert "ran on base: setup" in said and "gate" in said and "benchmark" in said
    assert "the gate's report lists 3 tests" in said and "python3 in the sandbox" in said
    bad = tmp_path / "bad.toml"
    bad.write_text(
        spec.read_text().replace('"python3 verify.py"', "\"python3 -c 'import no_such_gate_dep'\"")
    )
    out.unlink()
    assert main(["task", "freeze", str(bad), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "field 'quality.command'" in err and "No module named 'no_such_gate_dep'" in err
    assert not out.exists()  # nothing frozen that cannot work
    assert main(["task", "freeze", str(bad), "-o", str(out), "--no-run"]) == 0
    assert "not run on base (--no-run)" in capsys.readouterr().out and out.exists()
