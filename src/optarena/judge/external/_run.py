"""Commands of an external task, each in the candidate sandbox: set-up, gate, benchmark.

Every command runs under /bin/sh in its worktree as the sandbox's unprivileged uid, without
network, with the spec's limits and a timeout after which its whole tree is killed. Its OS CPU
time (the cgroup's count, else the children's rusage) and wall time are recorded beside what it
printed: a benchmark's self-reported metric is cross-checked against them.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import stat
import subprocess
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from optarena.sandbox import ResourceLimits, Sandbox, SandboxPolicy
from optarena.tasks.external import ExternalLimits, Metric

OUTPUT_TAIL = 4000  # characters of a command's output quoted in a failure's detail
OUTPUT_KEPT = 8 << 20  # bytes of a command's output the judge reads: the last ones
FAILURE_LINES = 30  # lines of a failing command's output quoted in its message


@dataclass(frozen=True)
class CommandRun:
    command: str
    returncode: int | None  # None: killed at its timeout
    output: str
    wall_s: float
    cpu_s: float | None
    log: Path | None = None  # the whole output, kept where a failing command's is kept

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def tail(self) -> str:
        return self.output[-OUTPUT_TAIL:]

    def failure(self) -> str:
        """How it failed, the end of its output and where the whole output is: what a person
        needs to fix a command (a missing module is named only in the output)."""
        why = "timed out" if self.returncode is None else f"exited {self.returncode}"
        lines = self.output.rstrip().splitlines()[-FAILURE_LINES:]
        last = f": {lines[-1].strip()[:300]}" if lines else ""
        text = "\n".join("    " + line for line in lines)[-OUTPUT_TAIL:]
        where = f"\n  full output: {self.log}" if self.log else ""
        return f"`{self.command}` {why}{last}\n  its output ends:\n{text or '    (none)'}{where}"


def limits_of(spec_limits: ExternalLimits) -> ResourceLimits:
    return ResourceLimits(
        address_space_mb=spec_limits.memory_mb,
        file_size_mb=spec_limits.file_size_mb,
        open_files=spec_limits.open_files,
        processes=spec_limits.processes,
    )


def run_command(
    command: str,
    worktree: Path,
    timeout_s: float,
    env: dict[str, str],
    limits: ResourceLimits,
    policy: SandboxPolicy | None,
    keep_failed: Path | None = None,
    visible: Sequence[Path] = (),
) -> CommandRun:
    """Run `command` in a fresh sandbox; `keep_failed`: where the whole output of a failing
    run is kept (else only its last 8 MiB are read, and the file is removed); `visible`: what
    the declared environment needs readable (a venv under /tmp or a home directory)."""
    log = worktree.parent / f".{worktree.name}-output.log"
    box = Sandbox(worktree, limits, policy, needed=visible)
    full_env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(worktree),
        "TMPDIR": str(worktree),
        "LANG": "C.UTF-8",
        **env,
    }
    before = os.times()
    t0 = time.monotonic()
    with log.open("wb") as out:
        proc = box.spawn(["/bin/sh", "-c", command], env=full_env, stdout=out, stderr=out)
        cpu0 = box.cpu_ns()
        try:
            code: int | None = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            code = None
        wall = time.monotonic() - t0
        cpu1 = box.cpu_ns()
        box.close()
    after = os.times()
    if cpu0 is not None and cpu1 is not None:
        cpu: float | None = (cpu1 - cpu0) / 1e9
    else:
        cpu = (after.children_user - before.children_user) + (
            after.children_system - before.children_system
        )
    output = _read_tail(log, OUTPUT_KEPT)
    if code != 0 and keep_failed is not None:
        keep_failed.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(log, keep_failed)
        return CommandRun(command, code, output, wall, cpu, keep_failed)
    log.unlink()
    return CommandRun(command, code, output, wall, cpu)


def _read_tail(log: Path, keep: int) -> str:
    """The last `keep` bytes of a command's output: the candidate's code decides how much it
    prints, and reading it all could exhaust the judge's memory."""
    with log.open("rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > keep:
            f.seek(size - keep)
        text = f.read(keep).decode(errors="replace")
    if size <= keep:
        return text
    return f"[the first {size - keep} bytes of output were not kept]\n" + text


def read_metric(metric: Metric, run: CommandRun) -> tuple[float | None, str]:
    """(value, why not): the metric from a benchmark run's output, or None and the reason."""
    if metric.wall:
        return run.wall_s, ""
    text = run.output
    if metric.regex is not None:
        m = _last_match(metric.regex, text)
        if m is None:
            return None, f"no match for {metric.regex!r} in the output's lines"
        return _number(m.group(1) if m.groups() else m.group(0))
    assert metric.json_path is not None
    data = _last_json(text)
    if data is None:
        return None, "the benchmark printed no JSON object"
    node: Any = data
    for part in metric.json_path.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None, f"key path {metric.json_path!r} is absent from the output's JSON"
    return _number(node)


# The spec's regex runs on output the candidate's code writes into. A pattern that backtracks
# took 7.8 s on 25 KB of digits and 82 s on 100 KB (quadratic: hours on the 8 MiB kept; red
# team, 2026-12-06), and a first match let an earlier line stand in for the benchmark's own.
_REGEX_LINE_MAX = 4096  # characters: longer lines are not searched
_REGEX_BUDGET_S = 5.0  # seconds of searching, checked between lines


def _last_match(pattern: str, text: str) -> re.Match[str] | None:
    """The match in the output's last line that has one, as the JSON metric's last line:
    a benchmark prints its metric last. Lines over _REGEX_LINE_MAX and searching past
    _REGEX_BUDGET_S count as no match."""
    rx = re.compile(pattern)
    t0 = time.monotonic()
    for line in reversed(text.splitlines()):
        if len(line) > _REGEX_LINE_MAX:
            continue
        if (m := rx.search(line)) is not None:
            return m
        if time.monotonic() - t0 > _REGEX_BUDGET_S:
            return None
    return None


def _number(v: Any) -> tuple[float | None, str]:
    try:
        x = float(v)
    except (TypeError, ValueError, OverflowError):  # an integer of 400 digits overflows
        return None, f"the metric {str(v)[:40]!r} is not a number"
    if not math.isfinite(x) or x <= 0:
        return None, f"the metric {x!r} is not a positive finite number"
    return x, ""


def _last_json(text: str) -> Any:
    """The output's JSON: the whole output, else its last line that parses as an object. The
    candidate's code prints into the same output: JSON nested too deep to parse (a
    RecursionError in the parser) counts as no JSON, never as the judge's crash."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        pass
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except (ValueError, RecursionError):
                continue
    return None


JUNIT_MAX_BYTES = 64 << 20


@dataclass(frozen=True)
class JUnitReport:
    tests: int  # test cases in the report
    failing: list[str]  # failing or erroring test names
    names: frozenset[str] = frozenset()  # every test case's name, to say which went missing


def read_junit(tree: Path, relpath: str) -> JUnitReport | None:
    """The JUnit XML report a gate wrote at `relpath` in `tree`; None when there is none, or
    it is not a plain file inside the tree (the candidate's code may have put a symlink to
    /dev/zero or a FIFO there, which would hang the judge), too large or not XML."""
    path = tree / relpath
    try:
        inside = path.parent.resolve().is_relative_to(tree.resolve())
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK) if inside else -1
    except (OSError, RuntimeError):  # 3.11's pathlib: a symlink loop is a RuntimeError
        return None
    if fd < 0:
        return None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size > JUNIT_MAX_BYTES:
            return None
        try:
            return _cases(_Bounded(f, JUNIT_MAX_BYTES))
        except (OSError, ET.ParseError, ValueError, LookupError):  # an encoding it lacks
            return None


class _Bounded:
    """A file read in the parser's chunks, never past `limit` bytes (ValueError beyond): a
    read of the whole limit at once allocates all of it first, and the size checked before
    reading is the file's then, not necessarily when it is read."""

    def __init__(self, f: BinaryIO, limit: int) -> None:
        self.f, self.left = f, limit

    def read(self, n: int = -1) -> bytes:
        want = self.left + 1 if n < 0 else min(n, self.left + 1)
        chunk = self.f.read(want)
        self.left -= len(chunk)
        if self.left < 0:
            raise ValueError("the report is over the size limit")
        return chunk


def _cases(source: _Bounded) -> JUnitReport:
    """The report's test cases, parsed as a stream: every element is let go at its end (a
    case's failure is noted on the case first). The whole tree of a report at the size limit,
    in tiny elements the candidate's code can write, held 2.8 GB of the judge's memory (red
    team, 2026-12-06)."""
    tests = 0
    failing: list[str] = []
    names: set[str] = set()
    open_: list[ET.Element] = []  # the elements not ended yet, outermost first
    failed: list[bool] = []  # beside each: whether a failure or error ended directly in it
    for event, elem in ET.iterparse(source, events=("start", "end")):
        if event == "start":
            open_.append(elem)
            failed.append(False)
            continue
        open_.pop()
        failed_here = failed.pop()
        if elem.tag == "testcase":
            tests += 1
            cls = elem.get("classname")
            name = f"{cls}.{elem.get('name')}" if cls else str(elem.get("name"))
            names.add(name)
            if failed_here:
                failing.append(name)
        elif elem.tag in ("failure", "error") and open_ and open_[-1].tag == "testcase":
            failed[-1] = True
        elem.clear()
        if open_:
            open_[-1].remove(elem)
    return JUnitReport(tests, failing, frozenset(names))
