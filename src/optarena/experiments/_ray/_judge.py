"""Judging a Ray worker's delivery on a judge node, never beside the agents.

The trial lifecycle asks its task to judge (`TrialTask.judge`); a worker gives it
`RemoteJudged`, which sends the candidate's files and diff to a node holding the one
`optarena_judge` slot there (so two judgements never share a node) and waits. The judge node
checks its own installation and task package (`TrialTask.verify`) before judging, as a local
judge does, and answers with the judgement, its JSON artifact, its node and its runtime
fingerprint: what the timings depend on, which the trial then records as its runtime (pairs
judged on different machines show as drift in `compare`).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from optarena.identity import runtime_fingerprint, tree_files
from optarena.judge import JudgeTamperedError
from optarena.ledger import ArtifactStore
from optarena.records import Judgement, JudgementKind, JudgeSettings, TaskInfo, load_judgement
from optarena.tasks import Task
from optarena.tasks.external import FrozenExternal
from optarena.trials import JudgeFn, Prepared, TrialTask, trial_task


@dataclass(frozen=True)
class JudgeRequest:
    task: Task | FrozenExternal
    task_sha256: str
    files: dict[str, bytes]  # the candidate directory, relative POSIX path -> bytes
    diff: bytes
    out_of_scope: list[str]
    trial_id: str
    kind: JudgementKind
    settings: JudgeSettings


@dataclass(frozen=True)
class JudgeReply:
    node: str
    runtime: dict[str, Any]
    judgement: str | None = None  # Judgement JSON
    artifacts: tuple[bytes, ...] = ()  # what the judgement names (its JudgeResult JSON)
    tampered: tuple[list[str], str] | None = None  # the judge node's changes, reference


def judge_here(request: JudgeRequest, node: str) -> JudgeReply:
    """On the judge node: the candidate written out privately, this installation and the
    task package checked, then judged exactly as a local trial is."""
    source = trial_task(request.task)
    try:
        source.verify(request.task_sha256)
    except JudgeTamperedError as e:
        return JudgeReply(node, runtime_fingerprint(), tampered=(e.changes, e.reference))
    with tempfile.TemporaryDirectory(prefix="optarena-judge-") as tmp:
        candidate = Path(tmp) / "candidate"
        for rel, data in request.files.items():
            path = candidate / _safe(rel)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        candidate.mkdir(exist_ok=True)
        store = ArtifactStore(Path(tmp) / "artifacts")
        judgement = source.judge(
            candidate, request.diff, request.out_of_scope, trial_id=request.trial_id,
            kind=request.kind, settings=request.settings, store=store,
        )  # fmt: skip
        named = [judgement.judge_json] if judgement.judge_json else []
        artifacts = tuple(store.read_bytes(sha) for sha in named)
    return JudgeReply(node, runtime_fingerprint(), judgement.model_dump_json(), artifacts)


def _safe(rel: str) -> str:
    """A relative path that stays under the candidate directory (the names come from the
    worker's own capture; checked all the same)."""
    p = PurePosixPath(rel)
    if p.is_absolute() or ".." in p.parts or not p.parts:
        raise ValueError(f"candidate file name {rel!r} leaves the candidate directory")
    return str(p)


@dataclass
class RemoteJudged:
    """A `TrialTask` whose judging runs on a judge node (`send` delivers the request and waits
    for the reply); everything else is the task's own, on the agent's node."""

    inner: TrialTask
    portable: Task | FrozenExternal  # the task as the judge node loads it
    send: Callable[[JudgeRequest], JudgeReply]
    replies: list[JudgeReply] = field(default_factory=list)

    @property
    def info(self) -> TaskInfo:
        return self.inner.info

    @property
    def editable(self) -> list[str]:
        return self.inner.editable

    def check_runnable(self) -> None:
        self.inner.check_runnable()

    def hidden(self) -> tuple[Path, ...]:
        return self.inner.hidden()

    def prepare(self, workspace: Path, shadow: Path, artifacts: Path | None) -> Prepared:
        return self.inner.prepare(workspace, shadow, artifacts)

    def editable_files(self, workspace: Path) -> list[str]:
        return self.inner.editable_files(workspace)

    def verify(self, task_sha256: str) -> None:
        self.inner.verify(task_sha256)  # this node: what the agent could have touched

    def judge(
        self,
        candidate: Path,
        diff: bytes,
        out_of_scope: list[str],
        *,
        trial_id: str,
        kind: JudgementKind,
        settings: JudgeSettings,
        store: ArtifactStore,
        judge_fn: JudgeFn | None = None,
        progress: Callable[[str, float], None] | None = None,
    ) -> Judgement:
        files = {rel: (candidate / rel).read_bytes() for rel in tree_files(candidate)}
        request = JudgeRequest(
            self.portable, self.inner.info.sha256, files, diff, out_of_scope, trial_id, kind,
            settings,
        )  # fmt: skip
        if progress is not None:
            progress("sent to a judge node", 0.0)
        reply = self.send(request)
        self.replies.append(reply)
        if reply.tampered is not None:
            changes, reference = reply.tampered
            raise JudgeTamperedError(
                [f"on judge node {reply.node}: {c}" for c in changes], reference
            )
        for data in reply.artifacts:
            store.put_bytes(data)
        assert reply.judgement is not None
        judgement = load_judgement(reply.judgement, f"judgement from node {reply.node}")
        if progress is not None:
            progress(f"judged on node {reply.node}", 1.0)
        return judgement


def judged_where(task: RemoteJudged) -> dict[str, object]:
    """What the trial's record takes from its judgement's node: the runtime the timings ran
    on, and the node's name (a label)."""
    if not task.replies:
        return {}
    last = task.replies[-1]
    return {"runtime": last.runtime, "judge_node": last.node}
