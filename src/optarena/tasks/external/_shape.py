"""What `task freeze` can tell about a spec before any candidate exists: its scope patterns,
and whether its benchmark loads the project's code into the process that prints the metric.

A benchmark whose own process imports the project runs the candidate's code beside the code
that draws its inputs, checks its answers and prints its metric: the candidate can change all
three (a single-process benchmark with an in-process self-check was defeated so, and read
`improved` at 0.21). The OS check cannot see that, since the work really is less. The shape
that holds is a parent that never imports the project (see docs/external-tasks.md). Looking is
static: for a `python SCRIPT` command, the script's imports at base, followed through the
project's own modules; what cannot be read that way (`python -m pytest`, a shell script) is
not guessed at.
"""

from __future__ import annotations

import ast
import shlex
from collections.abc import Callable
from pathlib import PurePosixPath

from optarena.tasks._loader import in_scope

ReadFile = Callable[[str], bytes | None]  # a path at base -> its bytes, None if not tracked


def unmatched_patterns(editable: list[str], tracked: list[str]) -> list[tuple[int, str]]:
    """(index, pattern) of each editable glob that matches no tracked file: with it, every
    change a candidate made there would be out of scope."""
    return [(i, g) for i, g in enumerate(editable) if not any(in_scope(p, [g]) for p in tracked)]


def _scripts(command: str) -> list[str]:
    """The .py scripts a command hands to a Python interpreter (`python3 bench.py ...`)."""
    try:
        words = shlex.split(command.replace("{scale}", "1"))
    except ValueError:
        return []
    out = []
    for i, w in enumerate(words[:-1]):
        name = PurePosixPath(w).name
        if name.startswith("python") and words[i + 1].endswith(".py"):
            out.append(words[i + 1].removeprefix("./"))
    return out


def _module_files(name: str, near: str, tracked: set[str]) -> list[str]:
    """Where a top-level module of the project would be: beside the importing file, at the
    root, or under src/ (a module, or every file of a package)."""
    out: list[str] = []
    for root in dict.fromkeys((near, "", "src")):
        base = f"{root}/{name}" if root else name
        if f"{base}.py" in tracked:
            out.append(f"{base}.py")
        out += [p for p in tracked if p.startswith(f"{base}/") and p.endswith(".py")]
    return out


def _imports(source: bytes) -> set[str]:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def loads_project(
    command: str, editable: list[str], tracked: list[str], read: ReadFile
) -> list[tuple[str, str]]:
    """(script, editable file) for each script of `command` whose process imports, directly
    or through the project's own modules, a file in the editable scope."""
    files = set(tracked)
    found: list[tuple[str, str]] = []
    for script in _scripts(command):
        seen: set[str] = set()
        todo = [script]
        while todo:
            path = todo.pop()
            if path in seen or len(seen) > 200:
                continue
            seen.add(path)
            if in_scope(path, editable) and path != script:
                found.append((script, path))
                break
            data = read(path)
            if data is None:
                continue
            near = str(PurePosixPath(path).parent).removeprefix(".")
            for name in _imports(data):
                todo += _module_files(name, near, files)
    return found


def single_process_warning(command: str, found: list[tuple[str, str]]) -> str | None:
    if not found:
        return None
    script, file = found[0]
    return (
        f"the benchmark `{command}` loads the project's code ({script} imports {file}, which "
        "candidates edit) into the process that prints the metric: a candidate's code can then "
        "change the inputs, the answer check and the printed metric, and the OS check cannot "
        "see a benchmark made to do less work. Draw the inputs and check the answers in a "
        "parent process that never imports the project (docs/external-tasks.md, 'A benchmark "
        "the candidate cannot forge')"
    )
