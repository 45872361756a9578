"""The package layering: no import cycles between optarena's top-level packages and modules,
and no reaching into another package's private modules. Read from the source with `ast`
(every import, lazy ones inside functions and `TYPE_CHECKING` ones included), so the test
needs no import side effects and names the file of each offending import."""

from __future__ import annotations

import ast
from collections import defaultdict
from itertools import pairwise
from pathlib import Path

import optarena

ROOT = Path(optarena.__file__).parent


def _imports(path: Path) -> list[str]:
    """Absolute `optarena.*` module names imported by a file (relative imports resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = ["optarena", *path.relative_to(ROOT).parent.parts]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            out.append(module)
    return [m for m in out if m == "optarena" or m.startswith("optarena.")]


def _top(path: Path) -> str:
    first = path.relative_to(ROOT).parts[0]
    return first.removesuffix(".py")


def _graph() -> dict[str, dict[str, list[str]]]:
    """top-level name -> imported top-level name -> the files that import it."""
    graph: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for path in sorted(ROOT.rglob("*.py")):
        if "builtin" in path.relative_to(ROOT).parts:  # task packages: data, not optarena
            continue
        src = _top(path)
        for module in _imports(path):
            parts = module.split(".")
            if len(parts) < 2 or parts[1] == src or parts[1] == "__init__":
                continue
            graph[src][parts[1]].append(str(path.relative_to(ROOT)))
    return graph


def _cycle(graph: dict[str, dict[str, list[str]]]) -> list[str] | None:
    """One cycle of the graph as a path [a, b, ..., a], or None."""
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, {})):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_no_import_cycle_between_top_level_packages() -> None:
    graph = _graph()
    cycle = _cycle(graph)
    if cycle is not None:
        where = [f"{a} -> {b}: {', '.join(graph[a][b])}" for a, b in pairwise(cycle)]
        raise AssertionError("import cycle " + " -> ".join(cycle) + "\n" + "\n".join(where))


def test_records_import_no_behaviour() -> None:
    # records are shared by every package, so they may import only errors (typed failures)
    assert set(_graph()["records"]) <= {"errors"}


# Deliberate exceptions, each with its reason.
PRIVATE_IMPORTS_ALLOWED = {
    # the relay runs inside the agent sandbox: `optarena.mcp` would import the MCP SDK
    ("cli/_mcp.py", "optarena.mcp._host"),
}


def test_no_package_imports_another_ones_private_modules() -> None:
    offenders = []
    for path in sorted(ROOT.rglob("*.py")):
        if "builtin" in path.relative_to(ROOT).parts:
            continue
        src = _top(path)
        for module in _imports(path):
            parts = module.split(".")
            private = any(p.startswith("_") and p != "__init__" for p in parts[2:])
            allowed = (str(path.relative_to(ROOT)), module) in PRIVATE_IMPORTS_ALLOWED
            if len(parts) > 2 and parts[1] != src and private and not allowed:
                offenders.append(f"{path.relative_to(ROOT)}: {module}")
    assert offenders == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph: dict[str, dict[str, list[str]]] = {
        "a": {"b": ["x"]},
        "b": {"c": ["y"]},
        "c": {"a": ["z"]},
    }
    assert _cycle(graph) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b": ["x"]}, "b": {}}) is None


def _public_type_names(path: Path) -> list[str]:
    """Classes and type aliases (`Name = Literal[...]`) a module defines at top level."""
    out = []
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ClassDef):
            out.append(node.name)
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name[:1].isupper() and not name.isupper():
                out.append(name)
    return [n for n in out if not n.startswith("_")]


def test_no_two_packages_define_the_same_type_name() -> None:
    where: dict[str, set[str]] = defaultdict(set)
    for path in sorted(ROOT.rglob("*.py")):
        if "builtin" in path.relative_to(ROOT).parts:
            continue
        for name in _public_type_names(path):
            where[name].add(_top(path))
    assert {n: sorted(p) for n, p in where.items() if len(p) > 1} == {}


def _judge_room(path: Path) -> str | None:
    """The judge's room a file belongs to: its subpackage (`speed`, `external`, ...) or, for a
    module at the judge's top level, the module itself (`_judge`); None outside the judge."""
    parts = path.relative_to(ROOT).parts
    if parts[0] != "judge" or len(parts) < 2:
        return None
    return parts[1].removesuffix(".py")


def _judge_rooms() -> dict[str, dict[str, list[str]]]:
    """judge room -> imported judge room -> the files that import it (the package's own
    `__init__`, which re-exports from every room, aside)."""
    graph: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for path in sorted((ROOT / "judge").rglob("*.py")):
        src = _judge_room(path)
        if src is None or src == "__init__":
            continue
        for module in _imports(path):
            parts = module.split(".")
            if parts[:2] != ["optarena", "judge"] or len(parts) < 3 or parts[2] == src:
                continue
            graph[src][parts[2]].append(str(path.relative_to(ROOT)))
    return graph


def test_the_judge_rooms_import_no_cycle_and_only_each_others_public_names() -> None:
    graph = _judge_rooms()
    assert {"correctness", "speed", "external", "client"} <= set(graph)
    cycle = _cycle(graph)
    assert cycle is None, "import cycle between judge rooms " + " -> ".join(cycle or [])
    offenders = []
    for path in sorted((ROOT / "judge").rglob("*.py")):
        src = _judge_room(path)
        for module in _imports(path):
            parts = module.split(".")
            if parts[:2] != ["optarena", "judge"] or len(parts) < 4 or parts[2] == src:
                continue
            room = parts[2]
            # `worker/` is loaded by path inside the worker: its modules are imported as they are
            if room != "worker" and (ROOT / "judge" / room).is_dir() and parts[3][:1] == "_":
                offenders.append(f"{path.relative_to(ROOT)}: {module}")
    assert offenders == []
