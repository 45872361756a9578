"""The external task spec (TOML, `kind = "external"`) and its frozen form.

Freezing resolves the base revision to a full commit hash and records the hashes of the spec,
of the tree at base and of the holdout directory; judging refuses an unfrozen spec and a frozen
one whose repository, base tree or holdout changed since (drift).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from optarena.errors import OptarenaError, RecordError, SpecError
from optarena.records import evolve, migrate_values
from optarena.tasks.external._environment import (
    Environment,
    ResolvedEnvironment,
    resolve_environment,
)

EXTERNAL_SCHEMA_VERSION = 2  # 2: at least 4 rounds (default 6) before a verdict


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Project(_Strict):
    repo: str = Field(description="a local git repository, relative to the spec file")
    base: str = Field(default="HEAD", description="any revision; frozen to a full commit hash")
    editable: list[str] = Field(min_length=1, description="globs: the only files an agent edits")


class Command(_Strict):
    command: str = Field(min_length=1, description="run by /bin/sh in the worktree")
    timeout_s: float = Field(default=600.0, gt=0)


class Setup(Command):
    cache: bool = Field(
        default=False,
        description="reuse set-up's result when the tree before it, the command, the variables "
        "and the environment are the same (opt-in: a set-up may write the worktree's own path "
        "into its output)",
    )


class Quality(Command):
    junit: str | None = Field(default=None, description="a JUnit XML report the command writes")
    holdout: str | None = Field(
        default=None, description="directory beside the spec, copied over the worktree to judge"
    )


class Metric(_Strict):
    json_path: str | None = Field(default=None, alias="json", description="key path: a.b.0.c")
    regex: str | None = Field(default=None, description="first group is the number")
    wall: bool = Field(default=False, description="the command's wall time")

    @model_validator(mode="after")
    def _one(self) -> Metric:
        if sum([self.json_path is not None, self.regex is not None, self.wall]) != 1:
            raise ValueError("exactly one of json, regex or wall = true")
        return self


SCALE_TOKEN = "{scale}"


class Scale(_Strict):
    """Two sizes of the benchmark's measured part, put where the command says `{scale}`.

    The judge runs each arm at both; the OS's time of the difference between them is the
    measured part's alone (start-up, compiling and whatever else a run does once cancel), so it
    can confirm an improvement that is a small part of the whole process."""

    low: int = Field(ge=1, description="the smaller size (e.g. repetitions of the timed part)")
    high: int = Field(ge=2, description="the larger size; the metric is read at this one")

    @model_validator(mode="after")
    def _order(self) -> Scale:
        if self.high <= self.low:
            raise ValueError(f"high ({self.high}) must be larger than low ({self.low})")
        return self


class Benchmark(Command):
    metric: Metric
    direction: Literal["lower", "higher"] = "lower"
    scale: Scale | None = Field(
        default=None, description="two sizes put into the command's {scale}; see Scale"
    )

    @model_validator(mode="after")
    def _scale_token(self) -> Benchmark:
        if self.scale is not None and SCALE_TOKEN not in self.command:
            raise ValueError(
                f"a scale is declared but the command has no {SCALE_TOKEN} to put it in"
            )
        if self.scale is None and SCALE_TOKEN in self.command:
            raise ValueError(
                f"the command has {SCALE_TOKEN} but no scale is declared: add "
                "scale = { low = 1, high = 16 } (sizes of the timed part)"
            )
        return self

    def at(self, size: int | None) -> str:
        """The command at one size of the scale (None: as written, without a scale)."""
        return self.command if size is None else self.command.replace(SCALE_TOKEN, str(size))


class ExternalLimits(_Strict):
    """The sandbox limits of every command of the task (unset: the sandbox's own)."""

    memory_mb: int | None = Field(default=None, gt=0, description="address space per process")
    processes: int | None = Field(default=None, gt=0, description="processes of the command")
    open_files: int | None = Field(default=None, gt=0, description="open files per process")
    file_size_mb: int | None = Field(default=None, gt=0, description="largest file written")


class ExternalMeasurement(_Strict):
    """How the judge times an external project's benchmark (rounds, budget, minimum effect)."""

    budget_s: float = Field(default=120.0, gt=0)
    min_effect: float = Field(default=0.03, gt=0, lt=1)
    max_rounds: int = Field(default=10, ge=4, le=1000)
    min_rounds: int = Field(
        default=6,
        ge=4,
        description="rounds before any verdict; a bootstrap interval over fewer covers far "
        "less than it claims (a no-op read `improved` over 3 rounds on a loaded machine)",
    )

    @model_validator(mode="after")
    def _rounds(self) -> ExternalMeasurement:
        if self.max_rounds < self.min_rounds:
            raise ValueError(
                f"max_rounds ({self.max_rounds}) is below min_rounds ({self.min_rounds})"
            )
        return self


class ExternalSpec(_Strict):
    schema_version: int = EXTERNAL_SCHEMA_VERSION
    kind: Literal["external"]
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")
    version: str
    title: str = Field(min_length=1)
    prompt: str = Field(description="a file of the repository at base, given as TASK.md")
    project: Project
    setup: Setup | None = None
    quality: Quality | None = None
    benchmark: Benchmark | None = None
    measurement: ExternalMeasurement = Field(default_factory=ExternalMeasurement)
    env: dict[str, str] = Field(default_factory=dict)
    environment: Environment = Field(default_factory=Environment)
    limits: ExternalLimits = Field(default_factory=ExternalLimits)


class Frozen(_Strict):
    spec_path: str
    repo: str = Field(description="absolute path of the repository")
    base_commit: str
    spec_sha256: str
    tree_sha256: str = Field(description="git's tree id of the base commit")
    holdout_sha256: str | None = None
    environment_sha256: str | None = Field(
        default=None, description="the declared interpreter's packages and the wheelhouse"
    )
    python: str | None = Field(default=None, description="the declared interpreter")
    python_version: str | None = None


class FrozenExternal(_Strict):
    """What `optarena task freeze` writes: the spec plus what it was frozen to."""

    spec: ExternalSpec
    frozen: Frozen
    path: str = Field(default="", description="where this frozen file was read from")

    @property
    def repo(self) -> Path:
        return Path(self.frozen.repo)

    @property
    def spec_dir(self) -> Path:
        return Path(self.frozen.spec_path).parent

    @property
    def holdout(self) -> Path | None:
        h = self.spec.quality.holdout if self.spec.quality else None
        return None if h is None else self.spec_dir / h

    def environment(self) -> ResolvedEnvironment:
        """The declared environment, resolved and checked again (it runs the interpreter)."""
        return resolve_environment(Path(self.frozen.spec_path), self.spec.environment)

    def gaps(self) -> list[str]:
        out = []
        if self.spec.quality is None:
            out.append("no_quality_gate")
        if self.spec.benchmark is None:
            out.append("no_benchmark")
        return out


def git_bytes(args: list[str], cwd: Path) -> bytes:
    """git's output as it is: file contents and names in a repository are bytes, in whatever
    encoding the project (or a candidate) chose."""
    try:
        return subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, check=True, timeout=120
        ).stdout
    except FileNotFoundError:
        raise OptarenaError("git is not installed (external tasks need it)") from None
    except subprocess.CalledProcessError as e:
        err = e.stderr.decode(errors="replace").strip()
        raise OptarenaError(f"git {' '.join(args)} in {cwd}: {err}") from None


