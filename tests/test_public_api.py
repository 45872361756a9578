"""The public surface: every package says what it offers in `__all__`, each record is offered
by `optarena.records` alone, and the tests reach through a public name wherever one exists.

Why: a name offered by two packages has two places to import it from, and they drift (a record
re-exported by the ledger is a second spelling of the one format). A private import in a test
ties the test to a module layout that a refactor should be free to change; where a test does
need an internal (a pure helper on literal numbers, a limit an attack test must reach, a module
it monkeypatches), it says so in a `# private:` comment. The names are read from the packages
themselves (`__all__` by `ast`, the objects by import), so a new package or export is checked
without touching this file. ARCHITECTURE.md lists each package's public names.
"""

from __future__ import annotations

import ast
import importlib
import types
from pathlib import Path

import optarena

ROOT = Path(optarena.__file__).parent
TESTS = Path(__file__).parent


def _packages() -> dict[str, Path]:
    """Dotted name -> the file that declares its public names, for every optarena package
    (its `__init__.py`) and top-level module (`errors`, `identity`, `qualify`); the built-in
    tasks are data and `__main__` only runs the command line."""
    out = {}
    for init in sorted(ROOT.rglob("__init__.py")):
        rel = init.relative_to(ROOT.parent).parent
        if "builtin" not in rel.parts:
            out[".".join(rel.parts)] = init
    for module in sorted(ROOT.glob("*.py")):
        if not module.name.startswith("_"):
            out[f"optarena.{module.stem}"] = module
    return out


def _declared_all(init: Path) -> list[str] | None:
    """The literal `__all__` a file assigns at top level, or None."""
    for node in ast.parse(init.read_text(encoding="utf-8")).body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if isinstance(target, ast.Name) and target.id == "__all__" and node.value is not None:
            value = ast.literal_eval(node.value)
            assert isinstance(value, list), f"{init}: __all__ is not a literal list"
            return value
    return None


def _is_private(dotted: str) -> bool:
    return any(p.startswith("_") and not p.startswith("__") for p in dotted.split(".")[1:])


def _exports() -> dict[str, dict[str, object]]:
    """Package -> its `__all__` names -> the objects they are."""
    out = {}
    for name in _packages():
        module = importlib.import_module(name)
        out[name] = {n: getattr(module, n) for n in getattr(module, "__all__", [])}
    return out


PLAIN = (int, float, str, bool, type(None))


def _key(name: str, obj: object) -> object:
    """What makes two bindings the same export: the object itself, or for a plain value (which
    Python may share between unrelated constants) the name together with the value."""
    return (name, repr(obj)) if isinstance(obj, PLAIN) else id(obj)


def _records_elsewhere(
    bound: dict[str, dict[str, object]], records: dict[str, object]
) -> list[str]:
    """`package.name` for every name bound in a package other than records (exported or
    merely imported into its namespace) that is one of records' exported objects."""
    keys = {_key(name, obj): name for name, obj in records.items()}
    out = []
    for package, names in bound.items():
        if package == "optarena.records":
            continue
        for name, obj in names.items():
            if (found := keys.get(_key(name, obj))) is not None:
                out.append(f"{package}.{name} is optarena.records.{found}")
    return sorted(out)


def _exported_twice(exports: dict[str, dict[str, object]]) -> list[str]:
    """Objects exported by two packages, except a package's facade over one of its own rooms
    (`optarena.judge` over `optarena.judge.external`): one place to import each name from."""
    seen: dict[object, list[str]] = {}
    for package, names in exports.items():
        for name, obj in names.items():
            seen.setdefault(_key(name, obj), []).append(f"{package}.{name}")
    out = []
    for places in seen.values():
        packages = [p.rsplit(".", 1)[0] for p in places]
        outer = min(packages, key=len)
        if len(places) > 1 and not all(p == outer or p.startswith(outer + ".") for p in packages):
            out.append(" and ".join(places))
    return sorted(out)


def test_every_package_declares_its_public_names() -> None:
    missing = [name for name, init in _packages().items() if _declared_all(init) is None]
    assert missing == [], "add an __all__ (what other packages and users need) to these"


