"""Files and trees an agent or a candidate wrote: read, copied, surveyed, handed back and
removed without following anything they made.

Reading: optarena reads what the agent left (its workspace, the logs directory a command agent
may write, a usage file, harness artifacts) as its own user, root typically, and sometimes
while the agent still runs (the task tools judge the workspace mid-trial). A plain `open` or
copy follows a link the agent planted (`stdout.log -> /root/.ssh/id_rsa`), or one it renames
over a file between a look and a read, and reads what the link names with optarena's rights.
Here a path below a directory optarena chose is opened one component at a time through the
descriptor of its parent with `O_NOFOLLOW`, and what was opened is checked with `fstat` on the
descriptor (against the `lstat` that listed it, when walking), so what is read is what was
checked. Only regular files are read: links, FIFOs (an open would block), sockets and devices
are refused, whenever they appear, and so is a hard link to a file others may not read (where
the kernel allows linking such a file, a link is another way to name it). Anything nested
deeper than `MAX_DEPTH` directories is left out.

Surveying (`survey`): the size (apparent and on disk), the number of entries and what in a tree
optarena would refuse to read, bounded by an entry limit, before git or a copy touches it.

Handing back, removing: such a tree may nest directories past Python's recursion limit and
past PATH_MAX, where `os.walk`, `Path.rglob`, `shutil.rmtree` and path-based calls fail;
`lchown_tree` and `remove_tree` work at any depth, and `entries_under` does not recurse.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import subprocess
import tempfile
import unicodedata
from collections.abc import Callable, Container, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Literal

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # a FIFO does not block
_CHUNK = 1 << 20
MAX_DEPTH = 64  # deeper directories are left out: each level holds a descriptor and a frame
PATH_MAX = 4096  # Linux: a longer path cannot be named in one call (git, most tools)


class UntrustedFileError(OSError):
    """A path an agent or candidate could have written that optarena will not read, and why."""


def kind_of(mode: int) -> str:
    """What a file mode is, in words (for the reasons a read was refused)."""
    kinds = (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    )
    return next((name for test, name in kinds if test(mode)), "a regular file")


def refusal(st: os.stat_result) -> str | None:
    """Why optarena will not read the entry `st` describes (None: a file it may read)."""
    if not stat.S_ISREG(st.st_mode):
        return kind_of(st.st_mode)
    if st.st_nlink > 1 and not st.st_mode & stat.S_IROTH:
        return f"a hard link ({st.st_nlink} names) to a file others may not read"
    return None


def name_line(name: str) -> str:
    """A name an agent chose (as the OS gave it: bytes that are not UTF-8 as surrogates), as
    one line of text any record can store and any terminal can show: each such byte as
    `\\xNN`, each control, format (bidi override, zero-width), line-separator or lone
    surrogate character as `\\xNN` / `\\uNNNN`, a backslash doubled (so one shown name
    stands for one name). A newline or U+202E in a file name cannot forge a line."""
    return "".join("\\\\" if c == "\\" else _escaped(c) for c in name)


def printable(text: str) -> str:
    """Text an agent or candidate wrote (a message, a reason, a log tail), with the characters
    `name_line` escapes escaped the same way, except newline and tab (it may span lines)."""
    return "".join(c if c in "\n\t" else _escaped(c) for c in text)


def _escaped(c: str) -> str:
    o = ord(c)
    if 0xDC80 <= o <= 0xDCFF:  # a byte that was not UTF-8 (surrogateescape)
        return f"\\x{o - 0xDC00:02x}"
    if o < 0x7F and c.isprintable():
        return c
    if unicodedata.category(c) not in _HIDDEN:
        return c
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}"


_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})  # act, reorder or show nothing


def is_utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def open_untrusted(path: Path, base: Path | None = None) -> BinaryIO:
    """`path`, a regular file, opened for reading without following a link anywhere below
    `base` (a directory optarena chose, default `path`'s parent: its own path is trusted).
    Raises UntrustedFileError naming the path and why, or OSError when it cannot be opened."""
    base = path.parent if base is None else base
    parts = path.relative_to(base).parts
    if not parts:
        raise UntrustedFileError(f"{path}: not a file below {base}")
    fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            try:
                nxt = os.open(part, _FILE if last else _DIR, dir_fd=fd)
            except OSError as e:  # a link (ELOOP), a file as a directory, a socket (ENXIO)
                if e.errno == errno.ENOENT:
                    raise
                st = os.stat(part, dir_fd=fd, follow_symlinks=False)
                if stat.S_ISREG(st.st_mode) and last:
                    raise
                raise UntrustedFileError(
                    f"{path}: {'/'.join(parts[: i + 1])} is {kind_of(st.st_mode)}"
                ) from None
            os.close(fd)
            fd = nxt
        why = refusal(os.fstat(fd))
        if why is not None:
            raise UntrustedFileError(f"{path}: is {why}")
        f = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    return f


def read_untrusted(path: Path, limit: int, base: Path | None = None) -> bytes:
    """The bytes of `path`, opened as `open_untrusted` does, at most `limit` of them (a larger
    file raises UntrustedFileError: the agent chose its size)."""
    with open_untrusted(path, base) as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise UntrustedFileError(f"{path}: larger than {limit} bytes")
    return data


@dataclass(frozen=True)
class Entry:
    """One entry of a tree being walked (`walk_untrusted`), as `lstat` saw it."""

    rel: str  # '/'-separated path below the root (undecodable bytes as surrogates)
    st: os.stat_result
    too_deep: bool  # a directory below MAX_DEPTH levels: listed, never entered
    _dir_fd: int = field(repr=False)
    _name: str = field(repr=False)

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.st.st_mode)

    def open(self) -> BinaryIO | None:
        """The entry, opened without following a link, if it is still the plain file that was
        listed (same inode); None otherwise. Valid only while the walk is at this entry."""
        if refusal(self.st) is not None:
            return None
        try:
            fd = os.open(self._name, _FILE, dir_fd=self._dir_fd)
        except OSError:
            return None  # a link (ELOOP) swapped in, or gone
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != (self.st.st_dev, self.st.st_ino) or refusal(st):
            os.close(fd)
            return None
        return os.fdopen(fd, "rb")

    def readlink(self) -> str:
        """A link's target, as text (never followed)."""
        return os.readlink(self._name, dir_fd=self._dir_fd)

    def remove(self) -> None:
        """Remove the entry (a directory with all it holds, however deep), never following
        a link; gone already is fine."""
        if not self.is_dir:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._name, dir_fd=self._dir_fd)
            return
        try:
            shutil.rmtree(self._name, dir_fd=self._dir_fd)  # through descriptors
        except FileNotFoundError:
            pass
        except (RecursionError, OSError):  # rm works at any depth (the descriptor's path)
            where = f"/proc/self/fd/{self._dir_fd}/{self._name}"
            rm = ["rm", "-rf", "--", where]
            subprocess.run(rm, check=False, timeout=600, pass_fds=(self._dir_fd,))

    def lchown(self, uid: int, gid: int) -> None:
        """Change the entry's owner (a link's own, never its target's)."""
        with contextlib.suppress(FileNotFoundError):
            os.chown(self._name, uid, gid, dir_fd=self._dir_fd, follow_symlinks=False)


