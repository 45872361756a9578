"""Metering applies to every runner: a `command` agent's model calls go through the trial's
metering proxy (found in `{proxy_url}`, `ANTHROPIC_BASE_URL`, `OPENAI_BASE_URL`), are limited
like Claude Code's, and land in the ledger with the trial; its own usage file stays beside."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from optarena.agents import RunContext
from optarena.fakemodel import USAGE, FakeModelServer, LongStreamScript, WireFault, make_script
from optarena.ledger import Ledger
from optarena.records import AgentLimits, AgentOutcome, TrialRecord
from optarena.sandbox import probe
from optarena.tasks import Task
from optarena.trials import TrialConfig, TrialHook, run_trial
from sandbox.test_agent_relay import FLOOD

# One Anthropic call at $ANTHROPIC_BASE_URL, one Chat Completions call at $OPENAI_BASE_URL,
# one at the proxy URL the template passed as $1; then the agent reports usage of its own
# (a figure the proxy never saw).
CALLER = """python3 - "$1" <<'END'
import json, os, sys, urllib.error, urllib.request

def post(url, body, headers):
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"content-type": "application/json", **headers})
    try:
        print(urllib.request.urlopen(req, timeout=10).status)
    except urllib.error.HTTPError as e:
        print(e.code)

msgs = [{"role": "user", "content": "hi"}]
post(os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages",
     {"model": "claude-sonnet-4-5", "max_tokens": 16, "messages": msgs},
     {"x-api-key": "k", "anthropic-version": "2023-06-01"})
post(os.environ["OPENAI_BASE_URL"] + "/chat/completions", {"model": "gpt-5", "messages": msgs},
     {"authorization": "Bearer k"})
post(sys.argv[1] + "/v1/responses", {"model": "gpt-5", "input": "hi"},
     {"authorization": "Bearer k"})
json.dump({"input_tokens": 999}, open(os.environ["OPTARENA_USAGE_FILE"], "w"))
END
"""


def _trial(
    ledger: Ledger, task: Task, command: str, fake: FakeModelServer, **limits: int
) -> TrialRecord:
    config = TrialConfig(
        task=task,
        agent="command",
        agent_args={"command": command, "upstream": fake.url},
        limits=AgentLimits(wall_s=60, **limits),
        measure=False,
    )
    return run_trial(config, ledger)


def test_a_command_agents_calls_are_metered_and_recorded(
    ledger: Ledger, rmsnorm: Task, agent: Callable[[str], str]
) -> None:
    with FakeModelServer(make_script("hello")) as fake:
        rec = _trial(ledger, rmsnorm, agent(CALLER) + " {proxy_url}", fake)
    assert rec.agent_status == "completed", rec.agent_detail
    stdout = ledger.store.read_text(rec.artifacts["logs/stdout.log"])
    assert stdout.split() == ["200", "200", "200"]
    calls = ledger.calls(rec.id)
    assert [c.api for c in calls] == ["anthropic", "chat", "responses"]
    assert len(fake.served) == 3
    chat = USAGE["chat"]
    assert all(c.input_tokens == chat.input and c.output_tokens == chat.output for c in calls)
    metered = rec.metered_usage
    assert metered is not None and metered.source == "metered" and metered.calls == 3
    assert metered.input_tokens == 3 * chat.input
    # the agent's own report stays beside the metered figures, never merged
    assert rec.usage.source == "usage-file" and rec.usage.input_tokens == 999
    assert "logs/api_calls.jsonl" in rec.artifacts


def test_a_command_that_calls_no_model_records_zero_metered_calls(
    ledger: Ledger, rmsnorm: Task, agent: Callable[[str], str]
) -> None:
    with FakeModelServer(make_script("hello")) as fake:
        rec = _trial(ledger, rmsnorm, agent("echo no model"), fake)
    assert rec.metered_usage is not None and rec.metered_usage.calls == 0
    assert ledger.calls(rec.id) == [] and fake.served == []
    assert rec.usage.source == "unknown"  # reported: unknown, not zero


def test_a_command_agents_calls_are_limited_like_claude_codes(
    ledger: Ledger, rmsnorm: Task, agent: Callable[[str], str]
) -> None:
    with FakeModelServer(make_script("hello")) as fake:
        rec = _trial(ledger, rmsnorm, agent(CALLER) + " {proxy_url}", fake, max_calls=1)
    assert rec.agent_status == "budget_exceeded", rec.agent_detail
    assert "call budget exhausted" in rec.agent_detail
    calls = ledger.calls(rec.id)
    assert [c.refused is not None for c in calls] == [False, True, True]
    assert len(fake.served) == 1
    assert rec.verdict is not None  # the delivered files were still judged


def test_meter_false_runs_a_command_without_a_proxy(
    ledger: Ledger, rmsnorm: Task, agent: Callable[[str], str]
) -> None:
    command = agent('echo "[$OPTARENA_PROXY_URL]"')
    config = TrialConfig(
        task=rmsnorm,
        agent="command",
        agent_args={"command": command, "meter": "false"},
        measure=False,
    )
    rec = run_trial(config, ledger)
    assert rec.metered_usage is None  # not metered, which is not zero calls
    assert ledger.store.read_text(rec.artifacts["logs/stdout.log"]) == "[]\n"


ONE_CALL_THEN_SLEEP = """python3 - <<'END'
import json, os, urllib.request
req = urllib.request.Request(os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages",
    data=json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 16,
                     "messages": [{"role": "user", "content": "hi"}]}).encode(),
    headers={"content-type": "application/json", "x-api-key": "k",
             "anthropic-version": "2023-06-01"})
