"""A private view of the filesystem for the worker, built in its own mount namespace.

After the masks, `readonly_root` makes every mount read-only except the worker's working
directory and its scratch tmpfs, so nothing the candidate writes outlives it anywhere else;
`mount_proc` gives it a /proc that shows only its own PID namespace.

Three jobs, one primitive. A *mask* mounts an empty tmpfs over a directory and binds back, at
their old places, only the paths under it that the worker needs. It is used to

- hide the task package (oracle, generator) from the candidate;
- give the worker private scratch directories (`/tmp`, `/var/tmp`, `/dev/shm`), so nothing it
  writes there reaches the host or outlives the judgement;
- make the interpreter reachable for an unprivileged uid when it lives under a directory that
  uid may not traverse (e.g. a pyenv Python under a 0700 `/root`), without loosening any
  permission on the host: everything else under that directory stays invisible.

`plan_masks` is pure (tested on literal paths); `apply_masks` runs in the forked child.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from optarena.sandbox import _linux
from optarena.sandbox._root import RootPlan, _mounts_with_flags, plan_root

SCRATCH_DIRS = ("/tmp", "/var/tmp", "/dev/shm")
# A worker's root filesystem is read-only: every directory programs expect to write becomes
# private scratch (`/run/lock` too: world-writable on most distributions, and persistent).
WORKER_SCRATCH = (*SCRATCH_DIRS, "/run/lock")


@dataclass(frozen=True)
class Mask:
    """A fresh tmpfs at `path`; `keep` (absolute paths below it) are bound back in place."""

    path: str
    keep: tuple[str, ...] = ()
    scratch: bool = False  # world-writable (1777) rather than an empty read-only directory


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _ancestors(path: str) -> list[str]:
    """'/a/b/c' -> ['/', '/a', '/a/b'] (strict ancestors, outermost first)."""
    parts = path.strip("/").split("/")
    return ["/" + "/".join(parts[:i]) for i in range(len(parts))]


def may_traverse(st: os.stat_result, uid: int, gid: int) -> bool:
    """Whether (uid, gid) without supplementary groups may search a directory with this stat."""
    if uid == 0:
        return True
    if st.st_uid == uid:
        return bool(st.st_mode & stat.S_IXUSR)
    if st.st_gid == gid:
        return bool(st.st_mode & stat.S_IXGRP)
    return bool(st.st_mode & stat.S_IXOTH)


def blockers(needed: Iterable[str], uid: int, gid: int) -> dict[str, list[str]]:
    """For each directory the uid cannot traverse on the way to a needed path: those paths."""
    out: dict[str, list[str]] = {}
    for path in needed:
        for anc in _ancestors(path):
            try:
                st = os.stat(anc)
            except OSError:
                break
            if not may_traverse(st, uid, gid):
                out.setdefault(anc, []).append(path)
                break
    return out


def _outermost(paths: Iterable[str]) -> tuple[str, ...]:
    uniq = sorted(set(paths), key=lambda p: (p.count("/"), p))
    kept: list[str] = []
    for p in uniq:
        if not any(_under(p, k) for k in kept):
            kept.append(p)
    return tuple(kept)


def plan_masks(
    needed: Sequence[str],
    hide: Sequence[str],
    scratch: Sequence[str] = SCRATCH_DIRS,
    blocked: Iterable[str] = (),
) -> list[Mask]:
    """Masks for `hide`, `scratch` and `blocked` directories that keep every `needed` path.

    A directory inside another mask's hidden part needs no mask of its own (it is already
    gone); one inside a kept path is masked after the outer mask, so order is outermost first.
    """
    wanted: dict[str, bool] = {}
    for p in (*hide, *blocked):
        wanted[p] = False
    for p in scratch:
        wanted[p] = True
    masks: list[Mask] = []
    for path in sorted(wanted, key=lambda p: (p.count("/"), p)):
        if any(_under(path, m.path) and not any(_under(path, k) for k in m.keep) for m in masks):
            continue
        keep = _outermost(n for n in needed if _under(n, path) and n != path)
        if any(n == path for n in needed):
            continue  # never hide something the worker needs
        masks.append(Mask(path=path, keep=keep, scratch=wanted[path]))
    return masks


def _placeholder(path: str, is_dir: bool) -> None:
    if is_dir:
        os.makedirs(path, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "ab"):
            pass


def apply_masks(masks: Sequence[Mask], scratch_mb: int) -> None:
    """In the child, inside a fresh mount namespace: make mounts private, then mask."""
    _linux.mount(None, "/", None, _linux.MS_REC | _linux.MS_PRIVATE)
    for m in masks:
        if not os.path.isdir(m.path):
            continue
        held = [(k, os.open(k, os.O_PATH), os.path.isdir(k)) for k in m.keep if os.path.exists(k)]
        size = f"{scratch_mb}m" if m.scratch else "1m"
        mode = "1777" if m.scratch else "755"
        flags = _linux.MS_NOSUID | _linux.MS_NODEV
        _linux.mount("tmpfs", m.path, "tmpfs", flags, f"mode={mode},size={size}")
        for path, fd, is_dir in held:
            _placeholder(path, is_dir)
            _linux.mount(f"/proc/self/fd/{fd}", path, None, _linux.MS_BIND | _linux.MS_REC)
            os.close(fd)
        if not m.scratch:
            _linux.mount(None, m.path, None, _linux.MS_REMOUNT | _linux.MS_RDONLY | flags)


def _remount_each(readonly: bool, only: Sequence[str] | None = None) -> None:
    """The fallback before mount_setattr(2): remount mount by mount, keeping each one's other
    flags (a remount that dropped a locked nosuid would fail in a user namespace)."""
    for path, flags in _mounts_with_flags():
        if only is not None and path not in only:
            continue
        ro = _linux.MS_RDONLY if readonly else 0
        _linux.mount(None, path, None, _linux.MS_BIND | _linux.MS_REMOUNT | flags | ro)


def readonly_root(writable: Sequence[str]) -> None:
    """In the child, after the masks: every mount read-only except the `writable` directories
    (the working directory, bound onto itself so it is a mount of its own, and the scratch
    tmpfs mounts). Covers mounts below the root too (/dev, /sys, /run ...), not only '/'."""
    for path in writable:
        if not _is_mount_point(path):
            _linux.mount(path, path, None, _linux.MS_BIND | _linux.MS_REC)
    try:
        _linux.mount_setattr("/", set_flags=_linux.MOUNT_ATTR_RDONLY, recursive=True)
        for path in writable:
            _linux.mount_setattr(path, clear=_linux.MOUNT_ATTR_RDONLY, recursive=False)
    except OSError as e:
        if e.errno not in (errno.ENOSYS, errno.EINVAL):
            raise
        _remount_each(readonly=True)
        _remount_each(readonly=False, only=writable)


def _is_mount_point(path: str) -> bool:
    return any(p == path for p, _ in _mounts_with_flags())


def mount_proc(readonly: bool = False) -> None:
    """In the worker, inside its PID namespace: a fresh procfs over /proc, listing only the
    namespace's processes (the judge, the other arm and every other process disappear).

    `hidepid=2` also hides processes of other uids: the namespace's init, a root-owned copy of
    the judge's process, whose command line would otherwise be readable. `readonly`: no file of
    it opens for writing. The processes of one sandbox share a uid and are dumpable, so each
    could open another's `/proc/PID/mem` and write it (seccomp stops ptrace and
    process_vm_writev, not open): an external benchmark's candidate code, in a child of the
    benchmark's own script, set that script's loop counter to 1 and the OS then "confirmed" a
    speed-up of work never done (red team, 2026-12-06). A read-only mount refuses the open for
    writing (EROFS) whoever asks."""
    flags = _linux.MS_NOSUID | _linux.MS_NODEV | _linux.MS_NOEXEC
    flags |= _linux.MS_RDONLY if readonly else 0
    _linux.mount("proc", "/proc", "proc", flags, "hidepid=2")


# --- the default-deny view: what any sandbox's private root holds ---------------------------

# The system: programs, libraries and configuration. Homes, /opt, /srv, /mnt, /media, /var and
# /run are absent unless a path in them is named (a toolchain on PATH, the interpreter).
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
# What a program installed under PREFIX/bin reads beside it (a venv's pyvenv.cfg, a conda or
# node prefix's libraries); never PREFIX/share, which under ~/.local holds the default ledger.
PREFIX_PARTS = ("lib", "lib64", "libexec", "include", "pyvenv.cfg")
_LINKS_SCANNED = 4096  # entries of one PATH directory looked at for links out of it
# What programs open in /dev (pts: the pseudo-terminals behind ptmx), and the prefixes of a
# GPU's device nodes (nvidia0, nvidiactl, nvidia-uvm, nvidia-caps/; dri/ for others).
_ENTRIES_OPENED = 256  # entries of a closed directory bound one by one (see `opened_for`)
DEVICES = ("null", "zero", "full", "random", "urandom", "tty", "ptmx", "pts")
GPU_DEVICES = ("nvidia", "dri")
DEV_LINKS = {
    "/dev/fd": "/proc/self/fd",
    "/dev/stdin": "/proc/self/fd/0",
    "/dev/stdout": "/proc/self/fd/1",
    "/dev/stderr": "/proc/self/fd/2",
}


def _homes() -> set[str]:
    """Home directories: never shown whole because a PATH entry sits directly in one."""
    import pwd

    found = {os.path.expanduser("~"), "/root"}
    with contextlib.suppress(KeyError):
        found.add(pwd.getpwuid(os.getuid()).pw_dir)
    return {os.path.realpath(h) for h in found if h}


def _prefix_parts(bin_dir: str, homes: set[str]) -> list[str]:
    prefix = os.path.dirname(bin_dir)
    if prefix in ("/", *homes):
        return []
    return [
        os.path.join(prefix, p) for p in PREFIX_PARTS if os.path.lexists(os.path.join(prefix, p))
    ]


def _install_of(real: str, homes: set[str]) -> list[str]:
    """What a program at `real` reads besides itself: its directory, its prefix's libraries,
    and for an npm package the outermost `node_modules` it lives in."""
    parent = os.path.dirname(real)
    out = [parent]
    if os.path.basename(parent) in ("bin", "sbin"):
        out += _prefix_parts(parent, homes)
    parts = real.split("/")
    if "node_modules" in parts:
        out.append("/".join(parts[: parts.index("node_modules") + 1]))
    return out


def _links_out(directory: str, inside: Sequence[str]) -> list[str]:
    """Real paths of the links in `directory` that point outside `inside` (capped)."""
    out = []
    try:
        with os.scandir(directory) as it:
            for n, entry in enumerate(it):
                if n >= _LINKS_SCANNED:
                    break
                if entry.is_symlink():
                    real = os.path.realpath(entry.path)
                    if os.path.exists(real) and not any(_under(real, r) for r in inside):
                        out.append(real)
    except OSError:
        return []
    return out


def toolchain_paths(path_env: str) -> list[str]:
    """What programs on `path_env` (a PATH value) need beyond the system directories: each
    absolute PATH directory; for PREFIX/bin the prefix's libraries; for a version manager's
    `shims` the manager's root (pyenv's shims run `$PYENV_ROOT/libexec/pyenv`); rustup's home
    beside `~/.cargo/bin`; and where a PATH directory's links point (a CLI linked from
    `~/.local/bin` into its own installation). Relative entries are ignored: inside the
    sandbox they would name the agent's own directory, outside they could name anything."""
    homes = _homes()
    dirs = [d for d in path_env.split(":") if d.startswith("/") and os.path.isdir(d)]
    out: list[str] = []
    for d in dirs:
        if os.path.realpath(d) == "/":
            continue
        out.append(d)
        base = os.path.basename(d.rstrip("/"))
        if base in ("bin", "sbin"):
            out += _prefix_parts(d, homes)
        if base == "shims":
            out.append(os.path.dirname(d))
        if d.rstrip("/").endswith("/.cargo/bin"):
            rustup = os.environ.get("RUSTUP_HOME") or os.path.join(d, "..", "..", ".rustup")
            if os.path.isdir(rustup):
                out.append(os.path.normpath(rustup))
        real = os.path.realpath(d)
        if not any(_under(real, s) for s in SYSTEM_DIRS):
            for target in _links_out(real, [real, *SYSTEM_DIRS]):
                out += [target, *_install_of(target, homes)]
    return list(dict.fromkeys(out))


