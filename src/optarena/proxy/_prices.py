"""The price table (`prices.toml` beside this module): model -> dollars per million tokens.

A model no entry matches has an unknown cost (None), never a guessed one; so does a call whose
token counts are unknown for a kind of token that is priced.
"""

from __future__ import annotations

import fnmatch
import functools
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from optarena.errors import SpecError

PRICES_PATH = Path(__file__).with_name("prices.toml")


class ModelPrice(BaseModel):
    """Prices of the models matching `match` (shell-style patterns on the model id)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    match: list[str] = Field(min_length=1)
    input: float = Field(ge=0, description="uncached input, $/Mtok")
    output: float = Field(ge=0, description="output incl. reasoning, $/Mtok")
    cache_read: float = Field(ge=0, description="cached input read, $/Mtok")
    cache_write: float = Field(ge=0, description="cache write, $/Mtok")
    source: str = Field(description="where the numbers come from")
    checked: str = Field(description="when they were last confirmed")


class PriceTable(BaseModel):
    """A dated, versioned table; `version` is recorded with every cost computed from it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1]
    version: str
    as_of: str
    currency: Literal["USD"]
    unit: Literal["per_million_tokens"]
    models: list[ModelPrice]

    def lookup(self, model: str | None) -> ModelPrice | None:
        """The first entry matching `model` (a `[1m]`-style suffix ignored), else None."""
        if not model:
            return None
        bare = model.split("[", 1)[0].strip()
        for entry in self.models:
            if any(fnmatch.fnmatchcase(bare, pat) for pat in entry.match):
                return entry
        return None

    def cost(
        self,
        model: str | None,
        *,
        input: int | None,
        output: int | None,
        cache_read: int | None = None,
        cache_write: int | None = None,
    ) -> float | None:
        """Dollars for these token counts, or None when the model or a priced count is
        unknown. A count may be None only where its price is zero (OpenAI has no cache
        writes)."""
        price = self.lookup(model)
        if price is None:
            return None
        total = 0.0
        for count, rate in (
            (input, price.input),
            (output, price.output),
            (cache_read, price.cache_read),
            (cache_write, price.cache_write),
        ):
            if count is None:
                if rate:
                    return None
                continue
            total += count * rate / 1e6
        return total


def load_prices(path: Path | None = None) -> PriceTable:
    """Read and validate a price table (default: the one shipped with optarena)."""
    path = path or PRICES_PATH
    if path == PRICES_PATH:
        return _default()
    return _read(path)


@functools.cache
def _default() -> PriceTable:
    return _read(PRICES_PATH)


def _read(path: Path) -> PriceTable:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise SpecError(path, "", f"not a readable TOML price table ({e})") from None
    try:
        return PriceTable.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise SpecError(path, where, first["msg"]) from None
