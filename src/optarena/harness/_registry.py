"""The harness registry: every artifact a run built, with its content hash and status.

Versioned like every on-disk record and read through the records' migration steps; a registry
newer than this optarena is refused, never read as if it were this version. An artifact is
identified by kind, name and content hash: a failing version is quarantined by its hash and
never replaces, or is confused with, a qualified one.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any, BinaryIO, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from optarena.errors import OptarenaError
from optarena.files import name_line, open_untrusted, refusal, walk_untrusted
from optarena.records import RecordKind, migrate_values

M = TypeVar("M", bound=BaseModel)

REGISTRY_SCHEMA_VERSION = 1
MAX_NESTING = 32  # an artifact nested deeper is quarantined: copies of it would recurse
ArtifactKind = Literal["skill", "mcp", "tool", "verifier", "fixture", "doc"]
ArtifactStatus = Literal["qualified", "quarantined"]  # stored: "qualified" = passed vetting
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
    path: str = Field(description="the version as vetted: <sha256>/<name> in the snapshots")
    sha256: str = Field(description="hash of every file name and byte of the artifact")
    iteration: int
    status: ArtifactStatus
    report: str = Field(description="what vetting found, in words")


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
        """Record a vetting; the same content is recorded once."""
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
    the agent wrote the tree and optarena reads it as its own user; a file optarena will not
    read, a FIFO or a hard link to another's file, by its name alone)."""
    h = hashlib.sha256()
    if path.is_symlink() or not path.is_dir():
        h.update(os.fsencode(path.name))
        if path.is_symlink():
            h.update(b"\0link\0" + os.fsencode(os.readlink(path)))
        else:
            with contextlib.suppress(OSError), open_untrusted(path) as one:
                h.update(b"\0" + _digest(one))
        return h.hexdigest()
    parts: list[tuple[bytes, bytes]] = []
    for e in walk_untrusted(path):
        if e.is_dir:
            continue
        if stat.S_ISLNK(e.st.st_mode):
            parts.append((os.fsencode(e.rel), b"\0link\0" + os.fsencode(e.readlink())))
        elif (f := e.open()) is not None:
            with f:
                parts.append((os.fsencode(e.rel), b"\0" + _digest(f)))
        else:
            parts.append((os.fsencode(e.rel), b""))
    for rel, what in sorted(parts):
        h.update(rel + what)
    return h.hexdigest()


def _digest(f: BinaryIO) -> bytes:
    h = hashlib.sha256()
    while chunk := f.read(1 << 20):
        h.update(chunk)
    return h.digest()


def not_plain(path: Path) -> list[str]:
    """What in an artifact is not a plain file or directory with a plain name (links, FIFOs,
    devices, hard links to another's file, names with control, format or undecodable bytes,
    nesting deeper than `MAX_NESTING`): optarena copies artifacts into snapshots and into the
    next session's workspace, and a link would have it read, as its own user, whatever the
    link names (a key, another trial's files); a name is written into the registry."""
    top = name_line(path.name)
    if top != path.name:
        return [f"{top} (a name with control, format or undecodable characters)"]
    if path.is_symlink() or not path.is_dir():
        try:
            open_untrusted(path).close()
        except OSError as refused:
            return [f"{top} ({refused.strerror or refused})"]
        return []
    bad = []
    for entry in walk_untrusted(path, max_depth=MAX_NESTING):
        rel = name_line(entry.rel)
        why = None if entry.is_dir else refusal(entry.st)
        if rel != entry.rel:
            why = "a name with control, format or undecodable characters"
        elif entry.too_deep:
            why = f"nested over {MAX_NESTING} directories deep"
        if why is not None:
            bad.append(f"{top}/{rel} ({why})")
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