urllib.request.urlopen(req, timeout=10).read()
END
touch "$OPTARENA_LOGS_DIR/called"
sleep 300
"""


def test_kill_9_mid_trial_loses_no_metered_call(
    tmp_path: Path, agent: Callable[[str], str]
) -> None:
    home = tmp_path / "ledger"
    with FakeModelServer(make_script("hello")) as fake:
        argv = [sys.executable, "-m", "optarena", "run", "--task", "rmsnorm", "--no-measure"]
        argv += ["--command", agent(ONE_CALL_THEN_SLEEP), "--agent-arg", f"upstream={fake.url}"]
        proc = subprocess.Popen([*argv, "--ledger", str(home)], stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 60
            while not list((home / "work").glob("*/logs/called")):
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else b""
                assert time.monotonic() < deadline, "the agent never made its call"
                time.sleep(0.05)
            proc.kill()
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert len(fake.served) == 1
    with Ledger.open(home) as ledger:
        ledger.reconcile()  # the recovery after the crash
        (record,) = ledger.trials()
        assert record.state == "interrupted"
        (call,) = ledger.calls(record.id)
        assert (call.api, call.status, call.input_tokens) == ("anthropic", 200, USAGE["chat"].input)


class _CtrlCAfterAgent(TrialHook):
    """Ctrl-C right after the agent's run, before its delivery is captured."""

    def after_agent(self, context: RunContext, outcome: AgentOutcome) -> AgentOutcome:
        raise KeyboardInterrupt("Ctrl-C after the agent")


def test_an_interrupted_trial_keeps_its_delivery_and_its_metered_calls(
    ledger: Ledger, rmsnorm: Task, agent: Callable[[str], str]
) -> None:
    command = agent(ONE_CALL_THEN_SLEEP.replace("sleep 300", "true"))
    with FakeModelServer(make_script("hello")) as fake:
        config = TrialConfig(
            task=rmsnorm,
            agent="command",
            agent_args={"command": command, "upstream": fake.url},
            measure=False,
        )
        with pytest.raises(KeyboardInterrupt):
            run_trial(config, ledger, hooks=[_CtrlCAfterAgent()])
    (record,) = ledger.trials()
    assert record.state == "interrupted" and "diff" in record.artifacts  # the delivery kept
    assert [c.api for c in ledger.calls(record.id)] == ["anthropic"]


