"""The judge's side of a run of timed calls (`WorkerClient.run_calls`; the worker's is
`worker/_run`).

Between two timed calls the worker waits and the judge works, on the same CPU. Whatever the
judge's turn takes of the caches, the next call pays for, in both arms, and that dilutes every
ratio toward 1 (the null arm cannot take it away: its function has no state to lose). What
matters is the turn's footprint, not its length (docs/measurement.md, "The judge's turn"). So
a run is split in three:

- before the worker is thawed: every call's copies and go frame are worked out;
- per call, the hot path: copy the inputs in, write the go frame, wait, read the ref frame,
  read the output object and then its bytes from the worker's memory (`_objects`), compare
  the inputs, read the clocks. What it must know to read safely (the frame's magic and call
  index, the object's type, dtype, dimensions, a size within the limit) it checks at once;
- after the last call: whether the output lies in an input, and the `CallResult`s.

Anything but an output taken by reference (a failed call's wire frame, bytes through the pipe,
an array the judge asks the worker to describe, a malformed frame) leaves the hot path for the
general reader.

Where this machine can build it, the hot path runs compiled (`_turn`): a segment's calls in
one C call, which takes each answer exactly as the Python hot path would take it by reference
and hands every other call back, at the point it reached (its go frame partly or wholly sent,
its head partly or wholly read), to the Python reader (`_one`), then goes on with the next.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from optarena.judge.client import _turn
from optarena.judge.client._arena import Copy
from optarena.judge.client._layout import (
    OutHeader,
    call_layout,
    output_dtype,
    read_out_header,
    segments,
)
from optarena.judge.client._objects import ArrayRef
from optarena.judge.client._results import CallResult, WorkerError
from optarena.judge.worker import _run as run
from optarena.judge.worker import _wire as wire

if TYPE_CHECKING:
    from optarena.judge.client._worker import WorkerClient


class Answer(NamedTuple):
    """One call's answer. From the hot path: the output as its object describes it and its
    bytes (`raw`), its reply made after the run; from the general reader: its reply and
    output. And when the first frame arrived."""

    raw: tuple[ArrayRef, np.ndarray] | None
    reply: dict[str, Any]
    output: np.ndarray | None
    answered: int


class Taken(NamedTuple):
    """A call as the run took it, before its checks: its answer and the judge's clocks."""

    position: int  # in its segment (what the output frame must name)
    answer: Answer
    tile_ns: int
    cpu_ns: int | None
    changed: int | None
    go_ns: int
    timeout: float