def test_everything_in_all_exists_once() -> None:
    problems = []
    for name, init in _packages().items():
        declared = _declared_all(init) or []
        module = importlib.import_module(name)
        problems += [f"{name}.{n} does not exist" for n in declared if not hasattr(module, n)]
        if len(declared) != len(set(declared)):
            problems.append(f"{name}: a name is listed twice in __all__")
    assert problems == []


def test_records_are_exported_by_records_alone() -> None:
    records = _exports()["optarena.records"]
    bound = {
        name: {n: v for n, v in vars(importlib.import_module(name)).items() if n[:1] != "_"}
        for name in _packages()
    }
    again = _records_elsewhere(bound, records)
    assert again == [], "import records from optarena.records, not through another package"


def test_no_object_is_exported_by_two_unrelated_packages() -> None:
    assert _exported_twice(_exports()) == []


def test_the_checks_find_a_reexported_record_and_a_name_offered_twice() -> None:
    # negative controls on literal packages: a record in the ledger, a helper in two packages
    record, helper, room_fn = type("TrialRecord", (), {}), types.SimpleNamespace(), object()
    records = {"TrialRecord": record, "TRIAL_RECORD_VERSION": 3}
    bound: dict[str, dict[str, object]] = {
        "optarena.records": {"TrialRecord": record},
        "optarena.ledger": {"TrialRecord": record, "TRIAL_RECORD_VERSION": 3, "Ledger": helper},
    }
    assert _records_elsewhere(bound, records) == [
        "optarena.ledger.TRIAL_RECORD_VERSION is optarena.records.TRIAL_RECORD_VERSION",
        "optarena.ledger.TrialRecord is optarena.records.TrialRecord",
    ]
    exports: dict[str, dict[str, object]] = {
        "optarena.ledger": {"helper": helper},
        "optarena.trials": {"helper": helper},
        "optarena.judge": {"judge_external": room_fn},
        "optarena.judge.external": {"judge_external": room_fn},
    }
    assert _exported_twice(exports) == ["optarena.ledger.helper and optarena.trials.helper"]


def _private_imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, private module, imported names) of every `optarena` import in a file that goes
    through a private module; the names are empty for `import optarena.x._y`."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            mine = [a.name for a in node.names if a.name.split(".")[0] == "optarena"]
            out += [(node.lineno, name, []) for name in mine if _is_private(name)]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if node.module.split(".")[0] != "optarena":
                continue
            if _is_private(node.module):
                out.append((node.lineno, node.module, [a.name for a in node.names]))
            for a in node.names:
                if a.name.startswith("_") and not a.name.startswith("__"):
                    out.append((node.lineno, f"{node.module}.{a.name}", []))
    return out


def _public_home(module: str, name: str) -> str | None:
    """The public package above a private `module` that exports the same object as `name`."""
    obj = getattr(importlib.import_module(module), name, None)
    if obj is None or isinstance(obj, (types.ModuleType, int, str)):
        return None
    parts = module.split(".")
    for i in range(len(parts) - 1, 1, -1):
        package = ".".join(parts[:i])
        if _is_private(package):
            continue
        found = importlib.import_module(package)
        if name in getattr(found, "__all__", []) and getattr(found, name) is obj:
            return package
    return None


def _test_files() -> list[Path]:
    return [p for p in sorted(TESTS.rglob("*.py")) if "data" not in p.relative_to(TESTS).parts]


def test_tests_import_through_public_names_where_one_exists() -> None:
    offenders = []
    for path in _test_files():
        for line, module, names in _private_imports(path):
            for name in names:
                if home := _public_home(module, name):
                    where = f"{path.relative_to(TESTS)}:{line}"
                    offenders.append(f"{where}: {name} from {home}, not {module}")
    assert offenders == []


def test_tests_that_reach_an_internal_say_why() -> None:
    silent = [
        str(path.relative_to(TESTS))
        for path in _test_files()
        if _private_imports(path) and "# private:" not in path.read_text(encoding="utf-8")
    ]
    assert silent == [], "say why next to the private import (`# private: ...`)"
