"""`command`: any command-line agent, started from a template.

    optarena run --task rmsnorm --command 'my-agent --prompt-file {prompt_file} --cwd {workspace}'

Placeholders (bare `{name}`, no format spec or conversion; write `{{` and `}}` for literal
braces): `{prompt_file}`
(the prompt, as a file), `{workspace}`, `{logs_dir}` (files written there are kept as the
trial's logs), `{usage_file}`, `{timeout_s}`, `{trial_id}`, `{proxy_url}` (the trial's
metering proxy; empty with `meter=false`). The template is split like a shell
command line first, so a placeholder's value stays one argument even with spaces in it; it is
not run through a shell (use `sh -c '...'` for that).

In a trial the command runs in the agent sandbox (`optarena.sandbox.AgentSandbox`): it may
write its workspace, `{logs_dir}` and its private `$HOME`, and nothing else; files named on the
command line (an agent script, say) stay readable wherever they are; of the network only the
ports a trial hook opened (`RunContext.proxy_ports`) are reachable, at 127.0.0.1.

Its model calls are metered and limited exactly like Claude Code's (`optarena.agents.
run_metered`): the trial starts a metering proxy, and the command finds it in `{proxy_url}`
and in `ANTHROPIC_BASE_URL` and `OPENAI_BASE_URL` (`{proxy_url}/v1`, as the OpenAI SDK
expects). The proxy forwards to `--agent-arg upstream=URL`, by default to the user's own
`ANTHROPIC_BASE_URL` / `OPENAI_BASE_URL`, else to the providers' public endpoints (Anthropic's
API calls to one, OpenAI's to the other). `--agent-arg meter=false` runs it without a proxy.
A command that calls no model records zero metered calls.

Its own usage is unknown unless the command writes a JSON object with `Usage` fields (input_tokens,
output_tokens, cost_usd, calls, ...) to `{usage_file}` (default `{logs_dir}/usage.json`,
or `--agent-arg usage_file=PATH`, relative to `{logs_dir}`; keep it out of the workspace,
where it would be a change outside the editable scope). That report stays beside the metered
figures (`usage` and `metered_usage` of the record), never merged with them; it is read as the
command left it, never through a link (`read_usage_file`).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import string
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from optarena.agents._base import AgentRunner, RunContext
from optarena.agents._process import run_logged, status_of
from optarena.errors import AgentNotInstalledError, OptarenaError
from optarena.files import open_untrusted
from optarena.proxy import Upstreams
from optarena.records import AgentLimits, AgentOutcome, Usage

PLACEHOLDERS = (
    "prompt_file", "workspace", "logs_dir", "usage_file", "timeout_s", "trial_id", "proxy_url",
)  # fmt: skip
PUBLIC_ENDPOINTS = {"anthropic": "https://api.anthropic.com", "openai": "https://api.openai.com"}


def usage_from_json(data: object) -> tuple[Usage, list[str]]:
    """A Usage from a command's usage file content, and notes on what was ignored.

    Unknown keys are dropped (and noted), so one misspelt key does not lose the rest; a value
    of the wrong type loses the whole file, because then no figure in it can be trusted.
    """
    if not isinstance(data, dict):
        return Usage(), ["usage file ignored: not a JSON object"]
    known = set(Usage.model_fields) - {"source"}
    notes = [f"usage file: unknown key '{k}' ignored" for k in sorted(set(data) - known)]
    try:
        usage = Usage.model_validate(
            {**{k: v for k, v in data.items() if k in known}, "source": "usage-file"}
        )
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return Usage(), [*notes, f"usage file ignored: field '{where}': {first['msg']}"]
    return usage, notes


USAGE_FILE_LIMIT = 1 << 20  # bytes: a usage report is a few hundred


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.lstat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def read_usage_file(
    path: Path, before: tuple[int, int] | None = None, base: Path | None = None
) -> tuple[Usage, list[str]]:
    """The usage the command wrote; a file left unchanged since before the run is stale.
    The command wrote it, so it is read as hostile: never through a link, FIFO or hard link
    below `base` (`optarena.files.open_untrusted`; default: its directory), at most
    `USAGE_FILE_LIMIT` bytes, and JSON too deeply nested to parse counts as not JSON."""
    try:
        with open_untrusted(path, base) as f:
            st = os.fstat(f.fileno())
            if before is not None and (st.st_mtime_ns, st.st_size) == before:
                return Usage(), [f"usage file {path} ignored: not written during this run"]
            raw = f.read(USAGE_FILE_LIMIT + 1)
    except FileNotFoundError:
        return Usage(), []
    except OSError as e:
        return Usage(), [f"usage file ignored: {e}"]
    if len(raw) > USAGE_FILE_LIMIT:
        return Usage(), [f"usage file {path} ignored: larger than {USAGE_FILE_LIMIT} bytes"]
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError is a ValueError
        why = "nested too deeply" if isinstance(e, RecursionError) else str(e)
        return Usage(), [f"usage file {path} ignored: not JSON ({why})"]
    return usage_from_json(data)


def render_template(template: str, values: dict[str, str]) -> list[str]:
    """Split like a shell, then fill placeholders per argument. A placeholder is a bare
    `{name}`: Python's format specs, conversions, attributes and indexes are refused, not
    evaluated (`{workspace:>99999999999}` asked for a 100 GB string: a MemoryError)."""
    try:
        tokens = shlex.split(template)
    except ValueError as e:
        raise OptarenaError(f"--command '{template}': {e}") from None
    if not tokens:
        raise OptarenaError("--command is empty")
    return [_fill(template, token, values) for token in tokens]


def _fill(template: str, token: str, values: dict[str, str]) -> str:
    out = []
    try:
        for literal, name, spec, conversion in string.Formatter().parse(token):
            out.append(literal)
            if name is None:
                continue
            if name not in PLACEHOLDERS or spec or conversion:
                shown = "{" + name + (f"!{conversion}" if conversion else "")
                raise ValueError(f"'{shown + (f':{spec}' if spec else '')}}}'")
            out.append(values[name])
    except ValueError as e:
        raise OptarenaError(
            f"--command '{template}': bad placeholder {e}; a placeholder is one of "
            + ", ".join("{" + p + "}" for p in PLACEHOLDERS)
            + ", as is (no format spec or conversion; write {{ and }} for literal braces)"
        ) from None
    return "".join(out)


class CommandRunner(AgentRunner):
    """Runs a command-line template in the workspace; see the module docstring."""

    name = "command"

    def __init__(
        self,
        command: str,
        usage_file: str | None = None,
        version: str | None = None,
        model: str | None = None,
        grace_s: float | str = 1.0,
        upstream: str | None = None,
        meter: bool | str = True,
    ) -> None:
        self.command = command
        self.upstream_url = upstream
        self.meter = _flag("meter", meter)
        self.usage_file = usage_file
        self._version = version
        self._model = model
        self.grace_s = float(grace_s)
        placeholders = {p: "x" for p in PLACEHOLDERS}
        self._argv0 = render_template(command, placeholders)[0]  # validates the template

    def version(self) -> str | None:
        return self._version  # a command's version is unknown unless the user states it

    def model(self) -> str | None:
        return self._model

    def flags(self) -> dict[str, Any]:
        out: dict[str, Any] = {"command": self.command}
        if self.usage_file:
            out["usage_file"] = self.usage_file
        if self.upstream_url:
            out["upstream"] = self.upstream_url
        if not self.meter:
            out["meter"] = False
        return out

    def upstream(self, env: Mapping[str, str]) -> Upstreams | None:
        """The given upstream; else the user's own base URLs, else the public endpoints."""
        if not self.meter:
            return None
        if self.upstream_url:
            return self.upstream_url
        return {
            "anthropic": env.get("ANTHROPIC_BASE_URL") or PUBLIC_ENDPOINTS["anthropic"],
            "openai": env.get("OPENAI_BASE_URL") or PUBLIC_ENDPOINTS["openai"],
        }

    def check_available(self) -> None:
        exe = self._argv0
        found = os.access(exe, os.X_OK) if "/" in exe else shutil.which(exe) is not None
        if not found:
            raise AgentNotInstalledError(
                self.name, exe, "put it on PATH or give its full path in --command"
            )

    def run(self, context: RunContext, prompt: str, limits: AgentLimits) -> AgentOutcome:
        workspace, logs_dir = context.workspace, context.logs_dir
        logs_dir.mkdir(parents=True, exist_ok=True)
        prompt_file = logs_dir / "prompt.md"
        prompt_file.write_text(prompt, encoding="utf-8")
        values = {
            "prompt_file": str(prompt_file),
            "workspace": str(workspace),
            "logs_dir": str(logs_dir),
            "timeout_s": f"{limits.wall_s:g}",
            "trial_id": context.trial_id,
            "proxy_url": context.proxy_url or "",
        }
        usage_path = Path(
            os.path.normpath(logs_dir / Path(self.usage_file or "usage.json").expanduser())
        )
        usage_base = logs_dir if usage_path.is_relative_to(logs_dir) else usage_path.parent
        values["usage_file"] = str(usage_path)
        usage_before = _stamp(usage_path)
        argv = render_template(self.command, values)
        env = dict(os.environ)
        if context.proxy_url:
            env["ANTHROPIC_BASE_URL"] = context.proxy_url
            env["OPENAI_BASE_URL"] = f"{context.proxy_url}/v1"
        env.update(context.env)  # what a trial hook sets explicitly wins
        env.update({f"OPTARENA_{k.upper()}": v for k, v in values.items()})
        logs = {"stdout": logs_dir / "stdout.log", "stderr": logs_dir / "stderr.log"}
        named = [Path(a) for a in argv if os.path.isabs(a) and os.path.exists(a)]
        sandbox = context.agent_sandbox([workspace, logs_dir], readable=named)
        result = run_logged(
            argv,
            cwd=workspace,
            env=env,
            wall_s=limits.wall_s,
            stdout_path=logs["stdout"],
            stderr_path=logs["stderr"],
            grace_s=self.grace_s,
            sandbox=sandbox,
        )
        status, detail = status_of(result)
        usage, notes = read_usage_file(usage_path, usage_before, usage_base)
        return AgentOutcome(
            status=status,
            exit_code=result.exit_code,
            logs={**{k: str(v) for k, v in logs.items()}, "prompt": str(prompt_file)},
            usage=usage,
            wall_s=result.wall_s,
            cpu_s=result.cpu_s,
            detail="; ".join([detail, *notes]),
            sandbox=result.sandbox,
            extra={"argv": argv},
        )


def _flag(name: str, value: bool | str) -> bool:
    """A boolean `--agent-arg` (true/false, yes/no, 1/0)."""
    if isinstance(value, bool):
        return value
    text = value.strip().lower()
    if text in ("true", "yes", "1", "on"):
        return True
    if text in ("false", "no", "0", "off"):
        return False
    raise OptarenaError(f"--agent-arg {name}: expected true or false, not '{value}'")