def git(args: list[str], cwd: Path, strip: bool = True) -> str:
    """git's output as text. Bytes that are not UTF-8 (a latin-1 file name) become lone
    surrogates, as the OS's own file names do in Python, so a name read here opens the same
    file; show one to a person or a record through `readable`."""
    out = os.fsdecode(git_bytes(args, cwd))
    return out.strip() if strip else out


def readable(name: str) -> str:
    """A name from git or the file system as text a record (JSON) can hold: bytes that are
    not UTF-8 are shown as \\xNN (a lone surrogate cannot be written as UTF-8)."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise OptarenaError(f"{path}: cannot read: {e.strerror or e}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise SpecError(path, "", f"not valid TOML: {e}") from None


def is_external_spec(path: Path) -> bool:
    """A file (not a task directory) whose `kind` is "external", frozen or not."""
    if not path.is_file():
        return False
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return data.get("kind") == "external" or (
        isinstance(data.get("spec"), dict) and data["spec"].get("kind") == "external"
    )


def _migrated(path: Path, data: Any, prefix: str = "") -> Any:
    """The spec's data at today's version (older versions step by step, newer refused)."""
    if not isinstance(data, dict):
        return data  # validation says what is wrong
    try:
        return migrate_values(
            "external_task", data, current=EXTERNAL_SCHEMA_VERSION, where=str(path)
        )
    except RecordError as e:
        raise SpecError(path, prefix + "schema_version", str(e).removeprefix(f"{path}: ")) from None


def _validate(path: Path, data: dict[str, Any], model: type[BaseModel], prefix: str = "") -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        loc = prefix + ".".join(str(p) for p in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "missing":
            msg = "is required but missing"
        elif err["type"] == "extra_forbidden":
            msg = "is not a known field"
        raise SpecError(path, loc or "(top level)", msg) from None


def load_spec(path: Path) -> ExternalSpec:
    spec: ExternalSpec = _validate(path, _migrated(path, _read_toml(path)), ExternalSpec)
    return spec


def holdout_sha256(path: Path | None) -> str | None:
    if path is None:
        return None
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        h.update(os.fsencode(f.relative_to(path).as_posix()) + b"\0")  # a name in any encoding
        h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()


def _resolve(spec_path: Path, spec: ExternalSpec) -> tuple[Path, str, str]:
    repo = (spec_path.parent / spec.project.repo).resolve()
    if not (repo / ".git").exists() and git(["rev-parse", "--is-inside-work-tree"], repo) != "true":
        raise SpecError(spec_path, "project.repo", f"{repo} is not a git repository")
    try:
        commit = git(["rev-parse", "--verify", f"{spec.project.base}^{{commit}}"], repo)
    except OptarenaError:
        raise SpecError(
            spec_path, "project.base", f"revision '{spec.project.base}' does not exist in {repo}"
        ) from None
    tree = git(["rev-parse", f"{commit}^{{tree}}"], repo)
    try:
        git(["cat-file", "-e", f"{commit}:{spec.prompt}"], repo)
    except OptarenaError:
        raise SpecError(
            spec_path, "prompt", f"{spec.prompt} is not a file at {commit[:12]}"
        ) from None
    return repo, commit, tree


def _check_holdout_unseen(spec_path: Path, repo: Path, commit: str, holdout: Path) -> None:
    """The holdout must not be in the repository at base: the agent's workspace is a clone."""
    real = holdout.resolve()
    if not real.is_relative_to(repo):
        return
    rel = real.relative_to(repo).as_posix() or "."
    if git(["ls-tree", "-r", "--name-only", commit, "--", rel], repo):
        raise SpecError(
            spec_path, "quality.holdout",
            f"{holdout} is tracked in the repository at {commit[:12]}: every clone the agent "
            "gets would contain it; keep the holdout outside the repository, or untracked",
        )  # fmt: skip


