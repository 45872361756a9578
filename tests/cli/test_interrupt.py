"""A Ctrl-C that lands in a finalizer is not lost (`cli/_interrupt.py`)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

# The finalizer says when it starts, then runs long enough for the interrupt sent on that word
# to land inside it; the main code between two finalizers runs long enough for a resent one.
SCRIPT = """
import sys, time
from optarena.cli._interrupt import interrupts_kept

def busy(s):
    t = time.monotonic()
    while time.monotonic() - t < s:
        pass

class Slow:
    def __del__(self):
        print("finalizer", flush=True)
        busy(0.6)
        print("finalizer done", flush=True)

def main():
    for _ in range(3):
        Slow()  # dropped at once: its __del__ runs here
        busy(0.3)
    print("ran to its end", flush=True)

try:
    if sys.argv[1] == "kept":
        with interrupts_kept():
            main()
    else:
        main()
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(130)
"""


def _run(tmp_path: Path, mode: str) -> tuple[int, str, str]:
    script = tmp_path / "finalizer.py"
    script.write_text(SCRIPT)
    proc = subprocess.Popen(
        [sys.executable, str(script), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # Ctrl-C as a terminal delivers it, whatever the test's own process ignores
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "finalizer"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    # It landed in the first finalizer (whose first line was read above) and cut it short.
    assert out.splitlines()[0] != "finalizer done", out
    return proc.returncode, out, err


def test_an_interrupt_a_finalizer_swallowed_is_sent_again(tmp_path: Path) -> None:
    rc, out, err = _run(tmp_path, "kept")
    assert rc == 130, out
    assert out.splitlines() == ["interrupted"]
    assert "Traceback" not in err  # a Ctrl-C is no error to print


def test_negative_control_without_it_the_interrupt_is_lost(tmp_path: Path) -> None:
    rc, out, err = _run(tmp_path, "plain")
    assert rc == 0, out
    assert "ran to its end" in out
    assert "KeyboardInterrupt" in err  # Python printed what it dropped


@pytest.mark.parametrize("disposition", [signal.SIG_IGN, signal.SIG_DFL])
def test_where_ctrl_c_raises_nothing_nothing_changes(disposition: signal.Handlers) -> None:
    # private: the guard of the CLI's main, tested on its own (main installs it for a command)
    from optarena.cli._interrupt import interrupts_kept

    old = signal.signal(signal.SIGINT, disposition)
    hook = sys.unraisablehook
    try:
        with interrupts_kept():
            assert sys.unraisablehook is hook
    finally:
        signal.signal(signal.SIGINT, old)
