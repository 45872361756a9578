"""The sandbox a coding agent runs in: it may change its workspace, and nothing else.

The candidate is sandboxed by the judge; this contains the agent that writes it, with the same
machinery (`_uids`, `_cgroup`, `_mounts`, `_process`, and `_steps` for taking and reporting
each measure), because an agent running as the user who started optarena could otherwise
rewrite the installed judge, the ledger, the task package or other trials, and reach any
address. Measures, each used where the machine allows it and reported either way
(`report()`, recorded as the trial's `agent_sandbox`):

- **user**: when optarena runs as root, a dedicated unprivileged uid per agent (leased like a
  worker's), owning only the agent's writable directories for the length of the run;
- **mounts**: a private mount namespace whose root is default-deny (`_root`, planned by
  `_mounts.private_root`): a fresh read-only tmpfs holding only the system directories, the
  toolchain on PATH, the interpreter, optarena's package, the readable paths and, writable, the
  agent's directories (its workspace, its private home and config home); private scratch
  (`/tmp`, `/var/tmp`, `/dev/shm`, fresh per run). The ledger, other trials, the task, homes,
  `/run` and the host's sockets do not exist inside; the hidden paths are emptied where they
  lie inside something shown. Where the kernel allows no private root: every mount read-only
  but those directories, the hidden paths and `/run` masked by an empty tmpfs;
- **pid**: with the mounts, a PID namespace and a fresh `/proc` (the holder -> init -> agent
  forks of `_child`): no other process to list, signal or enter through `/proc/PID/root`;
- **network**: a network namespace holding only a loopback, on which `_agent_relay` listens at
  127.0.0.1:PORT for each allowed port and relays to optarena over a Unix socket: the metering
  proxy is reachable, nothing else on the host or beyond is;
- **cgroup**: a pids cgroup holding the agent's whole tree (`pids.max`), however detached, so
  that the end of the run, a timeout or Ctrl-C kills all of it; plus a parent-death signal, and
  `_agent_sweep.sweep_agent_leftovers` for what a `kill -9` of optarena left running and its
  bridge sockets (run by the ledger's reconcile, the first step of the next run).

What the child does before exec is in `_agent_child`; the network relay in `_agent_net` (host
side) and `_agent_relay` (inside the namespace).

Without root the namespaces come from a user namespace (the agent keeps the user's uid, which
the report says); what the kernel refuses is reported as unavailable, never silently skipped.
A failure to start a sandbox the probe said was possible raises `AgentSandboxError`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

from optarena.errors import OptarenaError
from optarena.files import lchown_tree
from optarena.processes import HeldNamespace, kill_tree, signal_all, stop_then_kill
from optarena.sandbox import _linux
from optarena.sandbox._agent_child import (
    AgentChildPlan,
    agent_child_setup,
    receive_namespaces,
    under_any,
)
from optarena.sandbox._agent_net import UnixBridge
from optarena.sandbox._agent_sweep import AgentCgroup, owned_name, remove_socket_dir, socket_bases
from optarena.sandbox._cgroup import PidsCgroup
from optarena.sandbox._child import end_pid_namespace
from optarena.sandbox._mounts import SCRATCH_DIRS, Mask, blockers, plan_masks, private_root
from optarena.sandbox._probe import Capabilities
from optarena.sandbox._process import ResourceLimits, spawn
from optarena.sandbox._root import RootPlan
from optarena.sandbox._sandbox import _fd_ceiling, interpreter_paths, probe
from optarena.sandbox._steps import IsolationSteps, alive_members, kill_until_gone, members
from optarena.sandbox._uids import UidLease, lease_uid

RELAY = str(Path(__file__).with_name("_agent_relay.py"))
OPTARENA_PACKAGE = str(Path(__file__).resolve().parents[1])
HIDDEN_ALWAYS = ("/run",)  # host daemons' Unix sockets, the uid leases' locks


class AgentSandboxError(OptarenaError):
    """The agent's sandbox could not be started although the machine seemed to allow it."""


@dataclass(frozen=True)
class AgentSandboxPolicy:
    """Which measures to use for the agent where available; `off()` is `--no-agent-sandbox`."""

    enabled: bool = True
    user: bool = True
    mounts: bool = True
    network: bool = True
    cgroup: bool = True
    max_processes: int = 1024  # tasks (threads count): node, compilers and BLAS all use many
    scratch_mb: int = 2048  # size cap of each private scratch tmpfs (/tmp, ...)

    @classmethod
    def off(cls) -> AgentSandboxPolicy:
        return cls(enabled=False, user=False, mounts=False, network=False, cgroup=False)


