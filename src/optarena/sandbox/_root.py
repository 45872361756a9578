"""A default-deny root: a fresh, empty filesystem holding only the paths a sandbox was given.

Hiding a list of paths (`_mounts.Mask`) leaves everything else visible, and whatever the list
forgot stays readable: a source repository under a home directory, another ledger, a second
mount of the same disk named in /proc/self/mountinfo, a hard link to a hidden file, a Unix
socket in a directory nobody thought of. Here the sandbox starts from nothing instead: an empty
tmpfs becomes the root (pivot_root, the old root detached), and only the named paths are bound
into it at their own places, read-only unless named writable. A path that is not named does
not exist inside, whatever its permissions, links or sockets.

`plan_root` runs in the parent: it follows every symlink on the way to a named path (so that
`/bin -> usr/bin` or a PATH entry under a linked directory resolves the same inside) and says
what to bind, link, mask and mount. `enter_root` runs in the forked child, in a new mount
namespace, before the uid is dropped.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from optarena.sandbox import _linux

EntryKind = Literal["bind", "link", "scratch", "empty", "null", "dir"]
_MAX_LINKS = 40  # symlinks followed on the way to one path (the kernel's own limit)
_STAGE = "/tmp"  # where the new root is assembled before the pivot (its old content is held)
OLD_ROOT = "/.old-root"  # where the old root waits, inside the new one, to be detached


@dataclass(frozen=True)
class RootEntry:
    """One thing at `path` in the new root.

    - `bind`: the host's `source` (a real path), read-only unless `writable`;
    - `link`: a symlink to `source`, as on the host;
    - `scratch`: a fresh world-writable tmpfs; `empty`: a fresh read-only, empty tmpfs (a
      hidden directory inside a bound one); `null`: /dev/null bound over a hidden file;
    - `dir`: an empty directory (where /proc is mounted later).
    """

    path: str
    kind: EntryKind
    source: str = ""
    writable: bool = False

    @property
    def depth(self) -> int:
        return 0 if self.path == "/" else self.path.count("/")


@dataclass(frozen=True)
class RootPlan:
    """Every entry of the new root, outermost first (a path is placed after its parents)."""

    entries: tuple[RootEntry, ...]

    def paths(self, *kinds: EntryKind) -> list[str]:
        return [e.path for e in self.entries if e.kind in kinds]


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def resolve(path: str, links: dict[str, str] | None = None) -> str | None:
    """`path` with every symlink on the way replaced by its target, or None when it does not
    exist. Each link met is recorded in `links` (its path -> its target, as written), so the
    new root can hold the same link where a program will look for it."""
    links = {} if links is None else links
    todo = os.path.normpath(path)
    for _ in range(_MAX_LINKS):
        parts = [p for p in todo.split("/") if p]
        cur = "/"
        for i, part in enumerate(parts):
            nxt = os.path.join(cur, part)
            try:
                st = os.lstat(nxt)
            except OSError:
                return None
            if stat.S_ISLNK(st.st_mode):
                try:
                    target = os.readlink(nxt)
                except OSError:
                    return None
                links[nxt] = target
                todo = os.path.normpath(os.path.join(cur, target, *parts[i + 1 :]))
                break
            cur = nxt
        else:
            return cur
    return None


def _covered(path: str, writable: bool, binds: dict[str, bool], masks: Iterable[str]) -> bool:
    """Whether another bind already shows `path` as it would be shown: an outer bind, at
    least as writable, with no mask in between."""
    for outer, outer_writable in binds.items():
        if outer == path or not _under(path, outer) or outer_writable < writable:
            continue
        if not any(_under(m, outer) and m != outer and _under(path, m) for m in masks):
            return True
    return False


def plan_root(
    read: Iterable[str],
    write: Iterable[str] = (),
    scratch: Iterable[str] = (),
    hide: Iterable[str] = (),
    dirs: Iterable[str] = (),
    links: Mapping[str, str] | None = None,
) -> RootPlan:
    """What the new root holds: `read` and `write` bound (write wins where both name a path),
    `scratch` as private tmpfs, `hide` emptied where it lies inside something bound (a bound
    path is never hidden: naming it is needing it), `dirs` as empty directories, `links` as
    symlinks (path -> target, never resolved here: `/dev/fd -> /proc/self/fd` must name the
    reader's own process, not the planner's). Paths that do not exist are left out; every
    symlink on the way to one is recreated."""
    followed: dict[str, str] = {}
    binds: dict[str, bool] = {}

    def place(path: str) -> str | None:
        met: dict[str, str] = {}
        real = resolve(path, met)
        if real is None or real == "/":
            return None
        followed.update(met)  # the links to a path that is not there are not recreated either
        return real

    for writable, paths in ((True, write), (False, read)):
        for p in paths:
            if (real := place(p)) is not None:
                binds[real] = binds.get(real, False) or writable
    scratch_real = {r for s in scratch if (r := place(s)) is not None}
    for s in scratch_real:
        binds.pop(s, None)  # a scratch directory is private: the host's own never shows
    masks: dict[str, EntryKind] = {}
    for h in hide:
        real = resolve(h)  # the links to a hidden path need not be recreated
        if real is None or real in binds or real in scratch_real:
            continue
        if any(_under(real, b) for b in binds):
            masks[real] = "empty" if os.path.isdir(real) else "null"
    entries = [RootEntry(p, kind) for p, kind in masks.items()]
    entries += [RootEntry(s, "scratch") for s in scratch_real]
    entries += [
        RootEntry(p, "bind", p, w) for p, w in binds.items() if not _covered(p, w, binds, masks)
    ]
    followed = {**followed, **(links or {})}
    entries += [RootEntry(p, "link", t) for p, t in followed.items() if not _shown(p, binds)]
    entries += [RootEntry(d, "dir") for d in dirs]
    order = {"link": 0, "dir": 0, "bind": 1, "empty": 2, "null": 2, "scratch": 2}
    entries.sort(key=lambda e: (e.depth, order[e.kind], e.path))
    return RootPlan(tuple(entries))


def _shown(path: str, binds: dict[str, bool]) -> bool:
    """A link inside a bound directory is there already (as the host has it)."""
    return any(_under(path, b) and path != b for b in binds)


# --- in the forked child ---------------------------------------------------------------

_MOUNT_FLAGS = {
    "nosuid": _linux.MS_NOSUID,
    "nodev": _linux.MS_NODEV,
    "noexec": _linux.MS_NOEXEC,
    "noatime": _linux.MS_NOATIME,
    "nodiratime": _linux.MS_NODIRATIME,
    "relatime": _linux.MS_RELATIME,
    "strictatime": _linux.MS_STRICTATIME,
}


def _unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash in paths as octal escapes."""
    out, i = [], 0
    while i < len(field):
        code = field[i + 1 : i + 4]
        if field[i] == "\\" and len(code) == 3 and code.isdigit():
            out.append(chr(int(code, 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def mount_points(text: str) -> list[tuple[str, int]]:
    """(mount point, flags to keep on a read-only remount) of each line of a mountinfo text,
    outermost first. The flags kept are the per-mount ones the kernel locks inside a user
    namespace (a remount that dropped a locked nosuid would fail there)."""
    out: list[tuple[str, int]] = []
    for line in text.splitlines():
        fields = line.split(" - ", 1)[0].split()
        if len(fields) < 6:
            continue
        flags = 0
        for opt in fields[5].split(","):
            flags |= _MOUNT_FLAGS.get(opt, 0)
        out.append((_unescape(fields[4]), flags))
    return out


def _mounts_with_flags() -> list[tuple[str, int]]:
    """(mount point, per-mount MS_* flags) of every mount in this namespace, outermost first."""
    with open("/proc/self/mountinfo") as f:
        return mount_points(f.read())


def make_readonly(path: str) -> None:
    """Every mount at or below `path` read-only: one mount_setattr(2), else one remount each
    (keeping the flags a user namespace locks)."""
    try:
        _linux.mount_setattr(path, set_flags=_linux.MOUNT_ATTR_RDONLY, recursive=True)
        return
    except OSError as e:
        if e.errno not in (errno.ENOSYS, errno.EINVAL, errno.EPERM):
            raise
    for point, flags in _mounts_with_flags():
        if _under(point, path):
            remount = _linux.MS_REMOUNT | _linux.MS_BIND | _linux.MS_RDONLY | flags
            with contextlib.suppress(FileNotFoundError):
                _linux.mount(None, point, None, remount)


def _placeholder(target: str, is_dir: bool) -> None:
    if os.path.lexists(target):
        return
    os.makedirs(os.path.dirname(target), exist_ok=True)
    if is_dir:
        os.mkdir(target)
    else:
        os.close(os.open(target, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644))


def _hold(entries: Sequence[RootEntry]) -> dict[str, tuple[int, bool]]:
    """O_PATH descriptors of every bind source (and /dev/null for `null`), opened before the
    stage is mounted over /tmp: a source under /tmp stays reachable through its descriptor."""
    held: dict[str, tuple[int, bool]] = {}
    for e in entries:
        source = "/dev/null" if e.kind == "null" else e.source
        if e.kind not in ("bind", "null") or source in held:
            continue
        try:
            fd = os.open(source, os.O_PATH | os.O_CLOEXEC)
        except FileNotFoundError:
            if e.writable:
                raise
            continue  # gone since the plan was made: simply not there
        held[source] = (fd, stat.S_ISDIR(os.fstat(fd).st_mode))
    return held


def _place(stage: str, e: RootEntry, held: dict[str, tuple[int, bool]], scratch_mb: int) -> None:
    target = stage + e.path
    flags = _linux.MS_NOSUID | _linux.MS_NODEV
    if e.kind == "link":
        if not os.path.lexists(target):
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.symlink(e.source, target)
    elif e.kind == "dir":
        os.makedirs(target, exist_ok=True)
    elif e.kind in ("bind", "null"):
        source = "/dev/null" if e.kind == "null" else e.source
        if source not in held or (e.kind == "null" and not os.path.lexists(target)):
            return  # gone since the plan was made: nothing to show, or nothing to hide
        fd, is_dir = held[source]
        _placeholder(target, is_dir)
        _linux.mount(f"/proc/self/fd/{fd}", target, None, _linux.MS_BIND | _linux.MS_REC)
        if not e.writable:
            make_readonly(target)
    else:  # scratch, empty
        if e.kind == "empty" and not os.path.isdir(target):
            return  # a hidden directory gone since the plan: nothing to hide
        os.makedirs(target, exist_ok=True)
        size, mode = (f"{scratch_mb}m", "1777") if e.kind == "scratch" else ("1m", "755")
        _linux.mount("tmpfs", target, "tmpfs", flags, f"mode={mode},size={size}")


def enter_root(plan: RootPlan, scratch_mb: int) -> None:
    """In the child, inside a fresh mount namespace: build the plan's root on a tmpfs and make
    it this namespace's root. The old root stays at `OLD_ROOT` until `leave_old_root`: inside
    a user namespace a fresh /proc may be mounted only while another procfs is visible in the
    namespace (and that mount waits for the PID namespace's fork)."""
    _linux.mount(None, "/", None, _linux.MS_REC | _linux.MS_PRIVATE)
    old_umask = os.umask(0o022)  # the placeholders: traversable by the sandbox's uid
    held = _hold(plan.entries)
    try:
        flags = _linux.MS_NOSUID | _linux.MS_NODEV
        _linux.mount("tmpfs", _STAGE, "tmpfs", flags, "mode=755,size=1m")
        for e in plan.entries:
            _place(_STAGE, e, held, scratch_mb)
        os.mkdir(_STAGE + OLD_ROOT, 0o700)
    finally:
        for fd, _ in held.values():
            os.close(fd)
        os.umask(old_umask)
    os.chdir(_STAGE)
    _linux.pivot_root(".", "." + OLD_ROOT)
    os.chdir("/")


def leave_old_root(plan: RootPlan) -> None:
    """Detach the old root (no path leads to it any more) and make the new root's own tmpfs
    mounts read-only. Once, after `enter_root` and any /proc mount."""
    _linux.umount2(OLD_ROOT, _linux.MNT_DETACH)
    os.rmdir(OLD_ROOT)
    ro = _linux.MS_REMOUNT | _linux.MS_RDONLY | _linux.MS_NOSUID | _linux.MS_NODEV
    _linux.mount(None, "/", None, ro)
    for path in plan.paths("empty"):
        with contextlib.suppress(FileNotFoundError):  # gone before `_place`: not mounted
            _linux.mount(None, path, None, ro)
