"""What a condition's trials are made of, as hashes: the files its command names and runs, the
agent's version, and one `cell_sha256` per (task, condition) that resume matches on.

An experiment's agents are often scripts beside the plan (`{plan_dir}/agent.py`). Editing one
after freeze changes every later trial of that condition, so the lock hashes, per condition:

- every existing file or directory a command token or an agent argument names by an absolute
  path (`{plan_dir}` expanded; `--opt=PATH` read after the `=`), links followed to what they
  point at and the link itself recorded;
- the command's executable as PATH resolves it (for a command agent it *is* the agent);
- for each Python file among those, the modules it imports that are found beside it (the
  script's directory and the directory its real path is in, where Python looks first), then
  theirs, transitively; a local package is hashed whole.

What a script reads by a name computed at run time (`exec`, `importlib` with a built string, a
data file opened by path) is not found this way: name such files in the command, or keep them
in the condition's `artifacts`, which are hashed whole.

Resume matches on `cell_sha256`, never on the experiment's name alone: a second plan reusing
a name, or a condition whose script changed, does not inherit another's trials. What a trial
*means* goes into it (the experiment's name, the task's hash, the condition with these file
hashes and the agent's version, the limits, the judge settings); what only orders or compares
trials (seed, repetitions, max_parallel, retries, [compare]) does not, so adding repetitions
keeps the ones done.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import shlex
import shutil
from pathlib import Path
from typing import Any

from optarena.agents import create_runner
from optarena.errors import OptarenaError, SpecError
from optarena.files import entries_under
from optarena.records import Condition, ExperimentPlan

MAX_FILES = 5_000  # per condition: a named directory bigger than this is refused, not skimmed
MAX_BYTES = 512 * 2**20
MAX_PARSE_BYTES = 4 * 2**20  # a "Python file" larger than this is hashed, not parsed
_SKIP_DIRS = {"__pycache__", ".git", ".pytest_cache", ".mypy_cache", ".ruff_cache"}


class _Files:
    """The files of one condition: shown name -> sha256, bounded in count and bytes."""

    def __init__(self, plan_dir: Path, where: str, field: str) -> None:
        self.plan_dir = plan_dir
        self.where, self.field = where, field
        self.hashes: dict[str, str] = {}
        self.bytes = 0
        self._python: list[tuple[Path, tuple[Path, ...]]] = []

    def shown(self, path: Path) -> str:
        """Relative to the plan's directory when inside it (the lock stays valid when the
        plan's directory moves), else absolute; never through a resolved link."""
        p = Path(os.path.abspath(path))
        inside = p.is_relative_to(self.plan_dir)
        return p.relative_to(self.plan_dir).as_posix() if inside else str(p)

    def add(self, path: Path) -> None:
        """A named path: a file, a directory (whole), or a link (recorded, then followed)."""
        name = self.shown(path)
        if name in self.hashes:
            return
        if path.is_symlink():
            self.hashes[name] = "link -> " + os.readlink(path)
            real = Path(os.path.realpath(path))
            if real.exists():
                self.add(real)
            return
        if path.is_dir():
            self.hashes[name] = "directory"
            for entry in entries_under(path, enter=lambda d: d.name not in _SKIP_DIRS):
                if entry.suffix not in (".pyc", ".pyo") and (entry.is_file() or entry.is_symlink()):
                    self.add(entry)
            return
        if not path.is_file():
            self.hashes[name] = "not a regular file"
            return
        self._hash_file(path, name)
        if path.suffix == ".py" or _python_shebang(path):
            roots = tuple(dict.fromkeys((path.parent, Path(os.path.realpath(path)).parent)))
            self._python.append((path, roots))

    def _hash_file(self, path: Path, name: str) -> None:
        if len(self.hashes) >= MAX_FILES:
            raise self._too_big(f"more than {MAX_FILES} files")
        h = hashlib.sha256()
        try:
            with path.open("rb") as f:
                while chunk := f.read(1 << 20):
                    self.bytes += len(chunk)
                    if self.bytes > MAX_BYTES:
                        raise self._too_big(f"more than {MAX_BYTES >> 20} MiB")
                    h.update(chunk)
        except OSError as e:
            raise SpecError(self.where, self.field, f"cannot read {path}: {e.strerror}") from None
        self.hashes[name] = h.hexdigest()

    def _too_big(self, what: str) -> SpecError:
        return SpecError(
            self.where, self.field, f"names {what} to fingerprint; name the agent's own files, "
            "not a whole tree of data",
        )  # fmt: skip

    def follow_imports(self) -> None:
        """Hash the local modules the Python files import, transitively."""
        seen: set[Path] = set()
        while self._python:
            path, roots = self._python.pop()
            real = Path(os.path.realpath(path))
            if real in seen:
                continue
            seen.add(real)
            for module in _imports(real, roots):
                found = _find_module(module, roots)
                if found is None or self.shown(found) in self.hashes:
                    continue
                self.add(found)
                if found.is_dir():  # a package: its modules may import more
                    inside = entries_under(found, enter=lambda d: d.name not in _SKIP_DIRS)
                    self._python += [(f, roots) for f in sorted(inside) if f.suffix == ".py"]


