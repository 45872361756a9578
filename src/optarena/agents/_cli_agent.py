"""What the Claude Code and Codex runners share: typed options from `--agent-arg key=value`,
finding the executable, a private config home per trial, where the metering proxy forwards
(the proxy itself is the trial's, `optarena.agents.run_metered`), and the run itself (closed
stdin, own session, whole tree killed on timeout).

A subclass says how to build the command line and environment, and how to read the agent's
own output into a usage record and a status.
"""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import shutil
import subprocess
from abc import abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from optarena.agents._base import AgentRunner, RunContext
from optarena.agents._process import ProcessResult, run_logged
from optarena.errors import AgentNotInstalledError, OptarenaError
from optarena.files import open_untrusted
from optarena.records import AgentLimits, AgentOutcome, AgentStatus, Usage
from optarena.sandbox import AgentSandbox

NPM_CACHE_ENV = "OPTARENA_NPM_CACHE"


def npm_cache() -> Path:
    """Where optarena (and `.ci/run`) installs pinned agent CLIs from npm."""
    root = os.environ.get(NPM_CACHE_ENV)
    return Path(root) if root else Path.home() / ".cache" / "optarena" / "npm"


class CliAgentOptions(BaseModel):
    """Options every CLI agent runner takes (`--agent-arg key=value`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str | None = Field(default=None, description="model; None: the agent's default")
    bin: str | None = Field(default=None, description="the executable; default: PATH, npm cache")
    upstream: str | None = Field(default=None, description="the real API the proxy forwards to")
    meter: bool = Field(default=True, description="route calls through the metering proxy")
    user_config: bool = Field(default=False, description="use the user's own config home")
    extra_args: list[str] = Field(default_factory=list, description="more CLI flags, verbatim")
    env: dict[str, str] = Field(default_factory=dict, description="more environment variables")
    grace_s: float = Field(default=2.0, ge=0, description="SIGTERM-to-SIGKILL on timeout")

    @classmethod
    def from_strings(cls, args: Mapping[str, str]) -> CliAgentOptions:
        """Typed options from strings: JSON for lists and objects (a list may also be given
        comma-separated, `extra_args` shell-split), pydantic coercion for the rest."""
        data: dict[str, Any] = {}
        for key, raw in args.items():
            info = cls.model_fields.get(key)
            if info is None:
                known = ", ".join(sorted(cls.model_fields))
                raise OptarenaError(f"--agent-arg {key}: unknown option; known: {known}")
            data[key] = _coerce(key, raw, get_origin(info.annotation) or info.annotation)
        try:
            return cls.model_validate(data)
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise OptarenaError(f"--agent-arg {where}: {first['msg']}") from None


def _coerce(key: str, raw: str, kind: Any) -> Any:
    text = raw.strip()
    if kind in (list, dict) and text[:1] in "[{":
        try:
            return json.loads(text)
        except ValueError as e:
            raise OptarenaError(f"--agent-arg {key}: not valid JSON ({e})") from None
    if kind is list:
        return shlex.split(text) if key == "extra_args" else [s for s in text.split(",") if s]
    return raw


def version_of(binary: str) -> str | None:
    """`<binary> --version` reduced to its version number, or None."""
    try:
        out = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"\d+\.\d+\.\d+[\w.+-]*", out.stdout + out.stderr)
    return m.group(0) if m else None


def installation_of(exe: str) -> list[Path]:
    """What running `exe` reads besides the system: the directory it was found in, where its
    link points, and for an npm package the whole `node_modules` tree it lives in (a CLI's
    native binary sits in a sibling package)."""
    found, real = Path(exe).absolute(), Path(os.path.realpath(exe))
    out = [found.parent, real.parent]
    tops = [p for p in real.parents if p.name == "node_modules"]
    if tops:
        out.append(tops[-1])
    return out


MAX_LINE = 16 << 20  # characters of one line of an agent's stream that are parsed


def stream_lines(path: Path) -> Iterator[str]:
    """The lines of an agent's output stream, read as hostile: never through a link or FIFO
    (`optarena.files.open_untrusted`; one that is refused, or missing, has no lines), each
    cut at `MAX_LINE` characters (the rest of a longer line is skipped, not held in memory:
    the cut line no longer parses, and counts as unparsed)."""
    try:
        raw = open_untrusted(path)
    except OSError:
        return
    with io.TextIOWrapper(raw, encoding="utf-8", errors="replace") as f:
        while line := f.readline(MAX_LINE):
            if not line.endswith("\n"):  # cut, or the last line: skip what is left of it
                while (rest := f.readline(MAX_LINE)) and not rest.endswith("\n"):
                    pass
            yield line


@dataclass
class Parsed:
    """What a subclass read from the agent's stdout."""

    usage: Usage
    session_id: str | None
    status: AgentStatus | None  # None: decide from the process alone
    detail: str
    extra: dict[str, Any] = field(default_factory=dict)