class CallRun:
    """One `run_calls`: the calls' copies and frames, the hot path, the checks after."""

    def __init__(
        self,
        client: WorkerClient,
        template: int,
        calls: Sequence[tuple[Sequence[Any], dict[str, Any]]],
        max_output_bytes: int,
    ) -> None:
        if client.inputs is None:
            raise RuntimeError("this worker has no input area (arena_bytes)")
        self.client = client
        self.inputs = client.inputs
        self.template = template
        self.calls = calls
        self.max_bytes = max_output_bytes
        self.layouts = [call_layout(list(a), k) for a, k in calls]
        self.segments = segments(self.layouts)
        self.copies: list[list[Copy]] = [self.inputs.copies(list(a), k) for a, k in calls]
        self.frames: list[bytes] = []
        for start, end in self.segments:
            for i in range(start, end):
                a, k = calls[i]
                scalars = [float(v) for v in self.layouts[i].values(list(a), k)]
                self.frames.append(run.go_frame(i - start, end - start, template, scalars))
        self.native = self._native_segments()

    def _native_segments(self) -> dict[int, _turn.Segment] | None:
        """Each segment's plan for the compiled turn, where it runs: a library built here, and
        outputs read by reference (without, every answer takes the general reader)."""
        client, lib = self.client, _turn.native()
        pid = client.sandbox.worker_pid
        if lib is None or client.objects is None or pid is None:
            return None
        fds = (client._to_worker, client._from_worker)
        cpu, base = client.sandbox.cpu_counter(), self.inputs.view.ctypes.data
        return {
            start: _turn.Segment(
                lib,
                base,
                self.copies[start:end],
                self.frames[start:end],
                fds,
                pid,
                cpu,
                client.objects.ndarray_type,
                self.max_bytes,
            )
            for start, end in self.segments
        }

    def run(self, timeout: Callable[[], float], warm: int) -> list[CallResult]:
        """The run, the worker thawed from before the first go frame to after the last answer.
        The windows tile: every cycle of the worker's tree during the run is charged to one of
        its calls, and the run's total is exact."""
        client, sandbox = self.client, self.client.sandbox
        client.freeze()
        # From where the worker was last put to rest, not from now: CPU its cgroup used while
        # frozen (a process of its tree dying while another arm ran: a fatal signal gets
        # through the freezer, and the exit's work is the cgroup's) is charged to this run.
        now = sandbox.cpu_ns()
        at_rest = client.cpu_at_rest if client.cpu_at_rest is not None and now is not None else now
        frozen = 0 if now is None or at_rest is None else now - at_rest
        taken: list[Taken] = []
        refused: CallResult | None = None  # a bind inside the run the guard refused
        results: list[CallResult] = []
        cpu_mark, wall_mark = now, time.perf_counter_ns()
        client.thaw()
        try:
            for start, end in self.segments:
                refused = self._bind(start, timeout)
                if refused is not None:
                    break
                cpu_mark, wall_mark = self._calls(start, end, timeout, taken, cpu_mark, wall_mark)
                if taken and taken[-1].answer.output is None and taken[-1].answer.raw is None:
                    break  # a call that delivered no array ends the run
            results = [self._result(t) for t in taken]
            if refused is not None:
                results.append(refused)
        finally:
            client.freeze()
            cpu_end = client.cpu_at_rest = sandbox.cpu_ns()
            _settle_clocks(results, cpu_end, cpu_mark, frozen, warm)
        return results

    def _bind(self, start: int, timeout: Callable[[], float]) -> CallResult | None:
        """Bind the template again where segment `start`'s layout differs (inside the run: its
        cost is timed, as in every arm); a result when the guard's findings end the run."""
        client = self.client
        if client.bound.get(self.template) == self.layouts[start]:
            return None
        a, k = self.calls[start]
        reply = client._bind(self.template, a, k, timeout())
        if reply.get("violations"):
            return CallResult({**reply, "ok": False}, None, 0, 0, None)
        if not reply.get("ok"):
            raise WorkerError("protocol_violation", f"bind refused: {reply}")
        return None

    def _calls(
        self,
        start: int,
        end: int,
        timeout: Callable[[], float],
        taken: list[Taken],
        cpu_mark: int | None,
        wall_mark: int,
    ) -> tuple[int | None, int]:
        """The hot path over one segment's calls; returns the clocks' marks after its last."""
        segment = None if self.native is None else self.native[start]
        i, resume = start, None
        while i < end:
            if segment is not None and resume is None:
                limit = timeout()
                stop = segment.run(i - start, 0)
                for k in range(i - start, stop.index):
                    t, cpu_mark, wall_mark = self._native_taken(
                        segment.calls[k], k, limit, cpu_mark, wall_mark
                    )
                    taken.append(t)
                if stop.status == _turn.DONE:
                    break
                i, resume = start + stop.index, stop
            delivered, cpu_mark, wall_mark = self._one(
                i, start, timeout, taken, cpu_mark, wall_mark, resume
            )
            if not delivered:
                break
            i, resume = i + 1, None
        return cpu_mark, wall_mark

    def _one(
        self,
        i: int,
        start: int,
        timeout: Callable[[], float],
        taken: list[Taken],
        cpu_mark: int | None,
        wall_mark: int,
        resume: _turn.OaStop | None,
    ) -> tuple[bool, int | None, int]:
        """Call `i` in Python, or the rest of one the compiled turn handed back (`resume`: its
        inputs are written and its go frame at least partly sent). Whether it delivered an
        array (a call that did not ends the run), and the clocks' marks after it."""
        copies, clock = self.copies[i], time.perf_counter_ns
        if resume is None:
            self.inputs.write(copies)
        limit = timeout()
        t_go = clock() if resume is None else self._native_t_go(i, start)
        got = self._answer(i, i - start, limit, resume, t_go)
        changed = self.inputs.changed(copies)
        cpu_now, wall_now = self.client.sandbox.cpu_ns(), clock()
        cpu = None if cpu_mark is None or cpu_now is None else cpu_now - cpu_mark
        taken.append(Taken(i - start, got, wall_now - wall_mark, cpu, changed, t_go, limit))
        return got.raw is not None or got.output is not None, cpu_now, wall_now

    def _native_t_go(self, i: int, start: int) -> int:
        """When the compiled turn sent call `i`'s go frame (its inputs written)."""
        assert self.native is not None
        return int(self.native[start].calls[i - start].t_go)

    def _native_taken(
        self, c: _turn.OaCall, k: int, limit: float, cpu_mark: int | None, wall_mark: int
    ) -> tuple[Taken, int | None, int]:
        """A call the compiled turn took whole, as the hot path's `Taken`, and the clocks'
        marks after it. Its output's bytes are adopted here (freed with the array)."""
        ref = ArrayRef(c.address, tuple(c.dims[: c.nd]), _turn.DTYPES[c.dtype], c.nbytes)
        data, c.data = _turn.adopt(c.data, c.nbytes), 0
        cpu_now: int | None = c.cpu_now
        if c.cpu_now < 0:  # none, or the read failed: the Python reader's answer (or error)
            cpu_now = self.client.sandbox.cpu_ns()
        cpu = None if cpu_mark is None or cpu_now is None else cpu_now - cpu_mark
        changed = None if c.changed < 0 else int(c.changed)
        answer = Answer((ref, data), {}, None, c.answered)
        return (
            Taken(k, answer, c.wall_now - wall_mark, cpu, changed, c.t_go, limit),
            cpu_now,
            c.wall_now,
        )

    def _answer(
        self, i: int, index: int, timeout: float, resume: _turn.OaStop | None, t_go: int
    ) -> Answer:
        """Call `i` (the `index`-th of its segment): its go frame out, its answer in; or the
        rest of both where the compiled turn stopped (`resume`). The deadline runs from the go
        frame."""
        client = self.client
        deadline = time.monotonic() + timeout - (time.perf_counter_ns() - t_go) / 1e9
        fd = client._from_worker
        try:
            if resume is None or resume.status == _turn.SENT:
                go = self.frames[i]
                sent = 0 if resume is None else resume.got
                if sent == 0:
                    try:
                        sent = os.write(client._to_worker, go)
                    except BlockingIOError:  # a full pipe: the worker has not read what came
                        sent = 0
                if sent < len(go):
                    wire._write_all(client._to_worker, go[sent:], deadline)
                client._await_reply(deadline)
                head = _take(fd, run.REF.size, deadline)
                answered = time.perf_counter_ns()
            else:  # the head (or part of it) is in: the compiled turn did not take the answer
                head = bytes(resume.head[: resume.got])
                head += _take(fd, run.REF.size - len(head), deadline)
                whole = resume.got == run.REF.size
                answered = resume.answered if whole else time.perf_counter_ns()
            return self._from_head(i, index, head, answered, deadline)
        except (wire.WireError, BrokenPipeError) as e:
            raise client._wire_failure(e, timeout) from None

    def _from_head(self, i: int, index: int, head: bytes, answered: int, deadline: float) -> Answer:
        """The answer whose first frame's head is `head`: an output taken by reference, or
        (anything else) the general reader's.

        `answered` ends the call's go-to-answer clock, which the waiting check compares with
        its CPU: it is when the output the judge takes arrived, never an earlier frame. A
        candidate's own loop sent call i+1's ref frame as it answered call i, naming an array
        the judge asks to have described, then slept and computed before it answered the
        describe frame: stamped at the ref frame, its calls read as no waiting at all (red
        team, 2026-12-07)."""
        client = self.client
        fd = client._from_worker
        magic, idx, ref = run.REF.unpack(head)
        if magic == run.REF_MAGIC:
            objects = client.objects
            if objects is None or idx != index:
                raise wire.WireError("malformed output frame header")
            got = objects.read(ref)
            if got is not None and got.nbytes <= self.max_bytes:
                data = np.empty(got.nbytes, dtype=np.uint8)
                if got.nbytes:
                    client._read_memory(got.address, data)
                return Answer((got, data), {}, None, answered)
            # Not one to take by reference: the worker describes it in full (see `_run`).
            m = len(self.layouts[i].scalars)
            seg = next(e - s for s, e in self.segments if s <= i < e)
            asking = run.describe_frame(index, seg, self.template, m)
            wire._write_all(client._to_worker, asking, deadline)
            client._await_reply(deadline)
            head = _take(fd, run.REF.size, deadline)
            answered = time.perf_counter_ns()
        head += _take(fd, run.OUT.size - run.REF.size, deadline)
        reply, output, delivered = self._general(head, index, deadline)
        return Answer(None, reply, output, answered if delivered is None else delivered)

    def _general(
        self, head: bytes, index: int, deadline: float
    ) -> tuple[dict[str, Any], np.ndarray | None, int | None]:
        """The rest of an answer the hot path does not take, read and checked at once; and
        when its last byte came through the pipe (None: it all came with its head, or its
        bytes were read from the worker's memory at once)."""
        client = self.client
        fd = client._from_worker
        frame = read_out_header(head, index, client.reads_memory)
        shape = run.SHAPES[frame.ndim].unpack(_take(fd, 8 * frame.ndim, deadline))
        if frame.status == run.STATUS_FRAME:
            reply = wire.recv(fd, timeout=max(deadline - time.monotonic(), 1e-3))
            if not isinstance(reply, dict):
                raise wire.WireError("reply is not an object")
            return reply, None, time.perf_counter_ns()
        dtype = output_dtype(frame, shape)
        desc = _description(shape, dtype, frame.nbytes)
        if frame.nbytes > self.max_bytes:  # never read: the arm is rejected, the worker closed
            return _reply(self._aliases(frame), {**desc, "too_large": True}), None, None
        data = np.empty(frame.nbytes, dtype=np.uint8)
        delivered = None
        if frame.nbytes and frame.in_memory:
            client._read_memory(frame.address, data)
        elif frame.nbytes:
            wire._read_into(fd, data.data, deadline)
            delivered = time.perf_counter_ns()
        return _reply(self._aliases(frame), desc), data.view(dtype).reshape(shape), delivered

    def _aliases(self, frame: OutHeader) -> bool:
        """The worker's flag, or an output in memory inside the input area (`_in_inputs`)."""
        return frame.aliases or (frame.in_memory and self._in_inputs(frame.address, frame.end))

    def _in_inputs(self, address: int, end: int) -> bool:
        """Whether [address, end) lies in the input area's mapping in the worker, which the
        judge reads from the kernel's list of the worker's mappings."""
        return any(lo < end and address < hi for lo, hi in self.client.input_ranges)

    def _result(self, t: Taken) -> CallResult:
        """A call's result, with the checks the hot path left (as the general reader's)."""
        answer = t.answer
        reply, output = answer.reply, answer.output
        if answer.raw is not None:
            ref, data = answer.raw
            desc = _description(ref.shape, ref.dtype, ref.nbytes)
            reply = _reply(self._in_inputs(ref.address, ref.end), desc)
            output = data.view(ref.dtype).reshape(ref.shape)
        return CallResult(reply, output, t.tile_ns, t.cpu_ns, t.changed, answer.answered - t.go_ns)


