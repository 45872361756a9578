"""A seccomp filter for candidate workers: system calls a numeric kernel never needs are refused.

Why: the judge's clocks are the kernel's accounting of the worker's cgroup, and kernels without
`CONFIG_IRQ_TIME_ACCOUNTING` charge interrupt and softirq work to whatever task is on the CPU.
A candidate that can make the kernel work *later*, while it is frozen and the other arm runs on
the shared CPU, bills the other arm: the attack that read `improved` for a copy of the baseline
built a network namespace in a new user namespace, a veth pair and a paced qdisc, so packets
were processed during the baseline's calls. Each such lever is a system call, so the filter
refuses the families that give one, and a few more that give a way around the other measures:

- new namespaces (`unshare`, `setns`, `clone` with a namespace flag; `clone3`, whose flags the
  filter cannot read, answers ENOSYS so the C library falls back to `clone`): no user namespace,
  hence no capabilities over a network stack of its own;
- kernel timers that fire while the worker is frozen (`timer_create`, `timerfd_create`) and
  asynchronous kernel work (`io_uring_*`, `userfaultfd`, `bpf`, `perf_event_open`);
- keyrings (`add_key`, `request_key`, `keyctl`): a uid's keyring outlives the worker and would
  carry state to the next judgement that draws the same uid;
- page-moving copies (`splice`, `vmsplice`, `tee`, `sendfile`): the timed call path delivers
  each output through a pipe, and these would let a candidate skip the copy every honest
  output pays (`sendfile` answers ENOSYS, on which `shutil` falls back to read and write);
- other processes and the system (`ptrace`, `process_vm_*`, `pidfd_getfd`, mounts, modules,
  `open_by_handle_at`, `kexec_*`, `reboot`, swap, accounting, `syslog`);
- packet, netlink and kernel crypto (`AF_ALG`) sockets: an asynchronous cipher (`cryptd`)
  runs its work in kernel threads, outside the worker's cgroup (red team, 2026-12-06; this
  kernel has no AF_ALG, so only the refusal is tested);
- one system call that stays in the kernel for seconds, which the freezer cannot stop: a
  red-team candidate evicted files it wrote from the page cache (`fadvise64`), turned off
  readahead and populated them in one `madvise(MADV_POPULATE_READ)`, 4 KiB disk read after
  4 KiB disk read, whenever it chose, so that its worker could not be frozen and the pair
  was discarded (docs/guarantees.md, "Choosing which pairs count"). Refused: `fadvise64`,
  `madvise`'s populating and page-evicting advice (`MADV_COLD`, `MADV_PAGEOUT`,
  `MADV_POPULATE_READ`, `MADV_POPULATE_WRITE`), `process_madvise`, `mmap` with
  `MAP_POPULATE` (3 GiB of it is two seconds of page zeroing), `sync` and `syncfs`. The
  same without a disk (2026-12-07, a process in a cgroup v1 freezer, the freeze asked for
  0.2 s into the call): `madvise(MADV_COLLAPSE)` copies a range into huge pages, 2.2 s for
  1 GiB, and the freeze waited 1.7 s; `remap_file_pages` populates a shared mapping as
  `MAP_POPULATE` does (2 GiB of a memfd: 1.3 s, the freeze waited 0.9 s); `mlock` populates
  what it locks (2 GiB: 1.3 s, the freeze waited 0.8 s) where the memlock limit allows it,
  and the judge's own limit is what the worker inherits. Refused too: `MADV_COLLAPSE`,
  `remap_file_pages`, `mlock`, `mlock2`, `mlockall` and `mmap` with `MAP_LOCKED`. Still
  allowed, as docs/guarantees.md lists with their times: calls whose copy loop faults pages
  in (a `pread` of `/proc/self/mem`, a write from a cold file mapping), which no filter
  rule can tell from ordinary reads; the judge's other two defences do not depend on the call.

- a second mapping of a mapping (`mremap` with an old size of 0, or `MREMAP_DONTUNMAP`): the
  judge looks for outputs over the worker's input area where that area was mapped at hello,
  and a red-team candidate returned its input through a copy of the mapping made later, which
  the aliasing check did not see (2026-12-07). The worker also seals the area's mapping
  (`mseal`, `worker/_loop._seal`) where the kernel has it, so that it cannot move either;
  `mremap` as allocators use it (growing or moving a mapping of their own) is allowed.

Refused calls fail with EPERM (ENOSYS where noted); nothing is killed, so an honest candidate
that tries one sees an ordinary error. Non-native system call ABIs (int 0x80, x32) are refused
whole. The filter is installed last, in the worker, after no-new-privileges, and is inherited by
everything the worker starts; it cannot be removed. On an architecture without a table here the
sandbox reports `seccomp: unavailable`.
"""

from __future__ import annotations

import ctypes
import errno
import platform
import struct
from dataclasses import dataclass

from optarena.sandbox import _linux

PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_LD_ABS_W = 0x20
_JEQ = 0x15
_JGE = 0x35
_JSET = 0x45
_RET = 0x06
_OFF_NR, _OFF_ARCH, _OFF_ARG0 = 0, 4, 16

# Every namespace flag: CLONE_NEWTIME, NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET.
CLONE_NAMESPACES = 0x00000080 | 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000
CLONE_NAMESPACES |= 0x10000000 | 0x20000000 | 0x40000000
AF_NETLINK, AF_PACKET, AF_ALG = 16, 17, 38
MADV_COLD, MADV_POPULATE_WRITE = 20, 23  # and MADV_PAGEOUT, MADV_POPULATE_READ between them
MADV_COLLAPSE = 25
MAP_POPULATE, MAP_LOCKED = 0x8000, 0x2000
MREMAP_DONTUNMAP = 4

# Numbers from the generic table (>= 424) are the same on every architecture.
_GENERIC = {
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "clone3": 435,
    "pidfd_getfd": 438,
    "process_madvise": 440,
    "mount_setattr": 442,
}
_X86_64 = {
    "clone": 56,
    "unshare": 272,
    "setns": 308,
    "add_key": 248,
    "request_key": 249,
    "keyctl": 250,
    "bpf": 321,
    "perf_event_open": 298,
    "userfaultfd": 323,
    "ptrace": 101,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "splice": 275,
    "tee": 276,
    "vmsplice": 278,
    "sendfile": 40,
    "timer_create": 222,
    "timerfd_create": 283,
    "mount": 165,
    "umount2": 166,
    "pivot_root": 155,
    "chroot": 161,
    "init_module": 175,
    "finit_module": 313,
    "delete_module": 176,
    "kexec_load": 246,
    "kexec_file_load": 320,
    "open_by_handle_at": 304,
    "name_to_handle_at": 303,
    "acct": 163,
    "swapon": 167,
    "swapoff": 168,
    "reboot": 169,
    "syslog": 103,
    "quotactl": 179,
    "socket": 41,
    "fadvise64": 221,
    "sync": 162,
    "syncfs": 306,
    "remap_file_pages": 216,
    "mlock": 149,
    "mlock2": 325,
    "mlockall": 151,
    "madvise": 28,
    "mmap": 9,
    "mremap": 25,
    **_GENERIC,
}
_AARCH64 = {
    "clone": 220,
    "unshare": 97,
    "setns": 268,
    "add_key": 217,
    "request_key": 218,
    "keyctl": 219,
    "bpf": 280,
    "perf_event_open": 241,
    "userfaultfd": 282,
    "ptrace": 117,
    "process_vm_readv": 270,
    "process_vm_writev": 271,
    "splice": 76,
    "tee": 77,
    "vmsplice": 75,
    "sendfile": 71,
    "timer_create": 107,
    "timerfd_create": 85,
    "mount": 40,
    "umount2": 39,
    "pivot_root": 41,
    "chroot": 51,
    "init_module": 105,
    "finit_module": 273,
    "delete_module": 106,
    "kexec_load": 104,
    "kexec_file_load": 294,
    "open_by_handle_at": 265,
    "name_to_handle_at": 264,
    "acct": 89,
    "swapon": 224,
    "swapoff": 225,
    "reboot": 142,
    "syslog": 116,
    "quotactl": 60,
    "socket": 198,
    "fadvise64": 223,
    "sync": 81,
    "syncfs": 267,
    "remap_file_pages": 234,
    "mlock": 228,
    "mlock2": 284,
    "mlockall": 230,
    "madvise": 233,
    "mmap": 222,
    "mremap": 216,
    **_GENERIC,
}


@dataclass(frozen=True)
class Arch:
    audit: int
    table: dict[str, int]
    x32_bit: int | None = None  # x86_64: numbers with this bit set are the x32 ABI


ARCHES = {
    "x86_64": Arch(0xC000003E, _X86_64, x32_bit=0x40000000),
    "aarch64": Arch(0xC00000B7, _AARCH64),
}

ENOSYS_CALLS = ("clone3", "sendfile")
SPECIAL_CALLS = ("clone", "socket", "madvise", "mmap", "mremap")  # refused by an argument
DENIED_CALLS = tuple(n for n in _X86_64 if n not in (*ENOSYS_CALLS, *SPECIAL_CALLS))


def native_arch() -> Arch | None:
    return ARCHES.get(platform.machine())


