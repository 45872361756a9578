"""Harness artifacts: vetting (contained), quarantine by hash, the registry's version,
and export of the qualified ones only."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from optarena.agents import SandboxSpec
from optarena.errors import OptarenaError
from optarena.harness import (
    Registry,
    export_artifacts,
    load_registry,
    load_run,
    save_registry,
    scan_area,
    vet,
)

# private: the skill front-matter parser, fed hostile files directly
from optarena.harness._vet import front_matter
from optarena.ledger import Ledger
from optarena.sandbox import AgentSandboxPolicy
from optarena.trials import agent_sandbox_spec

SERVER = '''
from mcp.server.mcpserver import MCPServer

server = MCPServer("bench")


@server.tool()
def double(x: int) -> int:
    """Twice x."""
    return 2 * x


@server.tool()
def echo(text: str) -> str:
    """The text back."""
    return text


server.run()
'''


def _mcp(root: Path, name: str, self_test: list[dict[str, object]]) -> Path:
    d = root / "mcp" / name
    d.mkdir(parents=True)
    (d / "server.py").write_text(SERVER)
    manifest = {"command": [sys.executable, "server.py"], "self_test": self_test}
    (d / "manifest.json").write_text(json.dumps(manifest))
    return d


def _skill(root: Path, name: str, text: str) -> Path:
    d = root / "skills" / name
    d.mkdir(parents=True)
    (d / "SKILL.md").write_text(text)
    return d


GOOD_TEST = [
    {"tool": "double", "arguments": {"x": 2}},
    {"tool": "echo", "arguments": {"text": "a"}},
]


def test_front_matter() -> None:
    assert front_matter("---\nname: fast-numpy\ndescription: 'one pass'\n---\nbody") == {
        "name": "fast-numpy",
        "description": "one pass",
    }
    assert front_matter("# no front matter") is None
    assert front_matter("---\nname: x\n") is None  # never closed


def test_a_skill_needs_name_and_description(tmp_path: Path) -> None:
    good = _skill(tmp_path, "good", "---\nname: good\ndescription: does things\n---\n")
    bad = _skill(tmp_path, "bad", "---\nname: bad\n---\n")
    assert vet("skill", good).passed
    q = vet("skill", bad)
    assert not q.passed and "description" in q.report


def test_an_mcp_server_passes_only_when_its_self_test_calls_every_tool(
    tmp_path: Path,
) -> None:
    assert vet("mcp", _mcp(tmp_path, "full", GOOD_TEST)).passed
    none = vet("mcp", _mcp(tmp_path / "a", "none", []))
    assert not none.passed and "none given" in none.report
    partial = vet("mcp", _mcp(tmp_path / "b", "partial", GOOD_TEST[:1]))
    assert not partial.passed and "echo" in partial.report and "every tool" in partial.report
    wrong = [{"tool": "double", "arguments": {"x": "not a number"}}, GOOD_TEST[1]]
    failing = vet("mcp", _mcp(tmp_path / "c", "failing", wrong))
    assert not failing.passed and "returned an error" in failing.report


def test_a_failing_servers_stderr_is_in_its_report_not_on_the_terminal(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    d = _mcp(tmp_path, "noisy", GOOD_TEST)
    (d / "server.py").write_text(
        "import sys\nprint('cannot open the model file weights.bin', file=sys.stderr)\n"
        "sys.exit(3)\n"
    )
    result = vet("mcp", d)
    assert not result.passed
    assert "closed; its stderr ends: cannot open the model file weights.bin" in result.report
    assert "weights.bin" not in capfd.readouterr().err


def _tool(where: Path, name: str, test_py: str) -> Path:
    """A tool artifact whose test is `python t.py` with this source."""
    d = where / "tools" / name
    d.mkdir(parents=True)
    (d / "t.py").write_text(test_py)
    (d / "manifest.json").write_text(json.dumps({"test": [sys.executable, "t.py"]}))
    return d


def test_a_tool_runs_its_test_contained(tmp_path: Path) -> None:
    # the test passes only if it cannot write outside the replay workspace
    d = _tool(
        tmp_path,
        "probe",
        "import pathlib, sys\n"
        "try:\n    pathlib.Path('/root/optarena-harness-escape').write_text('x')\n"
        "except OSError:\n    sys.exit(0)\n"
        "sys.exit(1)\n",
    )
    q = vet("tool", d)
    assert q.passed, q.report
    assert not Path("/root/optarena-harness-escape").exists()


def test_quarantine_never_replaces_a_qualified_version(tmp_path: Path) -> None:
    area, snaps = tmp_path / ".harness", tmp_path / "snapshots"
    reg = Registry(run="r1")
    server = _mcp(area, "bench", GOOD_TEST)
    added = scan_area(reg, area, snaps, iteration=1)
    assert [(a.name, a.status) for a in added] == [("bench", "qualified")]
    manifest = json.loads((server / "manifest.json").read_text())
    manifest["self_test"] = []  # iteration 2 breaks it
    (server / "manifest.json").write_text(json.dumps(manifest))
    added2 = scan_area(reg, area, snaps, iteration=2)
    assert [(a.name, a.status) for a in added2] == [("bench", "quarantined")]
    assert scan_area(reg, area, snaps, iteration=3) == []  # the same content is not re-tested
    [active] = reg.qualified()
    assert active.iteration == 1 and active.sha256 == added[0].sha256
    out = tmp_path / "export"
    written = export_artifacts(reg, snaps, out)
    exported = json.loads((out / "mcp-servers.json").read_text())["servers"]["bench"]
    assert exported["sha256"] == added[0].sha256 and "mcp-servers.json" in written
    shipped = json.loads((out / ".harness/mcp/bench/manifest.json").read_text())
    assert shipped["self_test"] == GOOD_TEST  # the qualified version, not the broken one
    assert (snaps / added2[0].path / "manifest.json").is_file()  # quarantined, kept on disk


def test_export_lays_out_skills_for_both_clis(tmp_path: Path) -> None:
    area, snaps = tmp_path / ".harness", tmp_path / "snapshots"
    _skill(area, "one-pass", "---\nname: one-pass\ndescription: reduce once\n---\nUse einsum.\n")
    _skill(area, "broken", "no front matter")
    reg = Registry(run="r2")
    scan_area(reg, area, snaps, iteration=1)
    written = export_artifacts(reg, snaps, tmp_path / "x")
    assert ".claude/skills/one-pass" in written and ".agents/skills/one-pass" in written
    assert not any("broken" in w for w in written)
    with pytest.raises(OptarenaError, match="exists"):
        export_artifacts(reg, snaps, tmp_path / "x")


def test_a_registry_of_another_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "registry.json"
    save_registry(Registry(run="r"), path)
    assert load_registry(path).run == "r"
    path.write_text(json.dumps({"schema_version": 99, "run": "r", "artifacts": []}))
    with pytest.raises(OptarenaError, match="version 99 is newer than this optarena reads"):
        load_registry(path)


def test_registry_and_run_files_go_through_the_records_migrations(tmp_path: Path) -> None:
    """A version-0 file is bad input; one without `schema_version` is version 1 (as every first
    version was); a newer one names the upgrade."""
    path = tmp_path / "registry.json"
    path.write_text(json.dumps({"run": "r", "artifacts": []}))
    assert load_registry(path).schema_version == 1
    path.write_text(json.dumps({"schema_version": 0, "run": "r", "artifacts": []}))
    with pytest.raises(OptarenaError, match="positive integer"):
        load_registry(path)
    path.write_text("[]")
    with pytest.raises(OptarenaError, match="JSON object"):
        load_registry(path)
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"schema_version": 2, "id": "x"}))
    with pytest.raises(OptarenaError, match=r"harness_run record version 2 is newer.*upgrade"):
        load_run(run)


def test_an_artifact_holding_a_link_is_quarantined_and_what_it_names_is_never_read(
    tmp_path: Path,
) -> None:
    """The agent writes `.harness/` and optarena copies it (snapshot, activation) as its own
    user: a skill whose extra file links to a file the agent cannot read, or a doc that is a
    link, would have had that file's bytes copied into the next session's workspace."""
    secret = tmp_path / "secret.key"
    secret.write_text("SECRET-KEY-BYTES")
    secret.chmod(0o600)
    area, snaps = tmp_path / ".harness", tmp_path / "snapshots"
    skill = _skill(area, "leaky", "---\nname: leaky\ndescription: a skill\n---\nUse it.\n")
    (skill / "notes.txt").symlink_to(secret)
    (area / "docs").mkdir()
    (area / "docs" / "key.md").symlink_to(secret)
    reg = Registry(run="r")
    added = scan_area(reg, area, snaps, iteration=1)
    assert sorted((a.kind, a.name, a.status) for a in added) == [
        ("doc", "key.md", "quarantined"),
        ("skill", "leaky", "quarantined"),
    ]
    assert all("not a plain file" in a.report for a in added), [a.report for a in added]
    assert reg.qualified() == []
    for a in added:  # kept on disk as it was, the link a link
        assert not any(
            p.is_file() and not p.is_symlink() and "SECRET" in p.read_text()
            for p in [snaps / a.path, *(snaps / a.path).rglob("*")]
        )
    export_artifacts(reg, snaps, tmp_path / "export")
    assert not any(
        "SECRET" in p.read_text()
        for p in (tmp_path / "export").rglob("*")
        if p.is_file() and not p.is_symlink()
    )


def test_a_verifiers_report_carries_no_other_trials_files(tmp_path: Path) -> None:
    """A failing test's output goes back to the agent in the repair prompt: a verifier that
    prints every trial's workspace it can find shows none (the ledger is hidden by name, private
    by mode, and absent from a default-deny root)."""
    base = Path(tempfile.mkdtemp(prefix=".vet-test-", dir=Path(__file__).resolve().parents[2]))
    try:
        base.chmod(0o755)
        with Ledger.open(base / "L") as ledger:
            other = ledger.work_dir("t0") / "workspace"
            other.mkdir(parents=True)
            (other / "solution.py").write_text("OTHER-TRIAL-SECRET-5512")
            spec = agent_sandbox_spec(ledger, workspace=None, home=None)
        d = tmp_path / "verifiers" / "snoop"
        d.mkdir(parents=True)
        snoop = f"cat {base}/L/work/*/workspace/* {base}/*/work/*/workspace/*; exit 1"
        (d / "manifest.json").write_text(json.dumps({"test": ["sh", "-c", snoop]}))
        q = vet("verifier", d, spec=spec)
        assert not q.passed and "OTHER-TRIAL-SECRET-5512" not in q.report, q.report
    finally:
        shutil.rmtree(base)


def test_an_artifacts_command_keeps_the_agents_process_limit(tmp_path: Path) -> None:
    """Contained as the agent: with the spec's `max_processes`, not the sandbox's default."""
    d = _tool(
        tmp_path,
        "forker",
        "import os, sys\n"
        "n = 0\n"
        "for _ in range(64):\n"
        "    try:\n"
        "        if os.fork() == 0:\n"
        "            os.execvp('sleep', ['sleep', '5'])\n"
        "        n += 1\n"
        "    except OSError:\n"
        "        break\n"
        "sys.exit(0 if n < 32 else 1)\n",
    )
    spec = SandboxSpec(policy=AgentSandboxPolicy(max_processes=24))
    assert vet("tool", d, spec=spec).passed
    assert not vet("tool", d).passed  # the default (1024) lets all 64 start


def test_hostile_names_and_shapes_in_an_artifact_are_quarantined_never_a_crash(
    tmp_path: Path,
) -> None:
    """Beyond links: a FIFO (a copy would block), a hard link to a file others may not read,
    a name that is not UTF-8 (the registry could not be written: a crash), a name carrying a
    newline, and an MCP manifest nested past the JSON parser's depth (RecursionError)."""
    secret = tmp_path / "secret.key"
    secret.write_text("SECRET-KEY-BYTES")
    secret.chmod(0o600)
    area, snaps = tmp_path / ".harness", tmp_path / "snapshots"
    body = "---\nname: s\ndescription: a skill\n---\nUse it.\n"
    os.mkfifo(_skill(area, "piped", body) / "pipe")
    os.link(secret, _skill(area, "hard", body) / "key.txt")
    _skill(area, os.fsdecode(b"bad\xffname"), body)
    _skill(area, "line\nbreak", body)
    deep = area / "mcp" / "deep"
    deep.mkdir(parents=True)
    (deep / "manifest.json").write_text("[" * 100_000 + "]" * 100_000)
    reg = Registry(run="r")
    added = scan_area(reg, area, snaps, iteration=1)
    save_registry(reg, tmp_path / "registry.json")  # every name storable
    assert sorted((a.name, a.status) for a in added) == [
        ("bad\\xffname", "quarantined"),
        ("deep", "quarantined"),
        ("hard", "quarantined"),
        ("line\\x0abreak", "quarantined"),
        ("piped", "quarantined"),
    ]
    reports = {a.name: a.report for a in added}
    assert "a FIFO" in reports["piped"] and "hard link" in reports["hard"]
    assert "nested too deeply" in reports["deep"]
    assert not any(
        b"SECRET" in p.read_bytes() for p in snaps.rglob("*") if p.is_file() and not p.is_symlink()
    )