def _description(shape: tuple[int, ...], dtype: np.dtype[Any], nbytes: int) -> dict[str, Any]:
    """A reply's description of an output, the same from both readers."""
    return {"shape": list(shape), "dtype": dtype.str, "nbytes": nbytes}


def _reply(aliases: bool, output: dict[str, Any]) -> dict[str, Any]:
    return {"ok": True, "aliases": aliases, "lazy": None, "output": output}


def _settle_clocks(
    results: list[CallResult], cpu_end: int | None, cpu_mark: int | None, frozen: int, warm: int
) -> None:
    """The CPU the cgroup used after the last answer goes to the last result; what it used
    while frozen, to the first call after the caller's `warm` ones (never to an uncounted
    call: the tiles still add up to all the cgroup used)."""
    if not results:
        return
    last = results[-1]
    if last.cpu_ns is not None and cpu_end is not None and cpu_mark is not None:
        last.cpu_ns += cpu_end - cpu_mark
    first = results[min(warm, len(results) - 1)]
    if first.cpu_ns is not None:
        first.cpu_ns += frozen


def _take(fd: int, n: int, deadline: float) -> bytes:
    """The next `n` bytes of the reply pipe (non-blocking on the judge's side): one read when
    they are all there, as an honest worker's frame is (one write below PIPE_BUF); else the rest
    is waited for until the deadline."""
    if n == 0:
        return b""
    try:
        data = os.read(fd, n)
    except BlockingIOError:
        data = b""
    else:
        if not data:
            raise wire.WireClosed("the worker closed the pipe")
    if len(data) < n:
        rest = bytearray(n - len(data))
        wire._read_into(fd, memoryview(rest), deadline)
        data += bytes(rest)
    return data
