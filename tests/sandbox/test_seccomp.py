"""The worker's seccomp filter and cpuset: what a candidate could use to bill the other arm.

The attack that read `improved` for a copy of the baseline created a user and a network
namespace, built a paced routing loop and moved itself off the shared CPU, so that softirq work
ran (and was charged) during the other arm's calls. Each lever is checked here from inside a
sandboxed process, with the measure on and, as a control, off.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import pytest

from optarena.sandbox import ResourceLimits, Sandbox, SandboxPolicy, probe

# private: the seccomp program's builder, tested on its bytes
from optarena.sandbox._seccomp import ARCHES, native_arch, program, why_unavailable

PROBE = textwrap.dedent(
    r"""
    import ctypes, errno, json, os, socket, subprocess, threading
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    X86 = os.uname().machine == "x86_64"
    NR = {  # x86_64, aarch64
        "add_key": (248, 217), "keyctl": (250, 219), "timer_create": (222, 107),
        "timerfd_create": (283, 85), "io_uring_setup": (425, 425), "bpf": (321, 280),
        "perf_event_open": (298, 241), "clone3": (435, 435), "vmsplice": (278, 75),
        "userfaultfd": (323, 282), "fadvise64": (221, 223), "sync": (162, 81),
        "syncfs": (306, 267), "madvise": (28, 233), "mmap": (9, 222), "process_madvise": (440, 440),
        "remap_file_pages": (216, 234), "mlock": (149, 228), "mlock2": (325, 284),
        "mlockall": (151, 230),
    }
    out = {}
    def call(name, *args):
        r = libc.syscall(NR[name][0 if X86 else 1], *args)
        out[name] = "ok" if r >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")
    out["unshare_user_net"] = (
        "ok" if libc.unshare(0x10000000 | 0x40000000) == 0
        else errno.errorcode.get(ctypes.get_errno(), "?")
    )
    call("add_key", b"user", b"optarena-test", b"v", 1, ctypes.c_long(-4))
    call("keyctl", 0, ctypes.c_long(-4), 0)  # KEYCTL_GET_KEYRING_ID of the user keyring
    call("timer_create", 1, None, ctypes.byref(ctypes.c_int()))
    call("timerfd_create", 1, 0)
    call("io_uring_setup", 4, ctypes.byref((ctypes.c_char * 120)()))
    call("bpf", 0, None, 0)
    call("userfaultfd", 0)
    call("clone3", None, 0)
    call("vmsplice", 1, None, 0, 0)
    # one system call that stays in the kernel for seconds (the freezer cannot stop it)
    with open("f.bin", "wb") as f:
        f.write(b"x" * 65536)
    fd = os.open("f.bin", os.O_RDONLY)
    call("fadvise64", fd, 0, 0, 4)  # POSIX_FADV_DONTNEED: evicts it from the page cache
    call("sync")
    call("syncfs", fd)
    call("process_madvise", -1, None, 0, 21, 0)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    anon = 0x02 | 0x20  # MAP_PRIVATE | MAP_ANONYMOUS
    base = libc.mmap(None, 1 << 20, 3, anon, -1, 0)
    for name, advice in (("cold", 20), ("pageout", 21), ("populate_read", 22),
                         ("populate_write", 23), ("dontneed", 4), ("hugepage", 14),
                         ("random", 1), ("collapse", 25)):
        r = libc.syscall(NR["madvise"][0 if X86 else 1], ctypes.c_void_p(base),
                         ctypes.c_size_t(1 << 20), advice)
        out["madvise_" + name] = "ok" if r >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")
    call("mlock", ctypes.c_void_p(base), ctypes.c_size_t(4096))
    call("mlock2", ctypes.c_void_p(base), ctypes.c_size_t(4096), 0)
    call("mlockall", 4)  # MCL_ONFAULT alone: EINVAL where it is let through, nothing locked
    fd_m = os.memfd_create("probe")
    os.ftruncate(fd_m, 1 << 16)
    shared = libc.mmap(None, 1 << 16, 3, 0x01, fd_m, 0)  # MAP_SHARED
    call("remap_file_pages", ctypes.c_void_p(shared), ctypes.c_size_t(1 << 16), 0,
         ctypes.c_size_t(0), 0)
    libc.mremap.restype = ctypes.c_void_p
    libc.mremap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int]
    shared2 = libc.mmap(None, 1 << 16, 3, 0x01, fd_m, 0)
    for name, old, new, flags in (("mremap_twin", 0, 1 << 16, 1),  # a second mapping
                                  ("mremap_dontunmap", 1 << 16, 1 << 16, 1 | 4),
                                  ("mremap_grow", 1 << 16, 1 << 17, 1)):  # as realloc does
        r = libc.mremap(shared2, old, new, flags)
        out[name] = "ok" if r not in (None, ctypes.c_void_p(-1).value) else errno.errorcode.get(
            ctypes.get_errno(), "?")
        if out[name] == "ok" and name == "mremap_grow":
            shared2 = r
    for name, flags in (("mmap_populate", anon | 0x8000), ("mmap_locked", anon | 0x2000),
                        ("mmap", anon)):
        r = libc.mmap(None, 1 << 20, 3, flags, -1, 0)
        out[name] = "ok" if r not in (None, ctypes.c_void_p(-1).value) else errno.errorcode.get(
            ctypes.get_errno(), "?")
    try:
        socket.socket(17, socket.SOCK_RAW).close()
        out["packet_socket"] = "ok"
    except OSError as e:
        out["packet_socket"] = errno.errorcode.get(e.errno, "?")
    try:  # AF_ALG: refused before the kernel looks at the family (EAFNOSUPPORT without one)
        socket.socket(38, socket.SOCK_SEQPACKET).close()
        out["crypto_socket"] = "ok"
    except OSError as e:
        out["crypto_socket"] = errno.errorcode.get(e.errno, "?")
    t = threading.Thread(target=lambda: None); t.start(); t.join()
    out["thread"] = "ok"
    out["subprocess"] = subprocess.run(["true"]).returncode
    pid = os.fork()
    if pid == 0:
        os._exit(7)
    out["fork"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    try:
        os.sched_setaffinity(0, range(os.cpu_count() or 1))
    except OSError as e:
        out["setaffinity"] = errno.errorcode.get(e.errno, "?")
    out["affinity"] = sorted(os.sched_getaffinity(0))
    print(json.dumps(out))
    """
)


def _spawned(
    tmp_path: Path, policy: SandboxPolicy, script: str, cpus: list[int] | None = None
) -> tuple[Sandbox, subprocess.Popen[bytes]]:
    """`script` run by Python in a sandbox of its own (the caller closes the sandbox)."""
    workdir = tmp_path / f"w{len(list(tmp_path.iterdir()))}"
    workdir.mkdir()
    sb = Sandbox(workdir, ResourceLimits(address_space_mb=2048, processes=16), policy, cpus=cpus)
    try:
        proc = sb.spawn(
            [sys.executable, "-c", script],
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    except BaseException:
        sb.close()
        raise
    return sb, proc


def _run(tmp_path: Path, policy: SandboxPolicy, cpus: list[int] | None = None) -> dict:
    sb, proc = _spawned(tmp_path, policy, PROBE, cpus)
    try:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err.decode()
        result = json.loads(out)
        result["report"] = sb.report()
        return result
    finally:
        sb.close()


def test_every_jump_of_the_filter_is_forward_and_in_range() -> None:
    for arch in ARCHES.values():
        prog = program(arch)
        assert 0 < len(prog) < 200
        for i, (op, jt, jf, _) in enumerate(prog):
            assert i + 1 + max(jt, jf) < len(prog) or op == 0x06  # a return jumps nowhere
        assert prog[-1][0] == 0x06  # the program cannot fall off its end


needs_seccomp = pytest.mark.skipif(
    native_arch() is None or why_unavailable() is not None, reason="no seccomp here"
)


@needs_seccomp
def test_the_levers_of_the_softirq_attack_are_refused_and_ordinary_work_is_not(
    tmp_path: Path,
) -> None:
    r = _run(tmp_path, SandboxPolicy())
    assert r["report"]["seccomp"].startswith("filter")
    for name in (
        "unshare_user_net",
        "add_key",
        "keyctl",
        "timer_create",
        "timerfd_create",
        "io_uring_setup",
        "bpf",
        "userfaultfd",
        "vmsplice",
        "packet_socket",
        "crypto_socket",
    ):
        assert r[name] == "EPERM", (name, r[name])
    assert r["clone3"] == "ENOSYS"  # the C library falls back to clone, whose flags are read
    assert (r["thread"], r["subprocess"], r["fork"]) == ("ok", 0, 7)


@needs_seccomp
def test_a_call_that_holds_the_kernel_for_seconds_is_refused_and_its_neighbours_are_not(
    tmp_path: Path,
) -> None:
    """A red-team candidate evicted its own files from the page cache and populated them in
    one `madvise(MADV_POPULATE_READ)`, disk read after disk read: its worker could not be
    frozen for seconds, when it chose. Each lever of that kind is refused; the advice and
    mappings ordinary code uses are not (NumPy advises huge pages, the allocator maps)."""
    r = _run(tmp_path, SandboxPolicy())
    refused = ["fadvise64", "sync", "syncfs", "process_madvise", "mmap_populate", "mmap_locked"]
    refused += [f"madvise_{a}" for a in ("cold", "pageout", "populate_read", "populate_write")]
    # the same without a disk: a copy into huge pages, a populating remap, locking (below)
    refused += ["madvise_collapse", "remap_file_pages", "mlock", "mlock2", "mlockall"]
    for name in refused:
        assert r[name] == "EPERM", (name, r[name])
    for name in ("madvise_dontneed", "madvise_hugepage", "madvise_random", "mmap", "mremap_grow"):
        assert r[name] == "ok", (name, r[name])


@needs_seccomp
def test_a_second_mapping_of_a_mapping_is_refused_and_a_grown_one_is_not(tmp_path: Path) -> None:
    """A red-team candidate returned its input through a second mapping of the input area,
    made with `mremap` after the judge had looked where the area lies: refused, as is the
    old mapping kept by `MREMAP_DONTUNMAP`; growing or moving one, as `realloc` does, is not."""
    r = _run(tmp_path, SandboxPolicy())
    assert (r["mremap_twin"], r["mremap_dontunmap"]) == ("EPERM", "EPERM")
    assert r["mremap_grow"] == "ok"
    off = _run(tmp_path, replace(SandboxPolicy(), seccomp=False))
    assert off["mremap_twin"] == "ok"  # the control: the kernel makes one


@needs_seccomp
def test_control_without_the_filter_the_kernel_holding_calls_run(tmp_path: Path) -> None:
    r = _run(tmp_path, replace(SandboxPolicy(), seccomp=False))
    for name in ("fadvise64", "syncfs", "mmap_populate", "madvise_populate_read"):
        assert r[name] == "ok", (name, r[name])
    assert (r["remap_file_pages"], r["mmap_locked"], r["mlock"]) == ("ok", "ok", "ok")
    # the kernel's own answer: EINVAL where transparent huge pages are off
    assert r["madvise_collapse"] in ("ok", "EINVAL", "EAGAIN", "ENOMEM")
    assert r["madvise_pageout"] in ("ok", "EINVAL")  # a kernel built without swap may refuse it


@needs_seccomp
def test_control_without_the_filter_a_new_user_namespace_is_allowed(tmp_path: Path) -> None:
    r = _run(tmp_path, replace(SandboxPolicy(), seccomp=False))
    assert r["report"]["seccomp"] == "off"
    if probe().root or Path("/proc/sys/user/max_user_namespaces").read_text().strip() != "0":
        assert r["unshare_user_net"] == "ok"
    assert r["add_key"] == "ok" or r["add_key"] != "EPERM"
    assert r["crypto_socket"] != "EPERM"  # the kernel's own answer: ok, or EAFNOSUPPORT here


cpusets = pytest.mark.skipif(
    probe().cgroups.why_not.get("cpuset") is not None or len(os.sched_getaffinity(0)) < 2,
    reason="no cpuset cgroup or a single CPU",
)


@cpusets
def test_a_pinned_worker_cannot_leave_its_cpu(tmp_path: Path) -> None:
    cpu = max(os.sched_getaffinity(0))
    r = _run(tmp_path, SandboxPolicy(), cpus=[cpu])
    assert r["report"]["cpuset"] == f"cpus {cpu}"
    assert r["affinity"] == [cpu]


@cpusets
def test_control_without_the_cpuset_the_worker_moves_itself(tmp_path: Path) -> None:
    cpu = max(os.sched_getaffinity(0))
    r = _run(tmp_path, replace(SandboxPolicy(), cpuset=False), cpus=[cpu])
    assert len(r["affinity"]) > 1


COLLAPSE = textwrap.dedent(
    r"""
    import ctypes, mmap
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    n, huge = 512 << 20, 2 << 20
    m = mmap.mmap(-1, n + huge, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    buf = (ctypes.c_char * len(m)).from_buffer(m)
    a = (ctypes.addressof(buf) + huge - 1) & ~(huge - 1)
    libc.madvise(a, n, 15)  # MADV_NOHUGEPAGE: small pages first
    ctypes.memset(a, 1, n)
    libc.madvise(a, n, 14)  # MADV_HUGEPAGE
    print("go", flush=True)
    r = libc.madvise(a, n, 25)  # MADV_COLLAPSE: every page copied into huge ones, in one call
    print(r, ctypes.get_errno(), flush=True)
    """
)


def _freeze_during_collapse(tmp_path: Path, policy: SandboxPolicy) -> tuple[int, int, float]:
    """(return value, errno, how long a freeze asked for 0.1 s into the call took)."""
    sb, proc = _spawned(tmp_path, policy, COLLAPSE)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"go\n"
        time.sleep(0.1)
        if sb.freeze_method == "sigstop":
            pytest.skip("no cgroup freezer here")
        asked = time.monotonic()
        sb.freeze()
        took = time.monotonic() - asked
        sb.thaw()
        out = proc.stdout.read()  # what readline buffered with "go" too
        assert proc.wait(timeout=60) == 0, proc.stderr.read().decode() if proc.stderr else ""
        r, e = out.split()
        return int(r), int(e), took
    finally:
        sb.close()


@needs_seccomp
def test_a_collapse_into_huge_pages_is_refused_before_it_can_hold_the_freezer(
    tmp_path: Path,
) -> None:
    """`madvise(MADV_COLLAPSE)` copies a range into huge pages in one call that the freezer
    waits out (2.2 s for 1 GiB here): a candidate could make its worker unfreezable when it
    chose, as the `MADV_POPULATE_READ` attack did with a disk. Refused, it ends at once."""
    r, e, _ = _freeze_during_collapse(tmp_path, SandboxPolicy())
    assert (r, e) == (-1, errno.EPERM)


@needs_seccomp
def test_control_without_the_filter_a_collapse_holds_the_freezer_until_it_ends(
    tmp_path: Path,
) -> None:
    """512 MiB took 1.1 s here: the freeze waits most of it out (a machine three times faster
    would still keep it waiting 0.25 s; a loaded one, longer)."""
    r, e, took = _freeze_during_collapse(tmp_path, replace(SandboxPolicy(), seccomp=False))
    if r != 0:
        pytest.skip(f"no collapse into huge pages here (errno {e})")
    assert took > 0.2