@dataclass
class Walk:
    """How far a walk got: `truncated` once `max_entries` were listed (the rest never was)."""

    entries: int = 0
    truncated: bool = False


def walk_untrusted(
    root: Path,
    *,
    skip: Container[str] = (),
    max_depth: int = MAX_DEPTH,
    max_entries: int | None = None,
    progress: Walk | None = None,
    enter: Callable[[Entry], bool] | None = None,
) -> Iterator[Entry]:
    """Every entry under `root` (sorted per directory, parents before children), each
    directory entered through its parent's descriptor without following a link; names in
    `skip` are left out at any depth; directories deeper than `max_depth` are listed with
    `too_deep`, not entered, and so are those `enter` refuses (asked once the directory's
    entry was yielded). At most `max_entries` are listed (`progress.truncated` says so)."""
    walk = progress if progress is not None else Walk()
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield from _walk(fd, "", 0, (skip, max_depth, max_entries, enter), walk)
    finally:
        os.close(fd)


_How = tuple[Container[str], int, int | None, Callable[[Entry], bool] | None]


def _walk(dfd: int, prefix: str, depth: int, how: _How, walk: Walk) -> Iterator[Entry]:
    skip, max_depth, max_entries, enter = how
    for name in _listing(dfd, skip, max_entries, walk):
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except OSError:
            continue  # gone meanwhile
        rel = prefix + name
        entry = Entry(rel, st, stat.S_ISDIR(st.st_mode) and depth >= max_depth, dfd, name)
        yield entry
        if not entry.is_dir or entry.too_deep or (enter is not None and not enter(entry)):
            continue
        try:
            sub = os.open(name, _DIR, dir_fd=dfd)  # fails on a link swapped in since
        except OSError:
            continue
        try:
            now = os.fstat(sub)
            if (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino):
                yield from _walk(sub, f"{rel}/", depth + 1, how, walk)
        finally:
            os.close(sub)


