"""The holder count behind `kept_heap` and `one_blas_thread`: a process-wide setting that
the first of nested or concurrent holders applies and the last restores."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

# private: the shared counter itself (its public users are tested in test_heap and test_blas)
from optarena.judge.client._shared import SharedSetting


def _recorded(fail_first: bool = False) -> tuple[SharedSetting, list[str]]:
    calls: list[str] = []

    def apply() -> Callable[[], None]:
        calls.append("apply")
        if fail_first and calls.count("apply") == 1:
            raise OSError("first try fails")
        return lambda: calls.append("restore")

    return SharedSetting(apply), calls


def test_the_first_holder_applies_and_the_last_restores() -> None:
    s, calls = _recorded()
    with s.held():
        with s.held():
            assert calls == ["apply"]
        assert calls == ["apply"]  # the inner exit keeps it
    assert calls == ["apply", "restore"]
    with s.held():
        pass
    assert calls == ["apply", "restore", "apply", "restore"]


def test_concurrent_holders_on_two_threads_share_one_apply() -> None:
    s, calls = _recorded()
    inside, leave = threading.Event(), threading.Event()

    def hold() -> None:
        with s.held():
            inside.set()
            leave.wait(10)

    t = threading.Thread(target=hold)
    t.start()
    inside.wait(10)
    with s.held():
        leave.set()
        t.join()
        assert calls == ["apply"]  # the other thread left first: still held here
    assert calls == ["apply", "restore"]


def test_a_setting_that_failed_to_apply_is_tried_again_by_the_next_holder() -> None:
    """A first holder whose apply raised leaves no count behind: otherwise no later holder
    would ever apply the setting, and none would restore it."""
    s, calls = _recorded(fail_first=True)
    with pytest.raises(OSError), s.held():
        pass
    with s.held(), s.held():
        pass
    assert calls == ["apply", "apply", "restore"]