class CliAgentRunner(AgentRunner):
    """Base of `claude` and `codex`; see the module docstring."""

    can_resume = True  # both CLIs keep sessions in their config home
    options_class: ClassVar[type[CliAgentOptions]] = CliAgentOptions
    home_env: ClassVar[str]  # the variable naming the agent's config home
    package: ClassVar[str]  # the npm package, pinned, for install hints

    def __init__(self, options: CliAgentOptions | None = None, **kwargs: Any) -> None:
        self.options = options or self.options_class.model_validate(kwargs)
        self._version: str | None = None
        self._version_asked = False

    @classmethod
    def from_args(cls, args: Mapping[str, str]) -> AgentRunner:
        return cls(cls.options_class.from_strings(args))

    # ---- identity ------------------------------------------------------------------------

    def executable(self) -> str | None:
        if self.options.bin:
            path = Path(self.options.bin).expanduser()
            return str(path) if os.access(path, os.X_OK) else None
        assert self.binary is not None
        found = shutil.which(self.binary)
        cached = npm_cache() / "node_modules" / ".bin" / self.binary
        return found or (str(cached) if os.access(cached, os.X_OK) else None)

    def check_available(self) -> None:
        if self.executable() is None:
            assert self.binary is not None
            raise AgentNotInstalledError(
                self.name, self.options.bin or self.binary, f"npm install -g {self.package}"
            )
        self.check_credentials(dict(os.environ) | self.options.env)

    def check_credentials(self, env: Mapping[str, str]) -> None:
        """Raise OptarenaError when the agent could not authenticate; default: no check."""

    def version(self) -> str | None:
        if not self._version_asked:
            exe = self.executable()
            self._version = version_of(exe) if exe else None
            self._version_asked = True
        return self._version

    def model(self) -> str | None:
        return self.options.model

    def flags(self) -> dict[str, Any]:
        return self.options.model_dump(exclude_defaults=True, exclude={"env"}) | {
            "env": sorted(self.options.env)  # names only: values may be secrets
        }

    # ---- what subclasses provide ---------------------------------------------------------

    @abstractmethod
    def default_upstream(self, env: Mapping[str, str]) -> str: ...

    @abstractmethod
    def command(
        self,
        exe: str,
        workspace: Path,
        prompt: str,
        limits: AgentLimits,
        api_url: str | None,
        resume: str | None = None,
    ) -> list[str]:
        """The command line; `resume`: the session to continue (same config home)."""

    @abstractmethod
    def environment(self, home: Path | None, api_url: str | None) -> dict[str, str]: ...

    @abstractmethod
    def parse(self, stdout: Path) -> Parsed: ...

    def prepare_home(self, home: Path) -> None:
        """Write what the agent's config home needs before the run (default: nothing)."""

    def reported_usage(self, parsed: Parsed, context: RunContext) -> Usage:
        """The agent-reported usage as recorded (a subclass may price it); default: as is."""
        return parsed.usage

    def upstream(self, env: Mapping[str, str]) -> str | None:
        if not self.options.meter:
            return None
        return self.options.upstream or self.default_upstream(dict(env) | self.options.env)

    # ---- the run -------------------------------------------------------------------------

    def run(self, context: RunContext, prompt: str, limits: AgentLimits) -> AgentOutcome:
        exe = self.executable()
        if exe is None:
            self.check_available()  # raises with the install hint
            raise AssertionError("unreachable")
        workspace, logs_dir = context.workspace, context.logs_dir
        logs_dir.mkdir(parents=True, exist_ok=True)
        (logs_dir / "prompt.md").write_text(prompt, encoding="utf-8")
        home = None if self.options.user_config else context.paths.config_home(self.name)
        if home is not None:
            home.mkdir(parents=True, exist_ok=True)
            self.prepare_home(home)
        logs = {"stdout": logs_dir / f"{self.name}.jsonl", "stderr": logs_dir / "stderr.log"}
        api_url = context.proxy_url
        argv = self.command(exe, workspace, prompt, limits, api_url, context.resume)
        env = self._full_env(context, home, api_url)
        sandbox = self._sandbox(context, exe, home)
        result = run_logged(
            argv, cwd=workspace, env=env, wall_s=limits.wall_s,
            stdout_path=logs["stdout"], stderr_path=logs["stderr"],
            grace_s=self.options.grace_s, sandbox=sandbox,
        )  # fmt: skip
        return self._outcome(context, result, self.parse(logs["stdout"]), logs, argv, home)

    def _sandbox(self, context: RunContext, exe: str, home: Path | None) -> AgentSandbox | None:
        """The agent sandbox for this run: the workspace and the private config home are
        writable, the CLI's own installation readable, the metering proxy reachable."""
        spec = context.sandbox
        if spec is None or not spec.policy.enabled:
            return None
        if home is None:
            raise OptarenaError(
                f"agent '{self.name}': user_config=true gives the agent your own config home, "
                "which the agent sandbox keeps read-only; pass --no-agent-sandbox as well"
            )
        return context.agent_sandbox([context.workspace, home], readable=installation_of(exe))

    def _full_env(
        self, context: RunContext, home: Path | None, api_url: str | None
    ) -> dict[str, str]:
        env = dict(os.environ)
        env.update(context.env)
        env.update(self.environment(home, api_url))
        env.update(self.options.env)
        return env

    def _outcome(
        self,
        context: RunContext,
        result: ProcessResult,
        parsed: Parsed,
        logs: dict[str, Path],
        argv: list[str],
        home: Path | None,
    ) -> AgentOutcome:
        status, detail = decide_status(result, parsed)
        extra: dict[str, Any] = {"argv": argv, "config_home": str(home) if home else None}
        return AgentOutcome(
            sandbox=result.sandbox,
            status=status,
            exit_code=result.exit_code,
            logs={k: str(v) for k, v in logs.items()},
            session_id=parsed.session_id,
            usage=self.reported_usage(parsed, context),
            wall_s=result.wall_s,
            cpu_s=result.cpu_s,
            detail=detail,
            extra=extra | parsed.extra,
        )


def decide_status(result: ProcessResult, parsed: Parsed) -> tuple[AgentStatus, str]:
    """Timeout first (we killed it), then what the agent said about its own end, then its exit
    status. (A budget the proxy enforced comes after, in `with_metering`.)"""
    from optarena.agents._process import status_of

    if result.timed_out:
        return status_of(result)
    if parsed.status is not None:
        return parsed.status, parsed.detail
    status, detail = status_of(result)
    return status, "; ".join(d for d in (detail, parsed.detail) if d)
