"""End-to-end fixtures: the pinned agent CLIs, installed from npm into optarena's cache.

The tests skip only where npm itself is unavailable; an install that fails is an error.
`.ci/run` installs the same versions before the tests run.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from optarena.agents import npm_cache
from optarena.ledger import Ledger

PINNED = {"claude": ("@anthropic-ai/claude-code", "2.1.197"), "codex": ("@openai/codex", "0.171.0")}


def _installed(root: Path, package: str) -> str | None:
    manifest = root / "node_modules" / package / "package.json"
    try:
        return str(json.loads(manifest.read_text())["version"])
    except (OSError, ValueError, KeyError):
        return None


@pytest.fixture(scope="session")
def agent_bins() -> dict[str, str]:
    """name -> executable of each pinned CLI, installing what is missing."""
    root = npm_cache()
    root.mkdir(parents=True, exist_ok=True)
    # Each test worker has its own session: one installs while the others wait on the lock,
    # then find the packages installed (two npm installs into one prefix break each other).
    with (root / ".optarena-install.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        missing = [f"{p}@{v}" for p, v in PINNED.values() if _installed(root, p) != v]
        if missing:
            npm = shutil.which("npm")
            if npm is None:
                pytest.skip(f"npm is not available: cannot install {', '.join(missing)}")
            subprocess.run(
                [npm, "install", "--no-audit", "--no-fund", "--prefix", str(root), *missing],
                check=True,
                timeout=600,
            )
    bins = {name: str(root / "node_modules" / ".bin" / name) for name in PINNED}
    for name, exe in bins.items():
        assert os.access(exe, os.X_OK), f"{exe} missing after npm install of {PINNED[name]}"
    return bins


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger.open(tmp_path / "ledger") as led:
        yield led


@pytest.fixture(autouse=True)
def api_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keys the agents send and the proxy passes on; the scripted server ignores them."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-optarena-e2e")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-optarena-e2e")
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
