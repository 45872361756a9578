"""What a trial needs from its task, for both kinds: a built-in or local task package, and an
external project (a frozen spec of a user's git repository, `optarena.tasks.external`).

The trial lifecycle (`_trial`) is the same for both; only these steps differ: the workspace it
starts from, the editable scope, the check before judging, and the judge. A package's
workspace is its baseline's editable files plus TASK.md, committed fresh; an external task's
is a clone of the repository at the frozen base commit (the whole project, so the agent can
build and run its tests), whose base commit is also the baseline the delivery is diffed
against. The holdout of an external task is never in the workspace and is hidden from the
agent; it reaches only the judge's own clean worktrees.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from optarena import __version__
from optarena.errors import MissingPrerequisiteError, OptarenaError
from optarena.identity import judge_sha256, runtime_fingerprint, tree_files
from optarena.judge import JudgeTamperedError, judge_external, verify_judge
from optarena.ledger import ArtifactStore, utc_now
from optarena.records import Judgement, JudgementKind, JudgeSettings, TaskInfo
from optarena.tasks import Task, in_scope, unmet_requirements
from optarena.tasks.external import FrozenExternal, load_frozen
from optarena.trials._judging import JudgeFn, judge_delivery
from optarena.trials._workspace import (
    EXCLUDES,
    PROMPT_NAME,
    copy_artifacts,
    git,
    init_repos,
    write_starter,
)

ProgressFn = Callable[[str, float], None]


@dataclass(frozen=True)
class Prepared:
    """A workspace ready for the agent."""

    starter: list[str]  # what the agent starts from, as the phase note lists it
    baseline: str  # the commit the delivery is diffed against (in the shadow repository)
    prompt: str


class TrialTask(Protocol):
    """A task as the trial lifecycle uses it."""

    @property
    def info(self) -> TaskInfo: ...

    @property
    def editable(self) -> list[str]:
        """The editable globs: a changed tracked file outside them rejects the trial."""
        ...

    def check_runnable(self) -> None:
        """Bad input or a missing prerequisite, before anything is recorded."""

    def hidden(self) -> tuple[Path, ...]:
        """Paths the agent must not see, beyond the ledger and other trials."""
        ...

    def prepare(self, workspace: Path, shadow: Path, artifacts: Path | None) -> Prepared: ...

    def editable_files(self, workspace: Path) -> list[str]: ...

    def verify(self, task_sha256: str) -> None:
        """Before judging: raise JudgeTamperedError when the judge or the task changed."""

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
        progress: ProgressFn | None = None,
    ) -> Judgement: ...


@dataclass(frozen=True)
class PackageTask:
    """A built-in or local task package (`task.toml`)."""

    task: Task

    @property
    def info(self) -> TaskInfo:
        t = self.task
        return TaskInfo(id=t.id, version=t.spec.version, sha256=t.sha256, root=str(t.root))

    @property
    def editable(self) -> list[str]:
        return list(self.task.spec.editable)

    def check_runnable(self) -> None:
        unmet = unmet_requirements(self.task.spec.requirements)
        if unmet:
            raise MissingPrerequisiteError(
                f"task {self.task.id} cannot run here: {'; '.join(unmet)}"
            )
        self.task.check_workloads()  # a task whose params its generator cannot use: bad input

    def hidden(self) -> tuple[Path, ...]:
        """The package: its oracle, generator and controls (a known-good `optimized` among
        them); the agent gets the prompt and the starter files in its workspace."""
        return (self.task.root,)

    def prepare(self, workspace: Path, shadow: Path, artifacts: Path | None) -> Prepared:
        starter = write_starter(self.task, workspace)
        if artifacts is not None:
            starter += copy_artifacts(artifacts, workspace, starter)
        baseline = init_repos(self.task, workspace, shadow)
        prompt = (workspace / PROMPT_NAME).read_text(encoding="utf-8")
        return Prepared(starter, baseline, prompt)

    def editable_files(self, workspace: Path) -> list[str]:
        return self.task.editable_files(workspace)

    def verify(self, task_sha256: str) -> None:
        verify_judge(self.task, task_sha256)

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
        progress: ProgressFn | None = None,
    ) -> Judgement:
        return judge_delivery(
            self.task, candidate, out_of_scope, trial_id=trial_id, kind=kind,
            settings=settings, store=store, judge_fn=judge_fn, progress=progress,
        )  # fmt: skip


GAP_MEANING = {
    "no_quality_gate": "the spec has no quality gate: nothing verifies the candidate "
    "(unverified, never improved)",
    "no_benchmark": "the spec has no benchmark: no speed figure",
}


def forget_source(git_dir: Path) -> None:
    """What a fetch leaves in the agent's `.git` that names where it came from: FETCH_HEAD
    (`<sha> '<base>' of /path/to/repo`, from which `git -C /path/to/repo log --all` would show
    every later commit) and the reflogs. The repository itself is hidden from the agent too;
    this leaves it nothing to look for."""
    (git_dir / "FETCH_HEAD").unlink(missing_ok=True)
    (git_dir / "ORIG_HEAD").unlink(missing_ok=True)
    shutil.rmtree(git_dir / "logs", ignore_errors=True)


def external_sha256(frozen: FrozenExternal) -> str:
    """The identity of an external task: its spec, the tree at base and the holdout, as
    frozen. The same frozen task gives the same hash; any drift would change it."""
    f = frozen.frozen
    parts: tuple[str, ...] = (
        "external", f.spec_sha256, f.base_commit, f.tree_sha256, f.holdout_sha256 or ""
    )  # fmt: skip
    if f.environment_sha256 is not None:  # the declared interpreter's packages, the wheelhouse
        parts += (f.environment_sha256,)
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


@dataclass(frozen=True)
class ExternalTask:
    """A frozen external project: a clone of the repository at base, judged by its own gate
    and benchmark (`optarena.judge.judge_external`)."""

    frozen: FrozenExternal

    @property
    def info(self) -> TaskInfo:
        s = self.frozen.spec
        return TaskInfo(
            id=s.id, version=s.version, sha256=external_sha256(self.frozen),
            root=self.frozen.path, kind="external",
        )  # fmt: skip

    @property
    def editable(self) -> list[str]:
        return list(self.frozen.spec.project.editable)

    def check_runnable(self) -> None:
        if shutil.which("git") is None:
            raise MissingPrerequisiteError("external tasks need 'git' on PATH (apt install git)")

    def hidden(self) -> tuple[Path, ...]:
        """The source repository (its later commits may hold the very optimization asked
        for), the frozen spec's directory and the holdout."""
        f = self.frozen
        return (f.repo, f.spec_dir, *([f.holdout] if f.holdout is not None else []))

    def prepare(self, workspace: Path, shadow: Path, artifacts: Path | None) -> Prepared:
        f = self.frozen
        repo, base = str(f.repo), f.frozen.base_commit
        # Only what base's history holds: a clone would bring every branch, tag and later
        # commit (`git log --all`, `git show main:kernel.cpp`), and a later commit may well be
        # the optimization the task asks for. A fetch of base transfers its ancestors alone.
        workspace.mkdir(parents=True, exist_ok=True)
        git(["init", "-q"], cwd=workspace)
        git(["fetch", "-q", "--no-tags", repo, base], cwd=workspace)
        git(["checkout", "-q", "--detach", base], cwd=workspace)
        forget_source(workspace / ".git")
        git(["config", "optarena.workspace", "true"], cwd=workspace)
        git(["clone", "-q", "--bare", "--no-hardlinks", repo, str(shadow)], cwd=workspace)
        tracked = set(
            git(["ls-tree", "-r", "-z", "--name-only", base], cwd=workspace).decode().split("\0")
        )
        prompt = git(["show", f"{base}:{f.spec.prompt}"], cwd=workspace).decode("utf-8")
        starter = [f"a clone of {repo} at {base[:12]}"]
        extra: list[str] = []
        if PROMPT_NAME not in tracked:  # the prompt where agents look for it, never a change
            (workspace / PROMPT_NAME).write_text(prompt, encoding="utf-8")
            extra.append(PROMPT_NAME)
        if artifacts is not None:
            extra += copy_artifacts(artifacts, workspace, sorted(tracked))
        for git_dir in (workspace / ".git", shadow):
            exclude = git_dir / "info" / "exclude"
            exclude.parent.mkdir(parents=True, exist_ok=True)
            with exclude.open("a", encoding="utf-8") as out:
                out.write(EXCLUDES + "".join(f"/{p}\n" for p in extra))
        return Prepared(starter + extra, base, prompt)

    def editable_files(self, workspace: Path) -> list[str]:
        return [p for p in tree_files(workspace) if in_scope(p, self.editable)]

    def verify(self, task_sha256: str) -> None:
        verify_judge()
        try:
            now = load_frozen(Path(self.frozen.path))
        except OptarenaError as e:
            raise JudgeTamperedError([str(e)], "the external task as frozen") from None
        if external_sha256(now) != task_sha256:
            raise JudgeTamperedError(
                [f"external task {self.frozen.path}: differs from the trial's start"],
                "the external task as frozen",
            )

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
        progress: ProgressFn | None = None,
    ) -> Judgement:
        """The delivered diff, judged as a patch against base: the judge applies it to its own
        clean clone, rejects out-of-scope changes and drops new files outside the scope."""
        if progress is not None:
            progress("external judge: set-up, gate, then benchmark rounds", 0.0)
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="optarena-external-trial-") as tmp:
            patch = Path(tmp) / "delivery.patch"
            patch.write_bytes(diff)
            if not diff:
                patch = Path(tmp) / "unchanged"  # an empty directory: the base, unchanged
                patch.mkdir()
            result = judge_external(self.frozen, patch, measure=settings.measure)
        gaps = [f"{g}: {GAP_MEANING.get(g, g)}" for g in result.gaps]
        return Judgement(
            trial_id=trial_id,
            kind=kind,
            created_at=utc_now(),
            verdict=result.verdict,
            reasons=[*result.reasons, *gaps],
            reason_codes=result.reason_codes,
            metrics=result.metrics,
            settings=settings,
            judge_version=__version__,
            judge_sha256=judge_sha256(),
            runtime_sha256=str(runtime_fingerprint().get("sha256")),
            task_sha256=external_sha256(self.frozen),
            candidate_sha256=result.candidate.get("sha256"),
            seed=result.seed,
            judge_json=store.put_text(result.model_dump_json(indent=2)),
            duration_s=round(time.monotonic() - t0, 4),
        )


def trial_task(task: Task | FrozenExternal) -> TrialTask:
    return ExternalTask(task) if isinstance(task, FrozenExternal) else PackageTask(task)