def _tracked(repo: Path, commit: str) -> list[str]:
    return [p for p in git(["ls-tree", "-r", "-z", "--name-only", commit], repo).split("\0") if p]


def _check_scope(spec_path: Path, spec: ExternalSpec, repo: Path, commit: str) -> None:
    """At least one editable pattern must match a file at base: a scope of patterns that match
    nothing froze cleanly once, and then every candidate's change was out of scope. (A single
    pattern may name a file a candidate is to create: `freeze_warnings` says so.)"""
    from optarena.tasks.external._shape import unmatched_patterns

    editable = spec.project.editable
    if len(unmatched_patterns(editable, _tracked(repo, commit))) == len(editable):
        raise SpecError(
            spec_path, "project.editable",
            f"{editable} match no file at {commit[:12]}: every change a candidate made would "
            "be out of scope (paths are relative to the repository's root)",
        )  # fmt: skip


def freeze_warnings(frozen: FrozenExternal) -> list[str]:
    """What freezing can tell but not refuse: a benchmark that imports the project into the
    process that prints the metric (see `_shape`)."""
    from optarena.tasks.external._shape import (
        loads_project,
        single_process_warning,
        unmatched_patterns,
    )

    repo, commit = frozen.repo, frozen.frozen.base_commit
    tracked = _tracked(repo, commit)
    out = [
        f"project.editable.{i}: '{g}' matches no file at {commit[:12]}; a candidate may only "
        "create a file there"
        for i, g in unmatched_patterns(frozen.spec.project.editable, tracked)
    ]
    b = frozen.spec.benchmark
    if b is None:
        return out

    def read(path: str) -> bytes | None:
        try:
            return git_bytes(["show", f"{commit}:{path}"], repo)
        except OptarenaError:
            return None

    found = loads_project(b.command, frozen.spec.project.editable, tracked, read)
    warning = single_process_warning(b.command, found)
    return out if warning is None else [*out, warning]


