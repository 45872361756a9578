"""C candidates for gemm-c: native code can do whatever the worker process can, so what holds
them is the OS sandbox and the judge-side checks, never the in-process guard. Each cheat is
rejected with its reason, or (for attacks the sandbox must stop) stays without effect, shown
to be a real attack where switching the measure off lets it through."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from adversarial._support import MARKER, JudgeFn, copy_task
from optarena.judge import JudgeOptions, JudgeResult
from optarena.sandbox import SandboxPolicy
from optarena.tasks import Task

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")

# A correct product every cheat builds on, so that only the cheat can make it fail.
GEMM = """
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void gemm_ok(int m, int n, int k, const float *a, const float *b, float *c)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float s = 0.0f;
            for (int p = 0; p < k; p++) s += a[i * k + p] * b[p * n + j];
            c[i * n + j] = s;
        }
}
"""


@pytest.fixture(scope="module")
def gemm(tmp_path_factory: pytest.TempPathFactory) -> Task:
    return copy_task(tmp_path_factory.mktemp("c-cheats"), "gemm-c")


def _judge(
    judge_source: JudgeFn, task: Task, body: str, policy: SandboxPolicy | None = None
) -> JudgeResult:
    source = GEMM + body.replace("@TASK_ROOT@", str(task.root)).replace("@MARKER@", MARKER)
    return judge_source(task, source, JudgeOptions(measure=False, sandbox=policy))


def test_a_cache_keyed_on_the_input_pointer_is_stale(gemm: Task, judge_source: JudgeFn) -> None:
    """The input area sits at one address for every call: a cache keyed on the pointer
    (and the sizes, one slot per shape, so that calls of other shapes in between do not evict
    it: the judge shuffles them) replays an old output for new inputs."""
    body = """
    #define SLOTS 64
    static const float *key_a[SLOTS]; static int key_m[SLOTS], key_n[SLOTS], key_k[SLOTS];
    static float *saved[SLOTS];
    void gemm_f32(int m, int n, int k, const float *a, const float *b, float *c) {
        size_t bytes = (size_t)m * n * sizeof(float);
        int s = (int)(((size_t)m * 131 + (size_t)n * 31 + (size_t)k) % SLOTS);
        if (saved[s] && key_a[s] == a && key_m[s] == m && key_n[s] == n && key_k[s] == k) {
            memcpy(c, saved[s], bytes);
            return;
        }
        gemm_ok(m, n, k, a, b, c);
        free(saved[s]); saved[s] = malloc(bytes); memcpy(saved[s], c, bytes);
        key_a[s] = a; key_m[s] = m; key_n[s] = n; key_k[s] = k;
    }
    """
    result = _judge(judge_source, gemm, body)
    assert result.verdict == "rejected" and "stale_output" in result.reason_codes
    assert result.metrics is None


def test_writing_a_const_input_crashes_the_worker_not_the_judge(
    gemm: Task, judge_source: JudgeFn
) -> None:
    body = """
    void gemm_f32(int m, int n, int k, const float *a, const float *b, float *c) {
        ((float *)a)[0] = 0.0f;  /* the input area is mapped read-only */
        gemm_ok(m, n, k, a, b, c);
    }
    """
    result = _judge(judge_source, gemm, body)
    assert result.verdict == "rejected" and "worker_crashed" in result.reason_codes
    assert result.integrity["status"] == "unchanged"


def test_the_input_area_cannot_be_made_writable(gemm: Task, judge_source: JudgeFn) -> None:
    """The candidate finds the input memfd's mapping in /proc/self/maps and tries mprotect and
    a writable reopen through /proc/self/map_files: the seals refuse both. Had either worked it
    would have written the input (input_mutated); had it not found the mapping it poisons its
    output (non_finite). Accepted means: found, and not writable."""
    body = """
    static int attack(void) {  /* 1: written, 0: refused, -1: mapping not found */
        FILE *maps = fopen("/proc/self/maps", "r");
        char line[512]; unsigned long lo = 0, hi = 0;
        while (maps && fgets(line, sizeof line, maps))
            if (strstr(line, "optarena-inputs")) { sscanf(line, "%lx-%lx", &lo, &hi); break; }
        if (maps) fclose(maps);
        if (!lo) return -1;
        if (mprotect((void *)lo, hi - lo, PROT_READ | PROT_WRITE) == 0) {
            *(volatile char *)lo ^= 1; return 1;
        }
        char path[128]; snprintf(path, sizeof path, "/proc/self/map_files/%lx-%lx", lo, hi);
        int fd = open(path, O_RDWR);
        if (fd >= 0) { char x = 1; int w = pwrite(fd, &x, 1, 0) == 1; close(fd); if (w) return 1; }
        return 0;
    }
    void gemm_f32(int m, int n, int k, const float *a, const float *b, float *c) {
        int r = attack();
        gemm_ok(m, n, k, a, b, c);
        if (r < 0) c[0] = NAN;
    }
    """
    result = _judge(judge_source, gemm, body)
    assert result.verdict == "accepted", result.reasons


def test_the_oracle_is_out_of_reach_of_native_code(gemm: Task, judge_source: JudgeFn) -> None:
    """Native code bypasses the guard's audit hook: the mount namespace hides the task package.
    With the sandbox off the same code reads the oracle (and poisons its output to say so)."""
    body = """
    void gemm_f32(int m, int n, int k, const float *a, const float *b, float *c) {
        gemm_ok(m, n, k, a, b, c);
        int fd = open("@TASK_ROOT@/oracle.py", O_RDONLY);
        char buf[16];
        if (fd >= 0 && read(fd, buf, sizeof buf) > 0) c[0] = NAN;
        if (fd >= 0) close(fd);
        int w = open("@TASK_ROOT@/oracle.py", O_WRONLY | O_APPEND);
        if (w >= 0) { c[0] = NAN; close(w); }
    }
    """
    result = _judge(judge_source, gemm, body)
    assert result.verdict == "accepted", result.reasons
    assert result.integrity["status"] == "unchanged"
    unsandboxed = _judge(judge_source, gemm, body, SandboxPolicy.none())
    assert unsandboxed.verdict == "rejected" and "non_finite" in unsandboxed.reason_codes


def test_files_written_by_native_code_stay_in_the_sandbox(
    gemm: Task, judge_source: JudgeFn
) -> None:
    body = """
    void gemm_f32(int m, int n, int k, const float *a, const float *b, float *c) {
        FILE *f = fopen("/tmp/@MARKER@-written", "w");
        if (f) { fputs("cache", f); fclose(f); }
        gemm_ok(m, n, k, a, b, c);
    }
    """
    _judge(judge_source, gemm, body)
    assert not Path(f"/tmp/{MARKER}-written").exists()  # /tmp was the worker's private tmpfs


def test_a_child_process_left_running_is_named(gemm: Task, judge_source: JudgeFn) -> None:
    body = """
    void gemm_f32(int m, int n, int k, const float *a, const float *b, float *c) {
        static int forked;
        if (!forked++ && fork() == 0) {
            /* sh stays (the marker in its command line), its sleep runs on: 30 s */
            execl("/bin/sh", "sh", "-c", "sleep 30; : @MARKER@", (char *)NULL); _exit(0);
        }
        gemm_ok(m, n, k, a, b, c);
    }
    """
    result = _judge(judge_source, gemm, body)
    assert result.verdict == "rejected" and "process_outlived_call" in result.reason_codes


PYRUN = """
typedef int (*gil_ensure)(void); typedef void (*gil_release)(int);
typedef int (*run_string)(const char *);
static void python(const char *code) {  /* through the interpreter the worker runs in */
    gil_ensure ensure = (gil_ensure)dlsym(RTLD_DEFAULT, "PyGILState_Ensure");
    gil_release release = (gil_release)dlsym(RTLD_DEFAULT, "PyGILState_Release");
    run_string run = (run_string)dlsym(RTLD_DEFAULT, "PyRun_SimpleString");
    if (!ensure || !release || !run) abort();
    int state = ensure(); run(code); release(state);
}
static int done;
void gemm_f32(int m, int n, int k, const float *a, const float *b, float *c) {
    if (!done++) python("@CODE@");
    gemm_ok(m, n, k, a, b, c);
}
"""


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        # the worker loop's own check that an output did not change after return, disabled
        ("import __main__; __main__.Worker._check_last = lambda self: None", "worker_tampered"),
        # a global of the worker's wire module: its replies no longer parse in the judge
        ("import __main__; __main__.wire.MAGIC = b'EVIL'", "protocol_violation"),
    ],
    ids=["worker-method", "wire-global"],
)
def test_rewriting_the_worker_from_c_is_rejected(
    gemm: Task, judge_source: JudgeFn, code: str, reason: str
) -> None:
    result = _judge(judge_source, gemm, PYRUN.replace("@CODE@", code))
    assert result.verdict == "rejected" and reason in result.reason_codes, result.reasons
    assert result.metrics is None
