"""`optarena harness vet|show|export` from the command line, bad input included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from optarena.cli import main


def test_vet_show_export(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    area = tmp_path / ".harness"
    (area / "skills" / "one-pass").mkdir(parents=True)
    (area / "skills" / "one-pass" / "SKILL.md").write_text(
        "---\nname: one-pass\ndescription: reduce in one pass\n---\n"
    )
    (area / "docs").mkdir()
    (area / "docs" / "empty.md").write_text("")
    run = tmp_path / "run"
    assert main(["harness", "vet", str(area), "--run", str(run), "--iteration", "1"]) == 0
    out = capsys.readouterr().out
    assert "qualified   skill one-pass" in out and "quarantined doc empty.md" in out
    assert main(["harness", "show", str(run)]) == 0
    assert "active: skill:one-pass" in capsys.readouterr().out
    assert main(["harness", "export", str(run), "-o", str(tmp_path / "art")]) == 0
    assert (tmp_path / "art" / ".claude" / "skills" / "one-pass" / "SKILL.md").is_file()
    assert not (tmp_path / "art" / ".harness" / "docs").exists()


def test_bad_input_is_exit_2(tmp_path: Path) -> None:
    assert main(["harness", "show", str(tmp_path)]) == 2  # no registry
    (tmp_path / "registry.json").write_text(json.dumps({"schema_version": 7}))
    assert main(["harness", "show", str(tmp_path)]) == 2
    assert main(["harness", "vet", str(tmp_path / "nope"), "--run", str(tmp_path)]) == 2
    # its name before `vet` still works
    assert main(["harness", "qualify", str(tmp_path / "nope"), "--run", str(tmp_path)]) == 2
