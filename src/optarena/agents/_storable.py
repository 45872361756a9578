"""An agent's outcome made storable: what a runner read from the agent is the agent's text.

A runner's outcome carries what the agent wrote: messages and tool names from its JSON stream,
keys of a usage file, model names it sent the proxy. JSON's `\\udcff` escapes decode to lone
surrogates, which no UTF-8 record can hold (the ledger's write failed and left the trial
`running`), and a stream event can nest deeper than the serializer goes (a list 300 deep made
storing the outcome fail). `storable_outcome` is applied once, to every runner's outcome
(`run_metered`), so no record is refused for what an agent chose to write.
"""

from __future__ import annotations

from typing import Any

from optarena.files import printable
from optarena.records import AgentOutcome

MAX_NESTING = 32  # deeper values in an outcome are replaced by a note


def storable(value: Any, depth: int = 0) -> Any:
    """`value` as plain JSON data a record can always store: strings (keys too) as
    `optarena.files.printable` shows them (a lone surrogate as `\\xNN` / `\\uNNNN`),
    containers nested deeper than `MAX_NESTING` replaced by a note, anything but JSON's
    types as its text."""
    if isinstance(value, str):
        return _text(value)
    if value is None or isinstance(value, bool | int | float):
        return value
    if depth >= MAX_NESTING:
        return f"(nested deeper than {MAX_NESTING} levels: left out)"
    if isinstance(value, dict):
        return {_text(str(k)): storable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [storable(v, depth + 1) for v in value]
    return _text(str(value))


def _text(s: str) -> str:
    return s if s.isascii() and s.isprintable() else printable(s)


def storable_outcome(outcome: AgentOutcome) -> AgentOutcome:
    return AgentOutcome.model_validate(storable(outcome.model_dump()))
