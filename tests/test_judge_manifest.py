"""One definition of "the judge's code" (`identity.JUDGING_CODE`), used by the judge's hash,
the seal and the process-start snapshot, and covering every module a judgement loads: the
inputs' generator (`tasks/inputs.py`) was in none of the three, so trials judged with
different input code could share one judge identity."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

from optarena.identity import (
    BUILTIN_TASKS,
    PACKAGE_DIR,
    code_references,
    hash_files,
    judge_sha256,
    judging_code,
    judging_files,
    loaded_files,
)

# private: the seal's own list of files, compared with the manifest
from optarena.judge._seal import judge_code_files

# A judgement in a fresh interpreter, then every optarena module it loaded.
JUDGE_AND_LIST = """
import json, sys
from pathlib import Path
import optarena
from optarena.judge import JudgeOptions, judge
from optarena.tasks import resolve_task
task = resolve_task("rmsnorm")
control = {c.name: task.root / c.dir for c in task.spec.controls}["optimized"]
result = judge(task, control, JudgeOptions(measure=True, budget_s=1.0))
root = Path(optarena.__file__).resolve().parent
loaded = sorted({
    Path(m.__file__).resolve().relative_to(root).as_posix()
    for m in list(sys.modules.values())
    if getattr(m, "__file__", None) and Path(m.__file__).resolve().is_relative_to(root)
})
print(json.dumps({"verdict": result.verdict, "loaded": loaded}))
"""


def test_every_module_a_judgement_loads_is_in_the_manifest() -> None:
    out = subprocess.run(
        [sys.executable, "-c", JUDGE_AND_LIST], capture_output=True, text=True, check=True
    )
    data = json.loads(out.stdout.strip().splitlines()[-1])
    assert data["verdict"] == "accepted"
    loaded = data["loaded"]
    assert "tasks/inputs.py" in loaded  # the generator of the secret inputs
    outside = [rel for rel in loaded if not judging_code(rel) and not rel.startswith(BUILTIN_TASKS)]
    assert outside == []


def test_the_three_users_share_the_manifest() -> None:
    files = judging_files()
    assert "tasks/inputs.py" in files and "judge/speed/_stats.py" in files
    assert not any(f.startswith(BUILTIN_TASKS) for f in files)  # tasks have their own hashes
    assert judge_sha256() == hash_files(PACKAGE_DIR, files)
    sealed = {p.relative_to(PACKAGE_DIR).as_posix() for p in judge_code_files()}
    assert sealed <= set(files) and "judge/worker/_loop.py" in sealed
    snapshot = next(r for r in code_references() if not r.installed)
    assert set(files) <= set(snapshot.hashes)


def test_loaded_files_follows_the_modules_loaded_now(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each module's path is resolved once and cached, but the set is read from `sys.modules`
    at every call: a module loaded (here through a link into the package) after an earlier
    call is in the next one, and gone once it is unloaded; a link out of the package is not."""
    first = loaded_files()
    inside, outside = tmp_path / "inside.py", tmp_path / "outside.py"
    inside.symlink_to(PACKAGE_DIR / "tasks" / "builtin" / "rmsnorm" / "TASK.md")
    outside.write_text("")
    for name, path in (("_optarena_test_inside", inside), ("_optarena_test_outside", outside)):
        module = types.ModuleType(name)
        module.__file__ = str(path)
        monkeypatch.setitem(sys.modules, name, module)
    assert loaded_files() == first | {"tasks/builtin/rmsnorm/TASK.md"}
    monkeypatch.undo()
    assert "tasks/builtin/rmsnorm/TASK.md" not in loaded_files()
