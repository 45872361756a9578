"""Tables of trials fit the terminal: cells wrap between words; only a word too long for any
column is folded, in the column that gives way, never a reason code or a trial id."""

from __future__ import annotations

import io

from rich.console import Console

from optarena.cli._trial_views import fitted_table


def _render(table: object, width: int) -> list[str]:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(table)
    return [line.rstrip() for line in console.export_text().splitlines()]


HEADS = ["trial", "when", "task", "agent", "verdict", "speed or reasons", "agent s", "cost"]


def _row(agent: str, result: str) -> list[str]:
    return ["094277dc16", "12-03 13:07", "rmsnorm", agent, "rejected", result, "0.0", "?"]


def test_a_long_label_folds_its_own_column_and_nothing_else() -> None:
    cells = [
        _row("replay (not an agent) demo=missing-eps", "out_of_tolerance, non_finite"),
        _row("command", "0.80x (-20%) improved"),
    ]
    lines = _render(fitted_table(HEADS, cells, wrap={3: 1, 5: 2}, width=80), 80)
    assert all(len(line) <= 80 for line in lines)
    words = {w.strip(",") for line in lines for w in line.split()}
    assert {"094277dc16", "12-03", "13:07", "rmsnorm", "rejected"} <= words
    assert {"out_of_tolerance", "non_finite", "0.80x", "(-20%)", "improved"} <= words
    assert "…" not in "".join(lines)  # nothing cropped


def test_short_cells_are_not_wrapped() -> None:
    cells = [_row("command", "out_of_scope")]
    lines = _render(fitted_table(HEADS, cells, wrap={3: 1, 5: 2}, width=80), 80)
    assert len(lines) == 2 and "command" in lines[1] and "out_of_scope" in lines[1]
