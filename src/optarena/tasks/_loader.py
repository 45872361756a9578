"""Find, read and validate task packages; import their generator and oracle by path."""

from __future__ import annotations

import fnmatch
import importlib.util
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import ModuleType
from typing import Any

from pydantic import ValidationError

from optarena.errors import RecordError, SpecError, UnknownNameError
from optarena.identity import hash_files, hash_tree, tree_files
from optarena.records import migrate_values
from optarena.tasks._model import TASK_SCHEMA_VERSION, TaskSpec

BUILTIN_DIR = Path(__file__).resolve().parent / "builtin"
SPEC_FILE = "task.toml"


def in_scope(relpath: str, globs: list[str]) -> bool:
    """Whether a POSIX relative path is matched by any editable glob."""
    return any(fnmatch.fnmatchcase(relpath, g) for g in globs)


@dataclass(frozen=True)
class Task:
    """A loaded, validated task package. `root` is never handed to a candidate."""

    spec: TaskSpec
    root: Path
    _modules: dict[str, ModuleType] = field(default_factory=dict, repr=False, compare=False)

    @property
    def id(self) -> str:
        return self.spec.id

    @cached_property
    def sha256(self) -> str:
        return hash_tree(self.root)

    @property
    def baseline_dir(self) -> Path:
        return self.root / self.spec.baseline

    @property
    def prompt_path(self) -> Path:
        return self.root / self.spec.prompt

    def editable_files(self, candidate_dir: Path) -> list[str]:
        """The candidate's files that the editable scope covers (the candidate proper)."""
        return [f for f in tree_files(candidate_dir) if in_scope(f, self.spec.editable)]

    def candidate_sha256(self, candidate_dir: Path) -> str:
        return hash_files(candidate_dir, self.editable_files(candidate_dir))

    def _callable(self, ref: str) -> Callable[..., Any]:
        file, func = ref.split(":")
        if file not in self._modules:
            path = self.root / file
            name = f"optarena_task_{self.spec.id.replace('-', '_')}_{Path(file).stem}"
            spec = importlib.util.spec_from_file_location(name, path)
            if spec is None or spec.loader is None:
                raise SpecError(path, "", "cannot be imported as a Python module")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            self._modules[file] = module
        fn = getattr(self._modules[file], func, None)
        if not callable(fn):
            raise SpecError(self.root / SPEC_FILE, ref, f"{file} defines no function '{func}'")
        return fn

    @property
    def generator(self) -> Callable[..., Any]:
        return self._callable(self.spec.generator)

    def check_workloads(self) -> None:
        """Draw every workload's inputs once: params the generator cannot use are bad input
        (a SpecError naming the workload), found before anything is judged or recorded."""
        generator = self.generator
        for i, w in enumerate(self.spec.workloads):
            try:
                generator(w, 0)
            except Exception as e:  # any failure of the task's own code on its own params
                why = f"{type(e).__name__}: {e}"
                raise SpecError(
                    self.root / SPEC_FILE,
                    f"workloads.{i}.params",
                    f"workload '{w.name}': {self.spec.generator} cannot use {w.params} ({why})",
                ) from None

    @property
    def oracle(self) -> Callable[..., Any]:
        return self._callable(self.spec.oracle)


def _format_validation(path: Path, err: ValidationError) -> SpecError:
    lines = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "(top level)"
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "missing":
            msg = "is required but missing"
        elif e["type"] == "extra_forbidden":
            msg = "is not a known field"
        lines.append((loc, msg))
    first_loc, first_msg = lines[0]
    more = "".join(f"; field '{loc}': {msg}" for loc, msg in lines[1:])
    return SpecError(path, first_loc, first_msg + more)


def _check_files(spec: TaskSpec, root: Path, spec_path: Path) -> None:
    if not (root / spec.prompt).is_file():
        raise SpecError(spec_path, "prompt", f"file {spec.prompt} not found in {root}")
    base = root / spec.baseline
    if not base.is_dir():
        raise SpecError(spec_path, "baseline", f"directory {spec.baseline} not found in {root}")
    if not in_scope(spec.entry.file, spec.editable):
        raise SpecError(spec_path, "entry.file", f"'{spec.entry.file}' must match an editable glob")
    if not (base / spec.entry.file).is_file():
        raise SpecError(spec_path, "entry.file", f"baseline has no {spec.entry.file}")
    for fname in ("generator", "oracle"):
        file = getattr(spec, fname).split(":")[0]
        if not (root / file).is_file():
            raise SpecError(spec_path, fname, f"file {file} not found in {root}")
        if in_scope(file, spec.editable):
            raise SpecError(spec_path, fname, f"{file} must not be editable by the agent")
    for i, c in enumerate(spec.controls):
        if not (root / c.dir / spec.entry.file).is_file():
            raise SpecError(spec_path, f"controls.{i}.dir", f"{c.dir}/{spec.entry.file} not found")


def load_task(root: Path) -> Task:
    """Read and validate `root/task.toml`; raise SpecError naming file and field."""
    root = root.resolve()
    spec_path = root / SPEC_FILE
    if not spec_path.is_file():
        raise SpecError(spec_path, "", "no task.toml here: a task is a directory with a task.toml")
    try:
        raw = tomllib.loads(spec_path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise SpecError(spec_path, "", f"is not valid TOML ({e})") from None
    except UnicodeDecodeError:
        raise SpecError(spec_path, "", "is not UTF-8 text") from None
    try:
        spec = TaskSpec.model_validate(
            migrate_values("task", raw, current=TASK_SCHEMA_VERSION, where=str(spec_path))
        )
    except ValidationError as e:
        raise _format_validation(spec_path, e) from None
    except RecordError as e:
        raise SpecError(
            spec_path, "schema_version", str(e).removeprefix(f"{spec_path}: ")
        ) from None
    _check_files(spec, root, spec_path)
    return Task(spec=spec, root=root)


def builtin_task_ids() -> list[str]:
    return sorted(p.parent.name for p in BUILTIN_DIR.glob(f"*/{SPEC_FILE}"))


def resolve_task(ref: str | Path) -> Task:
    """A built-in id, or a path to a task directory."""
    ref_s = str(ref)
    if (BUILTIN_DIR / ref_s / SPEC_FILE).is_file():
        return load_task(BUILTIN_DIR / ref_s)
    path = Path(ref_s).expanduser()
    if path.is_dir():
        return load_task(path)
    if path.name == SPEC_FILE and path.is_file():
        return load_task(path.parent)
    raise UnknownNameError("task", ref_s, builtin_task_ids())
