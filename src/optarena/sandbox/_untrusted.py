"""Trees an agent or a candidate wrote: copied, walked, handed back and removed safely.

Copying: optarena reads the agent's workspace as its own user (root, typically), often while
the agent still runs (the task tools judge the workspace mid-trial). A plain copy lists an
entry, then opens it by path: in between, the agent can rename a link over it (`solution.py
-> /root/.ssh/id_rsa`, or a directory link to the task package), and the copy reads what the
link names with optarena's rights; an import error's traceback then quotes a line of it back.
Here every directory and file is opened through the descriptor of its parent with
`O_NOFOLLOW`, and checked with `fstat` on the open descriptor, so what is read is what was
checked: links, FIFOs, sockets and devices are left out, whenever they appear, and so is
anything nested deeper than `MAX_DEPTH` directories.

Walking, handing back, removing: such a tree may nest directories past Python's recursion
limit, where `os.walk`, `Path.rglob`, `shutil.rmtree` and `copytree` raise RecursionError;
`entries_under`, `lchown_tree` and `remove_tree` do not recurse.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Callable, Container, Iterator
from pathlib import Path

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # a FIFO does not block
_CHUNK = 1 << 20
MAX_DEPTH = 64  # deeper directories are left out: each level holds a descriptor and a frame


def copy_untrusted(
    src: Path,
    dest: Path,
    *,
    skip: Container[str] = (),
    want: Callable[[str], bool] | None = None,
) -> list[str]:
    """Copy the plain files under `src` into `dest` (created), as described above. `skip`:
    names of entries left out at any depth (`.git`); `want`: which relative file paths to copy
    (all by default). Returns the relative paths copied, sorted."""
    copied: list[str] = []
    root = os.open(src, _DIR)
    try:
        dest.mkdir(parents=True, exist_ok=True)
        _copy_dir(root, "", dest, skip, want, copied)
    finally:
        os.close(root)
    return sorted(copied)


def _copy_dir(
    dfd: int,
    rel: str,
    out: Path,
    skip: Container[str],
    want: Callable[[str], bool] | None,
    copied: list[str],
) -> None:
    for name in sorted(os.listdir(dfd)):
        if name in skip:
            continue
        path = f"{rel}{name}"
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except OSError:
            continue  # gone meanwhile
        if stat.S_ISDIR(st.st_mode):
            if path.count("/") >= MAX_DEPTH:
                continue
            try:
                sub = os.open(name, _DIR, dir_fd=dfd)  # fails on a link swapped in since
            except OSError:
                continue
            try:
                _copy_dir(sub, f"{path}/", out / name, skip, want, copied)
            finally:
                os.close(sub)
        elif (
            stat.S_ISREG(st.st_mode)
            and (want is None or want(path))
            and _copy_file(dfd, name, out / name)
        ):
            copied.append(path)


def _copy_file(dfd: int, name: str, dest: Path) -> bool:
    try:
        fd = os.open(name, _FILE, dir_fd=dfd)
    except OSError:
        return False  # a link (ELOOP) or gone
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return False
        dest.parent.mkdir(parents=True, exist_ok=True)
        with open(dest, "wb") as f:
            while chunk := os.read(fd, _CHUNK):
                f.write(chunk)
        os.chmod(dest, stat.S_IMODE(st.st_mode) & 0o755)
        return True
    finally:
        os.close(fd)


def entries_under(root: Path, enter: Callable[[Path], bool] | None = None) -> Iterator[Path]:
    """Every entry under `root` (links listed, never followed), walked with a stack: an agent
    or a candidate may nest directories past Python's recursion limit, where `os.walk`,
    `Path.rglob` and `shutil.rmtree` raise RecursionError. Unreadable directories, and those
    `enter` refuses, are listed, not entered."""
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


def lchown_tree(root: Path, uid: int, gid: int) -> None:
    """`lchown` everything under `root` and `root` itself (never through a link)."""
    for path in entries_under(root):
        with contextlib.suppress(FileNotFoundError):
            os.lchown(path, uid, gid)
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
    except RecursionError:  # rm works at any depth
        subprocess.run(["rm", "-rf", "--", str(path)], check=False, timeout=600)
