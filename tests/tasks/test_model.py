"""The task schema: the built-ins load; every kind of malformed spec is a SpecError that names
the file, the field and what was expected."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from optarena.errors import SpecError, UnknownNameError
from optarena.tasks import (
    BUILTIN_DIR,
    REASON_CODES,
    builtin_task_ids,
    load_task,
    resolve_task,
)


def test_builtins_load() -> None:
    assert builtin_task_ids() == [
        "attention",
        "gemm-c",
        "layernorm",
        "moe-forward",
        "rmsnorm",
        "rmsnorm-cuda",
        "softmax",
        "softmax-cuda",
    ]
    for tid in builtin_task_ids():
        t = resolve_task(tid)
        assert t.id == tid
        assert any(w.role == "timed" for w in t.spec.workloads)
        assert {w.role for w in t.spec.workloads} == {"timed", "check", "edge"}
        assert t.spec.entry.file in t.editable_files(t.baseline_dir)
        assert any(c.expect == "accepted" for c in t.spec.controls)


def test_resolve_by_path_and_unknown(tmp_path: Path) -> None:
    assert resolve_task(str(BUILTIN_DIR / "softmax")).id == "softmax"
    assert resolve_task(BUILTIN_DIR / "softmax" / "task.toml").id == "softmax"
    with pytest.raises(UnknownNameError, match="known tasks: " + ", ".join(builtin_task_ids())):
        resolve_task("no-such-task")


def _spec_dir(tmp_path: Path) -> Path:
    root = tmp_path / "t"
    shutil.copytree(BUILTIN_DIR / "rmsnorm", root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _edit(root: Path, old: str, new: str) -> None:
    p = root / "task.toml"
    text = p.read_text()
    assert old in text, old
    p.write_text(text.replace(old, new, 1))


INVALID = [
    # (old text, new text, field named in the error, words of the expectation)
    ('id = "rmsnorm"', 'id = "RMS Norm"', "id", "lower-case"),
    ('id = "rmsnorm"\n', "", "id", "required"),
    ('version = "1.1.0"', 'version = "1.0"', "version", "MAJOR.MINOR.PATCH"),
    ('title = "RMSNorm', 'titel = "RMSNorm', "title", "field 'titel': is not a known field"),
    ('editable = ["solution.py"]', "editable = []", "editable", "at least 1"),
    ('editable = ["solution.py"]', 'editable = "solution.py"', "editable", "list"),
    ('function = "rmsnorm"', 'function = "rms norm"', "entry.function", "identifier"),
    (
        'generator = "workloads.py:generate"',
        'generator = "workloads"',
        "generator",
        "file.py:function",
    ),
    ("atol = 1e-5", "atol = -1.0", "tolerance.atol", "greater than or equal to 0"),
    ("rtol = 1e-4\n", "", "tolerance.rtol", "required"),
    ('role = "timed"', 'role = "fast"', "workloads.0.role", "timed"),
    ('name = "prefill"', 'name = "decode"', "(top level)", "duplicate names"),
    (
        'expect = "rejected"\nreason = "out_of_tolerance"',
        'expect = "rejected"',
        "controls.2",
        "reason",
    ),
    ("min_effect = 0.03", "min_effect = 2.0", "measurement.min_effect", "less than 1"),
    ('device = "cpu"', 'device = "tpu"', "requirements.device", "cpu"),
    ("schema_version = 1", "schema_version = 7", "schema_version", "is newer than this optarena"),
]


@pytest.mark.parametrize(("old", "new", "field", "expected"), INVALID)
def test_invalid_specs_name_file_field_and_expectation(
    tmp_path: Path, old: str, new: str, field: str, expected: str
) -> None:
    root = _spec_dir(tmp_path)
    _edit(root, old, new)
    with pytest.raises(SpecError) as exc:
        load_task(root)
    err = exc.value
    assert err.path == str(root / "task.toml")
    assert err.field == field
    assert expected in str(err)


def test_no_timed_workload(tmp_path: Path) -> None:
    root = _spec_dir(tmp_path)
    text = (root / "task.toml").read_text().replace('role = "timed"', 'role = "check"')
    (root / "task.toml").write_text(text)
    with pytest.raises(SpecError, match="role = 'timed'"):
        load_task(root)


@pytest.mark.parametrize(
    ("old", "new", "field", "expected"),
    [
        ('prompt = "TASK.md"', 'prompt = "PROMPT.md"', "prompt", "PROMPT.md not found"),
        ('baseline = "baseline"', 'baseline = "base"', "baseline", "directory base not found"),
        ('file = "solution.py"', 'file = "kernel.py"', "entry.file", "must match an editable glob"),
        ('oracle = "oracle.py:reference"', 'oracle = "solution.py:rmsnorm"', "oracle", "not found"),
        ('dir = "controls/zeros"', 'dir = "controls/nothing"', "controls.5.dir", "not found"),
    ],
)
def test_file_references_are_checked(
    tmp_path: Path, old: str, new: str, field: str, expected: str
) -> None:
    root = _spec_dir(tmp_path)
    _edit(root, old, new)
    with pytest.raises(SpecError) as exc:
        load_task(root)
    assert exc.value.field == field
    assert expected in str(exc.value)


def test_oracle_must_not_be_editable(tmp_path: Path) -> None:
    root = _spec_dir(tmp_path)
    _edit(root, 'editable = ["solution.py"]', 'editable = ["*.py"]')
    with pytest.raises(SpecError, match="must not be editable"):
        load_task(root)


def test_not_toml_and_missing_spec(tmp_path: Path) -> None:
    root = _spec_dir(tmp_path)
    (root / "task.toml").write_text("id = [unclosed\n")
    with pytest.raises(SpecError, match="not valid TOML"):
        load_task(root)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SpecError, match=r"no task\.toml"):
        load_task(empty)


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ('packages = ["numpy>=1.26"]', 'packages = ["numpy >= = 1"]', "requirements.packages"),
        ('python = ">=3.11"', 'python = "three"', "requirements.python"),
    ],
)
def test_requirement_syntax(tmp_path: Path, old: str, new: str, field: str) -> None:
    root = _spec_dir(tmp_path)
    _edit(root, old, new)
    with pytest.raises(SpecError) as exc:
        load_task(root)
    assert exc.value.field == field


def test_unmet_requirements_are_named() -> None:
    from optarena.tasks import Requirements, unmet_requirements

    assert unmet_requirements(Requirements(packages=["numpy>=1.0"])) == []
    problems = unmet_requirements(
        Requirements(python=">=99", packages=["numpy>=999", "no-such-pkg-xyz"])
    )
    assert len(problems) == 3
    assert "python >=99 required" in problems[0]
    assert "numpy>=999 required" in problems[1]
    assert "no-such-pkg-xyz" in problems[2] and "not installed" in problems[2]


def test_the_reason_codes_a_control_may_expect_are_the_ones_the_judge_gives() -> None:
    """README's list, every code the judge's checks emit, and `REASON_CODES` agree."""
    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text()
    section = readme[readme.index("Reason codes, each") : readme.index("## What the judge")]
    documented = set(re.findall(r"`([a-z_]+)`", section))
    judge_src = " ".join(p.read_text() for p in (root / "src/optarena/judge").rglob("*.py"))
    emitted = set(re.findall(r'fail\(\s*"[a-z_]+",\s*"([a-z_]+)"', judge_src))
    assert emitted and emitted <= REASON_CODES
    assert documented | {"out_of_scope"} == REASON_CODES


def test_a_control_expecting_an_unknown_reason_code_is_refused_at_load(tmp_path: Path) -> None:
    root = tmp_path / "t"
    shutil.copytree(BUILTIN_DIR / "rmsnorm", root)
    toml = root / "task.toml"
    toml.write_text(toml.read_text().replace('reason = "stale_output"', 'reason = "stale"'))
    with pytest.raises(SpecError, match=r"controls\.\d+.*unknown reason code 'stale'"):
        load_task(root)
