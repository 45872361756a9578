"""One vetting pass over a run's artifact area (`.harness/`): every artifact found is
vetted and recorded by content hash; what fails is quarantined, never activated, and never
replaces a qualified version of the same name."""

from __future__ import annotations

from pathlib import Path

from optarena.agents import SandboxSpec
from optarena.files import copy_entry, name_line
from optarena.harness._registry import (
    KIND_DIRS,
    ArtifactEntry,
    Registry,
    content_sha256,
    not_plain,
)
from optarena.harness._vet import Vetting, vet


def scan_area(
    registry: Registry,
    area: Path,
    snapshots: Path,
    iteration: int,
    workspace: Path | None = None,
    spec: SandboxSpec | None = None,
) -> list[ArtifactEntry]:
    """Vet what is new or changed in `area` (commands contained as `spec` says); returns
    the entries added. Each version is kept as it was vetted under
    `snapshots/<sha256>/<name>` (the entry's `path`): the agent may change or break the
    original later, the recorded version stays what was tested."""
    added = []
    known = {(a.kind, a.name, a.sha256) for a in registry.artifacts}
    for sub, kind in KIND_DIRS.items():
        root = area / sub
        if not root.is_dir():
            continue
        for path in sorted(root.iterdir()):
            sha = content_sha256(path)
            name = name_line(path.name)  # the agent's name, as a record can hold it
            if (kind, name, sha) in known:
                continue
            snap = snapshots / sha / name
            bad = not_plain(path)
            if not snap.exists():
                snap.parent.mkdir(parents=True, exist_ok=True)
                if bad:  # kept as a record of what it was, its bytes never read
                    snap.write_text("not copied: " + ", ".join(bad[:20]) + "\n")
                else:
                    copy_entry(path, snap)
            if bad:
                why = ", ".join(bad[:5])
                q = Vetting(
                    False,
                    f"not a plain file or directory: {why} (an artifact may hold only files "
                    "and directories; a link would be read by optarena as its own user)",
                )
            else:
                q = vet(kind, snap, workspace, spec)
            entry = ArtifactEntry(
                kind=kind,
                name=name,
                path=f"{sha}/{name}",
                sha256=sha,
                iteration=iteration,
                status="qualified" if q.passed else "quarantined",
                report=q.report,
            )
            registry.add(entry)
            added.append(entry)
    return added


def area_status(registry: Registry, area: Path) -> list[ArtifactEntry]:
    """The recorded entry of each artifact as it is in `area` now (by its content hash)."""
    out = []
    for sub, kind in KIND_DIRS.items():
        root = area / sub
        if not root.is_dir():
            continue
        for path in sorted(root.iterdir()):
            sha = content_sha256(path)
            match = [
                a
                for a in registry.artifacts
                if (a.kind, a.name, a.sha256) == (kind, name_line(path.name), sha)
            ]
            if match:
                out.append(match[-1])
    return out