def freeze_external(spec_path: Path, out: Path) -> FrozenExternal:
    spec_path = spec_path.resolve()
    if not (spec_path.parent / ".git").exists() and not spec_path.is_file():
        raise OptarenaError(f"{spec_path}: not a file")
    spec = load_spec(spec_path)
    repo, commit, tree = _resolve(spec_path, spec)
    holdout = None
    if spec.quality and spec.quality.holdout:
        holdout = spec_path.parent / spec.quality.holdout
        if not holdout.is_dir():
            raise SpecError(spec_path, "quality.holdout", f"{holdout} is not a directory")
        _check_holdout_unseen(spec_path, repo, commit, holdout)
    _check_scope(spec_path, spec, repo, commit)
    env = resolve_environment(spec_path, spec.environment)
    frozen = FrozenExternal(
        spec=spec,
        frozen=Frozen(
            spec_path=str(spec_path),
            repo=str(repo),
            base_commit=commit,
            spec_sha256=hashlib.sha256(spec_path.read_bytes()).hexdigest(),
            tree_sha256=tree,
            holdout_sha256=holdout_sha256(holdout),
            environment_sha256=env.sha256() if spec.environment != Environment() else None,
            python=None if env.python is None else str(env.python),
            python_version=env.python_version,
        ),
    )
    out.write_text(_to_toml(json.loads(frozen.model_dump_json(by_alias=True, exclude={"path"}))))
    return evolve(frozen, path=str(out.resolve()))


def load_frozen(path: Path) -> FrozenExternal:
    """A frozen spec, checked against what it was frozen to (drift is an error)."""
    data = _read_toml(path)
    if "frozen" not in data:
        raise OptarenaError(
            f"{path}: an external spec that is not frozen; freeze it first: "
            f"optarena task freeze {path} -o FROZEN.toml"
        )
    data["spec"] = _migrated(path, data.get("spec"), "spec.")
    f: FrozenExternal = _validate(path, data, FrozenExternal)
    f = evolve(f, path=str(path.resolve()))
    drift = []
    repo = f.repo
    try:
        tree = git(["rev-parse", f"{f.frozen.base_commit}^{{tree}}"], repo)
    except OptarenaError as e:
        raise OptarenaError(f"{path}: drift: the base commit is gone from {repo} ({e})") from None
    if tree != f.frozen.tree_sha256:
        drift.append(f"the tree at {f.frozen.base_commit[:12]} changed")
    if holdout_sha256(f.holdout) != f.frozen.holdout_sha256:
        drift.append("the holdout directory changed")
    if f.frozen.environment_sha256 is not None:
        try:
            now = f.environment().sha256()
        except SpecError as e:
            now = f"gone ({e})"
        if now != f.frozen.environment_sha256:
            drift.append(
                "the declared environment changed (its interpreter, the distributions "
                "installed in it, or the wheelhouse)"
            )
    if drift:
        raise OptarenaError(f"{path}: drift since freezing: {'; '.join(drift)}")
    return f


def _to_toml(data: dict[str, Any]) -> str:
    """Enough TOML for the frozen spec: tables of scalars, lists of scalars, nested tables."""

    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int | float):
            return repr(v)
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return json.dumps(str(v))

    lines: list[str] = []

    def table(prefix: str, d: dict[str, Any]) -> None:
        scalars = {k: v for k, v in d.items() if not isinstance(v, dict) and v is not None}
        subs = {k: v for k, v in d.items() if isinstance(v, dict)}
        if prefix:
            lines.append(f"\n[{prefix}]")
        lines.extend(f"{k} = {value(v)}" for k, v in scalars.items())
        for k, v in subs.items():
            table(f"{prefix}.{k}" if prefix else k, v)

    table("", data)
    return "\n".join(lines).lstrip("\n") + "\n"
