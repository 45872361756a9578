"""The `command` runner: templates, usage files, exit statuses, timeouts and CPU time."""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace
from pathlib import Path

import pytest

from optarena.agents import RunContext
from optarena.agents.command import CommandRunner, render_template, usage_from_json
from optarena.errors import AgentNotInstalledError, OptarenaError
from optarena.records import AgentLimits, AgentOutcome


def test_placeholders_fill_single_arguments() -> None:
    argv = render_template(
        "agent --prompt-file {prompt_file} --cwd {workspace} --json '{{\"a\": 1}}'",
        {"prompt_file": "/p q/prompt.md", "workspace": "/w"},
    )
    assert argv == ["agent", "--prompt-file", "/p q/prompt.md", "--cwd", "/w", "--json", '{"a": 1}']


def test_an_unknown_placeholder_names_the_known_ones() -> None:
    with pytest.raises(OptarenaError, match=r"bad placeholder.*\{prompt_file\}"):
        CommandRunner("agent {prompt}")
    with pytest.raises(OptarenaError, match="empty"):
        CommandRunner("   ")


def test_usage_json_unknown_stays_none_never_zero() -> None:
    usage, notes = usage_from_json({"input_tokens": 120, "cost_usd": 0.5, "colour": "red"})
    assert usage.source == "usage-file"
    assert (usage.input_tokens, usage.cost_usd) == (120, 0.5)
    assert usage.output_tokens is None and usage.calls is None
    assert notes == ["usage file: unknown key 'colour' ignored"]
    bad, notes = usage_from_json({"input_tokens": "lots"})
    assert bad.input_tokens is None and bad.source == "unknown"
    assert "input_tokens" in notes[0]
    assert usage_from_json([1, 2])[1] == ["usage file ignored: not a JSON object"]


def test_missing_executable_is_named() -> None:
    with pytest.raises(AgentNotInstalledError, match="no-such-agent-binary"):
        CommandRunner("no-such-agent-binary --go").check_available()
    CommandRunner("sh -c true").check_available()


def _run(tmp_path: Path, script: str, wall_s: float = 20.0, **kw: str) -> AgentOutcome:
    ws, logs = tmp_path / "ws", tmp_path / "logs"
    ws.mkdir(exist_ok=True)
    runner = CommandRunner(f"sh -c '{script}'", **kw)
    base = RunContext.bare(ws, logs, trial_id="t-1", task_id="rmsnorm")
    context = replace(base, env={"METER_URL": "http://m"})
    return runner.run(context, "do the task", AgentLimits(wall_s=wall_s))


def test_a_completed_run_with_logs_env_and_usage(tmp_path: Path) -> None:
    script = (
        'echo out; echo err >&2; cat "$OPTARENA_PROMPT_FILE"; echo "$METER_URL" > meter.txt; '
        'echo "{{\\"output_tokens\\": 7}}" > "$OPTARENA_USAGE_FILE"'
    )
    out = _run(tmp_path, script)
    assert out.status == "completed" and out.exit_code == 0
    logs = out.logs
    assert Path(logs["stdout"]).read_text() == "out\ndo the task"
    assert Path(logs["stderr"]).read_text() == "err\n"
    assert (tmp_path / "ws" / "meter.txt").read_text() == "http://m\n"
    assert out.usage.output_tokens == 7 and out.usage.input_tokens is None


@pytest.mark.parametrize(
    ("script", "status", "code"),
    [("exit 3", "failed", 3), ("kill -SEGV $$", "crashed", -11), ("true", "completed", 0)],
)
def test_exit_statuses(tmp_path: Path, script: str, status: str, code: int) -> None:
    out = _run(tmp_path, script)
    assert (out.status, out.exit_code) == (status, code)
    assert out.usage.source == "unknown"


def test_a_stale_usage_file_is_not_this_runs_usage(tmp_path: Path) -> None:
    stale = tmp_path / "usage.json"
    stale.write_text(json.dumps({"input_tokens": 999}))
    out = _run(tmp_path, "true", usage_file=str(stale))
    assert out.usage.input_tokens is None
    assert "not written during this run" in out.detail


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text() if Path(f"/proc/{pid}").exists() else ""
    return " Z " not in stat  # a zombie is dead


def test_timeout_kills_the_tree_even_when_a_grandchild_holds_stdout(tmp_path: Path) -> None:
    script = "sleep 300 & echo $! > $OPTARENA_LOGS_DIR/grandchild.pid; echo started; sleep 300"
    t0 = time.monotonic()
    out = _run(tmp_path, script, wall_s=1.0, grace_s="0.5")
    assert time.monotonic() - t0 < 10
    assert out.status == "timeout"
    grandchild = int((tmp_path / "logs" / "grandchild.pid").read_text())
    deadline = time.monotonic() + 5
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild)
    assert Path(out.logs["stdout"]).read_text() == "started\n"


def test_cpu_time_comes_from_the_os(tmp_path: Path) -> None:
    out = _run(tmp_path, "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done")
    assert out.cpu_s is not None and out.cpu_s > 0.05
    assert out.cpu_s <= out.wall_s * 1.5 + 0.1


def test_the_upstream_is_the_given_one_else_the_users_else_the_public_endpoints() -> None:
    assert CommandRunner("sh -c true", upstream="http://up:1").upstream({}) == "http://up:1"
    mine = {"ANTHROPIC_BASE_URL": "http://a:2", "OPENAI_BASE_URL": "http://o:3/v1"}
    assert CommandRunner("sh -c true").upstream(mine) == {
        "anthropic": "http://a:2",
        "openai": "http://o:3/v1",
    }
    assert CommandRunner("sh -c true").upstream({}) == {
        "anthropic": "https://api.anthropic.com",
        "openai": "https://api.openai.com",
    }
    assert CommandRunner("sh -c true", meter="false").upstream(mine) is None
    with pytest.raises(OptarenaError, match="meter: expected true or false"):
        CommandRunner("sh -c true", meter="maybe")


def test_the_proxy_url_placeholder_and_base_url_variables(tmp_path: Path) -> None:
    ws, logs = tmp_path / "ws", tmp_path / "logs"
    ws.mkdir()
    runner = CommandRunner('sh -c \'echo {proxy_url} "$ANTHROPIC_BASE_URL" "$OPENAI_BASE_URL"\'')
    context = replace(RunContext.bare(ws, logs), proxy_url="http://127.0.0.1:7")
    out = runner.run(context, "go", AgentLimits(wall_s=20))
    line = Path(out.logs["stdout"]).read_text()
    assert line == "http://127.0.0.1:7 http://127.0.0.1:7 http://127.0.0.1:7/v1\n"
