"""What an agent writes is data, never a path to follow or a shape that crashes optarena: its
usage file and output stream are read without following a link, FIFO or hard link it planted,
bounded in size and nesting; whatever text it chose ends up storable in a record; the command
template is filled, never evaluated."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from optarena.agents import RunContext

# private: the runners' own stream parsers and output limits, fed hostile output directly
from optarena.agents._claude_stream import parse_claude_stream
from optarena.agents._cli_agent import MAX_LINE, stream_lines
from optarena.agents._codex_stream import parse_codex_stream
from optarena.agents._storable import MAX_NESTING, storable_outcome
from optarena.agents.command import (
    USAGE_FILE_LIMIT,
    CommandRunner,
    read_usage_file,
    render_template,
)
from optarena.errors import OptarenaError
from optarena.records import AgentLimits, AgentOutcome

DEEP = "[" * 200_000 + "]" * 200_000  # past the JSON parser's recursion limit


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    s = tmp_path / "secret.json"
    s.write_text('{"input_tokens": 424242}\n')  # a root-only file that happens to parse
    s.chmod(0o600)
    return s


@pytest.mark.parametrize(
    "template",
    [
        "echo {workspace:>99999999999}",  # a 100 GB string: MemoryError before
        "echo {workspace:{timeout_s}}",  # a nested spec
        "echo {workspace!r}",
        "echo {workspace.__class__.__mro__}",
        "echo {workspace[0]}",
        "echo {0}",
        "echo {}",
    ],
)
def test_a_placeholder_is_filled_never_formatted(template: str) -> None:
    with pytest.raises(OptarenaError, match="bad placeholder") as e:
        CommandRunner(template)
    assert "\n" not in str(e.value) and "{workspace}" in str(e.value)


def test_braces_and_placeholders_still_fill() -> None:
    values = {"workspace": "/w {x}", "timeout_s": "30"}
    assert render_template("a {{b}} {workspace}:{timeout_s}", values) == ["a", "{b}", "/w {x}:30"]


def _usage(path: Path, base: Path | None = None) -> tuple[Any, list[str]]:
    return read_usage_file(path, None, base)


@pytest.mark.parametrize(
    ("make", "why"),
    [
        (lambda p, s: p.symlink_to(s), "a symbolic link"),
        (lambda p, s: os.link(s, p), "a hard link"),
        (lambda p, s: os.mkfifo(p), "a FIFO"),  # a read would block forever
        (lambda p, s: p.mkdir(), "a directory"),
    ],
    ids=["symlink", "hard-link", "fifo", "directory"],
)
def test_a_usage_file_that_is_not_the_agents_own_is_not_read(
    tmp_path: Path, secret: Path, make: Any, why: str
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    make(logs / "usage.json", secret)
    usage, notes = _usage(logs / "usage.json", logs)
    assert usage.input_tokens is None and usage.source == "unknown"
    assert len(notes) == 1 and why in notes[0]


def test_a_usage_file_below_a_linked_directory_is_not_read(tmp_path: Path, secret: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "sub").symlink_to(secret.parent)
    usage, notes = _usage(logs / "sub" / secret.name, logs)
    assert usage.input_tokens is None and "sub is a symbolic link" in notes[0]


@pytest.mark.parametrize(
    ("content", "note"),
    [
        (DEEP.encode(), "nested too deeply"),
        (b"\xff\xfe{", "not JSON"),
        (b" " * (USAGE_FILE_LIMIT + 1), f"larger than {USAGE_FILE_LIMIT} bytes"),
        (b'{"\\udcff": 1, "output_tokens": 3}', "unknown key"),
    ],
    ids=["deep", "not-utf8", "huge", "surrogate-key"],
)
def test_a_hostile_usage_file_is_a_note_never_a_crash(
    tmp_path: Path, content: bytes, note: str
) -> None:
    path = tmp_path / "usage.json"
    path.write_bytes(content)
    usage, notes = _usage(path)
    assert any(note in n for n in notes)
    outcome = storable_outcome(
        AgentOutcome(status="completed", usage=usage, detail="; ".join(notes))
    )
    outcome.model_dump_json()  # storable, whatever the agent chose


def test_a_command_agents_symlinked_usage_file_in_a_run(tmp_path: Path, secret: Path) -> None:
    """The run as a trial does it: the usage file below `{logs_dir}` replaced by a link to a
    root-only file that parses as usage; its figures never become the agent's."""
    ws, logs = tmp_path / "ws", tmp_path / "logs"
    ws.mkdir()
    runner = CommandRunner(f"sh -c 'ln -s {secret} \"$OPTARENA_USAGE_FILE\"'")
    context = replace(RunContext.bare(ws, logs, trial_id="t-1", task_id="rmsnorm"))
    out = runner.run(context, "do the task", AgentLimits(wall_s=20))
    assert out.usage.input_tokens is None
    assert "a symbolic link" in out.detail


def test_stream_lines_refuse_a_link_and_cut_an_endless_line(tmp_path: Path, secret: Path) -> None:
    link = tmp_path / "claude.jsonl"
    link.symlink_to(secret)
    assert list(stream_lines(link)) == []
    fifo = tmp_path / "codex.jsonl"
    os.mkfifo(fifo)
    assert list(stream_lines(fifo)) == []  # never blocks
    long = tmp_path / "long.jsonl"
    with open(long, "w") as f:
        f.write('{"type": "x"}\n' + "[" * (MAX_LINE + 10) + "\n" + '{"type": "y"}\n')
    lines = list(stream_lines(long))
    assert len(lines) == 3 and len(lines[1]) == MAX_LINE
    assert json.loads(lines[2]) == {"type": "y"}


def test_streams_nested_too_deep_count_as_unparsed_lines() -> None:
    ok = '{"type": "system", "subtype": "init", "session_id": "s-1"}'
    claude = parse_claude_stream([ok, DEEP, '{"type": "x", "a": ' + DEEP + "}"])
    assert claude.unparsed_lines == 2 and claude.session_id == "s-1"
    codex = parse_codex_stream(['{"type": "thread.started", "thread_id": "t"}', DEEP])
    assert codex.unparsed_lines == 1 and codex.thread_id == "t"


def test_an_outcome_carrying_what_the_agent_wrote_is_always_storable() -> None:
    """Lone surrogates (JSON's `\\udcff` decodes to one) and values nested deeper than the
    serializer goes: storing the outcome failed, and the trial with it."""
    nested = json.loads("[" * 300 + "]" * 300)
    out = AgentOutcome(
        status="completed",
        detail="agent said \udcff\ud800",
        extra={"claude": {"permission_denials": [nested], "\udcffkey": "v\u202e"}},
    )
    with pytest.raises(ValueError):
        out.model_dump_json()
    safe = storable_outcome(out)
    text = safe.model_dump_json()
    assert "\\\\xff" in text and "\\\\ud800" in text
    assert f"nested deeper than {MAX_NESTING} levels" in text
    assert safe.status == "completed"
