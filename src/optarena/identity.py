"""Content hashes and the runtime fingerprint.

Hashes are over file contents and POSIX relative paths in sorted order, so the same tree gives
the same hash on any machine. Caches (`__pycache__`, `*.pyc`) are not content and are skipped.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import stat
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from optarena.files import entries_under

_SKIP_DIRS = {"__pycache__", ".git", ".pytest_cache", ".mypy_cache", ".ruff_cache"}
_SKIP_SUFFIXES = {".pyc", ".pyo"}


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def tree_files(root: Path) -> list[str]:
    """Relative POSIX paths of the content files under `root` (plain files: links are not
    followed), sorted. An agent's workspace may nest directories past Python's recursion
    limit: `entries_under` walks with a stack."""
    files = entries_under(root, enter=lambda d: d.name not in _SKIP_DIRS)
    return sorted(
        p.relative_to(root).as_posix()
        for p in files
        if p.suffix not in _SKIP_SUFFIXES and _plain_file(p)
    )


def _plain_file(p: Path) -> bool:
    """A regular file, not a link; False for what cannot even be looked at (a path past
    PATH_MAX in a tree nested thousands deep raised ENAMETOOLONG out of `is_file`)."""
    try:
        return stat.S_ISREG(os.lstat(p).st_mode)
    except OSError:
        return False


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
    """Hash of the code that judges: every file of the judging code manifest
    (`JUDGING_CODE`), by package-relative path and content."""
    return hash_files(PACKAGE_DIR, judging_files())


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


# --- the installation's own reference ------------------------------------------------------

PACKAGE_DIR = Path(__file__).resolve().parent
_CODE_SUFFIXES = {".py", ".pth", ".so", ".pyd"}  # a new file of these kinds can run

# The judging code manifest, the one definition of "the judge's code": every module a judgement
# loads (tests/test_judge_manifest.py checks it against a real judgement), the worker's files,
# and how a trial's verdict is combined. `judge_sha256` hashes it, the seal hashes the loaded
# part of it, and the process-start snapshot (`code_references`) watches it. The inputs'
# generator (`tasks/inputs.py`) is in it: trials judged with different input code never share
# an identity. The built-in task packages are not code of the judge: each has its own hash
# (`TaskInfo.sha256`), checked before judging.
JUDGING_CODE = (
    "__init__.py", "errors.py", "identity.py", "judge/", "records/", "sandbox/", "processes/",
    "files/", "tasks/", "trials/_judging.py",
)  # fmt: skip
BUILTIN_TASKS = "tasks/builtin/"


def judging_code(rel: str) -> bool:
    """Whether a package-relative path is part of the judging code manifest."""
    return rel.startswith(JUDGING_CODE) and not rel.startswith(BUILTIN_TASKS)


def judging_files(root: Path = PACKAGE_DIR) -> list[str]:
    """Package-relative paths of every content file of the judging code, sorted."""
    return [rel for rel in tree_files(root) if judging_code(rel)]


@dataclass(frozen=True)
class CodeReference:
    """What optarena's files should hash to: package-relative POSIX path -> sha256 (hex).

    `installed` is True for the install-time RECORD: every difference counts, additions of
    files that could run too (a stray `numpy.py` beside a script shadows the real one). For the
    process-start snapshot (an editable checkout), only what this process will still read
    counts: a module it has already imported runs from memory whatever its file says now, and a
    file that did not exist at the start is referred to by nothing loaded (so a developer saving
    an edit does not stop a running experiment; an agent's edit to anything still to be read
    does)."""

    source: str  # where the reference comes from, for messages
    hashes: Mapping[str, str]
    installed: bool = False

    def changes(
        self, current: Mapping[str, str], loaded: frozenset[str] = frozenset()
    ) -> list[str]:
        """'<path>: modified | deleted | added' for each difference that counts."""
        out = [
            f"{rel}: {'deleted' if rel not in current else 'modified'}"
            for rel, digest in sorted(self.hashes.items())
            if current.get(rel) != digest and (self.installed or rel not in loaded)
        ]
        if self.installed:
            out += [
                f"{rel}: added"
                for rel in sorted(set(current) - set(self.hashes))
                if Path(rel).suffix in _CODE_SUFFIXES
            ]
        return out


def loaded_files(root: Path = PACKAGE_DIR) -> frozenset[str]:
    """Package-relative paths of the modules this process has imported from `root`."""
    out = set()
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        rel = _relative_to(path, root) if isinstance(path, str) and path else None
        if rel is not None:
            out.add(rel)
    return frozenset(out)


@cache
def _relative_to(path: str, root: Path) -> str | None:
    """`path` resolved, relative to `root` (None: outside it). Once per module file: resolving
    every loaded module's path on every judgement (a `realpath` each, thousands in a process
    that imported a test suite) was a tenth of such a process's CPU. A module's file is where
    it was loaded from; links changed after that do not change which code it is."""
    resolved = Path(path).resolve()
    return resolved.relative_to(root).as_posix() if resolved.is_relative_to(root) else None


def package_hashes(root: Path = PACKAGE_DIR) -> dict[str, str]:
    """sha256 of every content file of the installed package, now."""
    out = {}
    for rel in tree_files(root):
        try:
            out[rel] = sha256_bytes((root / rel).read_bytes())
        except OSError:
            continue
    return out


def _record_reference(root: Path) -> CodeReference | None:
    """The sha256 entries of the distribution's RECORD (written at install time) for the files
    of this package; None for an editable install, whose RECORD does not list them."""
    import base64
    from importlib import metadata

    try:
        dist = metadata.distribution("optarena")
    except metadata.PackageNotFoundError:
        return None
    hashes: dict[str, str] = {}
    for f in dist.files or []:
        if f.hash is None or f.hash.mode != "sha256":
            continue
        where = Path(str(dist.locate_file(f))).resolve()
        if where.is_relative_to(root) and where.suffix not in _SKIP_SUFFIXES:
            raw = base64.urlsafe_b64decode(f.hash.value + "=" * (-len(f.hash.value) % 4))
            hashes[where.relative_to(root).as_posix()] = raw.hex()
    if not hashes:
        return None
    return CodeReference("the installed distribution's RECORD", hashes, installed=True)


@cache
def code_references() -> tuple[CodeReference, ...]:
    """The references the installation is checked against, fixed on the first call (call it
    at process start, before any agent runs): the wheel's RECORD when there is one (every
    file of the package), and always the judging code (`JUDGING_CODE`) and the built-in task
    packages as this process first saw them, which is all an editable checkout has."""
    now = {
        k: v for k, v in package_hashes().items() if judging_code(k) or k.startswith(BUILTIN_TASKS)
    }
    refs = [CodeReference("the files as this optarena process found them", now)]
    record = _record_reference(PACKAGE_DIR)
    return (record, *refs) if record is not None else tuple(refs)


def installation_changes() -> tuple[list[str], str]:
    """What differs between optarena's files now and its references, and which reference."""
    current, loaded = package_hashes(), loaded_files()
    for ref in code_references():
        changes = ref.changes(current, loaded)
        if changes:
            return changes, ref.source
    return [], ""


__all__ = [
    "BUILTIN_TASKS",
    "PACKAGE_DIR",
    "CodeReference",
    "code_references",
    "hash_files",
    "hash_tree",
    "installation_changes",
    "judge_sha256",
    "judging_code",
    "judging_files",
    "loaded_files",
    "runtime_fingerprint",
    "sha256_bytes",
    "tree_files",
]
