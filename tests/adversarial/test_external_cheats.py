"""Cheats against an external task (examples/external): the project's own gate and benchmark
run the candidate's code, so what it can write, keep or start between runs must earn nothing.

Each cheat is the example's hot path as it was (or wrong), plus a trick; none may read
`improved`. The benchmark's own answer check, the sealed worktree, the fresh sandbox per
command (private /tmp, read-only everything but the worktree, the process tree killed at the
end) and the OS's cross-check are what stop them.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from adversarial._support import MARKER
from external_example import EXAMPLE, make_project
from optarena.judge.external import judge_external
from optarena.tasks.external import freeze_external, load_frozen

HOT_PATH = (EXAMPLE / "primes" / "primes.py").read_text()

# A cache of the slow way's answers, kept where a later run would find it: a later run is fast.
CACHE = """
import json, os
_CACHE = {where!r}


def count_primes(n: int) -> int:
    try:
        with open(_CACHE) as f:
            flags = json.load(f)
    except (OSError, ValueError):
        flags = [is_prime(k) for k in range(70_000)]
        try:
            with open(_CACHE, "w") as f:
                json.dump(flags, f)
        except OSError:
            pass
    return sum(flags[: n + 1])
"""

# The answers for the benchmark's whole range, computed by the first run that asks and kept where
# the seal's digest does not look: an extended attribute of tests/ (red team, 2026-12-06, from the
# untimed gate; the same in the files' modification times: tests/judge/external/test_external_tree)
XATTR_CACHE = """
import os
_LO, _HI = 59_500, 60_500


def _table() -> bytes:
    try:
        return os.getxattr("tests", "user.primes")
    except OSError:
        below = sum(1 for k in range(_LO) if is_prime(k))
        data = below.to_bytes(4, "little") + bytes(is_prime(k) for k in range(_LO, _HI + 1))
        try:
            os.setxattr("tests", "user.primes", data)
        except OSError:
            pass
        return data


def count_primes(n: int) -> int:
    table = _table() if _LO <= n <= _HI else b""
    if len(table) == 5 + _HI - _LO:
        return int.from_bytes(table[:4], "little") + sum(table[4 : 5 + n - _LO])
    return sum(1 for k in range(n + 1) if is_prime(k))
"""

# The benchmark's checker is another process, but of the same uid: the child (measure.py, which
# imports the project) finds the checker's n (a 3.11 int) in its parent's memory through
# /proc/PPID/mem and sets it to 10, then answers for 10; the checker checks 10 and prints it
# (red team, 2026-12-06: `improved`, OS `confirmed`, on every seed, before /proc was read-only)
SHRINK_THE_CHECKERS_N = """
import os, struct


def _shrink_parent_n(n: int) -> bool:
    pp = os.getppid()
    try:
        mem = os.open(f"/proc/{pp}/mem", os.O_RDWR)
    except OSError:
        return False
    hits = 0
    with open(f"/proc/{pp}/maps") as maps:
        for line in maps:
            parts = line.split()
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            if not parts[1].startswith("rw") or hi - lo > 256 << 20:
                continue
            if len(parts) > 5 and parts[5] != "[heap]":
                continue
            try:
                buf = os.pread(mem, hi - lo, lo)
            except OSError:
                continue
            at = buf.find(struct.pack("<qI", 1, n))  # ob_size 1, the one digit n
            while at >= 0:
                if at % 8 == 0 and at >= 16:
                    os.pwrite(mem, struct.pack("<I", 10), lo + at + 8)
                    hits += 1
                at = buf.find(struct.pack("<qI", 1, n), at + 1)
    os.close(mem)
    return hits > 0


_slow = count_primes


def count_primes(n: int) -> int:
    if n > 50_000 and _shrink_parent_n(n):
        return _slow(10)
    return _slow(n)
