"""The package layering: optarena's top-level packages and modules in an order of layers (each
imports only from below it or beside it in its own layer; see ARCHITECTURE.md), no import
cycles, and no reaching into another package's private modules. Read from the source with
`ast` (every import, lazy ones inside functions and `TYPE_CHECKING` ones included), so the test
needs no import side effects and names the file (and line) of each offending import."""

from __future__ import annotations

import ast
from collections import defaultdict
from itertools import pairwise
from pathlib import Path

import optarena

ROOT = Path(optarena.__file__).parent


def _imports_at(path: Path) -> list[tuple[str, int]]:
    """Absolute `optarena.*` module names imported by a file (relative imports resolved), each
    with the line of its import statement."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = ["optarena", *path.relative_to(ROOT).parent.parts]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            out.append((module, node.lineno))
    return sorted((m, n) for m, n in out if m == "optarena" or m.startswith("optarena."))


def _imports(path: Path) -> list[str]:
    """Absolute `optarena.*` module names imported by a file (relative imports resolved)."""
    return [m for m, _ in _imports_at(path)]


def _sources() -> list[Path]:
    """optarena's own modules: the built-in task packages are data, not optarena."""
    return [p for p in sorted(ROOT.rglob("*.py")) if "builtin" not in p.relative_to(ROOT).parts]


def _top(path: Path) -> str:
    first = path.relative_to(ROOT).parts[0]
    return first.removesuffix(".py")


def _graph() -> dict[str, dict[str, list[str]]]:
    """top-level name -> imported top-level name -> the files that import it."""
    graph: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for path in _sources():
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


# The layers, lowest first: a package or module imports only from layers below its own, or
# from beside it in its own layer. Matched by top-level name (`optarena.judge.speed._x` is
# `judge`), so moving modules within a package changes nothing here. A new top-level package
# or module has to be placed in this table (test_every_top_level_name_has_a_layer); the order
# is the one today's imports have, and ARCHITECTURE.md describes it.
LAYERS: tuple[tuple[str, ...], ...] = (
    # the package itself (a version string); typed errors; processes from /proc; untrusted trees
    ("__init__", "errors", "processes", "files"),
    ("records", "sandbox"),  # pydantic models, no behaviour; process isolation
    ("identity",),  # content hashes, the runtime fingerprint (walks trees with `files`)
    ("tasks", "ledger", "proxy"),  # task packages; the ledger; the metering proxy
    ("judge", "agents"),  # verdicts on delivered files; agent runners (metered through proxy)
    ("trials", "qualify"),  # the trial lifecycle; a task's qualification (its controls judged)
    ("experiments", "harness", "mcp"),  # many trials compared; the harness loop; task tools
    ("report", "fakemodel"),  # reports of a comparison; the scripted model server (test double)
    ("cli",),  # the command line
    ("__main__",),  # `python -m optarena`
)

# Imports that go up the table, each with its reason: (importing file, imported module).
UPWARD_IMPORTS_ALLOWED: set[tuple[str, str]] = set()  # none today


def _layer_of() -> dict[str, int]:
    return {name: n for n, names in enumerate(LAYERS) for name in names}


def _upward(edges: list[tuple[str, str, str]], layer: dict[str, int]) -> list[str]:
    """`where: src (layer a) imports dst (layer b)` for each edge (src, dst, where) whose `dst`
    is in a higher layer than `src`; a name not in `layer` counts as above everything."""
    top = max(layer.values(), default=0) + 1
    out = []
    for src, dst, where in edges:
        a, b = layer.get(src, top), layer.get(dst, top)
        if b > a:
            out.append(f"{where}: {src} (layer {a}) imports {dst} (layer {b})")
    return out


def _edges() -> list[tuple[str, str, str]]:
    """(importing top-level name, imported top-level name, 'file:line') for every import of
    another top-level optarena name, minus UPWARD_IMPORTS_ALLOWED."""
    out = []
    for path in _sources():
        rel = str(path.relative_to(ROOT))
        src = _top(path)
        for module, line in _imports_at(path):
            parts = module.split(".")
            if len(parts) < 2 or parts[1] == src or (rel, module) in UPWARD_IMPORTS_ALLOWED:
                continue
            out.append((src, parts[1], f"{rel}:{line}"))
    return out


def test_every_top_level_name_has_a_layer() -> None:
    names = {_top(p) for p in _sources()}
    placed = [n for layer in LAYERS for n in layer]
    assert len(placed) == len(set(placed)), "a name is in two layers"
    assert sorted(names - set(placed)) == [], "add it to LAYERS, where its imports put it"
    assert sorted(set(placed) - names) == [], "LAYERS names something that is not there"


def test_imports_go_down_the_layers_or_sideways() -> None:
    upward = _upward(_edges(), _layer_of())
    assert upward == [], "imports up the layers:\n" + "\n".join(upward)


def test_every_allowed_upward_import_is_still_there() -> None:
    for rel, module in UPWARD_IMPORTS_ALLOWED:
        assert module in _imports(ROOT / rel), f"{rel} no longer imports {module}: drop it"


def test_the_layer_check_finds_an_upward_import() -> None:
    layer = {"records": 0, "ledger": 1, "tasks": 1, "trials": 2}
    edges = [
        ("trials", "ledger", "trials/_trial.py:3"),  # down: fine
        ("ledger", "tasks", "ledger/_x.py:5"),  # sideways in a layer: fine
        ("records", "trials", "records/_trial.py:9"),  # up
        ("ledger", "newpkg", "ledger/_y.py:2"),  # not placed: counts as the top
    ]
    assert _upward(edges, layer) == [
        "records/_trial.py:9: records (layer 0) imports trials (layer 2)",
        "ledger/_y.py:2: ledger (layer 1) imports newpkg (layer 3)",
    ]
    # and on the real table: a records module importing the ledger would be refused
    assert _upward([("records", "ledger", "r.py:1")], _layer_of()) != []
    assert _upward([("ledger", "records", "l.py:1")], _layer_of()) == []


# Deliberate exceptions, each with its reason.
PRIVATE_IMPORTS_ALLOWED = {
    # the relay runs inside the agent sandbox: `optarena.mcp` would import the MCP SDK
    ("cli/_mcp.py", "optarena.mcp._host"),
}


def test_no_package_imports_another_ones_private_modules() -> None:
    offenders = []
    for path in _sources():
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
    for path in _sources():
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
