"""A trial's workspace: starter files, the baseline commit, and what the agent delivered.

The workspace gets its own git repository with the baseline committed (agents expect one).
The delivery, though, is read through a second, private repository (`shadow.git`, outside the
workspace) that has the same baseline commit and the workspace as its work tree: whatever the
agent does to the workspace's `.git` (commit, reset, delete it), the exact diff against the
baseline and the list of changed paths come from a repository it never saw.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from optarena.errors import MissingPrerequisiteError, OptarenaError
from optarena.files import copy_untrusted, remove_tree, survey
from optarena.records import ChangedFile, ChangeKind
from optarena.tasks import Task, in_scope

PROMPT_NAME = "TASK.md"
EXCLUDES = "__pycache__/\n*.pyc\n*.pyo\n"  # never part of a delivery
_BASELINE_DATE = "2000-01-01T00:00:00+0000"  # fixed: the same task gives the same commit
_GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "optarena",
    "GIT_AUTHOR_EMAIL": "optarena@localhost",
    "GIT_COMMITTER_NAME": "optarena",
    "GIT_COMMITTER_EMAIL": "optarena@localhost",
    "GIT_AUTHOR_DATE": _BASELINE_DATE,
    "GIT_COMMITTER_DATE": _BASELINE_DATE,
    "GIT_TERMINAL_PROMPT": "0",
}
_KINDS: dict[str, ChangeKind] = {"A": "added", "M": "modified", "D": "deleted", "T": "type_changed"}


def git(args: list[str], *, cwd: Path, git_dir: Path | None = None) -> bytes:
    """Run git with no user or system configuration; raise OptarenaError on failure."""
    prefix = ["git", "-c", "core.quotepath=off"]
    if git_dir is not None:
        prefix += [f"--git-dir={git_dir}", f"--work-tree={cwd}"]
    env = {**os.environ, **_GIT_ENV}
    try:
        proc = subprocess.run(
            prefix + args, cwd=cwd, env=env, capture_output=True, timeout=300, check=False
        )
    except FileNotFoundError:
        raise MissingPrerequisiteError("trials need 'git' on PATH (apt install git)") from None
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip()
        raise OptarenaError(f"git {' '.join(args[:2])} in {cwd} failed: {err[:400]}")
    return proc.stdout


def check_workspace(path: Path, overwrite: bool, protected: list[Path]) -> None:
    """Refuse a non-empty directory unless told to overwrite, and never one that holds the
    current directory, the home directory, a `protected` path, or someone else's git repo."""
    if path.exists() and not path.is_dir():
        raise OptarenaError(f"workspace {path} exists and is not a directory")
    if not path.is_dir() or not any(path.iterdir()):
        return
    if not overwrite:
        raise OptarenaError(f"workspace {path} is not empty; pass --overwrite to replace it")
    real = path.resolve()
    for keep in [Path.cwd(), Path.home(), *protected]:
        if keep.resolve().is_relative_to(real):
            raise OptarenaError(f"refusing to overwrite {path}: it contains {keep}")
    if (real / ".git").exists() and not _is_our_repo(real):
        raise OptarenaError(
            f"refusing to overwrite {path}: it is a git repository optarena did not create"
        )


def _is_our_repo(path: Path) -> bool:
    try:
        return git(["config", "--get", "optarena.workspace"], cwd=path).strip() == b"true"
    except OptarenaError:
        return False


def clear_dir(path: Path) -> None:
    """Empty a workspace (`--overwrite`): an earlier agent's, so nested however deep."""
    for child in path.iterdir():
        if child.is_dir() and not child.is_symlink():
            remove_tree(child)
        else:
            child.unlink()