"""

CHEATS = {
    # fast because it looked up the answer to the benchmark's usual question
    "lookup-table": HOT_PATH + "\n_slow = count_primes\n"
    "count_primes = lambda n: 6057 if n > 50_000 else _slow(n)\n",
    # wrong only where the tests do not look: large n, as the benchmark asks
    "wrong-off-the-tests": HOT_PATH + "\n_slow = count_primes\n"
    "count_primes = lambda n: n // 10 if n > 50_000 else _slow(n)\n",
    "cache-in-the-worktree": HOT_PATH + CACHE.format(where=".primes-cache.json"),
    "cache-in-tmp": HOT_PATH + CACHE.format(where="/tmp/primes-cache.json"),
    "cache-in-dev-shm": HOT_PATH + CACHE.format(where="/dev/shm/primes-cache.json"),
    "cache-in-an-xattr": HOT_PATH + XATTR_CACHE,
    "shrink-the-checkers-n": HOT_PATH + SHRINK_THE_CHECKERS_N,
    # slow the other arm down: put a sleep into the baseline's worktree
    "edit-the-baseline": HOT_PATH
    + """
import os
_other = os.path.join(os.path.dirname(os.getcwd()), "baseline", "primes.py")
try:
    with open(_other, "a") as f:
        f.write("\\nimport time\\ntime.sleep(0.5)\\n")
except OSError:
    pass
""",
    # ... or leave a process burning CPU while the baseline runs
    "burner-left-behind": HOT_PATH
    + f"""
import os, subprocess, sys
if os.path.basename(sys.argv[0]) == "measure.py":  # the benchmark's child
    subprocess.Popen(
        [sys.executable, "-c", "while True: pass", "{MARKER}"],
        start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
""",
}
REJECTED = {"lookup-table", "wrong-off-the-tests"}  # the benchmark checks its answers
# The floor a cheat's interval must reach above: a cache found by a later run reads far
# below 0.8, its whole interval with it. Shrinking the checker's n read 0.18-0.19
# (its scan of the parent's memory is timed), and a loaded CI read this cheat 0.78
# (0.67..1.03) once it could no longer write there: noise. So did `edit-the-baseline`, 0.79
# (0.61..1.02): a point estimate of 6 pairs on a loaded machine is not the evidence, its
# interval is.
MIN_RATIO = {"shrink-the-checkers-n": 0.5}


@pytest.fixture(scope="module")
def frozen(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("external-cheats")
    out = tmp / "frozen.toml"
    freeze_external(make_project(tmp), out)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("cheat", sorted(CHEATS))
def test_an_external_cheat_never_earns_improved(tmp_path: Path, frozen: Path, cheat: str) -> None:
    d = tmp_path / "cand"
    d.mkdir()
    (d / "primes.py").write_text(CHEATS[cheat])
    r = judge_external(load_frozen(frozen), d, seed=3)
    if cheat in REJECTED:
        assert r.verdict == "rejected" and r.reason_codes == ["benchmark_failed"], r.reasons
        assert "expected" in r.reasons[0]  # the benchmark's own message, quoted
        return
    assert r.verdict == "accepted", r.reasons  # correct: only its speed is in question
    assert r.metrics is not None
    assert r.metrics.verdict != "improved", (r.metrics.overall, r.metrics.crosscheck)
    overall = r.metrics.overall  # nothing earlier runs left: no gain beyond noise
    top = overall.ratio_ci[1] if overall.ratio_ci else overall.ratio
    assert top > MIN_RATIO.get(cheat, 0.8), overall


def test_a_link_where_the_holdout_goes_never_makes_the_judge_write_outside(
    tmp_path: Path,
) -> None:
    """The judge copies the holdout over the candidate's tree as its own user (root, here).
    A patch whose in-scope entry `hidden` is a link to a directory outside, exactly where the
    holdout's `hidden/` goes, had it write the holdout there (any path, any directory the judge
    can write). The link is replaced by the holdout's directory instead."""
    spec = make_project(
        tmp_path, {'editable = ["primes.py"]': 'editable = ["primes.py", "hidden"]'}
    )
    holdout = tmp_path / "holdout" / "hidden"
    holdout.mkdir(parents=True)
    (holdout / "test_hidden.py").write_text("# the holdout's test\n")
    text = spec.read_text().replace(
        'junit = "report.xml"', 'junit = "report.xml"\nholdout = "holdout"'
    )
    spec.write_text(text)
    frozen = tmp_path / "frozen.toml"
    freeze_external(spec, frozen)
    outside = tmp_path / "outside"
    outside.mkdir()
    repo = tmp_path / "primes"
    (repo / "hidden").symlink_to(outside)
    subprocess.run(["git", "add", "hidden"], cwd=repo, check=True)
    patch = tmp_path / "link.patch"
    patch.write_bytes(
        subprocess.run(
            ["git", "diff", "--cached", "--binary"], cwd=repo, check=True, capture_output=True
        ).stdout
    )
    assert b"new file mode 120000" in patch.read_bytes()
    subprocess.run(["git", "reset", "-q"], cwd=repo, check=True)
    (repo / "hidden").unlink()
    r = judge_external(load_frozen(frozen), patch, measure=False, seed=5)
    assert list(outside.iterdir()) == []  # nothing written through the link
    assert r.verdict == "accepted", r.reasons  # primes.py unchanged: the base, as judged