def opened_for(paths: Iterable[str], uid: int, depth: int = 4) -> list[str]:
    """`paths` as a private root should bind them for `uid`: a bound directory keeps its own
    mode, so one the uid may not search (a venv made by `mkdtemp`, 0700) would stop it at the
    door, while the ancestors of a bound path are placeholders anyone may pass. Such a
    directory is bound by its entries instead (its own place is then a placeholder), to
    `depth` levels and `_ENTRIES_OPENED` entries; past that it stays closed."""
    out: list[str] = []
    for p in paths:
        try:
            st = os.stat(p)
            closed = stat.S_ISDIR(st.st_mode) and not may_traverse(st, uid, uid)
            names = os.listdir(p) if closed and depth > 0 else []
        except OSError:
            closed, names = False, []
        if not closed or not names or len(names) > _ENTRIES_OPENED:
            out.append(p)
        else:
            out += opened_for([os.path.join(p, n) for n in sorted(names)], uid, depth - 1)
    return out


def device_paths(root: str = "/dev") -> list[str]:
    """The devices a sandbox shows, one by one: `DEVICES` and the GPU's (`GPU_DEVICES`, by
    prefix), where the host has them. Never the host's /dev as a whole: whatever appears there
    after the plan (a daemon's socket, a FIFO) would show inside, and /dev/kmsg reads the host's
    kernel log, other sandboxes' names and processes included."""
    try:
        names = os.listdir(root)
    except OSError:
        names = []
    gpu = sorted(n for n in names if n.startswith(GPU_DEVICES))
    return [f"{root}/{n}" for n in (*DEVICES, *gpu) if n in names]


def private_root(
    read: Sequence[str],
    write: Sequence[str],
    scratch: Sequence[str],
    hide: Sequence[str] = (),
    *,
    fresh_proc: bool,
    path_env: str,
    uid: int | None = None,
) -> RootPlan:
    """The default-deny root of a sandbox: the system directories, the toolchain on
    `path_env`, `read` (read-only) and `write`, private `scratch`, a /dev of its own (the
    devices of `device_paths` and the /proc/self/fd links, nothing else of the host's) and
    /sys read-only without the cgroup tree, and /proc: an empty directory for a fresh procfs
    (`fresh_proc`, mounted by the caller inside its PID namespace) or else the host's. `hide`
    is emptied wherever it lies inside something shown. `uid`: who will run inside (a shown
    directory it may not search is shown by its entries, `opened_for`)."""
    shown = [*SYSTEM_DIRS, *toolchain_paths(path_env), *device_paths(), "/sys", *read]
    return plan_root(
        read=shown if uid is None else opened_for(shown, uid),
        write=[*write, *([] if fresh_proc else ["/proc"])],
        scratch=scratch,
        hide=["/sys/fs/cgroup", *hide],
        dirs=["/proc"] if fresh_proc else [],
        links=DEV_LINKS,
    )
