"""The harness registry: every artifact a run built, with its content hash and status.

Versioned like every on-disk record and read through the records' migration steps; a registry
newer than this optarena is refused, never read as if it were this version. An artifact is
identified by kind, name and content hash: a failing version is quarantined by its hash and
never replaces, or is confused with, a qualified one.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from optarena.errors import OptarenaError
from optarena.records import RecordKind, migrate_values
from optarena.sandbox import entries_under

M = TypeVar("M", bound=BaseModel)

REGISTRY_SCHEMA_VERSION = 1
MAX_NESTING = 32  # an artifact nested deeper is quarantined: copies of it would recurse
ArtifactKind = Literal["skill", "mcp", "tool", "verifier", "fixture", "doc"]
ArtifactStatus = Literal["qualified", "quarantined"]
KIND_DIRS: dict[str, ArtifactKind] = {
    "skills": "skill",
    "mcp": "mcp",
    "tools": "tool",
    "verifiers": "verifier",
    "fixtures": "fixture",
    "docs": "doc",
}


class ArtifactEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: ArtifactKind
    name: str
    path: str = Field(description="the version as qualified: <sha256>/<name> in the snapshots")
    sha256: str = Field(description="hash of every file name and byte of the artifact")
    iteration: int
    status: ArtifactStatus
    report: str = Field(description="what qualification found, in words")


class Registry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = REGISTRY_SCHEMA_VERSION
    run: str
    artifacts: list[ArtifactEntry] = Field(default_factory=list)

    def qualified(self) -> list[ArtifactEntry]:
        """The newest qualified version of each (kind, name)."""
        best: dict[tuple[str, str], ArtifactEntry] = {}
        for a in self.artifacts:
            if a.status == "qualified":
                best[(a.kind, a.name)] = a
        return list(best.values())

    def add(self, entry: ArtifactEntry) -> None:
        """Record a qualification; the same content is recorded once."""
        same = [
            a
            for a in self.artifacts
            if (a.kind, a.name, a.sha256) == (entry.kind, entry.name, entry.sha256)
        ]
        if same and same[-1].status == entry.status:
            return
        self.artifacts.append(entry)


def content_sha256(path: Path) -> str:
    """Hash of every entry's name and bytes (a link's target as text: never followed, since
    the agent wrote the tree and optarena reads it as its own user)."""
    h = hashlib.sha256()
    if path.is_symlink() or not path.is_dir():
        entries = [(path, path.name)]
    else:
        entries = [(path / rel, rel) for rel in _walk(path)]
    for f, rel in entries:
        h.update(rel.encode())
        if f.is_symlink():
            h.update(b"\0link\0" + os.readlink(f).encode(errors="surrogateescape"))
        elif f.is_file():
            h.update(b"\0" + hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()


def _walk(root: Path) -> list[str]:
    """Relative paths of everything under `root` but directories (links never entered)."""
    return sorted(
        p.relative_to(root).as_posix()
        for p in entries_under(root)
        if p.is_symlink() or not p.is_dir()
    )


def not_plain(path: Path) -> list[str]:
    """What in an artifact is not a plain file or directory (links, FIFOs, devices): optarena
    copies artifacts into snapshots and into the next session's workspace, and a link would
    have it read, as its own user, whatever the link names (a key, another trial's files)."""
    if path.is_symlink() or not (path.is_dir() or path.is_file()):
        return [path.name]
    if not path.is_dir():
        return []
    bad = []
    for rel in _walk(path):
        f = path / rel
        if f.is_symlink() or not f.is_file():
            bad.append(f"{path.name}/{rel}")
        elif rel.count("/") >= MAX_NESTING:
            bad.append(f"{path.name}/{rel} (nested over {MAX_NESTING} directories deep)")
    return bad


def load_versioned(path: Path, model: type[M], kind: RecordKind, current: int, what: str) -> M:
    """A harness file (`what`: registry, harness run) of this optarena's version or an older one
    it migrates (`records.migrate_values`); a clear error naming the file, the version or the
    field otherwise (a newer file is refused, never read as if it were this version)."""
    try:
        data: Any = json.loads(path.read_text())
    except OSError as e:
        raise OptarenaError(f"{path}: cannot read the {what}: {e.strerror or e}") from None
    except ValueError as e:
        raise OptarenaError(f"{path}: not JSON: {e}") from None
    if not isinstance(data, dict):
        raise OptarenaError(f"{path}: the {what} must be a JSON object")
    data = migrate_values(kind, data, current=current, where=str(path))
    try:
        return model.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise OptarenaError(f"{path}: field '{where}': {first['msg']}") from None


def load_registry(path: Path) -> Registry:
    return load_versioned(path, Registry, "registry", REGISTRY_SCHEMA_VERSION, "registry")


def save_registry(registry: Registry, path: Path) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(registry.model_dump_json(indent=1) + "\n")
    tmp.replace(path)
