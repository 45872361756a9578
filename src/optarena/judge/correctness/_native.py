"""What the judge tells a worker about loading the entry: the language, and for C the build.

The build is fixed by the judge, never by the candidate or the task: the system C compiler
(`cc` on PATH), `BUILD_FLAGS` (`-O2`, no `-march=native`: the code must not be tuned to this
one machine by the flags; the candidate's own pragmas and intrinsics are its business), and
the libraries in `BUILD_LIBS`. Both arms, every worker, the same. The worker compiles inside its
own sandbox (see `worker/_native.py`); the judge only resolves the compiler and records its
version, which it reads itself by running `cc --version` (no candidate input involved).
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from typing import Any

from optarena.judge.correctness._checks import Finding, fail, ok
from optarena.tasks import TaskSpec

BUILD_FLAGS = (
    "-std=c11",
    "-O2",
    "-fPIC",
    "-shared",
    "-Wall",
    "-Wextra",
    "-Werror=implicit-function-declaration",  # a call to nothing is an error, not a warning
    "-Wl,--no-undefined",  # an unresolved symbol fails the build, not the first call
)
BUILD_LIBS = ("-lm",)
COMPILE_TIMEOUT_S = 60.0  # well below any sane compile of one file; the load timeout bounds it


@functools.cache
def compiler() -> tuple[str | None, str]:
    """(absolute path of `cc`, its version line), or (None, why not)."""
    cc = shutil.which("cc")
    if cc is None:
        return None, "no C compiler: cc is not on PATH"
    try:
        done = subprocess.run(
            [cc, "--version"], capture_output=True, text=True, timeout=30, check=False
        )
        version = (done.stdout.splitlines() or ["unknown version"])[0].strip()
    except (OSError, subprocess.SubprocessError) as e:
        version = f"unknown version ({e})"
    return cc, version


def build_record(spec: TaskSpec) -> dict[str, Any] | None:
    """The build a C entry gets, as recorded in the judgement (None for a Python entry)."""
    if spec.entry.language != "c":
        return None
    cc, version = compiler()
    return {
        "compiler": cc,
        "version": version,
        "flags": [*BUILD_FLAGS, *BUILD_LIBS],
        "where": "inside the worker's sandbox, before any candidate code runs",
    }


def load_request(spec: TaskSpec, load_timeout_s: float) -> dict[str, Any]:
    """The worker's `load` request for this task's entry."""
    entry = spec.entry
    msg: dict[str, Any] = {"op": "load", "file": entry.file, "function": entry.function}
    if spec.requirements.device == "cuda":
        msg["device"] = "cuda"
    if entry.language == "c":
        assert entry.c is not None  # the spec validator guarantees it
        cc, why = compiler()
        msg.update(
            language="c",
            binding=entry.c.model_dump(),
            build={
                "cc": cc or why,
                "flags": list(BUILD_FLAGS),
                "libs": list(BUILD_LIBS),
                "timeout_s": min(COMPILE_TIMEOUT_S, 0.9 * load_timeout_s),
            },
        )
    return msg


def compile_finding(build: dict[str, Any], loaded: dict[str, Any]) -> Finding:
    """The `compile` check: passed with the compiler's warnings (if any) in its detail, or
    `compile_failed` with its message. The worker wrote both before candidate code ran."""
    flags = " ".join(build["flags"])
    if not loaded.get("ok") and loaded.get("code") == "compile_failed":
        return fail(
            "compile", "compile_failed", f"{build['version']}, {flags}: {loaded.get('error')}"
        )
    messages = str(loaded.get("compiler_messages") or "").strip()
    if not loaded.get("ok"):
        return ok("compile", f"{build['version']}, {flags}: compiled (loading failed)")
    warnings = messages.count("warning:")
    said = f"{warnings} warning(s): {messages}" if messages else "no warnings"
    return ok("compile", f"{build['version']}, {flags}: {said}")
