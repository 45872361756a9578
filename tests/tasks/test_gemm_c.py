"""The compiled C task: built in the candidate sandbox with fixed, recorded flags; a build that
fails is a rejection with the compiler's words; native code gets no more than Python does."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from optarena.judge import JudgeOptions, judge
from optarena.tasks import C_FLAGS, resolve_task, unmet_requirements

TASK = resolve_task("gemm-c")
pytestmark = pytest.mark.skipif(
    bool(unmet_requirements(TASK.spec.requirements)), reason="needs a C compiler (cc)"
)
SIGNATURE = "void gemm_f32(int m, int n, int k, const float *a, const float *b, float *c)"
BODY = """
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float s = 0.0f;
            for (int p = 0; p < k; p++) s += a[i * k + p] * b[p * n + j];
            c[i * n + j] = s;
        }
"""


def _judge(tmp_path: Path, source: str) -> object:
    d = tmp_path / "cand"
    d.mkdir(exist_ok=True)
    (d / "solution.c").write_text(source)
    return judge(TASK, d, JudgeOptions(measure=False))


def test_the_build_is_recorded_and_a_failed_one_rejects_with_the_compilers_words(
    tmp_path: Path,
) -> None:
    warn = f"{SIGNATURE} {{ int unused; {BODY} }}\n"
    r = _judge(tmp_path, warn)
    assert r.verdict == "accepted", r.reasons  # type: ignore[attr-defined]
    (load,) = [c for c in r.checks if c.name == "load"]  # type: ignore[attr-defined]
    assert " ".join(C_FLAGS) in load.detail and "-march" not in load.detail
    assert "unused variable" in load.detail  # the compiler's warnings, recorded

    r = _judge(tmp_path, f"{SIGNATURE} {{ no_such_name; }}\n")
    assert r.verdict == "rejected" and r.reason_codes == ["compile_failed"]  # type: ignore[attr-defined]
    assert "no_such_name" in r.reasons[0] and "undeclared" in r.reasons[0]  # type: ignore[attr-defined]
    assert r.metrics is None  # type: ignore[attr-defined]

    r = _judge(tmp_path, "void other(void) {}\n")
    assert r.reason_codes == ["entry_missing"]  # type: ignore[attr-defined]


# Native cheats: what C code in the worker can do that a Python candidate could not as easily.
CACHE = f"""#include <string.h>
#define SLOTS 16
#define SIZE (1 << 17)
static float saved[SLOTS][SIZE];  /* the answer of an earlier call of the same sizes */
static int dims[SLOTS][3], used[SLOTS];
{SIGNATURE} {{
    int slot = (m * 31 + n * 7 + k) % SLOTS;
    long size = (long)m * n;
    if (used[slot] && dims[slot][0] == m && dims[slot][1] == n && dims[slot][2] == k) {{
        memcpy(c, saved[slot], sizeof(float) * size);
        return;
    }}
    {BODY}
    if (size <= SIZE) {{
        memcpy(saved[slot], c, sizeof(float) * size);
        used[slot] = 1, dims[slot][0] = m, dims[slot][1] = n, dims[slot][2] = k;
    }}
}}
"""
WRITES_INPUT = f"""{SIGNATURE} {{
    ((float *)a)[0] = 0.0f;  /* the inputs are mapped read-only: this faults */
    {BODY}
}}
"""
CONSTRUCTOR = (
    """#include <stdio.h>
__attribute__((constructor)) static void escape(void) {
    const char *paths[] = {"ESCAPE_TMP", "ESCAPE_TREE"};  /* outside the candidate's copy */
    for (int i = 0; i < 2; i++) {
        FILE *f = fopen(paths[i], "w");
        if (f) { fputs("escaped", f); fclose(f); }
    }
}
"""
    + f"{SIGNATURE} {{ {BODY} }}\n"
)


def test_native_cheats_are_rejected_or_contained(tmp_path: Path) -> None:
    r = _judge(tmp_path, CACHE)  # the same sizes again: the previous call's answer
    assert r.verdict == "rejected", r.reasons  # type: ignore[attr-defined]
    assert {"stale_output", "history_dependent", "out_of_tolerance"} & set(r.reason_codes)  # type: ignore[attr-defined]

    r = _judge(tmp_path, WRITES_INPUT)
    assert r.verdict == "rejected"  # type: ignore[attr-defined]
    assert {"worker_crashed", "input_mutated"} & set(r.reason_codes), r.reasons  # type: ignore[attr-defined]

    in_tmp = tmp_path / "escaped.txt"  # the judge's /tmp: private to the worker
    in_tree = Path(__file__).with_name("escaped-by-gemm-c.txt")  # the read-only root
    source = CONSTRUCTOR.replace("ESCAPE_TMP", str(in_tmp)).replace("ESCAPE_TREE", str(in_tree))
    try:
        r = _judge(tmp_path, source)
        assert not in_tmp.exists() and not in_tree.exists()  # both writes went nowhere
    finally:
        in_tree.unlink(missing_ok=True)
    shutil.rmtree(tmp_path / "cand")
