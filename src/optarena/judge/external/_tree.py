"""Each command of an external task starts from the worktree as it was prepared.

The gate and the benchmark run the candidate's code with its worktree writable, so that code
can rewrite anything in it: the project's benchmark script (to print a fine metric and do no
work), its tests, the holdout, a build output. Later commands would then measure or verify the
rewrite. So the tree is sealed once prepared (a digest of every entry, and a copy kept outside
the tree, where no command can write), and every command gets a new tree copied from it. Not
only what changed is put back: a file's content, mode and kind are what the digest sees, but
a command can also leave what a later one reads in what the digest does not see (modification
times, extended attributes, the order of a directory's entries). The red team's candidates kept
the benchmark's answers, computed once during the untimed gate, in the modification times of
the project's files and in an extended attribute of `tests/`; every benchmark run found them
and the OS "confirmed" the speed-up. A new copy has the pristine copy's content, modes, links
and modification times (so builds and bytecode caches stay valid), no extended attribute,
new files and entries made in one order. A watched file (tracked at base outside the editable
scope, or from the holdout) that changed is remembered with the command during which it
changed: the judge rejects a candidate that changed one the baseline's commands left alone.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from optarena.files import copy_entry, entries_under, remove_tree

_CHUNK = 1 << 20


def entry_digest(path: Path, size: int | None = None) -> str:
    """Kind, mode and content of one entry, links not followed. `size`: read the content only
    if the file is that size (the size of what it is compared with), else say only its size:
    a candidate's sparse file of 16 TiB costs it no disk and costs a reader of every byte about
    20 hours (red team, 2026-12-06: a 32 GiB one held a judgement for 316 s)."""
    st = path.lstat()
    mode = stat.S_IMODE(st.st_mode)
    if stat.S_ISLNK(st.st_mode):
        return f"link:{os.readlink(path)}"
    if stat.S_ISDIR(st.st_mode):
        return f"dir:{mode:o}"
    if not stat.S_ISREG(st.st_mode):
        return f"special:{stat.S_IFMT(st.st_mode):o}"
    if size is not None and st.st_size != size:
        return f"file:{mode:o}:{st.st_size}:unread"
    h = hashlib.blake2b(digest_size=20)
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return f"file:{mode:o}:{st.st_size}:{h.hexdigest()}"


def _file_size(digest: str | None) -> int:
    """The size a sealed file digest names; -1 (no file is that size) for anything else."""
    if digest is None or not digest.startswith("file:"):
        return -1
    return int(digest.split(":")[2])


def tree_digests(root: Path, like: dict[str, str] | None = None) -> dict[str, str]:
    """Every entry under `root` (relative path -> kind, mode and content), links not followed,
    however deep the candidate's commands nested it (`entries_under` does not recurse).
    `like`: the digests it is compared with; a file is read only where it is the size of the
    file `like` has at its path (so never more than the sealed tree's bytes)."""
    out: dict[str, str] = {}
    for p in entries_under(root):
        rel = p.relative_to(root).as_posix()
        try:
            out[rel] = entry_digest(p, None if like is None else _file_size(like.get(rel)))
        except OSError as err:  # a path past PATH_MAX: new, so removed with its top
            out[rel] = f"unreadable:{err.errno}"
    return out


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        remove_tree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def copy_over(src: Path, tree: Path, skip: Iterable[str] = ()) -> list[str]:
    """Copy every entry of `src` over `tree` (links copied as links), never through an entry
    `tree` holds: the judge writes as its own user, and a candidate's patch can put a symlink
    where a copied path goes (`tests -> /etc`, or an editable file linked to one of the judge's
    own), which a plain copy would follow. What is in the way is removed, as if `tree` were
    empty there. `skip`: top-level names not copied. Returns the files copied."""
    copied: list[str] = []
    for dirpath, dirnames, filenames in os.walk(src, followlinks=False):
        here = Path(dirpath)
        rel = here.relative_to(src)
        if not rel.parts:
            dirnames[:] = [n for n in dirnames if n not in skip]
            filenames = [n for n in filenames if n not in skip]
        dest_dir = tree / rel  # a real directory: made so one level up, or `tree` itself
        for name in sorted((*dirnames, *filenames)):
            s, d = here / name, dest_dir / name
            if s.is_dir() and not s.is_symlink():
                if not d.is_dir() or d.is_symlink():
                    _remove(d)
                    d.mkdir()
            else:
                _remove(d)
                copy_entry(s, d)
            if not s.is_dir() or s.is_symlink():
                copied.append((rel / name).as_posix())
    return copied


# How much more a candidate's prepared tree may hold than the baseline's, in bytes (a sparse
# file counting in full) and entries: the judge reads and copies it before every command.
EXTRA_BYTES = 256 << 20
EXTRA_ENTRIES = 100_000


@dataclass(frozen=True)
class TreeSize:
    bytes: int  # apparent: a sparse file counts in full
    entries: int

    @classmethod
    def of(cls, root: Path) -> TreeSize:
        """At any depth (`survey` stops at 64 levels, and a red-team set-up put a sparse
        600 MiB file and 20,000 entries below 70, which the seal's copy then filled in)."""
        size = entries = 0
        for p in entries_under(root):
            entries += 1
            with contextlib.suppress(OSError):  # a path past PATH_MAX: an entry all the same
                st = p.lstat()
                size += st.st_size if stat.S_ISREG(st.st_mode) else 0
        return cls(size, entries)

    def beyond(self, baseline: TreeSize) -> str | None:
        """Why this (a candidate's) tree is too large beside the baseline's, or None."""
        cap = TreeSize(2 * baseline.bytes + EXTRA_BYTES, 2 * baseline.entries + EXTRA_ENTRIES)
        mib = 1 << 20
        if self.bytes > cap.bytes:
            return (
                f"left {self.bytes / mib:,.0f} MiB of files in the tree (a sparse file counts "
                f"in full), more than {cap.bytes / mib:,.0f} MiB (twice the baseline's "
                f"{baseline.bytes / mib:,.0f} MiB, plus 256): the judge reads and copies the "
                "tree before every command"
            )
        if self.entries > cap.entries:
            return (
                f"left {self.entries:,} entries in the tree, more than {cap.entries:,} (twice "
                f"the baseline's {baseline.entries:,}, plus 100,000): the judge reads and "
                "copies the tree before every command"
            )
        return None


@dataclass
class SealedTree:
    """A prepared worktree, its digests and a pristine copy; see the module docstring."""

    tree: Path
    pristine: Path
    digests: dict[str, str]
    watched: frozenset[str]
    changed: dict[str, str] = field(default_factory=dict)  # watched path -> during which command

    @classmethod
    def seal(
        cls,
        tree: Path,
        pristine: Path,
        watched: Iterable[str],
        before: dict[str, str] | None = None,
        during: str = "set-up",
    ) -> SealedTree:
        """Seal `tree` as it is now. `before`: the digests taken before set-up, so a watched
        file the set-up changed is remembered too (and then kept: it is the set-up's output).
        FIFOs, sockets and devices are removed first: copying a FIFO would block the judge."""
        digests = tree_digests(tree)
        for path, digest in list(digests.items()):
            if digest.startswith("special:"):
                (tree / path).unlink()
                del digests[path]
        fresh_copy(tree, pristine)
        remove_tree(tree)
        fresh_copy(pristine, tree)  # the first command's tree is the judge's copy too
        # the copies hold what was digested (content, modes, links): the tree is read once
        sealed = cls(tree, pristine, digests, frozenset(watched))
        if before is not None:
            sealed._note(before, sealed.digests, during)
        return sealed

    def _note(self, was: dict[str, str], now: dict[str, str], during: str) -> None:
        for path in self.watched:
            if was.get(path) != now.get(path):
                self.changed.setdefault(path, during)

    def restore(self, after: str) -> list[str]:
        """Make the tree a new copy of the sealed one; `after`: the command that ran since.
        Returns the paths whose kind, mode or content it had changed (or that it added)."""
        now = tree_digests(self.tree, like=self.digests)
        self._note(self.digests, now, after)
        was = self.digests
        touched = sorted(p for p in set(now) | set(was) if now.get(p) != was.get(p))
        remove_tree(self.tree)
        fresh_copy(self.pristine, self.tree)
        return touched


def fresh_copy(src: Path, dest: Path) -> None:
    """Copy the tree `src` to `dest` (made here): files' content, modes and modification
    times, links as links; never an extended attribute, a file or a directory's entry order
    of `src` itself (see the module docstring). FIFOs and other special files are left out."""
    made: list[tuple[Path, os.stat_result]] = []
    dest.parent.mkdir(parents=True, exist_ok=True)
    for dirpath, dirnames, filenames in os.walk(src, followlinks=False):
        dirnames.sort()
        here = Path(dirpath)
        out = dest / here.relative_to(src)
        out.mkdir(mode=0o700)
        made.append((out, here.lstat()))
        for name in sorted((*dirnames, *filenames)):
            s, d = here / name, out / name
            st = s.lstat()
            if stat.S_ISLNK(st.st_mode):
                os.symlink(os.readlink(s), d)
            elif stat.S_ISREG(st.st_mode):
                shutil.copyfile(s, d, follow_symlinks=False)
                os.chmod(d, stat.S_IMODE(st.st_mode))
                os.utime(d, ns=(st.st_atime_ns, st.st_mtime_ns))
    for out, st in reversed(made):  # deepest first: a read-only directory is filled by now
        os.chmod(out, stat.S_IMODE(st.st_mode))
        os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))
