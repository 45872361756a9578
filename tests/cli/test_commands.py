"""The command table of `optarena.cli`: every command is in it, each word's modules are the ones
that register it, and a run imports only those (so `optarena mcp relay` does not load the
judge)."""

from __future__ import annotations

import json
import subprocess
import sys

import typer

from optarena.cli import COMMANDS, app, register


def _modules(typer_app: typer.Typer) -> set[str]:
    """The modules defining the commands of a group (and of its groups)."""
    found = {f"{c.callback.__module__}" for c in typer_app.registered_commands if c.callback}
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            found |= _modules(group.typer_instance)
    return found


def test_the_table_names_every_command_and_the_modules_that_register_it() -> None:
    register([])
    commands = {c.name: c for c in app.registered_commands}
    groups = {g.name: g for g in app.registered_groups}
    assert sorted([*commands, *groups]) == sorted(COMMANDS)  # none missing, none stale
    for word, modules in COMMANDS.items():
        wanted = {f"optarena.cli.{m}" for m in modules}
        if word in commands:
            callback = commands[word].callback
            assert callback is not None and callback.__module__ in wanted, word
        else:
            group = groups[word].typer_instance
            assert group is not None and _modules(group) == wanted, word


# In a fresh interpreter (this one has imported every command module already), a forked child
# per word registers that word's command and reports which heavy packages it then has.
PROBE = """
import json, os, sys
from optarena.cli import register

out = {}
for word in sys.argv[1:]:
    r, w = os.pipe()
    if os.fork() == 0:
        register([word, "--help"])
        heavy = [m for m in ("optarena.judge", "optarena.trials", "optarena.harness",
                             "optarena.report") if m in sys.modules]
        os.write(w, json.dumps(heavy).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        out[word] = json.loads(f.read())
    os.wait()
print(json.dumps(out))
"""


def test_the_mcp_relay_and_the_experiment_driver_start_without_the_judge() -> None:
    """They are spawned per agent session and per experiment: the judge, the trials, the
    harness and the report are imported only when (and if) the command needs them."""
    argv = [sys.executable, "-c", PROBE, "mcp", "experiment", "judge"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    heavy = json.loads(done.stdout)
    assert heavy["mcp"] == [] and heavy["experiment"] == []
    assert "optarena.judge" in heavy["judge"]  # a negative control: the probe sees imports
