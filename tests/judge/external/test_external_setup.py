"""A set-up's result reused across worktrees and judgements when its inputs are the same
(`[setup] cache = true`), and never when they differ."""

from __future__ import annotations

from pathlib import Path

import pytest

from external_example import EXAMPLE, make_project
from optarena.judge import judge_external

# private: the judgement's type, for a helper's signature
from optarena.judge.external._judge import ExternalJudgement
from optarena.tasks.external import freeze_external, load_frozen

# A set-up that takes time and leaves a build output the gate needs.
BUILD = (
    'import pathlib, time; time.sleep(0.3); pathlib.Path(\\"build\\").mkdir(); '
    'pathlib.Path(\\"build/out.txt\\").write_text(\\"built\\")'
)
SETUP = f"[setup]\ncommand = \"python3 -c '{BUILD}'\"\ncache = true\n"
GATE = {'"python3 verify.py"': '"test -f build/out.txt && python3 verify.py"'}


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "optarena" / "external-setup"


@pytest.mark.slow
def test_a_cached_set_up_is_reused_only_for_the_same_tree(tmp_path: Path, cache: Path) -> None:
    spec = make_project(tmp_path, GATE)
    spec.write_text(spec.read_text() + "\n" + SETUP)
    out = tmp_path / "frozen.toml"
    freeze_external(spec, out)
    sieve = EXAMPLE / "candidates" / "sieve"
    first = judge_external(load_frozen(out), sieve, measure=False)
    assert first.verdict == "accepted", first.reasons
    assert first.setup == {"baseline": "ran", "candidate": "ran"}  # the trees differ
    again = judge_external(load_frozen(out), sieve, measure=False)
    assert again.verdict == "accepted" and again.setup == {
        "baseline": "cached",
        "candidate": "cached",
    }
    assert again.timings["setup.baseline"] < first.timings["setup.baseline"]
    empty = tmp_path / "unchanged"
    empty.mkdir()  # the candidate is the base itself: the baseline's result serves it
    same = judge_external(load_frozen(out), empty, measure=False)
    assert same.setup == {"baseline": "cached", "candidate": "cached"}
    # a kept entry that is not what set-up left is never used: set-up runs
    for kept in cache.glob("*/files/build/out.txt"):
        kept.write_text("tampered")
    redo = judge_external(load_frozen(out), sieve, measure=False)
    assert redo.setup == {"baseline": "ran", "candidate": "ran"}, redo.setup


def test_without_cache_set_up_always_runs(tmp_path: Path, cache: Path) -> None:
    spec = make_project(tmp_path, GATE)
    spec.write_text(spec.read_text() + "\n" + SETUP.replace("cache = true\n", ""))
    out = tmp_path / "frozen.toml"
    freeze_external(spec, out)
    for _ in range(2):
        r = judge_external(load_frozen(out), EXAMPLE / "candidates" / "sieve", measure=False)
        assert r.verdict == "accepted" and r.setup == {"baseline": "ran", "candidate": "ran"}
    assert not cache.exists()


def _judged_with_set_up_importing(tmp_path: Path, payload: str) -> ExternalJudgement:
    """The primes example with a set-up that imports the project, judged without timing for
    a candidate whose module runs `payload` at import: its code runs during set-up."""
    spec = make_project(tmp_path)
    spec.write_text(spec.read_text() + "\n[setup]\ncommand = \"python3 -c 'import primes'\"\n")
    out = tmp_path / "frozen.toml"
    freeze_external(spec, out)
    cand = tmp_path / "cand"
    cand.mkdir()
    primes = (EXAMPLE / "primes" / "primes.py").read_text()
    (cand / "primes.py").write_text(primes + payload)
    return judge_external(load_frozen(out), cand, measure=False)


def test_a_candidate_whose_set_up_leaves_a_huge_sparse_file_is_rejected(
    tmp_path: Path, cache: Path
) -> None:
    """The candidate's code leaves a sparse file of 64 GiB during set-up, no disk at all: the
    judge would hash and copy it before every command. The prepared tree may not hold more
    than twice the baseline's bytes plus 256 MiB."""
    r = _judged_with_set_up_importing(tmp_path, "\nopen('.sparse', 'wb').truncate(64 << 30)\n")
    assert r.verdict == "rejected" and r.reason_codes == ["setup_failed"], r.reasons
    assert "65,536 MiB" in r.reasons[0] and "sparse" in r.reasons[0]


def test_a_set_up_leaving_a_path_past_path_max_is_the_candidates_failure(
    tmp_path: Path, cache: Path
) -> None:
    """Red team, 2026-12-06: 20 nested folders of 250-character names, a file inside, left by
    the candidate's code during set-up: the seal's copy met ENAMETOOLONG and the OSError left
    the judge (no judgement recorded). It is the candidate's `setup_failed` now."""
    nest = (
        "\nimport os\n_fd = os.open('.', os.O_RDONLY)\nfor _ in range(20):\n"
        "    os.mkdir('n' * 250, dir_fd=_fd)\n"
        "    _fd = os.open('n' * 250, os.O_RDONLY, dir_fd=_fd)\n"
        "os.close(os.open('f', os.O_CREAT | os.O_WRONLY, dir_fd=_fd))\n"
    )
    r = _judged_with_set_up_importing(tmp_path, nest)
    assert r.verdict == "rejected" and r.reason_codes == ["setup_failed"], r.reasons
    assert "cannot copy" in r.reasons[0]
