"""Fixtures shared by the CLI's tests."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable

import pytest

Start = Callable[[list[str]], "subprocess.Popen[str]"]


@pytest.fixture
def from_a_terminal() -> Start:
    """Start a command as a terminal would, for the Ctrl-C tests: SIGINT at its default
    disposition. A process started with SIGINT ignored (a background job's children, e.g. a
    suite run with `&`) keeps ignoring it, as it should, and runs to its end with exit 0."""

    def start(argv: list[str]) -> subprocess.Popen[str]:
        return subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )

    return start