def write_starter(task: Task, workspace: Path) -> list[str]:
    """The baseline's editable files plus TASK.md: what the agent starts from."""
    files = task.editable_files(task.baseline_dir)
    for rel in files:
        (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(task.baseline_dir / rel, workspace / rel)
    shutil.copyfile(task.prompt_path, workspace / PROMPT_NAME)
    return [*files, PROMPT_NAME]


def copy_artifacts(source: Path, workspace: Path, starter: list[str]) -> list[str]:
    """Copy a condition's artifacts (skills, CLAUDE.md, .claude/, MCP configs) into the
    workspace before the baseline commit, so they are part of what the agent starts from and
    never count as its changes. They may not replace a starter file (the baseline's editable
    files or the prompt): that would change the task, not the agent's set-up."""
    if not source.is_dir():
        raise OptarenaError(f"artifacts directory {source} does not exist")
    copied = []
    for path in sorted(source.rglob("*")):
        rel = path.relative_to(source).as_posix()
        if rel.split("/")[0] == ".git" or path.is_dir():
            continue
        if rel in starter:
            raise OptarenaError(f"artifact {source / rel} would replace the starter file {rel}")
        (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, workspace / rel, follow_symlinks=False)
        copied.append(rel)
    return copied


def _commit_baseline(workspace: Path, git_dir: Path | None, message: str) -> str:
    exclude = (git_dir or workspace / ".git") / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    exclude.write_text(EXCLUDES)
    git(["add", "-A", "--", "."], cwd=workspace, git_dir=git_dir)
    git(["commit", "-q", "--no-verify", "-m", message], cwd=workspace, git_dir=git_dir)
    return git(["rev-parse", "HEAD"], cwd=workspace, git_dir=git_dir).decode().strip()


def init_repos(task: Task, workspace: Path, shadow: Path) -> str:
    """The workspace's own repository and the private shadow one, both at the baseline."""
    message = f"baseline: {task.id} {task.spec.version}"
    git(["init", "-q", "--initial-branch=main"], cwd=workspace)
    git(["config", "optarena.workspace", "true"], cwd=workspace)
    ours = _commit_baseline(workspace, None, message)
    git(["init", "-q", "--bare", "--initial-branch=main", str(shadow)], cwd=workspace)
    theirs = _commit_baseline(workspace, shadow, message)
    if ours != theirs:
        raise OptarenaError(
            f"baseline commits differ ({ours} vs {theirs}): git is not reproducible"
        )
    return theirs


@dataclass(frozen=True)
class WorkspaceLimits:
    """How much a delivered workspace may hold before optarena reads it (git reads every file
    it stages, a large one whole into memory, and an agent decides the sizes: a 2 GB sparse
    file took 2 GB of git's memory). Beyond either limit the delivery is refused unread
    (`workspace_too_large`). The workspace's own `.git` is not counted (git never reads it)."""

    max_mb: float = 1024.0  # apparent size (a sparse file in full) and disk use, each
    max_entries: int = 200_000  # files, directories and links

    @property
    def max_bytes(self) -> int:
        return int(self.max_mb * (1 << 20))


class DeliveryRefused(Exception):
    """What the agent left cannot be read safely or is too large: the trial is recorded as
    rejected with these (code, reason) pairs, unread by git and never judged. Not an
    OptarenaError: it is the agent's doing, never the user's bad input."""

    def __init__(self, refusals: list[tuple[str, str]]) -> None:
        super().__init__("; ".join(reason for _code, reason in refusals))
        self.refusals = refusals


def check_delivery(workspace: Path, limits: WorkspaceLimits) -> None:
    """Survey the workspace before git or a copy reads it (bounded by the entry limit) and
    raise DeliveryRefused for what must not be read: a size over the limits, or an entry
    optarena would refuse (`optarena.files.survey`: a FIFO, socket or device, a hard link
    to a file others may not read, a name that is not UTF-8, a path nested too deep)."""
    found = survey(workspace, skip=(".git",), max_entries=limits.max_entries)
    refusals: list[tuple[str, str]] = []
    over = [
        f"{what} {size / (1 << 20):.1f} MiB"
        for what, size in (("apparent size", found.apparent_bytes), ("disk use", found.disk_bytes))
        if size > limits.max_bytes
    ]
    if found.truncated:
        over.append(f"more than {limits.max_entries} entries")
    if over:
        refusals.append(
            (
                "workspace_too_large",
                f"workspace_too_large: {', '.join(over)} (limit {limits.max_mb:g} MiB each, "
                f"{limits.max_entries} entries); not read",
            )
        )
    for f in found.findings:
        refusals.append((f.problem, f"{f.problem}: {f.rel} is {f.why}; not read"))
    if refusals:
        raise DeliveryRefused(refusals)


@dataclass(frozen=True)
class Delivery:
    """What the agent left in the workspace, relative to the baseline commit."""

    changed: list[ChangedFile]
    diff: bytes
    editable: list[str]

    @property
    def out_of_scope(self) -> list[str]:
        """Tracked files outside the editable scope that were changed or deleted: these
        reject the trial."""
        return [c.path for c in self.changed if not c.in_scope and c.change != "added"]

    @property
    def ignored(self) -> list[str]:
        """New files outside the editable scope (an agent's scratch benchmark, notes): listed
        in `changed`, never judged (only editable files reach the judge), never a rejection."""
        return [c.path for c in self.changed if not c.in_scope and c.change == "added"]


def parse_name_status(raw: bytes, editable: list[str]) -> list[ChangedFile]:
    """`git diff --name-status -z --no-renames` output -> changed files with their scope.
    (Names that are not UTF-8 were refused before git ran; were one there, it would be shown
    as `\\xNN`, never stored as a surrogate no record can hold.)"""
    parts = raw.decode("utf-8", errors="backslashreplace").split("\0")
    out = []
    for status, path in zip(parts[0::2], parts[1::2], strict=False):
        if not status:
            continue
        kind = _KINDS.get(status[0], "modified")
        out.append(ChangedFile(path=path, change=kind, in_scope=in_scope(path, editable)))
    return out


def capture(
    task: _Scoped,
    workspace: Path,
    shadow: Path,
    baseline: str,
    dest: Path,
    limits: WorkspaceLimits,
) -> Delivery:
    """Check the workspace (`check_delivery`: raises DeliveryRefused), then stage everything
    in the shadow repo, diff against the baseline, and copy the editable files to `dest` (the
    candidate that is judged and stored)."""
    workspace.mkdir(parents=True, exist_ok=True)  # an agent that deleted it delivered nothing
    check_delivery(workspace, limits)
    # The index starts as the baseline's tree: `add -A` then updates every file tracked at
    # base, even one the project's .gitignore matches (from an empty index it left those out,
    # and a clean delivery read as deleting them: out_of_scope).
    git(["read-tree", baseline], cwd=workspace, git_dir=shadow)
    git(["add", "-A", "--", "."], cwd=workspace, git_dir=shadow)
    base = ["diff", "--cached", "--no-renames", "--no-ext-diff", "--no-textconv", baseline]
    names = git([*base, "--name-status", "-z"], cwd=workspace, git_dir=shadow)
    diff = git([*base, "--binary", "--full-index"], cwd=workspace, git_dir=shadow)
    listed = set(task.editable_files(workspace))
    files = copy_untrusted(workspace, dest, skip=(".git",), want=listed.__contains__)
    return Delivery(parse_name_status(names, task.editable), diff, files)


class _Scoped(Protocol):
    @property
    def editable(self) -> list[str]: ...

    def editable_files(self, workspace: Path) -> list[str]: ...
