"""Content hashes and the runtime fingerprint.

Hashes are over file contents and POSIX relative paths in sorted order, so the same tree gives
the same hash on any machine. Caches (`__pycache__`, `*.pyc`) are not content and are skipped.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

_SKIP_DIRS = {"__pycache__", ".git", ".pytest_cache", ".mypy_cache", ".ruff_cache"}
_SKIP_SUFFIXES = {".pyc", ".pyo"}


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def tree_files(root: Path) -> list[str]:
    """Relative POSIX paths of the content files under `root`, sorted."""
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
        for name in filenames:
            if Path(name).suffix in _SKIP_SUFFIXES:
                continue
            full = Path(dirpath) / name
            if full.is_symlink() or not full.is_file():
                continue
            out.append(full.relative_to(root).as_posix())
    return sorted(out)


def hash_files(root: Path, relpaths: Iterable[str]) -> str:
    """One digest over (path, content digest) pairs in canonical (sorted) order."""
    h = hashlib.sha256()
    for rel in sorted(relpaths):
        digest = sha256_bytes((root / rel).read_bytes())
        h.update(f"{rel}\0{digest}\n".encode())
    return h.hexdigest()


def hash_tree(root: Path) -> str:
    return hash_files(root, tree_files(root))


@cache
def judge_sha256() -> str:
    """Hash of the code that judges: the judge and sandbox packages and this module."""
    pkg = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for sub in ("judge", "sandbox"):
        h.update(f"{sub}\0{hash_tree(pkg / sub)}\n".encode())
    h.update(f"identity.py\0{sha256_bytes(Path(__file__).read_bytes())}\n".encode())
    return h.hexdigest()


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _version_of(module: str) -> str | None:
    try:
        mod = __import__(module)
    except Exception:  # an optional package that is absent or broken is simply not fingerprinted
        return None
    return str(getattr(mod, "__version__", None))


@cache
def runtime_fingerprint() -> dict[str, Any]:
    """What the numbers depend on besides the code: interpreter, libraries, OS, CPU."""
    fp: dict[str, Any] = {
        "python": platform.python_version(),
        "implementation": sys.implementation.name,
        "numpy": _version_of("numpy"),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "blas_env": {
            k: os.environ[k]
            for k in sorted(os.environ)
            if k.startswith(("OPENBLAS_", "OMP_", "MKL_"))
        },
    }
    fp["sha256"] = sha256_bytes(json.dumps(fp, sort_keys=True).encode())
    return fp
