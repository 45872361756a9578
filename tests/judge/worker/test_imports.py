"""What runs inside the worker interpreter may import only the standard library and NumPy."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import optarena.judge.worker as worker_pkg

WORKER_DIR = Path(worker_pkg.__file__).resolve().parent
ALLOWED_THIRD_PARTY = {"numpy"}


def _imported_roots(path: Path) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: would pull in the optarena package
                roots.add(".")
            elif node.module:
                roots.add(node.module.split(".")[0])
    return roots


def test_worker_files_import_only_stdlib_and_numpy() -> None:
    files = sorted(WORKER_DIR.glob("*.py"))
    assert {f.name for f in files} >= {"_loop.py", "_wire.py", "_guard.py"}
    bad = {}
    for f in files:
        extra = {
            r
            for r in _imported_roots(f)
            if r not in sys.stdlib_module_names and r not in ALLOWED_THIRD_PARTY
        }
        if extra:
            bad[f.name] = sorted(extra)
    assert bad == {}, f"worker-side files import more than stdlib + NumPy: {bad}"


def test_the_import_check_catches_a_forbidden_import(tmp_path: Path) -> None:
    """Negative control: the checker itself sees optarena, relative and third-party imports."""
    f = tmp_path / "bad.py"
    f.write_text("import json\nfrom optarena.judge import x\nfrom . import y\nimport pydantic\n")
    roots = _imported_roots(f)
    assert {"optarena", ".", "pydantic"} <= roots
    assert "json" in roots