# The stencil example declares a scale: the OS looks at the difference between a run at the
# high size and one at the low size. The candidate's code is in the benchmark's process and
# sees the size (how many calls it got, its parent's argv); these must never read `improved`.
KERNEL = (EXAMPLE / "stencil" / "stencil.c").read_text()
FASTER_KERNEL = (EXAMPLE / "candidates" / "stencil-interior" / "stencil.c").read_text()
SLOW_CLOCK_C = """
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* The driver's clock, defined here, wins at link time: it runs 20x slow. */
int clock_gettime(clockid_t id, struct timespec *ts) {
    long r = syscall(SYS_clock_gettime, id, ts);
    long long ns = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec;
    ns /= 20;
    ts->tv_sec = ns / 1000000000LL;
    ts->tv_nsec = ns % 1000000000LL;
    return (int)r;
}
"""
BURN_C = """
static void burn(double seconds) {
    struct timespec t0, t;
    syscall(SYS_clock_gettime, CLOCK_PROCESS_CPUTIME_ID, &t0);
    do {
        syscall(SYS_clock_gettime, CLOCK_PROCESS_CPUTIME_ID, &t);
    } while ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) * 1e-9 < seconds);
}
"""
STENCIL_CHEATS = {
    # the metric forged, the kernel unchanged: the difference does not move
    "slow-clock": KERNEL + SLOW_CLOCK_C,
    # ... and CPU burnt at exit when the run was the low size (few calls), so that its own
    # high-minus-low difference shrinks to nothing: a plain difference would read it faster
    "slow-clock-burns-at-the-low-size": KERNEL.replace(
        "void box_sum(", "static int calls;\n\nvoid box_sum("
    ).replace("    const long m = (long)n;", "    const long m = (long)n;\n    calls++;")
    + SLOW_CLOCK_C
    + BURN_C
    + "\n__attribute__((destructor)) static void at_exit(void) {\n"
    "    if (calls < 8) burn(0.4);\n}\n",
    # really faster per call, with its work moved into start-up (which a plain difference
    # cancels): at the high size the whole run is slower than the baseline's
    "work-at-start-up": FASTER_KERNEL
    + "\n#include <sys/syscall.h>\n#include <time.h>\n#include <unistd.h>\n"
    + BURN_C
    + "\n__attribute__((constructor)) static void prepare(void) { burn(0.35); }\n",
}


@pytest.fixture(scope="module")
def stencil_frozen(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("cc") is None:
        pytest.skip("the stencil example needs a C compiler")
    tmp = tmp_path_factory.mktemp("stencil-cheats")
    out = tmp / "frozen.toml"
    freeze_external(
        make_project(tmp, {"max_rounds = 8": "max_rounds = 4\nmin_rounds = 4"}, "stencil"), out
    )
    return out


@pytest.mark.slow
@pytest.mark.parametrize("cheat", sorted(STENCIL_CHEATS))
def test_a_cheat_on_the_scaled_benchmark_never_earns_improved(
    tmp_path: Path, stencil_frozen: Path, cheat: str
) -> None:
    d = tmp_path / "cand"
    d.mkdir()
    (d / "stencil.c").write_text(STENCIL_CHEATS[cheat])
    r = judge_external(load_frozen(stencil_frozen), d, seed=3)
    assert r.verdict == "accepted", r.reasons  # correct: only its speed is in question
    m = r.metrics
    assert m is not None and m.os_check is not None
    assert m.overall.ratio is not None and m.overall.ratio < 0.3  # what the metric claims
    assert m.os_check.basis == "scaled_difference"
    assert m.verdict != "improved", (m.overall, m.os_check)
    assert m.os_check.outcome in ("unresolved", "contradicted"), m.os_check
    if cheat == "work-at-start-up":
        assert m.os_check.outcome == "contradicted", m.os_check.why