# One real call, then a forged line in the proxy's log under {logs_dir}, which the command
# agent may write.
FORGER = """python3 - <<'END'
import json, os, urllib.request
req = urllib.request.Request(
    os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages",
    data=json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 16,
                     "messages": [{"role": "user", "content": "hi"}]}).encode(),
    headers={"content-type": "application/json", "x-api-key": "k",
             "anthropic-version": "2023-06-01"})
print(urllib.request.urlopen(req, timeout=10).status)
log = os.path.join(os.environ["OPTARENA_LOGS_DIR"], "api_calls.jsonl")
with open(log + ".new", "w") as f:  # the directory is writable: replace whatever is there
    f.write('{"FORGED": "zero cost, no calls"}\\n')
os.replace(log + ".new", log)
END
"""


def test_the_proxys_call_log_is_out_of_a_command_agents_reach(
    ledger: Ledger, rmsnorm: Task, agent: Callable[[str], str]
) -> None:
    """The log is the cost evidence taken in after Ctrl-C or kill -9: it is written outside
    `{logs_dir}`, and the trial's `logs/api_calls.jsonl` is the proxy's copy."""
    with FakeModelServer(make_script("hello")) as fake:
        rec = _trial(ledger, rmsnorm, agent(FORGER), fake)
    assert rec.agent_status == "completed", rec.agent_detail
    kept = ledger.store.read_text(rec.artifacts["logs/api_calls.jsonl"])
    assert "FORGED" not in kept and len(kept.splitlines()) == 1
    calls, notes = ledger.logged_calls(rec.id)  # what an interrupted trial would take in
    assert [c.api for c in calls] == ["anthropic"] and notes == []
    assert not any(
        k.startswith("logs/api_calls") and k != "logs/api_calls.jsonl" for k in rec.artifacts
    )


# Spends through an endpoint the proxy cannot meter, then makes one metered call.
UNMETERED = """python3 - <<'END'
import json, os, urllib.error, urllib.request
def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={
        "content-type": "application/json", "authorization": "Bearer k"})
    try:
        print(urllib.request.urlopen(req, timeout=10).status)
    except urllib.error.HTTPError as e:
        print(e.code)
post(os.environ["OPENAI_BASE_URL"] + "/completions", {"model": "gpt-5", "prompt": "hi"})
post(os.environ["OPENAI_BASE_URL"] + "/completions%23/chat/completions", {"model": "gpt-5"})
post(os.environ["OPENAI_BASE_URL"] + "/chat/completions",
     {"model": "gpt-5", "messages": [{"role": "user", "content": "hi"}]})
END
"""


def test_a_command_agent_cannot_spend_around_the_meter(
    ledger: Ledger, rmsnorm: Task, agent: Callable[[str], str]
) -> None:
    """Legacy completions (and a path dressed as a metered one) are refused in a real trial:
    nothing reaches the upstream but the metered call, the refusals are recorded and noted,
    and the run is not called budget_exceeded."""
    with FakeModelServer(make_script("hello")) as fake:
        rec = _trial(ledger, rmsnorm, agent(UNMETERED), fake, max_tokens=10**6)
    stdout = ledger.store.read_text(rec.artifacts["logs/stdout.log"])
    assert stdout.split() == ["400", "400", "200"]
    assert [s.path for s in fake.served] == ["/v1/chat/completions"]
    assert rec.agent_status == "completed" and "cannot meter" in rec.agent_detail
    calls = ledger.calls(rec.id)
    assert [(c.api, c.refused is not None) for c in calls] == [
        ("other", True),
        ("other", True),
        ("chat", False),
    ]