def _python_shebang(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            first = f.readline(256)
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


def _imports(path: Path, roots: tuple[Path, ...]) -> list[str]:
    """Dotted names a file imports (relative ones made absolute against the roots)."""
    try:
        if path.stat().st_size > MAX_PARSE_BYTES:
            return []
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return []  # hashed as bytes all the same; only its imports are not followed
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = _relative_base(path, node.level, base, roots)
            if base:
                out.append(base)
                out += [f"{base}.{a.name}" for a in node.names if a.name != "*"]
    return out


def _relative_base(path: Path, level: int, module: str, roots: tuple[Path, ...]) -> str:
    """`from ..x import y` in a file under one of the roots, as an absolute dotted name."""
    for root in roots:
        if path.is_relative_to(root):
            parts = list(path.relative_to(root).parent.parts)
            if level - 1 > len(parts):
                return ""
            parts = parts[: len(parts) - (level - 1)]
            return ".".join([*parts, *([module] if module else [])])
    return ""


def _find_module(dotted: str, roots: tuple[Path, ...]) -> Path | None:
    """Where a module lives under one of the roots: a top-level module's file, or the
    directory of the top-level package the name is inside (hashed whole); None when it is not
    a local module (the standard library, an installed package)."""
    parts = dotted.split(".")
    for root in roots:
        top = root / parts[0]
        if top.is_dir() and top.name not in _SKIP_DIRS:
            inside = top.joinpath(*parts[1:])
            if (top / "__init__.py").is_file() or inside.with_suffix(".py").is_file():
                return top
        if len(parts) == 1 and top.with_suffix(".py").is_file():
            return top.with_suffix(".py")
    return None


def _named_paths(value: str, plan_dir: Path) -> list[Path]:
    """Absolute paths a command or argument names (after `{plan_dir}`), that exist."""
    text = value.replace("{plan_dir}", shlex.quote(str(plan_dir)))  # as the trial expands it
    try:
        tokens = shlex.split(text)
    except ValueError:
        tokens = text.split()
    out = []
    for token in tokens:
        for part in {token, token.partition("=")[2]}:
            if part.startswith(("/", "~")):
                path = Path(part).expanduser()
                if os.path.lexists(path):
                    out.append(path)
    return out


def condition_command(c: Condition) -> str | None:
    return c.command if c.command is not None else c.agent_args.get("command")


def condition_files(plan_path: Path, index: int, c: Condition) -> dict[str, str]:
    """shown path -> sha256 (or 'directory', 'link -> TARGET') of what the condition's agent
    is made of, beside the plan or anywhere its command names."""
    plan_dir = plan_path.parent
    files = _Files(plan_dir, str(plan_path), f"conditions.{index}")
    values = [v for k, v in sorted(c.agent_args.items()) if k != "command"]
    command = condition_command(c)
    if command is not None:
        values.insert(0, command)
        try:
            argv0 = shlex.split(command.replace("{plan_dir}", shlex.quote(str(plan_dir))))[0]
        except (ValueError, IndexError):
            argv0 = ""
        exe = shutil.which(argv0) if argv0 and "/" not in argv0 else None
        if exe is not None:
            files.add(Path(exe))
    for value in values:
        for path in _named_paths(value, plan_dir):
            files.add(path)
    files.follow_imports()
    return dict(sorted(files.hashes.items()))


def agent_version(c: Condition) -> str | None:
    """The agent's own version (`claude --version`...), None when it cannot be known."""
    args = dict(c.agent_args)
    command = condition_command(c)
    if command is not None:
        args["command"] = command
    try:
        return create_runner(c.agent, args).version()
    except OptarenaError:
        return None


def condition_identity(plan_path: Path, index: int, c: Condition) -> dict[str, Any]:
    """A condition as its trials depend on it: its definition, files and agent version."""
    return {
        "agent": c.agent,
        "command": c.command,
        "agent_args": dict(sorted(c.agent_args.items())),
        "env": dict(sorted(c.env.items())),
        "labels": dict(sorted(c.labels.items())),
        "files": condition_files(plan_path, index, c),
        "agent_version": agent_version(c),
    }


def cell_sha256(plan: ExperimentPlan, task: dict[str, str], condition: dict[str, Any]) -> str:
    """The identity of one (task, condition) cell: what its trials mean (module docstring)."""
    content = {
        "experiment": plan.experiment.name,
        "task": task,
        "condition": condition,
        "limits": plan.limits.model_dump(mode="json"),
        "judge": plan.judge.model_dump(mode="json"),
    }
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()