def program(arch: Arch) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) instructions (pure: tested without installing it)."""
    code: list[tuple[int, str | None, str | None, int]] = []
    labels: dict[str, int] = {}

    def emit(op: int, k: int, jt: str | None = None, jf: str | None = None) -> None:
        code.append((op, jt, jf, k))

    def label(name: str) -> None:
        labels[name] = len(code)

    emit(_LD_ABS_W, _OFF_ARCH)
    emit(_JEQ, arch.audit, jt="native", jf="eperm")
    label("native")
    emit(_LD_ABS_W, _OFF_NR)
    if arch.x32_bit is not None:
        emit(_JGE, arch.x32_bit, jt="eperm", jf="next0")
        label("next0")
    for i, name in enumerate(DENIED_CALLS):
        emit(_JEQ, arch.table[name], jt="eperm", jf=f"d{i}")
        label(f"d{i}")
    for i, name in enumerate(ENOSYS_CALLS):
        emit(_JEQ, arch.table[name], jt="enosys", jf=f"e{i}")
        label(f"e{i}")
    emit(_JEQ, arch.table["clone"], jt="clone", jf="c0")
    label("c0")
    emit(_JEQ, arch.table["madvise"], jt="madvise", jf="c1")
    label("c1")
    emit(_JEQ, arch.table["mmap"], jt="mmap", jf="c2")
    label("c2")
    emit(_JEQ, arch.table["socket"], jt="socket", jf="c3")
    label("c3")
    emit(_JEQ, arch.table["mremap"], jt="mremap", jf="allow")
    label("allow")
    emit(_RET, _RET_ALLOW)
    label("clone")
    emit(_LD_ABS_W, _OFF_ARG0)  # the low half of the flags (every namespace flag is there)
    emit(_JSET, CLONE_NAMESPACES, jt="eperm", jf="allow2")
    label("allow2")  # BPF jumps only forward: each block has its own return
    emit(_RET, _RET_ALLOW)
    label("madvise")
    emit(_LD_ABS_W, _OFF_ARG0 + 16)  # the advice (arg 2)
    emit(_JEQ, MADV_COLLAPSE, jt="eperm", jf="m0")
    label("m0")
    emit(_JGE, MADV_COLD, jt="m1", jf="allow4")
    label("m1")
    emit(_JGE, MADV_POPULATE_WRITE + 1, jt="allow4", jf="eperm")
    label("allow4")
    emit(_RET, _RET_ALLOW)
    label("mmap")
    emit(_LD_ABS_W, _OFF_ARG0 + 24)  # the flags (arg 3)
    emit(_JSET, MAP_POPULATE | MAP_LOCKED, jt="eperm", jf="allow5")
    label("allow5")
    emit(_RET, _RET_ALLOW)
    label("socket")
    emit(_LD_ABS_W, _OFF_ARG0)
    emit(_JEQ, AF_PACKET, jt="eperm", jf="s1")
    label("s1")
    emit(_JEQ, AF_NETLINK, jt="eperm", jf="s2")
    label("s2")
    emit(_JEQ, AF_ALG, jt="eperm", jf="allow3")
    label("allow3")
    emit(_RET, _RET_ALLOW)
    label("mremap")  # a second mapping of what is mapped (old size 0, or the old one kept)
    emit(_LD_ABS_W, _OFF_ARG0 + 24)  # the flags (arg 3)
    emit(_JSET, MREMAP_DONTUNMAP, jt="eperm", jf="r1")
    label("r1")
    emit(_LD_ABS_W, _OFF_ARG0 + 8)  # the old size (arg 1), its low half ...
    emit(_JEQ, 0, jt="r2", jf="allow6")
    label("r2")
    emit(_LD_ABS_W, _OFF_ARG0 + 12)  # ... and its high half
    emit(_JEQ, 0, jt="eperm", jf="allow6")
    label("allow6")
    emit(_RET, _RET_ALLOW)
    label("eperm")
    emit(_RET, _RET_ERRNO | errno.EPERM)
    label("enosys")
    emit(_RET, _RET_ERRNO | errno.ENOSYS)

    out = []
    for i, (op, jt, jf, k) in enumerate(code):
        t = 0 if jt is None else labels[jt] - i - 1
        f = 0 if jf is None else labels[jf] - i - 1
        if not (0 <= t <= 255 and 0 <= f <= 255):
            raise ValueError("seccomp program: a jump out of range")  # a bug, caught by tests
        out.append((op, t, f, k))
    return out


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install() -> None:
    """Install the filter in this process (after PR_SET_NO_NEW_PRIVS). Raises OSError."""
    arch = native_arch()
    if arch is None:
        raise OSError(errno.ENOSYS, f"no seccomp table for {platform.machine()}")
    prog = program(arch)
    raw = b"".join(struct.pack("=HBBI", op, jt, jf, k) for op, jt, jf, k in prog)
    buf = ctypes.create_string_buffer(raw, len(raw))
    fprog = _SockFprog(len(prog), ctypes.cast(buf, ctypes.c_void_p))
    _linux.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog))


def why_unavailable() -> str | None:
    """None if the filter can be installed on this machine, else why not (probe)."""
    if native_arch() is None:
        return f"no system call table for {platform.machine()}"
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            if not any(line.startswith("Seccomp:") for line in f):
                return "the kernel has no seccomp support"
    except OSError as e:
        return f"cannot read /proc/self/status: {e.strerror}"
    return None
