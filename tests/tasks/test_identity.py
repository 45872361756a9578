"""Identity hashes: stable across copies and machines, sensitive to content, blind to caches."""

from __future__ import annotations

import shutil
from pathlib import Path

from optarena.identity import hash_files, hash_tree, judge_sha256, runtime_fingerprint, tree_files
from optarena.tasks import BUILTIN_DIR, load_task


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(text.encode())
    return root


def test_literal_hash_is_machine_independent(tmp_path: Path) -> None:
    root = _tree(tmp_path / "a", {"b/x.py": "print(1)\n", "a.txt": "hello"})
    # Golden value: sha256 over "rel\0sha256(content)\n" lines in sorted path order.
    assert hash_tree(root) == "2a7e4fee27bed7880868118e84c1f829cafde911f70cd1cfa8a9a2b66b8e80ef"


def test_same_content_same_hash_any_order_or_location(tmp_path: Path) -> None:
    a = _tree(tmp_path / "a", {"x.py": "1", "sub/y.py": "2"})
    b = _tree(tmp_path / "elsewhere" / "b", {"sub/y.py": "2", "x.py": "1"})
    assert hash_tree(a) == hash_tree(b)
    assert hash_files(a, ["x.py", "sub/y.py"]) == hash_files(a, ["sub/y.py", "x.py"])


def test_content_and_names_matter_caches_do_not(tmp_path: Path) -> None:
    a = _tree(tmp_path / "a", {"x.py": "1"})
    before = hash_tree(a)
    _tree(a, {"__pycache__/x.cpython-311.pyc": "junk", "y.pyc": "junk"})
    assert hash_tree(a) == before
    assert tree_files(a) == ["x.py"]
    (a / "x.py").write_text("2")
    assert hash_tree(a) != before
    (a / "x.py").rename(a / "z.py")
    assert hash_tree(a) != before


def test_task_hash_matches_its_copy(tmp_path: Path) -> None:
    copy = tmp_path / "rmsnorm"
    shutil.copytree(BUILTIN_DIR / "rmsnorm", copy)
    assert load_task(copy).sha256 == load_task(BUILTIN_DIR / "rmsnorm").sha256


def test_judge_hash_and_runtime_fingerprint() -> None:
    assert len(judge_sha256()) == 64
    fp = runtime_fingerprint()
    for key in ("python", "numpy", "platform", "machine", "cpu_model", "sha256"):
        assert fp[key], key


def test_a_tree_deeper_than_the_recursion_limit_is_listed(tmp_path: Path) -> None:
    """An agent's workspace may nest directories 1,500 deep: the capture lists it (os.walk
    recursed, and raised RecursionError inside optarena)."""
    import subprocess

    from optarena.identity import tree_files

    root = tmp_path / "ws"
    deep = root
    try:
        for _ in range(1500):
            deep = deep / "d"
            deep.mkdir(parents=True)
        (root / "solution.py").write_text("x = 1\n")
        (deep / "buried.py").write_text("y = 2\n")
        listed = tree_files(root)
        assert listed[-1] == "solution.py" and listed[0].endswith("/d/buried.py")
    finally:
        subprocess.run(["rm", "-rf", str(root)], check=True)  # rmtree recurses too
