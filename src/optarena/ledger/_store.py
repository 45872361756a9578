"""The content-addressed artifact store: logs, candidates, diffs and judge JSON, by sha256.

An artifact's name is the sha256 of its bytes, so storing the same content twice is a no-op
and nothing is ever overwritten: a file is written to a temporary name, then hard-linked to
its final name (a link never replaces an existing file), and made read-only for its owner alone
(0400: like the ledger around it, private). A directory (a
delivered candidate) is stored as its files plus a `TreeManifest` artifact that maps relative
paths to file digests; the manifest's digest names the tree.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import BinaryIO

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from optarena.errors import LedgerError
from optarena.files import Walk, name_line, open_untrusted, refusal, walk_untrusted

_CHUNK = 1 << 20


class TreeManifest(BaseModel):
    """A stored directory: relative POSIX path -> sha256 of the file's bytes."""

    model_config = ConfigDict(extra="forbid")

    kind: str = Field(default="optarena.tree/1", description="format tag of a tree manifest")
    files: dict[str, str] = Field(description="relative POSIX path -> sha256 of its content")

    def canonical(self) -> bytes:
        """Sorted-key JSON: the same tree always gets the same manifest digest."""
        return json.dumps(self.model_dump(), sort_keys=True, separators=(",", ":")).encode()


class ArtifactStore:
    """Files named by their sha256 under `root/sha256/ab/cdef...`; written once, read-only."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._objects = root / "sha256"
        self._tmp = root / "tmp"

    def path(self, sha: str) -> Path:
        if len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):
            raise LedgerError(f"'{sha}' is not a sha256 artifact name")
        return self._objects / sha[:2] / sha[2:]

    def has(self, sha: str) -> bool:
        return self.path(sha).is_file()

    def put_bytes(self, data: bytes) -> str:
        sha = hashlib.sha256(data).hexdigest()
        if not self.has(sha):
            self._tmp.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=self._tmp, delete=False) as f:
                f.write(data)
            self._link(Path(f.name), sha)
        return sha

    def put_text(self, text: str) -> str:
        return self.put_bytes(text.encode("utf-8"))

    def put_file(self, src: Path) -> str:
        """Store the bytes of a file optarena wrote (for one an agent could have written, open
        it with `optarena.files.open_untrusted` and use `put_stream`)."""
        with open(src, "rb") as f:
            return self.put_stream(f)

    def put_stream(self, fin: BinaryIO) -> str:
        """Store what an open file holds, hashing while copying (logs may be large)."""
        h = hashlib.sha256()
        self._tmp.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=self._tmp, delete=False) as fout:
            while chunk := fin.read(_CHUNK):
                h.update(chunk)
                fout.write(chunk)
        sha = h.hexdigest()
        self._link(Path(fout.name), sha)
        return sha

    def put_untrusted_tree(
        self, root: Path, max_entries: int = 10_000
    ) -> tuple[dict[str, str], list[str]]:
        """Store the plain files under `root`, a directory an agent could write (logs), never
        through anything it made there (`optarena.files.walk_untrusted`), looking at most at
        `max_entries` entries. Returns relative path (as `name_line`) -> sha, and what was left
        out, with why."""
        stored: dict[str, str] = {}
        left_out: list[str] = []
        walk = Walk()
        for e in walk_untrusted(root, max_entries=max_entries, progress=walk):
            if e.too_deep:
                left_out.append(f"{name_line(e.rel)}: nested too deep, not entered")
            if e.is_dir:
                continue
            f = e.open()
            if f is None:
                why = refusal(e.st) or "changed while it was read"
                left_out.append(f"{name_line(e.rel)}: {why}")
                continue
            with f:
                stored[name_line(e.rel)] = self.put_stream(f)
        if walk.truncated:
            left_out.append(f"more than {max_entries} entries: the rest not looked at")
        return stored, left_out

    def put_tree(self, root: Path, relpaths: list[str]) -> str:
        """Store the files `relpaths` under `root` and their manifest; return the tree's sha."""
        files = {rel: self.put_file(root / rel) for rel in sorted(relpaths)}
        return self.put_bytes(TreeManifest(files=files).canonical())

    def read_bytes(self, sha: str) -> bytes:
        """The artifact's bytes, checked against its name (a damaged store is an error)."""
        path = self.path(sha)
        try:
            with open_untrusted(path, self._objects) as f:  # a link or FIFO put there: refused
                data = f.read()
        except FileNotFoundError:
            raise LedgerError(f"artifact {sha} is missing from {self.root}") from None
        except OSError as e:
            raise LedgerError(f"artifact {path} cannot be read: {e}") from None
        if hashlib.sha256(data).hexdigest() != sha:
            raise LedgerError(f"artifact {path} does not match its sha256: the store is damaged")
        return data

    def read_text(self, sha: str) -> str:
        return self.read_bytes(sha).decode("utf-8", errors="replace")

    def tree(self, sha: str) -> TreeManifest:
        try:
            return TreeManifest.model_validate_json(self.read_bytes(sha))
        except ValidationError as e:
            raise LedgerError(f"artifact {sha} is not a tree manifest: {e}") from None

    def materialize_tree(self, sha: str, dest: Path) -> list[str]:
        """Write a stored tree's files under `dest` (writable copies); return their paths."""
        manifest = self.tree(sha)
        for rel, file_sha in manifest.files.items():
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(self.read_bytes(file_sha))
        return sorted(manifest.files)

    def _link(self, tmp: Path, sha: str) -> None:
        """Give `tmp` its final name unless that name exists; never replace a stored file."""
        final = self.path(sha)
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            os.chmod(tmp, 0o400)
            try:
                os.link(tmp, final)
            except FileExistsError:
                pass  # same name, same content: already stored
            except OSError:  # file systems without hard links: copy, then no-clobber rename
                if not final.exists():
                    shutil.copyfile(tmp, final)
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
