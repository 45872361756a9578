"""Every way a candidate can fail is a rejection with a named reason; the judge never crashes."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from optarena.judge import JudgeOptions, JudgeResult, judge
from optarena.tasks import Task, resolve_task

FAST_LIMITS = """
[limits]
call_timeout_s = 2.0
load_timeout_s = 5.0
total_timeout_s = 60.0
"""

CASES = {
    "missing_function": ("def not_rmsnorm(x, weight, *, eps):\n    return x\n", "entry_missing"),
    "import_error": ("import numpy as np\nimport no_such_module_xyz\n", "import_failed"),
    "syntax_error": ("def rmsnorm(x, weight, *, eps)\n    return x\n", "import_failed"),
    "raises": ("def rmsnorm(x, weight, *, eps):\n    raise ValueError('nope')\n", "raised"),
    "sys_exit": ("import sys\ndef rmsnorm(x, weight, *, eps):\n    sys.exit(3)\n", "exited"),
    "hard_exit": (
        "import os\ndef rmsnorm(x, weight, *, eps):\n    os._exit(9)\n",
        "worker_crashed",
    ),
    "segfault": (
        "import ctypes\ndef rmsnorm(x, weight, *, eps):\n    ctypes.string_at(0)\n",
        "worker_crashed",
    ),
    "hangs": ("import time\ndef rmsnorm(x, weight, *, eps):\n    time.sleep(60)\n", "timeout"),
    "hangs_on_import": ("import time\ntime.sleep(60)\n", "timeout"),
    "returns_list": ("def rmsnorm(x, weight, *, eps):\n    return x.tolist()\n", "wrong_type"),
    "returns_subclass": (
        "import numpy as np\nclass A(np.ndarray):\n    pass\n"
        "def rmsnorm(x, weight, *, eps):\n"
        "    m = (x*x).mean(-1, keepdims=True)\n"
        "    return (x / np.sqrt(m + eps) * weight).view(A)\n",
        "wrong_type",
    ),
    "object_array": (
        "import numpy as np\ndef rmsnorm(x, weight, *, eps):\n    return x.astype(object)\n",
        "wrong_type",
    ),
    "float64_output": (
        "import numpy as np\ndef rmsnorm(x, weight, *, eps):\n"
        "    x = x.astype(np.float64)\n"
        "    return x / np.sqrt((x*x).mean(-1, keepdims=True) + eps) * weight\n",
        "wrong_dtype",
    ),
    "wrong_shape": (
        "import numpy as np\ndef rmsnorm(x, weight, *, eps):\n"
        "    return (x / np.sqrt((x*x).mean(-1, keepdims=True) + eps) * weight).ravel()\n",
        "wrong_shape",
    ),
    "writes_its_result_into_the_input": (
        "import numpy as np\ndef rmsnorm(x, weight, *, eps):\n"
        "    out = x / np.sqrt((x*x).mean(-1, keepdims=True) + eps) * weight\n"
        "    x[...] = out\n    return x\n",
        "input_mutated",  # inputs are read-only views of the judge's sealed memory
    ),
    "returns_input_view": (
        "import numpy as np\ndef rmsnorm(x, weight, *, eps):\n    return x.view()\n",
        "output_aliases_input",
    ),
}


@pytest.fixture(scope="module")
def fast_task(tmp_path_factory: pytest.TempPathFactory) -> Task:
    import shutil

    from optarena.tasks import BUILTIN_DIR, load_task

    root = tmp_path_factory.mktemp("task") / "rmsnorm"
    shutil.copytree(BUILTIN_DIR / "rmsnorm", root, ignore=shutil.ignore_patterns("__pycache__"))
    with (root / "task.toml").open("a") as f:
        f.write(FAST_LIMITS)
    return load_task(root)


def _judge(task: Task, d: Path) -> JudgeResult:
    return judge(task, d, JudgeOptions(measure=False))


@pytest.mark.parametrize("case", sorted(CASES))
def test_failure_is_rejected_with_reason(
    case: str, fast_task: Task, candidate: Callable[[str], Path]
) -> None:
    source, code = CASES[case]
    t0 = time.monotonic()
    result = _judge(fast_task, candidate(source))
    assert result.verdict == "rejected"
    assert code in result.reason_codes, result.reasons
    assert result.metrics is None
    assert time.monotonic() - t0 < 30


def test_missing_entry_file(fast_task: Task, candidate: Callable[..., Path]) -> None:
    d = candidate("def rmsnorm(x, weight, *, eps):\n    return x\n", filename="other.py")
    result = _judge(fast_task, d)
    assert result.reason_codes == ["entry_missing"]
    assert result.candidate.files == []


def test_only_editable_files_reach_the_worker(
    fast_task: Task, candidate: Callable[..., Path]
) -> None:
    """A helper module outside the editable scope is not part of the candidate."""
    d = candidate("from helper import rmsnorm\n")
    (d / "helper.py").write_text("def rmsnorm(x, weight, *, eps):\n    return x\n")
    result = _judge(fast_task, d)
    assert result.reason_codes == ["import_failed"]
    assert result.candidate.files == ["solution.py"]


def test_total_timeout(task_copy: Callable[..., Task], candidate: Callable[[str], Path]) -> None:
    task = task_copy("softmax", "[limits]\ncall_timeout_s = 5.0\ntotal_timeout_s = 1.5\n")
    slow = candidate(
        "import time\nimport numpy as np\n"
        "def softmax(x):\n    time.sleep(0.2)\n"
        "    e = np.exp(x - x.max(-1, keepdims=True))\n    return e / e.sum(-1, keepdims=True)\n"
    )
    result = judge(task, slow, JudgeOptions(measure=False))
    assert "timeout" in result.reason_codes


def test_judge_survives_and_stays_usable(fast_task: Task, candidate: Callable[[str], Path]) -> None:
    _judge(fast_task, candidate(CASES["segfault"][0]))
    good = resolve_task("rmsnorm").baseline_dir
    assert _judge(fast_task, good).verdict == "accepted"


def test_unmet_requirements_refuse_to_judge(task_copy: Callable[..., Task], tmp_path: Path) -> None:
    from optarena.errors import OptarenaError

    task = task_copy("softmax")
    toml = task.root / "task.toml"
    toml.write_text(
        toml.read_text().replace('packages = ["numpy>=1.26"]', 'packages = ["numpy>=999"]')
    )
    from optarena.tasks import load_task

    with pytest.raises(OptarenaError, match=r"numpy>=999 required"):
        judge(load_task(task.root), task.baseline_dir, JudgeOptions(measure=False))
