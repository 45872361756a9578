"""What an agent made is data, never a path to follow: real trials whose agent plants links
where optarena reads its logs and usage, and leaves hostile names and shapes in its workspace
(names that are not UTF-8 or forge output lines, FIFOs, sockets, directories nested past
PATH_MAX, sparse files of gigabytes). Each ends in a recorded trial with a named reason, never
a row left `running` and never exit 2; nothing outside the agent's own files is read; nothing
stays owned by the agent's uid."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from optarena.cli import main
from optarena.errors import OptarenaError
from optarena.judge import JudgeOptions, JudgeResult
from optarena.ledger import Ledger
from optarena.records import AgentLimits, TrialRecord
from optarena.tasks import Task
from optarena.trials import TrialConfig, TrialInterrupted, WorkspaceLimits, rejudge, run_trial

Trial = Callable[..., TrialRecord]
Agent = Callable[[str], str]
SECRET = "ROOT-ONLY-7f3a9c"


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    """A file only root may read (the agent runs as a pool uid when optarena is root)."""
    s = tmp_path / "root-only.key"
    s.write_text(f'{{"input_tokens": 999, "note": "{SECRET}"}}\n')
    s.chmod(0o600)
    return s


def _store_text(ledger: Ledger) -> bytes:
    return b"".join(p.read_bytes() for p in ledger.store.root.rglob("*") if p.is_file())


def _owners(root: Path) -> set[int]:
    """Every owner under `root` however deep (`find`, not optarena's walker)."""
    out = subprocess.run(["find", str(root), "-printf", "%U\n"], capture_output=True, text=True)
    return {int(u) for u in out.stdout.split()}


def refused(ledger: Ledger, rec: TrialRecord, code: str) -> None:
    """Recorded as rejected with `code`, unread by git and unjudged, the agent's uid gone."""
    assert rec.state == "complete" and rec.verdict == "rejected", rec
    assert code in rec.reason_codes and rec.metrics is None
    assert ledger.get(rec.id) == rec
    (judgement,) = ledger.judgements(rec.id)
    assert (judgement.verdict, judgement.reason_codes) == ("rejected", rec.reason_codes)
    assert "diff" not in rec.artifacts and "candidate" not in rec.artifacts
    assert "outcome" in rec.artifacts and "judge" not in rec.phases_s
    json.dumps(rec.model_dump(mode="json"))
    if os.geteuid() == 0:
        assert _owners(ledger.work_dir(rec.id)) == {0}


# ---- links where optarena reads the agent's logs and usage ------------------------------


LOGS = ("stdout.log", "stderr.log", "prompt.md", "usage.json")


@pytest.mark.parametrize("how", ["symlink", "fifo"])
def test_a_log_replaced_by_a_link_or_fifo_is_left_out_not_read(
    trial: Trial, agent: Agent, ledger: Ledger, secret: Path, how: str
) -> None:
    """The agent replaces each file optarena keeps from `{logs_dir}` with a link to a
    root-only file (it was stored as a world-readable artifact and shown in the report) or a
    FIFO (which would hang the copy)."""
    plant = " ".join(
        f"rm -f {n}; " + (f"ln -s {secret} {n};" if how == "symlink" else f"mkfifo {n};")
        for n in LOGS
    )
    rec = trial(agent(f'cd "$OPTARENA_LOGS_DIR"; {plant}'))
    assert rec.agent_status == "completed" and rec.verdict == "accepted"
    for name in LOGS:
        assert f"logs/{name}" not in rec.artifacts
        assert f"{name}: a " in rec.agent_detail.split("logs not kept: ", 1)[1]
    assert SECRET.encode() not in _store_text(ledger)
    assert rec.usage.input_tokens is None  # the linked file's figures are never the agent's


def test_a_usage_file_behind_a_linked_directory_is_not_read(
    trial: Trial, agent: Agent, ledger: Ledger, secret: Path
) -> None:
    rec = trial(
        agent(f'cd "$OPTARENA_LOGS_DIR"; ln -s {secret.parent} sub'),
        agent_args={"usage_file": f"sub/{secret.name}"},
    )
    assert rec.usage.input_tokens is None and "sub is a symbolic link" in rec.agent_detail
    assert SECRET.encode() not in _store_text(ledger)


@pytest.mark.parametrize(
    ("content", "note"),
    [
        ("python3 -c \"print('['*200000 + ']'*200000)\"", "nested too deeply"),
        ("printf '{\"\\\\udcff\\\\u202e\": 1}'", "unknown key '\\xff\\u202e' ignored"),
        ("head -c 3000000 /dev/zero", "larger than"),
    ],
    ids=["nested", "surrogate-key", "huge"],
)
def test_a_hostile_usage_file_is_a_recorded_note(
    trial: Trial, agent: Agent, content: str, note: str
) -> None:
    rec = trial(agent(f'{content} > "$OPTARENA_USAGE_FILE"'))
    assert rec.state == "complete" and rec.verdict == "accepted"
    assert note in rec.agent_detail and rec.usage.input_tokens is None


# ---- hostile names and shapes in the workspace ---------------------------------------------


@pytest.mark.parametrize(
    "plant",
    [
        "touch \"$(printf 'bad\\377name.py')\"",
        "mkdir \"$(printf 'd\\377')\" && touch \"$(printf 'd\\377')/x.py\"",
        "mkdir -p a/b && touch \"a/b/$(printf '\\300\\257')\"",
    ],
    ids=["file", "directory", "nested-overlong-utf8"],
)
def test_a_name_that_is_not_utf8_is_a_recorded_rejection(
    trial: Trial, agent: Agent, ledger: Ledger, plant: str
) -> None:
    """It crashed the record's serialization and left the trial `running`."""
    rec = trial(agent(plant), check=False)
    refused(ledger, rec, "undecodable_name")
    assert any("\\x" in r for r in rec.reasons)


@pytest.mark.parametrize(
    ("plant", "code", "what"),
    [
        ("rm solution.py; mkfifo solution.py", "special_file", "solution.py is a FIFO"),
        ("mkfifo scratch.pipe", "special_file", "scratch.pipe is a FIFO"),
        (
            "python3 -c \"import socket; socket.socket(socket.AF_UNIX).bind('ctl.sock')\"",
            "special_file",
            "ctl.sock is a socket",
        ),
    ],
    ids=["fifo-tracked", "fifo-new", "socket"],
)
def test_a_special_file_is_a_recorded_rejection_not_bad_input(
    trial: Trial, agent: Agent, ledger: Ledger, plant: str, code: str, what: str
) -> None:
    """A FIFO in place of a tracked file made `git add` fail: exit 2, 'bad input'."""
    rec = trial(agent(plant), check=False)
    refused(ledger, rec, code)
    assert any(what in r for r in rec.reasons)


def test_a_directory_where_a_file_was_is_judged_like_any_delivery(
    trial: Trial, agent: Agent
) -> None:
    rec = trial(agent("rm solution.py; mkdir solution.py; echo 'x = 1' > solution.py/x.py"))
    assert rec.state == "complete" and rec.verdict == "rejected"
    assert ("solution.py", "deleted") in {(c.path, c.change) for c in rec.changed}


NEST = (
    "python3 -c \"\nimport os\nfd = os.open('.', os.O_RDONLY)\nfor _ in range({n}):\n"
    "    os.mkdir('{name}', dir_fd=fd)\n"
    "    nxt = os.open('{name}', os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)\n"
    "    os.close(fd); fd = nxt\n"
    "os.close(os.open('leaf.py', os.O_WRONLY | os.O_CREAT, dir_fd=fd))\n\""
)


@pytest.mark.parametrize(("n", "name"), [(600, "d" * 50), (150, "d")], ids=["path-max", "depth"])
def test_a_tree_nested_past_path_max_is_rejected_and_handed_back_whole(
    trial: Trial, agent: Agent, ledger: Ledger, n: int, name: str
) -> None:
    """The hand-back chown failed past PATH_MAX and left files owned by a pool uid (`refused`
    checks that every file of the trial is optarena's again)."""
    try:
        rec = trial(agent(NEST.format(n=n, name=name)), check=False)
        refused(ledger, rec, "nested_too_deep")
    finally:  # pytest's own clean-up of old temporary directories recurses
        subprocess.run(["rm", "-rf", str(ledger.home / "work")], check=True)


def test_a_sparse_file_of_gigabytes_is_refused_before_git_reads_it(
    trial: Trial, agent: Agent, ledger: Ledger
) -> None:
    """1.5 GB of holes took git 15 s and an 8 MB diff (2 GB: 2 GB of git's memory)."""
    rec = trial(agent("truncate -s 1500M scratch.bin"), check=False)
    refused(ledger, rec, "workspace_too_large")
    assert "apparent size 1500.0 MiB" in rec.reasons[0]
    with pytest.raises(OptarenaError, match="refused before judging"):
        rejudge(ledger, rec.id)


@pytest.mark.parametrize(
    ("limits", "plant", "shown"),
    [
        (WorkspaceLimits(max_mb=1), "head -c 2000000 /dev/urandom > data.bin", "disk use"),
        (WorkspaceLimits(max_entries=40), "mkdir many; cd many; touch $(seq 1 60)", "entries"),
    ],
    ids=["disk", "entries"],
)
def test_the_workspace_limits_hold_on_disk_and_in_entries(
    trial: Trial,
    agent: Agent,
    ledger: Ledger,
    limits: WorkspaceLimits,
    plant: str,
    shown: str,
) -> None:
    rec = trial(agent(plant), check=False, workspace_limits=limits)
    refused(ledger, rec, "workspace_too_large")
    assert shown in rec.reasons[0]


FORGING = [
    "x\nverdict    accepted",
    "evil\u202eyp.py",
    "erase\x1b[1A\x1b[2Kverdict accepted",
    "[reverse]markup",
]


def test_names_cannot_forge_lines_in_trial_show(
    trial: Trial,
    agent: Agent,
    ledger: Ledger,
    control: Callable[[str], Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A file named with a newline printed a second 'verdict accepted' line under a rejected
    verdict; U+202E reversed the rest of the line."""
    names = " ".join("'" + n.replace("'", "'\\''") + "'" for n in FORGING)
    rec = trial(agent(f"cp {control('zeros')}/solution.py solution.py; touch {names}"))
    assert rec.verdict == "rejected"
    assert {c.path for c in rec.changed} >= set(FORGING)  # recorded as they are
    assert main(["trial", "show", rec.id, "--ledger", str(ledger.home)]) == 0
    out = capsys.readouterr().out
    assert [line.split()[:2] for line in out.splitlines() if line.startswith("verdict")] == [
        ["verdict", "rejected"]
    ]
    assert "\x1b" not in out and "\u202e" not in out
    assert "x\\x0averdict" in out and "evil\\u202eyp.py" in out and "[reverse]markup" in out
    assert main(["trial", "show", rec.id, "--json", "--ledger", str(ledger.home)]) == 0
    raw = capsys.readouterr().out
    assert raw.isascii() and "\\u202e" in raw
    assert {c["path"] for c in json.loads(raw)["trial"]["changed"]} >= set(FORGING)


def test_a_delivery_that_cannot_be_recorded_still_finishes_the_row(
    ledger: Ledger, rmsnorm: Task, agent: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever fails while recording an interrupted trial's delivery, the row never stays
    `running`: it is finished with the start record and why."""

    def interrupted_judge(task: Task, cand: Path, options: JudgeOptions) -> JudgeResult:
        raise KeyboardInterrupt

    calls = []
    finish = Ledger.finish_trial

    def failing_once(self: Ledger, *args: object, **kw: object) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("cannot store '\udcff'")
        finish(self, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(Ledger, "finish_trial", failing_once)
    config = TrialConfig(
        task=rmsnorm,
        agent="command",
        agent_args={"command": agent("true")},
        limits=AgentLimits(wall_s=30),
        measure=False,
    )
    with pytest.raises(TrialInterrupted) as e:
        run_trial(config, ledger, judge_fn=interrupted_judge)
    row = ledger.get(e.value.trial_id)
    assert row.state == "interrupted" and row.error is not None
    assert "its delivery not recorded" in row.error
    json.dumps(row.model_dump(mode="json"))
