"""Parsers of agent outputs. Structured outputs come only from well-formed JSON objects, the last
valid one winning; free text is never read as a verdict."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from memearena.errors import ParseError
from memearena.prompts.schemas import LEVELS, Answer, Context, CriterionVerdict

__all__ = [
    "extract_json_objects",
    "parse_answer",
    "parse_contexts",
    "parse_guideline",
    "parse_verdicts",
]

T = TypeVar("T")

_DECODER = json.JSONDecoder()
_MAX_REASON = 160


def extract_json_objects(text: str) -> list[dict[str, Any]]:
    """Every well-formed top-level JSON object in ``text`` (also inside ```json fences), in order.

    Objects nested in a found object are part of it, not separate entries."""
    found: list[dict[str, Any]] = []
    pos = text.find("{")
    while pos != -1:
        try:
            obj, end = _DECODER.raw_decode(text, pos)
        except ValueError:
            pos = text.find("{", pos + 1)
            continue
        if isinstance(obj, dict):
            found.append(obj)
        pos = text.find("{", end)
    return found


def _short(reason: str) -> str:
    return reason if len(reason) <= _MAX_REASON else reason[: _MAX_REASON - 1] + "…"


def _last_valid(text: str, key: str, validate: Callable[[Any], T]) -> T:
    """The last JSON object holding ``key`` that ``validate`` accepts; else ParseError naming the
    last object's problem."""
    objects = [o for o in extract_json_objects(text) if key in o]
    if not objects:
        raise ParseError(f'no JSON object with a "{key}" field')
    problem = ""
    for obj in reversed(objects):
        try:
            return validate(obj[key])
        except ParseError as e:
            problem = problem or str(e)
    raise ParseError(_short(problem))


def parse_contexts(text: str, n: int) -> list[Context]:
    """Exactly ``n`` contexts with the levels high, moderate, unrelated (the first ``n``), returned
    in that order; ParseError with a short reason otherwise."""
    if not 1 <= n <= len(LEVELS):
        raise ValueError(f"n must be between 1 and {len(LEVELS)}, got {n}")
    wanted = LEVELS[:n]

    def validate(value: Any) -> list[Context]:
        if not isinstance(value, list):
            raise ParseError('"contexts" must be a list')
        if len(value) != n:
            raise ParseError(f"expected exactly {n} contexts, got {len(value)}")
        by_level: dict[str, Context] = {}
        for i, item in enumerate(value):
            if not isinstance(item, dict):
                raise ParseError(f"context {i + 1} is not an object")
            level = str(item.get("level", "")).strip().lower()
            if level not in wanted:
                raise ParseError(f"context {i + 1}: level must be one of {list(wanted)}")
            if level in by_level:
                raise ParseError(f"level {level!r} appears twice")
            fields = {}
            for field in ("background", "task"):
                v = item.get(field)
                if not isinstance(v, str) or not v.strip():
                    raise ParseError(f"context {i + 1}: {field!r} must be a non-empty string")
                fields[field] = v.strip()
            by_level[level] = Context.model_validate({"level": level, **fields})
        return [by_level[lv] for lv in wanted]

    return _last_valid(text, "contexts", validate)


def parse_guideline(text: str) -> str:
    """The guideline text of the last well-formed ``{"guideline": "<non-empty>"}``."""

    def validate(value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            raise ParseError('"guideline" must be a non-empty string')
        return value.strip()

    return _last_valid(text, "guideline", validate)


_WINNERS = {"a": "A", "b": "B", "tie": "tie"}


def parse_verdicts(text: str, criteria: Sequence[str]) -> dict[str, CriterionVerdict]:
    """A verdict for every requested criterion, from the last well-formed ``{"verdicts": ...}``
    that has them all; ParseError otherwise (never a default tie)."""
    if not criteria:
        raise ValueError("criteria must not be empty")

    def validate(value: Any) -> dict[str, CriterionVerdict]:
        if not isinstance(value, dict):
            raise ParseError('"verdicts" must be an object')
        out: dict[str, CriterionVerdict] = {}
        for c in criteria:
            v = value.get(c)
            if not isinstance(v, dict):
                raise ParseError(f"missing verdict for criterion {c!r}")
            w = v.get("winner")
            winner = _WINNERS.get(w.strip().lower()) if isinstance(w, str) else None
            if winner is None:
                raise ParseError(f'criterion {c!r}: winner must be "A", "B" or "tie"')
            rationale = v.get("rationale", "")
            rationale = rationale.strip() if isinstance(rationale, str) else ""
            out[c] = CriterionVerdict.model_validate({"winner": winner, "rationale": rationale})
        return out

    # Take the last well-formed verdict field: text quoted from a meme must not forge one.
    return _last_valid(text, "verdicts", validate)


# A heading is "[Name]" (the asked-for form) or a bare "Name" closed by a colon or the line's end,
# optionally dressed in markdown; a sentence that merely starts with the word is not one.
_HEADING = r"^[ \t>#*_]*(?:\[[ \t]*{name}[ \t]*\][ \t*_]*:?|{name}[ \t*_]*(?::|$))[ \t*_]*"
_BACKGROUND = re.compile(_HEADING.format(name=r"background[ \t]+knowledge"), re.I | re.M)
_REASONING = re.compile(_HEADING.format(name=r"reasoning"), re.I | re.M)


def parse_answer(text: str) -> Answer:
    """Split a target's answer into its two sections. Never raises: with a section missing,
    ``format_ok`` is False and the text is kept (it is what Instruction Following judges)."""
    bg = _BACKGROUND.search(text)
    rs = _REASONING.search(text, bg.end() if bg else 0)
    if bg and rs:
        background = text[bg.end() : rs.start()].strip()
        reasoning = text[rs.end() :].strip()
        return Answer(
            background=background,
            reasoning=reasoning,
            format_ok=bool(background and reasoning),
        )
    if bg:
        return Answer(background=text[bg.end() :].strip(), reasoning="", format_ok=False)
    if rs:
        return Answer(background="", reasoning=text[rs.end() :].strip(), format_ok=False)
    return Answer(background="", reasoning=text.strip(), format_ok=False)