# --- ownership of the writable directories -------------------------------------------------


@dataclass
class _Timing:
    setup_ms: float | None = None
    teardown_ms: float | None = None
    marks: dict[str, float] = field(default_factory=dict)


class AgentSandbox:
    """One agent run's containment: `spawn` starts the agent in it, `close` ends every process
    it started and gives the writable directories back; `report` says what was active.

    `writable` are the directories the agent may change (they must exist; the first is its
    working directory); `readable` are paths it must be able to reach even under a closed
    directory (its executable, a script named on its command line); `hidden` disappear;
    `ports` are the host loopback ports it may reach (the metering proxy); `home` becomes its
    `HOME` (one of `writable`).
    """

    def __init__(
        self,
        policy: AgentSandboxPolicy,
        *,
        writable: Sequence[Path],
        readable: Sequence[Path] = (),
        hidden: Sequence[Path] = (),
        ports: Sequence[int] = (),
        home: Path | None = None,
    ) -> None:
        if not writable:
            raise ValueError("an agent sandbox needs at least its working directory")
        for path in writable:
            if not Path(path).is_dir():
                raise AgentSandboxError(f"the agent's writable directory {path} does not exist")
        self.policy = policy
        self.writable = [Path(os.path.realpath(p)) for p in writable]
        self.readable = [os.path.realpath(p) for p in readable]
        self.hidden = [os.path.realpath(p) for p in hidden]
        self.ports = sorted(set(ports))
        self.sockets: Path | None = None
        self.home = Path(os.path.realpath(home)) if home else None
        self.proc: subprocess.Popen[bytes] | None = None
        self.lease: UidLease | None = None
        self.cgroup: PidsCgroup | None = None
        self.bridges: list[UnixBridge] = []
        self.bridge_refused = 0  # connections the bridges closed over their limit
        self.namespace: HeldNamespace | None = None  # its user namespace (without root)
        self.steps = IsolationSteps()
        self.timing = _Timing()
        self._nproc: int | None = None
        self._given: list[Path] = []  # directories chowned to the agent's uid, to take back
        self.shown: list[str] = []  # what its private root binds (empty: none was built)
        self.pid_namespace: HeldNamespace | None = None  # the agent's own, when it has one
        self._pid_ns = False  # whether it has one (held or not)
        self.survivors: list[str] = []  # processes that outlived `close()`, described

    @property
    def measures(self) -> dict[str, str]:
        """Each measure's state in words (the report's values)."""
        return self.steps.measures

    @property
    def notes(self) -> list[str]:
        """Why a measure that was wanted is missing."""
        return self.steps.notes

    # -- starting ---------------------------------------------------------------------------

    def _measure(self, name: str, wanted: bool, why_not: str | None) -> bool:
        return self.steps.wanted(name, self.policy.enabled and wanted, why_not)

    def _needed(self) -> list[str]:
        """What must stay reachable: the interpreter (the relay runs on it, and the agent's
        `python3` may be it), optarena's own package (its relays), PATH (so commands
        resolve) and the version managers behind its shims, the readable and writable
        paths."""
        # Absolute entries only: `.` or `bin` would name optarena's working directory (a
        # project, its repository) here and the agent's own inside.
        entries = os.environ.get("PATH", "").split(":")
        path_dirs = [os.path.realpath(d) for d in entries if d.startswith("/")]
        path_dirs = [d for d in path_dirs if os.path.isdir(d) and not under_any(d, self.hidden)]
        # A version manager's shims (pyenv, rbenv, asdf: `~/.pyenv/shims/python3`) are scripts
        # that run the manager from its root: without it every `python3` exits 127.
        managers = [os.path.dirname(d) for d in path_dirs if os.path.basename(d) == "shims"]
        # A readable path at or above something hidden or private would unmask it: dropped.
        private = [*self.hidden, *HIDDEN_ALWAYS, *SCRATCH_DIRS]
        readable = [
            r for r in [*self.readable, *managers] if not any(under_any(p, [r]) for p in private)
        ]
        return sorted(
            {
                *interpreter_paths(),
                *path_dirs,
                *readable,
                OPTARENA_PACKAGE,  # `python -m optarena mcp relay` (a checkout under /tmp too)
                RELAY,
                *(str(w) for w in self.writable),
                *([str(self.sockets)] if self.sockets else []),
            }
        )

    def _lease_uid(self, root: bool, use_mounts: bool, needed: list[str]) -> None:
        if not self._measure("user", self.policy.user, None):
            return
        if not root:
            self.steps.record("user", f"same (uid {os.getuid()}: optarena is not root)")
            return
        if not use_mounts and blockers(needed, 1_500_000, 1_500_000):
            self.steps.record(
                "user",
                "same (root)",
                "an unprivileged uid cannot reach the agent's tools without a mount namespace; "
                "the agent runs as root and read-only mounts would not bind it",
            )
            return
        self.lease = self.steps.attempt(
            "user", lease_uid, state="same (root)", why="no uid lease ({})"
        )
        if self.lease is None:
            return
        for path in dict.fromkeys([*self.writable, *([self.home] if self.home else [])]):
            lchown_tree(path, self.lease.uid, self.lease.gid)
            self._given.append(path)
        self.measures["user"] = f"uid {self.lease.uid}"

    def _make_cgroup(self, unavailable: str | None, base: Path | None, helpers: int) -> None:
        """`helpers`: optarena's own processes in the cgroup (a PID namespace's holder and
        init), allowed on top of the policy's limit."""
        why_not = None if base is not None else str(unavailable)
        if not self._measure("cgroup", self.policy.cgroup, why_not) or base is None:
            return
        where = base
        self.cgroup = self.steps.attempt(
            "cgroup", lambda: AgentCgroup(where, self.policy.max_processes + helpers)
        )
        if self.cgroup is not None:
            self.steps.record("cgroup", f"pids.max={self.policy.max_processes}")

    def _open_bridges(self) -> None:
        """One Unix socket per allowed port, in a fresh directory under /run (or the temp
        directory), absent from every other agent's root; named after this process, so that
        the sweep after a `kill -9` can tell it is left over (`_agent_sweep`)."""
        self.sockets = socket_bases()[0] / owned_name()
        self.sockets.mkdir(mode=0o711)
        os.chmod(self.sockets, 0o711)
        for port in self.ports:
            bridge = UnixBridge(self.sockets / f"{port}.sock", port, mode=0o600)
            self.bridges.append(bridge)

    def _mount_plan(
        self, caps: Capabilities, needed: list[str], uid: int | None, fresh_proc: bool
    ) -> tuple[RootPlan | None, tuple[Mask, ...]]:
        """The agent's view of the filesystem: a default-deny root where the machine allows
        one (only the system, the toolchain, `needed` and the writable directories exist),
        else masks over the hidden paths and everything else read-only. `fresh_proc`: /proc
        is its own (a PID namespace: no other process's /proc/PID/root or cwd to walk into)."""
        scratch = [d for d in SCRATCH_DIRS if os.path.isdir(d)]
        if caps.private_root is None:
            writable = [str(w) for w in self.writable]
            root = private_root(
                [n for n in needed if n not in writable],
                writable,
                scratch,
                self.hidden,
                fresh_proc=fresh_proc,
                path_env=os.environ.get("PATH", ""),
                uid=uid,
            )
            self.shown = sorted(root.paths("bind"))
            self.measures["mounts"] = (
                "private root: only the system, the toolchain and the named paths exist; "
                f"writable: {', '.join(writable)}; private {', '.join(root.paths('scratch'))}"
            )
            return root, ()
        self.notes.append(f"mounts: no private root ({caps.private_root}); paths hidden by list")
        blocked = list(blockers(needed, uid, uid)) if uid is not None else []
        hide = [h for h in (*self.hidden, *HIDDEN_ALWAYS) if os.path.isdir(h)]
        masks = tuple(plan_masks(needed, hide, scratch, blocked))
        hidden = sorted(m.path for m in masks if not m.scratch)
        self.measures["mounts"] = (
            "read-only but for the writable directories; private "
            + ", ".join(m.path for m in masks if m.scratch)
            + (f"; hidden: {', '.join(hidden)}" if hidden else "")
        )
        return None, masks

    def _plan(self) -> AgentChildPlan:
        caps = probe()
        use_net = self._measure("network", self.policy.network, caps.netns)
        use_mnt = self._measure("mounts", self.policy.mounts, caps.mountns)
        if use_net and self.ports:
            self._open_bridges()
        use_pid = use_mnt and caps.pidns is None
        needed = self._needed()
        self._lease_uid(caps.root, use_mnt, needed)
        self._make_cgroup(caps.cgroup, caps.cgroup_base, helpers=2 if use_pid else 0)
        uid = self.lease.uid if self.lease else None
        for bridge in self.bridges:
            if uid is not None:
                os.chown(bridge.path, uid, uid)
        root, masks = self._mount_plan(caps, needed, uid, use_pid) if use_mnt else (None, ())
        flags = (_linux.CLONE_NEWNET if use_net else 0) | (_linux.CLONE_NEWNS if use_mnt else 0)
        if use_mnt and caps.ipcns is None:
            flags |= _linux.CLONE_NEWIPC  # no SysV shared memory or queues of the host
        flags |= _linux.CLONE_NEWPID if use_pid else 0
        ids = None
        if flags and not caps.root:
            flags |= _linux.CLONE_NEWUSER
            ids = (os.getuid(), os.getgid())
        self.measures["ipc"] = "private" if flags & _linux.CLONE_NEWIPC else "host"
        self.measures["pid"] = "namespace, own /proc" if use_pid else "host /proc"
        if use_net:
            allowed = ", ".join(f"127.0.0.1:{p}" for p in self.ports)
            self.measures["network"] = f"netns, reachable: {allowed or 'nothing'}"
        userns = bool(flags & _linux.CLONE_NEWUSER)
        # In a user namespace RLIMIT_NPROC counts its tasks: the PID namespace's two helpers too.
        helpers = 2 if use_pid and userns else 0
        nproc = self.policy.max_processes + helpers if (self.lease or userns) else None
        self._nproc = nproc
        return AgentChildPlan(
            workdir=str(self.writable[0]),
            unshare_flags=flags,
            userns_ids=ids,
            loopback=use_net,
            masks=masks,
            root=root,
            scratch_mb=self.policy.scratch_mb,
            writable=tuple(str(w) for w in self.writable),
            readonly=use_mnt,
            cgroup_procs=self.cgroup.procs_file if self.cgroup else None,
            uid=uid,
            nproc=nproc,
        )

    def spawn(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        stdout: IO[Any] | int | None = None,
        stderr: IO[Any] | int | None = None,
        stdin: IO[Any] | int | None = subprocess.DEVNULL,
    ) -> subprocess.Popen[bytes]:
        """Start the agent inside the sandbox; raise AgentSandboxError if that fails. `stdin`
        is closed unless given (a contained MCP server speaks over it)."""
        if self.proc is not None:
            raise RuntimeError("an AgentSandbox runs one agent")
        probe()  # once per process (cached): not part of what one agent's sandbox costs
        t0 = time.monotonic()
        try:
            plan = self._plan()
        except BaseException:
            self._release()
            raise
        argv = list(argv)
        if self.bridges:
            specs = [f"{b.port}={b.path}" for b in self.bridges]
            argv = [sys.executable, "-I", "-S", RELAY, *specs, "--", *argv]
        env = dict(env)
        if self.home is not None:
            env["HOME"] = str(self.home)
        if plan.unshare_flags & _linux.CLONE_NEWNS:
            env["TMPDIR"] = "/tmp"
        r, w = os.pipe()
        sr, sw = os.pipe()  # init -> holder: the agent's wait status (PID namespace)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        plan = replace(
            plan,
            status_fds=(sr, sw),
            fd_ceiling=_fd_ceiling(),
            ns_sock=theirs.fileno(),
            parent=os.getpid(),
        )
        try:
            self.proc = spawn(
                argv,
                cwd=self.writable[0],
                env=env,
                limits=ResourceLimits(core_dumps=False),
                stdout=stdout,
                stderr=stderr,
                stdin=stdin,
                setup=lambda: agent_child_setup(replace(plan, err_fd=w)),
            )
        except (OSError, subprocess.SubprocessError) as e:
            ours.close()  # with whatever the child sent: the kernel closes those
            os.close(w)
            w = -1
            detail = os.read(r, 500).decode(errors="replace")
            self._release()
            if detail or isinstance(e, subprocess.SubprocessError):
                raise AgentSandboxError(
                    f"the agent's sandbox did not start ({detail or e}); "
                    "--no-agent-sandbox runs the agent without it"
                ) from None
            raise
        finally:
            theirs.close()
            for fd in (r, w, sr, sw):
                if fd >= 0:
                    os.close(fd)
        with ours:  # its namespaces, as the child made them, before the agent's code ran
            sent = receive_namespaces(ours)
        self._pid_ns = bool(plan.unshare_flags & _linux.CLONE_NEWPID)
        self.pid_namespace = sent.get("pid")
        self.namespace = sent.get("user")
        self.timing.setup_ms = round((time.monotonic() - t0) * 1000, 2)
        return self.proc

    # -- while it runs ----------------------------------------------------------------------

    def members(self) -> set[int]:
        """Every live process of the agent, its first one included."""
        return members(self.proc, self.cgroup, self.lease, self.namespace, live=True)

    # -- ending -----------------------------------------------------------------------------

    def close(self, grace_s: float = 0.0) -> None:
        """End every process of the agent (SIGTERM and `grace_s` first, when given), then
        release the cgroup and the uid and take the writable directories back."""
        t0 = time.monotonic()
        try:
            if self.proc is not None:
                if grace_s > 0 and self.proc.poll() is None:
                    signal_all(self.members(), signal.SIGTERM)
                    deadline = time.monotonic() + grace_s
                    while self.proc.poll() is None and time.monotonic() < deadline:
                        time.sleep(0.02)
                if self._pid_ns:  # held or not: its init is the holder's child
                    end_pid_namespace(self.proc)
                if self.cgroup is not None:
                    self.cgroup.kill_all()
                if self.lease is not None:
                    self.lease.kill_all()
                if self.cgroup is None and self.lease is None:
                    me = os.getpid()
                    stop_then_kill(lambda: self.members() - {me})
                kill_tree(self.proc)
                self._verify_ended()
        finally:
            self._release()
            self.timing.teardown_ms = round((time.monotonic() - t0) * 1000, 2)

    def _verify_ended(self) -> None:
        """Look again in every list that names the agent's processes and kill what still
        lives: each kill above trusts one list, this trusts none. What survives is named in
        the report (`survivors`, and a note), never released silently."""
        namespaces = [ns for ns in (self.namespace, self.pid_namespace) if ns is not None]
        self.survivors = kill_until_gone(
            lambda: alive_members(self.cgroup, self.lease, namespaces) - {os.getpid()}
        )
        if self.survivors:
            self.notes.append(
                f"cleanup: {len(self.survivors)} process(es) outlived every kill: "
                + "; ".join(self.survivors)
            )

    def _release(self) -> None:
        agent_uid = self.lease.uid if self.lease is not None else None
        for bridge in self.bridges:
            bridge.close()
            self.bridge_refused += bridge.refused
        self.bridges = []
        if self.sockets is not None:
            remove_socket_dir(self.sockets)
        if self.cgroup is not None:
            if not self.cgroup.remove():
                self.notes.append(f"cleanup: the cgroup {self.cgroup.path} could not be removed")
            self.cgroup = None
        if self.lease is not None:
            self.lease.release()
            self.lease = None
        for ns in (self.namespace, self.pid_namespace):  # after the last look at members
            if ns is not None:
                ns.close()
        for path in self._given:  # what the agent's uid owns: not a file it hard-linked
            with contextlib.suppress(FileNotFoundError):
                lchown_tree(path, os.getuid(), os.getgid(), owner=agent_uid)
        self._given = []

    def report(self) -> dict[str, Any]:
        """Which measures were active for the agent, in words (the trial's `agent_sandbox`)."""
        m = self.measures
        return {
            "enabled": self.policy.enabled,
            "user": m.get("user", "off"),
            "network": m.get("network", "off"),
            "mounts": m.get("mounts", "off"),
            "ipc": m.get("ipc", "host"),
            "pid": m.get("pid", "host /proc"),
            "processes": self.steps.processes(self._nproc),
            "cleanup": self.steps.cleanup(),
            "writable": [str(w) for w in self.writable],
            # With a private root everything not `visible` is absent, `hidden` included.
            "visible": list(self.shown) if self.shown else None,
            "hidden": sorted({*self.hidden, *HIDDEN_ALWAYS})
            if m.get("mounts", "off") not in ("off", "unavailable")
            else [],
            "home": str(self.home) if self.home else None,
            "ports": list(self.ports),
            "setup_ms": self.timing.setup_ms,
            "teardown_ms": self.timing.teardown_ms,
            "notes": list(self.notes),
            "bridge_refused": self.bridge_refused,
            "survivors": list(self.survivors),
        }
