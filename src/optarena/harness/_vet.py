"""Vetting of built artifacts in a clean replay workspace: each kind has a test it must
pass before it can be activated, and the report says exactly what failed (it goes back to the
agent for repair). Every command an artifact declares runs inside the agent sandbox.

- skill: `SKILL.md` with front matter naming `name` and `description`;
- mcp: `manifest.json` with `command` (argv) and `self_test` (tool calls); the server must
  answer `initialize` and `tools/list` within the timeout, list at least one tool, and the
  self-test must call every listed tool, each without an error result;
- tool / verifier: `manifest.json` with `test` (argv) that exits 0 in the replay workspace;
- fixture / doc: must not be empty.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import anyio

from optarena.agents import SandboxSpec
from optarena.harness._wrap import wrap

VET_TIMEOUT_S = 30.0
STDERR_KEPT = 800  # the end of a failing server's stderr, in its report


@dataclass(frozen=True)
class Vetting:
    passed: bool
    report: str


def front_matter(text: str) -> dict[str, str] | None:
    """`---`-delimited `key: value` lines at the top of a Markdown file, or None."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return None
    out: dict[str, str] = {}
    for line in lines[1:]:
        if line.strip() == "---":
            return out
        key, sep, value = line.partition(":")
        if sep:
            out[key.strip()] = value.strip().strip("'\"")
    return None


def vet_skill(path: Path) -> Vetting:
    skill = path / "SKILL.md"
    if not skill.is_file():
        return Vetting(False, f"{skill.name} is missing")
    meta = front_matter(skill.read_text(errors="replace"))
    if meta is None:
        return Vetting(False, "SKILL.md has no front matter (--- name/description ---)")
    missing = [k for k in ("name", "description") if not meta.get(k)]
    if missing:
        return Vetting(False, f"SKILL.md front matter lacks {', '.join(missing)}")
    return Vetting(True, f"skill '{meta['name']}': {meta['description'][:120]}")


def _manifest(path: Path) -> tuple[dict[str, Any] | None, str]:
    m = path / "manifest.json"
    try:
        data = json.loads(m.read_text())
    except OSError:
        return None, "manifest.json is missing"
    except ValueError as e:
        return None, f"manifest.json is not JSON: {e}"
    except RecursionError:  # the agent wrote it: nested past the parser's depth
        return None, "manifest.json is not JSON: nested too deeply"
    if not isinstance(data, dict):
        return None, "manifest.json is not an object"
    return data, ""


def _argv(value: Any) -> list[str] | None:
    if isinstance(value, list) and value and all(isinstance(x, str) for x in value):
        return value
    return None


async def _mcp_check(
    argv: list[str],
    cwd: Path,
    replay: Path,
    self_test: list[dict[str, Any]],
    errlog: TextIO,
    spec: SandboxSpec | None,
) -> str:
    """'' when the server passes; else what failed. The server's stderr goes to `errlog`
    (never the user's terminal; its end is part of a failure's report)."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    wrapped = wrap(argv, [cwd, replay], spec=spec)
    params = StdioServerParameters(command=wrapped[0], args=wrapped[1:], cwd=str(cwd))
    with anyio.fail_after(VET_TIMEOUT_S):
        async with Client(stdio_client(params, errlog=errlog)) as client:
            listed = await client.list_tools()
            names = sorted(t.name for t in listed.tools)
            if not names:
                return "tools/list lists no tool"
            called = {str(c.get("tool")) for c in self_test}
            uncovered = [n for n in names if n not in called]
            if uncovered:
                return f"the self-test calls no {', '.join(uncovered)} (it must call every tool)"
            for c in self_test:
                result = await client.call_tool(str(c["tool"]), c.get("arguments") or {})
                if result.is_error:
                    text = "".join(getattr(x, "text", "") for x in result.content)
                    return f"self-test call {c['tool']} returned an error: {text[:300]}"
    return ""


def _first_leaf(e: BaseException) -> BaseException:
    """The first real error inside the SDK's task-group wrappers (their own message says only
    'unhandled errors in a TaskGroup')."""
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    return e


def vet_mcp(path: Path, replay: Path, spec: SandboxSpec | None = None) -> Vetting:
    data, why = _manifest(path)
    if data is None:
        return Vetting(False, why)
    argv = _argv(data.get("command"))
    self_test = data.get("self_test")
    if argv is None:
        return Vetting(False, "manifest.json 'command' must be a non-empty list of strings")
    if (
        not isinstance(self_test, list)
        or not self_test
        or not all(isinstance(c, dict) and isinstance(c.get("tool"), str) for c in self_test)
    ):
        return Vetting(False, "manifest.json 'self_test' must list tool calls (none given)")
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as errlog:
        try:
            failure = anyio.run(_mcp_check, argv, path, replay, self_test, errlog, spec)
        except TimeoutError:
            failure = f"no answer to initialize/tools/list within {VET_TIMEOUT_S:g} s"
        except Exception as e:  # the server crashed or spoke something else than MCP
            leaf = _first_leaf(e)
            failure = f"the server failed: {type(leaf).__name__}: {leaf}"[:500]
        if failure:
            errlog.seek(0)
            tail = errlog.read()[-STDERR_KEPT:].strip()
            return Vetting(False, f"{failure}; its stderr ends: {tail}" if tail else failure)
    return Vetting(
        True, f"answers tools/list; self-test called every tool ({len(self_test)} calls)"
    )


def vet_tested(path: Path, replay: Path, spec: SandboxSpec | None = None) -> Vetting:
    data, why = _manifest(path)
    if data is None:
        return Vetting(False, why)
    argv = _argv(data.get("test"))
    if argv is None:
        return Vetting(False, "manifest.json 'test' must be a non-empty list of strings")
    try:
        r = subprocess.run(
            wrap(argv, [path, replay], spec=spec),
            cwd=path,
            capture_output=True,
            text=True,
            timeout=VET_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return Vetting(False, f"its test could not run: {e}")
    if r.returncode != 0:
        tail = (r.stdout + r.stderr)[-1500:]
        return Vetting(False, f"its test exited {r.returncode}:\n{tail}")
    return Vetting(True, "its test passed")


def vet(
    kind: str, path: Path, workspace_files: Path | None = None, spec: SandboxSpec | None = None
) -> Vetting:
    """Vet one artifact in a clean replay workspace (a copy of `workspace_files`, with the
    artifact's own directory beside it at .harness/...); its commands contained as `spec`
    says (`trials.agent_sandbox_spec`)."""
    if not path.exists():
        return Vetting(False, f"{path} does not exist")
    with tempfile.TemporaryDirectory(prefix="optarena-replay-") as tmp:
        replay = Path(tmp) / "workspace"
        if workspace_files is not None and workspace_files.is_dir():
            shutil.copytree(
                workspace_files, replay, ignore=shutil.ignore_patterns(".git", ".harness")
            )
        else:
            replay.mkdir()
        local = replay / ".harness" / path.name
        local.parent.mkdir(parents=True, exist_ok=True)
        if path.is_dir():
            shutil.copytree(path, local, symlinks=True)
        else:
            shutil.copy2(path, local, follow_symlinks=False)
        if kind == "skill":
            return vet_skill(local)
        if kind == "mcp":
            return vet_mcp(local, replay, spec)
        if kind in ("tool", "verifier"):
            return vet_tested(local, replay, spec)
        empty = local.is_dir() and not any(p.is_file() for p in local.rglob("*"))
        if empty or (local.is_file() and local.stat().st_size == 0):
            return Vetting(False, f"the {kind} is empty")
        return Vetting(True, f"{kind} present")