def _listing(dfd: int, skip: Container[str], max_entries: int | None, walk: Walk) -> list[str]:
    """A directory's names, sorted, counted against the walk's entry limit (read lazily, so a
    directory of millions of names costs no more than the limit)."""
    names: list[str] = []
    if walk.truncated:
        return names
    try:
        with os.scandir(dfd) as it:
            for e in it:
                if e.name in skip:
                    continue
                if max_entries is not None and walk.entries >= max_entries:
                    walk.truncated = True
                    break
                walk.entries += 1
                names.append(e.name)
    except OSError:
        pass
    return sorted(names)


def copy_untrusted(
    src: Path,
    dest: Path,
    *,
    skip: Container[str] = (),
    want: Callable[[str], bool] | None = None,
    max_bytes: int | None = None,
) -> list[str]:
    """Copy the plain files under `src` into `dest` (created), as described above. `skip`:
    names of entries left out at any depth (`.git`); `want`: which relative file paths to copy
    (all by default); `max_bytes`: more bytes than that raise UntrustedFileError (a sparse file
    of terabytes costs the agent nothing and its copy a disk). Returns the paths copied."""
    copied: list[str] = []
    left = max_bytes
    dest.mkdir(parents=True, exist_ok=True)
    for entry in walk_untrusted(src, skip=skip):
        if entry.is_dir or (want is not None and not want(entry.rel)):
            continue
        f = entry.open()
        if f is None:
            continue
        target = dest / entry.rel
        target.parent.mkdir(parents=True, exist_ok=True)
        with f, open(target, "wb") as out:
            while chunk := f.read(_CHUNK if left is None else min(_CHUNK, left + 1)):
                if left is not None:
                    left -= len(chunk)
                    if left < 0:
                        raise UntrustedFileError(f"{src}: more than {max_bytes} bytes to copy")
                out.write(chunk)
        os.chmod(target, stat.S_IMODE(entry.st.st_mode) & 0o755)
        copied.append(entry.rel)
    return sorted(copied)


Problem = Literal["special_file", "hard_link", "undecodable_name", "nested_too_deep"]


@dataclass(frozen=True)
class SurveyFinding:
    """An entry of a surveyed tree that optarena will not read or cannot name."""

    rel: str  # as `name_text`
    problem: Problem
    why: str


@dataclass
class Survey:
    """What a tree holds, as `survey` found it."""

    apparent_bytes: int = 0  # the sizes of its files (a sparse file counts in full)
    disk_bytes: int = 0  # the blocks allocated to every entry
    entries: int = 0
    truncated: bool = False  # the entry limit stopped the survey: the rest was not seen
    findings: list[SurveyFinding] = field(default_factory=list)


def survey(
    root: Path, *, skip: Container[str] = (), max_entries: int, max_findings: int = 20
) -> Survey:
    """Sizes, entry count and what optarena would refuse to read under `root`, listing at
    most `max_entries` entries and `max_findings` findings, without opening any file."""
    out = Survey()
    walk = Walk()
    room = PATH_MAX - len(os.fsencode(root.absolute())) - 2
    for e in walk_untrusted(root, skip=skip, max_entries=max_entries, progress=walk):
        out.disk_bytes += e.st.st_blocks * 512
        if stat.S_ISREG(e.st.st_mode):
            out.apparent_bytes += e.st.st_size
        found = _finding(e, room)
        if found is not None and len(out.findings) < max_findings:
            out.findings.append(found)
    out.entries, out.truncated = walk.entries, walk.truncated
    return out