# A streamed call read in part, then hung up on (the reported attack), then a second call.
HANG_UP = """python3 - <<'END'
import json, os, socket, urllib.error, urllib.request
from urllib.parse import urlsplit
base = urlsplit(os.environ["ANTHROPIC_BASE_URL"])
body = json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 8000, "stream": True,
                   "messages": [{"role": "user", "content": "write a lot"}]}).encode()
s = socket.create_connection((base.hostname, base.port), timeout=30)
s.sendall(b"POST /v1/messages HTTP/1.1\\r\\nHost: x\\r\\ncontent-type: application/json\\r\\n"
          b"x-api-key: k\\r\\ncontent-length: %d\\r\\n\\r\\n%s" % (len(body), body))
got = b""
while got.count(b"content_block_delta") < 30:
    piece = s.recv(4096)
    if not piece:
        break
    got += piece
s.close()
print("hung up")
req = urllib.request.Request(os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages",
    data=json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 16,
                     "messages": [{"role": "user", "content": "hi"}]}).encode(),
    headers={"content-type": "application/json", "x-api-key": "k"})
try:
    print(urllib.request.urlopen(req, timeout=30).status)
except urllib.error.HTTPError as e:
    print(e.code)
END
"""


@pytest.mark.parametrize("upstream_cut", [False, True])
def test_hanging_up_mid_stream_neither_hides_tokens_nor_slips_past_a_budget(
    ledger: Ledger, rmsnorm: Task, agent: Callable[[str], str], upstream_cut: bool
) -> None:
    """A contained command agent reads 30 of 40 chunks and hangs up, then calls again under
    a 5,000-token budget. The proxy reads the rest of the stream: the call counts its 7,000
    output tokens and the second call is refused. When the upstream itself breaks the stream
    off, the count is unknown (a named lower bound in the ledger) and the budget refuses on
    that, the outcome saying why."""
    wire = WireFault(event_delay_s=0.005, cut_after=33 if upstream_cut else None)
    with FakeModelServer(LongStreamScript(wire)) as fake:
        rec = _trial(ledger, rmsnorm, agent(HANG_UP), fake, max_tokens=5000)
    stdout = ledger.store.read_text(rec.artifacts["logs/stdout.log"])
    assert stdout.split() == ["hung", "up", "400"]
    assert rec.agent_status == "budget_exceeded", rec.agent_detail
    first, second = ledger.calls(rec.id)
    assert second.refused is not None and len(fake.served) == 1
    if upstream_cut:
        assert first.output_tokens is None and first.tokens_at_least == 1201
        assert first.usage_note is not None and "before its final usage event" in first.usage_note
        assert "call 1's token count is unknown" in rec.agent_detail
        assert "token counts unknown for call(s) 1" in rec.agent_detail
        metered = rec.metered_usage
        assert metered is not None and metered.output_tokens is None
        assert metered.tokens_at_least == 1201 and metered.cost_usd is None
    else:
        assert (first.input_tokens, first.output_tokens) == (1000, 7000)
        assert "token budget exhausted (8200 of 5000 tokens used)" in rec.agent_detail


@pytest.mark.skipif(probe().netns is not None, reason="no network namespace: no bridge")
def test_a_flood_of_connections_is_refused_and_noted_on_the_outcome(
    ledger: Ledger, rmsnorm: Task, agent: Callable[[str], str]
) -> None:
    """600 connections straight to the bridge socket and 200 through the relay, held: the
    bridge and the proxy refuse what is over their limits, and the trial's outcome says so."""
    with FakeModelServer(make_script("hello")) as fake:
        rec = _trial(ledger, rmsnorm, agent(FLOOD.format(port=0)), fake)
    err = ledger.store.read_text(rec.artifacts["logs/stderr.log"])
    assert "held 800" in ledger.store.read_text(rec.artifacts["logs/stdout.log"]), err
    assert "the agent's network bridge refused" in rec.agent_detail
    assert "the proxy refused" in rec.agent_detail and "over its limit of 32" in rec.agent_detail
    assert rec.agent_sandbox is not None and rec.agent_sandbox["bridge_refused"] >= 600 - 64
