"""The example external project (examples/external) as a fresh git repository, for tests."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "external"
FAST = {"budget_s = 60": "budget_s = 30"}


def make_project(
    tmp_path: Path, spec_edits: dict[str, str] | None = None, project: str = "primes"
) -> Path:
    """A copy of an example (primes or stencil) as a git repository; returns the spec's path."""
    shutil.copytree(EXAMPLE / project, tmp_path / project)
    text = (EXAMPLE / f"{project}.toml").read_text()
    fast = FAST if project == "primes" else {}
    for old, new in {**fast, **(spec_edits or {})}.items():
        assert old in text, old
        text = text.replace(old, new)
    spec = tmp_path / f"{project}.toml"
    spec.write_text(text)
    repo = tmp_path / project
    ident = ["-c", "user.name=t", "-c", "user.email=t@t"]
    for cmd in (["init", "-q"], ["add", "-A"], [*ident, "commit", "-q", "-m", "base"]):
        subprocess.run(["git", *cmd], cwd=repo, check=True)
    return spec