def _finding(e: Entry, room: int) -> SurveyFinding | None:
    rel = name_line(e.rel)
    if not is_utf8(e.rel.rsplit("/", 1)[-1]):
        return SurveyFinding(rel, "undecodable_name", "a name that is not UTF-8")
    if e.too_deep:
        return SurveyFinding(rel, "nested_too_deep", f"a directory nested deeper than {MAX_DEPTH}")
    parent = e.rel.rpartition("/")[0]
    if len(os.fsencode(e.rel)) > room >= len(os.fsencode(parent)):  # once, where it starts
        return SurveyFinding(rel, "nested_too_deep", f"a path longer than {PATH_MAX} bytes")
    if e.is_dir or stat.S_ISLNK(e.st.st_mode):
        return None
    why = refusal(e.st)
    if why is None:
        return None
    return SurveyFinding(
        rel, "special_file" if not stat.S_ISREG(e.st.st_mode) else "hard_link", why
    )


def entries_under(root: Path, enter: Callable[[Path], bool] | None = None) -> Iterator[Path]:
    """Every entry under `root` (links listed, never followed), walked with a stack: an agent
    or a candidate may nest directories past Python's recursion limit, where `os.walk`,
    `Path.rglob` and `shutil.rmtree` raise RecursionError. Unreadable directories, and those
    `enter` refuses, are listed, not entered. Path-based: for trees optarena checked first."""
    stack = [root]
    while stack:
        here = stack.pop()
        try:
            with os.scandir(here) as it:
                entries = list(it)
        except OSError:
            continue
        for e in entries:
            yield Path(e.path)
            with contextlib.suppress(OSError):
                if e.is_dir(follow_symlinks=False) and (enter is None or enter(Path(e.path))):
                    stack.append(Path(e.path))


def lchown_tree(root: Path, uid: int, gid: int, *, owner: int | None = None) -> None:
    """`lchown` everything under `root` and `root` itself, never through a link; with `owner`,
    only what that uid owns (handing a tree back from an agent's uid must not take a file it
    hard-linked from someone else). Through descriptors to `MAX_DEPTH`; a tree nested deeper
    is handed to coreutils' `chown -R`, which works at any depth."""
    deeper = False
    for e in walk_untrusted(root):
        deeper = deeper or e.too_deep
        if owner is None or e.st.st_uid == owner:
            e.lchown(uid, gid)
    if deeper:
        since = [f"--from={owner}"] if owner is not None else []
        cmd = ["chown", "-R", "-h", "-P", *since, f"{uid}:{gid}", "--", str(root)]
        subprocess.run(cmd, check=True, timeout=600, capture_output=True)
    if owner is None or os.lstat(root).st_uid == owner:
        os.lchown(root, uid, gid)


def copy_entry(src: Path, dest: Path) -> None:
    """Copy a file, a link or a directory with links kept as links (never read through)."""
    if src.is_symlink():
        os.symlink(os.readlink(src), dest)
    elif src.is_dir():
        shutil.copytree(src, dest, symlinks=True)
    else:
        shutil.copy2(src, dest, follow_symlinks=False)


@contextlib.contextmanager
def temporary_tree(prefix: str) -> Iterator[Path]:
    """A private temporary directory for trees a candidate writes into, removed however deep
    they nest (`tempfile.TemporaryDirectory` removes with `shutil.rmtree`, which raised
    RecursionError on a candidate's 3,000-deep directory and left the judge's files behind)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        remove_tree(path)


def remove_tree(path: Path) -> None:
    """Remove a directory an agent or candidate wrote, however deep it nests."""
    try:
        shutil.rmtree(path)
    except (RecursionError, OSError):  # rm works at any depth and past PATH_MAX
        subprocess.run(["rm", "-rf", "--", str(path)], check=False, timeout=600)
