"""`evolve`: a model with some fields changed, checked like a new one.

pydantic's `model_copy(update=...)` validates nothing: a misspelled key lands in the copy's
`__dict__` beside the real field (`extra="forbid"` notwithstanding) and a wrong type is kept
as given, so the mistake surfaces later, in a dump or on the next read. `evolve` refuses a
name that is not a field, and validates the result as the model's constructor would (its
field and model validators run, `frozen` models included).

The fields are handed over as they are, not dumped: a nested model stays the same instance
(validated when it was built; a plain dict given as a change becomes its model), so the cost
is one shallow validation, not a round trip through JSON-like data, and fields that do not
round-trip (aliases, `exclude=True`) keep their values. Like `model_copy`, the result's
`model_fields_set` is the original's plus the changed names, and private attributes are
copied.
"""

from __future__ import annotations

from difflib import get_close_matches
from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)


def evolve(record: M, /, **changes: Any) -> M:
    """`record` with `changes` applied, validated: `TypeError` names a key that is not a field
    of the model; pydantic's `ValidationError` (a `ValueError`) a value the field refuses."""
    cls = type(record)
    fields = cls.model_fields
    unknown = [name for name in changes if name not in fields]
    if unknown:
        named = "; ".join(_with_guess(name, fields) for name in unknown)
        raise TypeError(f"{cls.__name__} has no field {named}")
    values: dict[str, Any] = dict(record.model_extra or {})
    for name, info in fields.items():
        key = info.validation_alias if info.validation_alias is not None else name
        if not isinstance(key, str):  # AliasPath / AliasChoices: no one key to hand it over by
            raise TypeError(f"evolve: {cls.__name__}.{name} has a composite validation alias")
        values[key] = changes[name] if name in changes else getattr(record, name)
    new = cls.model_validate(values)
    object.__setattr__(new, "__pydantic_fields_set__", record.model_fields_set | set(changes))
    if record.__pydantic_private__ is not None:
        object.__setattr__(new, "__pydantic_private__", dict(record.__pydantic_private__))
    return new


def _with_guess(name: str, fields: dict[str, Any]) -> str:
    close = get_close_matches(name, fields, n=1)
    return repr(name) + (f" (did you mean {close[0]!r}?)" if close else "")
