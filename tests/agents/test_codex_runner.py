"""The codex runner: command line with the proxy as a custom model provider, MCP overrides,
credentials, and a run with a stand-in executable replaying a recorded Codex stream."""

from __future__ import annotations

import json
import stat
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

from optarena.agents import RunContext, create_runner, run_metered
from optarena.agents.codex import CodexOptions, CodexRunner
from optarena.errors import OptarenaError
from optarena.fakemodel import FakeModelServer, make_script
from optarena.records import AgentLimits

DATA = Path(__file__).parent / "data"


def overrides(argv: list[str]) -> dict[str, object]:
    """The -c overrides, parsed back as TOML the way Codex reads them."""
    pairs = [argv[i + 1] for i, a in enumerate(argv) if a == "-c"]
    return tomllib.loads("\n".join(pairs))


def test_proxy_is_a_custom_responses_provider(tmp_path: Path) -> None:
    r = create_runner(
        "codex",
        {
            "model": "gpt-5.5",
            "max_retries": "0",
            "mcp_servers": '{"tools": {"command": "python3", "args": ["-m", "srv"]}}',
            "config": 'model_reasoning_effort="low"',
        },
    )
    argv = r.command("codex", tmp_path, "go", AgentLimits(), "http://127.0.0.1:7")
    assert argv[:4] == ["codex", "exec", "--json", "--skip-git-repo-check"]
    assert argv[-2:] == ["--", "go"]
    assert "--sandbox" in argv and argv[argv.index("--sandbox") + 1] == "workspace-write"
    assert argv[argv.index("--cd") + 1] == str(tmp_path)
    cfg = overrides(argv)
    assert cfg["model_provider"] == "optarena"
    assert cfg["model_providers"] == {
        "optarena": {
            "name": "optarena metering proxy",
            "base_url": "http://127.0.0.1:7/v1",
            "env_key": "OPENAI_API_KEY",
            "wire_api": "responses",
            "request_max_retries": 0,
            "stream_max_retries": 0,
        }
    }
    assert cfg["mcp_servers"] == {"tools": {"command": "python3", "args": ["-m", "srv"]}}
    # Codex takes each dotted part of a -c key literally: the server name must be bare.
    assert any(a.startswith("mcp_servers.tools=") for a in argv)
    assert cfg["model_reasoning_effort"] == "low"


@pytest.mark.parametrize("name", ['"tools"', "my.tools", "two words"])
def test_an_mcp_server_name_codex_cannot_read_is_a_clear_error(name: str) -> None:
    servers = json.dumps({name: {"command": "python3"}})
    with pytest.raises(OptarenaError, match=r"mcp_servers: .*MCP server name"):
        create_runner("codex", {"mcp_servers": servers})


def test_bypass_and_no_proxy(tmp_path: Path) -> None:
    r = CodexRunner(CodexOptions(bypass_sandbox=True, meter=False))
    argv = r.command("codex", tmp_path, "go", AgentLimits(), None)
    assert "--dangerously-bypass-approvals-and-sandbox" in argv and "--sandbox" not in argv
    assert "model_provider" not in overrides(argv)
    assert r.environment(tmp_path / "h", None) == {"CODEX_HOME": str(tmp_path / "h")}
    assert CodexRunner(CodexOptions(user_config=True)).environment(None, None) == {}


def test_missing_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MY_KEY", raising=False)
    with pytest.raises(OptarenaError, match="set MY_KEY"):
        CodexRunner(CodexOptions(bin="/bin/true", env_key="MY_KEY")).check_available()


def test_run_with_a_recorded_stream_prices_known_models(tmp_path: Path) -> None:
    exe = tmp_path / "codex"
    exe.write_text(f"#!/bin/sh\ncat {DATA / 'codex_success.jsonl'}\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    (tmp_path / "ws").mkdir()
    with FakeModelServer(make_script("hello")) as fake:
        known = CodexRunner(CodexOptions(bin=str(exe), upstream=fake.url, model="gpt-5"))
        ctx = RunContext.bare(tmp_path / "ws", tmp_path / "a" / "logs")
        out = run_metered(known, ctx, "go", AgentLimits(wall_s=30))
        unknown = CodexRunner(CodexOptions(bin=str(exe), upstream=fake.url, model="gpt-x"))
        ctx2 = RunContext.bare(tmp_path / "ws", tmp_path / "b" / "logs")
        out2 = run_metered(unknown, ctx2, "go", AgentLimits(wall_s=30))
    assert out.status == "completed"
    assert out.session_id == "01a23699-925d-7281-b1b0-91ed2ae23c12"
    # gpt-5: 1600 uncached x $1.25 + 8300 cached x $0.125 + 1060 out x $10, per million
    assert out.usage.cost_usd == pytest.approx((1600 * 1.25 + 8300 * 0.125 + 1060 * 10) / 1e6)
    assert out2.usage.cost_usd is None  # unknown model: unknown cost, never a guess
    assert out.extra["codex"]["files_changed"] == ["/tmp/exp/ws2/solution.py"]


def test_default_model_is_priced_from_what_the_proxy_saw(tmp_path: Path) -> None:
    # private: the codex runner's stream parser and its result, tested on recorded output
    from optarena.agents._cli_agent import Parsed
    from optarena.agents._codex_stream import parse_codex_stream
    from optarena.proxy import MeteredSession, ProxyLimits

    stream = parse_codex_stream(DATA.joinpath("codex_success.jsonl").read_text().splitlines())
    session = MeteredSession("http://127.0.0.1:9", ProxyLimits(), tmp_path / "c.jsonl")
    call = session.meter.start(
        started_at="t", api="responses", method="POST", path="/v1/responses", model="gpt-5"
    )
    call.status, call.input_tokens, call.output_tokens = 200, 1, 1
    session.meter.record(call)
    parsed = Parsed(stream.usage, stream.thread_id, "completed", "", {"codex": {}})
    context = replace(RunContext.bare(tmp_path, tmp_path / "logs"), metered=session.usage)
    usage = CodexRunner(CodexOptions()).reported_usage(parsed, context)
    assert usage.cost_usd == pytest.approx((1600 * 1.25 + 8300 * 0.125 + 1060 * 10) / 1e6)
    assert parsed.extra["codex"]["cost_source"].endswith(", gpt-5")
    session.proxy.httpd.server_close()


def test_resume_continues_the_session_with_the_exec_options(tmp_path: Path) -> None:
    r = CodexRunner(CodexOptions(model="gpt-5.5"))
    argv = r.command("codex", tmp_path, "go on", AgentLimits(), "http://127.0.0.1:7", "t-1")
    assert argv[-4:] == ["resume", "t-1", "--", "go on"]
    head = argv[: argv.index("resume")]  # `exec resume` has no --cd or --sandbox of its own
    assert "--cd" in head and "--sandbox" in head and "--model" in head
    assert overrides(argv)["model_provider"] == "optarena"
