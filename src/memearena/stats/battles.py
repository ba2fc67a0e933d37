"""Pairwise battles in the Chatbot Arena format, and their JSONL / JSON-array reader."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, model_validator

from memearena.errors import DataError

Winner = Literal["model_a", "model_b", "tie", "tie (bothbad)"]
WINNERS: tuple[str, ...] = ("model_a", "model_b", "tie", "tie (bothbad)")
_OPTIONAL_STR_FIELDS = ("judge", "criterion", "item")


class Battle(BaseModel):
    """One pairwise comparison; unknown fields are kept (see `field`) for group-by."""

    model_config = ConfigDict(frozen=True, extra="allow")

    model_a: str
    """Name of the model whose response was labelled A."""
    model_b: str
    """Name of the model whose response was labelled B (never equal to `model_a`)."""
    winner: Winner
    """`model_a`, `model_b`, `tie` or `tie (bothbad)`; both ties count half a win each."""
    judge: str | None = None
    """Who decided the battle (an LLM judge, a human), if recorded."""
    criterion: str | None = None
    """The criterion the battle was judged on, if any."""
    item: str | None = None
    """The item (meme, task) both responses answer, if recorded."""

    @model_validator(mode="after")
    def _distinct_models(self) -> Battle:
        if self.model_a == self.model_b:
            raise ValueError(f"model_a and model_b are both {self.model_a!r}")
        return self

    @property
    def score_a(self) -> float:
        """Points scored by `model_a`: 1 for a win, 0.5 for any tie, 0 for a loss."""
        return 1.0 if self.winner == "model_a" else 0.0 if self.winner == "model_b" else 0.5

    def field(self, name: str) -> Any:
        """Value of a declared or extra field (None when the battle lacks it)."""
        if name in type(self).model_fields:
            return getattr(self, name)
        return (self.model_extra or {}).get(name)


class SkippedLine(NamedTuple):
    """A malformed line left out by `load_battles(..., skip_bad=True)`."""

    line: int
    reason: str


class LoadedBattles(NamedTuple):
    """What `load_battles` read: the valid battles and the lines it skipped."""

    battles: list[Battle]
    skipped: list[SkippedLine]


def _validate(obj: Any) -> tuple[Battle | None, str]:
    """Check one decoded record; return the battle or a reason naming the bad field."""
    if not isinstance(obj, dict):
        return None, f"expected a JSON object, got {type(obj).__name__}"
    for name in ("model_a", "model_b", "winner"):
        if name not in obj:
            return None, f"field {name!r}: missing"
    for name in ("model_a", "model_b"):
        value = obj[name]
        if not isinstance(value, str) or not value.strip():
            return None, f"field {name!r}: must be a non-empty string; got {value!r}"
    if obj["winner"] not in WINNERS:
        return None, f"field 'winner': must be one of {', '.join(WINNERS)}; got {obj['winner']!r}"
    if obj["model_a"] == obj["model_b"]:
        return None, f"field 'model_b': must differ from model_a; both are {obj['model_a']!r}"
    clean = dict(obj)
    for name in _OPTIONAL_STR_FIELDS:
        value = clean.get(name)
        if value is None:
            continue
        # Item ids are often integers in datasets: accept them, keep them as text.
        if name == "item" and isinstance(value, int) and not isinstance(value, bool):
            clean[name] = str(value)
        elif not isinstance(value, str):
            return None, f"field {name!r}: must be a string or null; got {value!r}"
    return Battle.model_validate(clean), ""


def _records(text: str, source: str) -> Iterable[tuple[int, Any, str]]:
    """Yield (line number, decoded object or None, JSON error) for JSONL or a JSON array."""
    stripped = text.lstrip()
    if not stripped.startswith("["):
        for number, raw in enumerate(text.splitlines(), start=1):
            if not raw.strip():
                continue
            try:
                yield number, json.loads(raw), ""
            except json.JSONDecodeError as exc:
                yield number, None, f"invalid JSON: {exc.msg} (column {exc.colno})"
        return
    # A JSON array: decode element by element so each error names the element's line.
    decoder = json.JSONDecoder()
    pos = len(text) - len(stripped) + 1
    while True:
        while pos < len(text) and text[pos] in " \t\r\n":
            pos += 1
        if pos < len(text) and text[pos] == "]":
            return
        line = text.count("\n", 0, pos) + 1
        try:
            obj, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise DataError(f"{source}:{exc.lineno}: invalid JSON: {exc.msg}") from None
        yield line, obj, ""
        while pos < len(text) and text[pos] in " \t\r\n":
            pos += 1
        if pos < len(text) and text[pos] == ",":
            pos += 1
        elif pos >= len(text) or text[pos] != "]":
            line = text.count("\n", 0, pos) + 1
            raise DataError(f"{source}:{line}: invalid JSON: expected ',' or ']' in the array")


def parse_battles(text: str, *, source: str = "<battles>", skip_bad: bool = False) -> LoadedBattles:
    """Parse battles from JSONL or JSON-array text; `source` names it in error messages."""
    battles: list[Battle] = []
    skipped: list[SkippedLine] = []
    for number, obj, error in _records(text, source):
        battle, reason = (None, error) if error else _validate(obj)
        if battle is not None:
            battles.append(battle)
        elif skip_bad:
            skipped.append(SkippedLine(number, reason))
        else:
            raise DataError(f"{source}:{number}: {reason}")
    return LoadedBattles(battles, skipped)


def load_battles(path: str | Path, *, skip_bad: bool = False) -> LoadedBattles:
    """Read a battle file (JSONL, or one JSON array) in the Chatbot Arena format.

    A malformed record raises `DataError` naming file, line and field; with `skip_bad` it is
    left out and listed in `.skipped` instead (never dropped silently).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: cannot read: {exc}") from None
    return parse_battles(text, source=str(path), skip_bad=skip_bad)
