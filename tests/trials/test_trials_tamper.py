"""An agent that edits the installed judge, on a regular (wheel-like) install: contained, the
edit fails and later trials are judged by the intact judge; uncontained (--no-agent-sandbox),
the judge sees its files differ from the install's RECORD and refuses to judge that trial and
every later one (judge_tampered, recorded, exit 2), instead of accepting zeros from then on.

The install is a copy of the package with a RECORD, in the Python environment (where pip would
put it), so a failed defence can only damage the copy."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from optarena.identity import PACKAGE_DIR, CodeReference, tree_files
from optarena.ledger import Ledger
from optarena.sandbox import probe

CAPS = probe()


def _record_line(root: Path, rel: str) -> str:
    data = (root / rel).read_bytes()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{rel},sha256={digest},{len(data)}"


@pytest.fixture(scope="module")
def install() -> Iterator[Path]:
    """site/optarena plus site/optarena-0.1.0.dist-info with METADATA and a RECORD."""
    site = Path(tempfile.mkdtemp(prefix=".optarena-test-site-", dir=sys.prefix))
    shutil.copytree(PACKAGE_DIR, site / "optarena", ignore=shutil.ignore_patterns("__pycache__"))
    info = site / "optarena-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: optarena\nVersion: 0.1.0\n")
    lines = [_record_line(site, f"optarena/{rel}") for rel in tree_files(site / "optarena")]
    lines += [_record_line(site, f"{info.name}/METADATA"), f"{info.name}/RECORD,,"]
    (info / "RECORD").write_text("\n".join(lines) + "\n")
    yield site
    shutil.rmtree(site)


@pytest.fixture
def fresh(install: Path) -> Iterator[Path]:
    """The install, restored after each test (an uncontained agent does edit it)."""
    checks = install / "optarena" / "judge" / "correctness" / "_checks.py"
    original = checks.read_bytes()
    yield install
    checks.write_bytes(original)


def run_cli(
    site: Path, ledger: Path, command: str, *extra: str
) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "optarena", "run", "--task", "rmsnorm", "--command", command]
    argv += ["--no-measure", "--ledger", str(ledger), *extra]
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture
def hostile(agent: Callable[[str], str], control: Callable[[str], Path]) -> Callable[[Path], str]:
    def make(site: Path) -> str:
        checks = site / "optarena" / "judge" / "correctness" / "_checks.py"
        return agent(
            f"cp {control('zeros')}/solution.py solution.py\n"
            f"echo 'PASS_EVERYTHING = True  # tampered' >> {checks} 2>/dev/null || true\n"
        )

    return make


def test_the_install_under_test_is_the_copy(fresh: Path) -> None:
    probe_code = "import optarena, optarena.identity as i; print(optarena.__file__); "
    probe_code += "print([r.source for r in i.code_references()])"
    out = subprocess.run(
        [sys.executable, "-c", probe_code],
        env={**os.environ, "PYTHONPATH": str(fresh)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert out[0] == str(fresh / "optarena" / "__init__.py")
    assert "RECORD" in out[1]


@pytest.mark.skipif(CAPS.mountns is not None, reason=f"no mount namespace: {CAPS.mountns}")
def test_a_contained_agent_cannot_edit_the_installed_judge(
    fresh: Path,
    tmp_path: Path,
    hostile: Callable[[Path], str],
    agent: Callable[[str], str],
    control: Callable[[str], Path],
) -> None:
    before = (fresh / "optarena" / "judge" / "correctness" / "_checks.py").read_bytes()
    first = run_cli(fresh, tmp_path / "L", hostile(fresh))
    assert first.returncode == 1, first.stderr  # judged: zeros are rejected
    assert (fresh / "optarena" / "judge" / "correctness" / "_checks.py").read_bytes() == before
    later = run_cli(fresh, tmp_path / "L", agent(f"cp {control('zeros')}/solution.py ."))
    assert later.returncode == 1, later.stderr  # still the intact judge
    with Ledger(tmp_path / "L") as ledger:
        records = ledger.trials()
    assert [r.verdict for r in records] == ["rejected", "rejected"]
    assert all(r.outside_changes == [] and r.agent_sandbox for r in records)


def test_an_uncontained_agents_edit_is_refused_now_and_later(
    fresh: Path,
    tmp_path: Path,
    hostile: Callable[[Path], str],
    agent: Callable[[str], str],
    control: Callable[[str], Path],
) -> None:
    first = run_cli(fresh, tmp_path / "L", hostile(fresh), "--no-agent-sandbox")
    assert first.returncode == 2, first.stderr
    assert (
        "judge_tampered" in first.stderr
        and "judge/correctness/_checks.py: modified" in first.stderr
    )
    later = run_cli(fresh, tmp_path / "L", agent(f"cp {control('zeros')}/solution.py ."))
    assert later.returncode == 2, later.stderr  # a new process: the RECORD still disagrees
    assert "installed distribution's RECORD" in later.stderr
    with Ledger(tmp_path / "L") as ledger:
        newest, oldest = ledger.trials()
    for rec in (oldest, newest):
        assert rec.state == "interrupted" and rec.verdict is None
        assert rec.reason_codes == ["judge_tampered"]
        assert "judge/correctness/_checks.py: modified" in rec.outside_changes
        assert "candidate" in rec.artifacts  # what the agent delivered is kept
    assert oldest.agent_sandbox is not None and oldest.agent_sandbox["enabled"] is False
    assert json.loads(oldest.model_dump_json())["error"].startswith("judge_tampered")


def test_install_reference_counts_every_difference() -> None:
    ref = CodeReference("RECORD", {"judge/a.py": "1", "judge/b.py": "2"}, installed=True)
    now = {"judge/a.py": "1x", "judge/numpy.py": "3", "tasks/t/out.json": "4"}
    loaded = frozenset({"judge/a.py"})
    assert ref.changes(now, loaded) == [
        "judge/a.py: modified",
        "judge/b.py: deleted",
        "judge/numpy.py: added",  # could shadow a module; a data file would not count
    ]


def test_the_process_start_snapshot_counts_only_what_is_still_to_be_read() -> None:
    ref = CodeReference("start", {"judge/a.py": "1", "judge/worker/w.py": "2", "x.toml": "3"})
    now = {"judge/a.py": "1x", "judge/worker/w.py": "2x", "judge/new.py": "4"}
    loaded = frozenset({"judge/a.py"})  # imported already: runs from memory
    assert ref.changes(now, loaded) == ["judge/worker/w.py: modified", "x.toml: deleted"]
