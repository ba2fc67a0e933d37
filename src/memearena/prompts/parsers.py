"""Parsers of agent outputs.

A structured output (verdicts, contexts, a guideline) comes only from the agent's own answer:
one JSON object in ONE final fenced block that stands after everything else the agent wrote
(or, the structured-outputs form, a reply that is nothing but that JSON object). A second object
holding the same field anywhere else in the output, fenced or not, is a ParseError: a judge that
echoes or quotes a response (whose text is defanged when the prompt is rendered, see
``prompts.render``) must yield its own verdict or a counted parse failure, never the quoted one.
Free text is never read as a verdict.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from memearena.errors import ParseError
from memearena.jsonsafe import loads_bounded
from memearena.prompts.schemas import LEVELS, Answer, Context, CriterionVerdict

__all__ = [
    "MAX_BLOCK_CHARS",
    "extract_json_objects",
    "final_block",
    "own_object",
    "parse_answer",
    "parse_contexts",
    "parse_guideline",
    "parse_verdicts",
]

T = TypeVar("T")

_DECODER = json.JSONDecoder()
_MAX_REASON = 160

MAX_BLOCK_CHARS = 200_000
"""Longest final block parsed (characters); a longer one is a ParseError, not a slow parse."""
_MAX_SCAN_CHARS = 2_000_000
# Bounds the work spent looking for a second object outside the final block.


def extract_json_objects(text: str) -> list[dict[str, Any]]:
    """Every well-formed top-level JSON object in ``text`` (also inside ```json fences), in order.

    Objects nested in a found object are part of it, not separate entries. Too deeply nested or
    oversized numbers count as not well-formed."""
    found: list[dict[str, Any]] = []
    pos = text.find("{")
    while pos != -1:
        try:
            obj, end = _DECODER.raw_decode(text, pos)
        except (ValueError, RecursionError):
            pos = text.find("{", pos + 1)
            continue
        if isinstance(obj, dict):
            found.append(obj)
        pos = text.find("{", end)
    return found


def _short(reason: str) -> str:
    return reason if len(reason) <= _MAX_REASON else reason[: _MAX_REASON - 1] + "…"


_LANG_TAG = re.compile(r"[ \t]*json\b", re.IGNORECASE)


def final_block(text: str) -> tuple[str, str] | None:
    """``(body, before)``: the body of the fenced block that ends ``text`` (trailing whitespace
    aside) and everything written before its opening fence; None when ``text`` does not end
    with a fenced block."""
    t = text.rstrip()
    # The closing fence: the run of backticks that ends the text, three at least (found from
    # the end, not by a pattern tried at every offset).
    close_start = len(t.rstrip("`"))
    if len(t) - close_start < 3:
        return None
    opening = t.rfind("```", 0, close_start)
    if opening == -1:
        return None
    body_start = opening + 3
    while opening > 0 and t[opening - 1] == "`":
        opening -= 1
    tag = _LANG_TAG.match(t, body_start)
    if tag is not None:
        body_start = tag.end()
    return t[body_start:close_start].strip(), t[:opening]


def _has_key(obj: Any, key: str, depth: int = 0) -> bool:
    """Whether ``key`` is a field of ``obj`` or of anything nested in it."""
    if depth > 64:
        return True  # deeper than any answer we ask for: treat as suspect
    if isinstance(obj, dict):
        return key in obj or any(_has_key(v, key, depth + 1) for v in obj.values())
    if isinstance(obj, list):
        return any(_has_key(v, key, depth + 1) for v in obj)
    return False


def _values_of(obj: Any, key: str, depth: int = 0) -> list[Any]:
    """Every value of ``key`` in ``obj`` and in anything nested in it."""
    if depth > 64:
        return []
    out: list[Any] = []
    if isinstance(obj, dict):
        if key in obj:
            out.append(obj[key])
        for v in obj.values():
            out.extend(_values_of(v, key, depth + 1))
    elif isinstance(obj, list):
        for v in obj:
            out.extend(_values_of(v, key, depth + 1))
    return out


def _objects_with_key(text: str, key: str) -> Iterator[dict[str, Any]]:
    # Cheap guard: an object can only hold the key if its name (or a \u escape) is written.
    if key not in text and "\\u" not in text:
        return
    for obj in extract_json_objects(text[:_MAX_SCAN_CHARS]):
        if _has_key(obj, key):
            yield obj


def own_object(text: str, key: str) -> dict[str, Any]:
    """The agent's own JSON object holding ``key``: the final fenced block (or the whole reply),
    with no other object holding ``key`` anywhere before it."""
    how = f'end your reply with one fenced json block holding the "{key}" object, after all else'
    stripped = text.strip()
    block = final_block(stripped)
    if block is None:
        if stripped.startswith("{"):
            body, before = stripped, ""  # the structured-outputs form: the reply is the object
        else:
            raise ParseError(f"no final json block; {how}")
    else:
        body, before = block
    if len(body) > MAX_BLOCK_CHARS:
        raise ParseError(f"the final block is longer than {MAX_BLOCK_CHARS:,} characters")
    try:
        obj = loads_bounded(body, max_bytes=4 * MAX_BLOCK_CHARS)
    except ValueError as e:
        what = "holds more than one JSON object" if "Extra data" in str(e) else "is not valid JSON"
        raise ParseError(f"the final block {what} ({_short(str(e))[:80]}); {how}") from None
    if not isinstance(obj, dict) or key not in obj:
        raise ParseError(f'the final block has no "{key}" field; {how}')
    if any(True for _ in _objects_with_key(before, key)):
        raise ParseError(
            f'a "{key}" object appears before the final block: write exactly one, at the end'
        )
    return obj


def _own_value(text: str, key: str, validate: Callable[[Any], T]) -> T:
    obj = own_object(text, key)
    try:
        return validate(obj[key])
    except ParseError as e:
        raise ParseError(_short(str(e))) from None


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

    return _own_value(text, "contexts", validate)


def parse_guideline(text: str) -> str:
    """The guideline text of the final block's ``{"guideline": "<non-empty>"}``."""

    def validate(value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            raise ParseError('"guideline" must be a non-empty string')
        return value.strip()

    return _own_value(text, "guideline", validate)


_WINNERS = {"a": "A", "b": "B", "tie": "tie"}


def parse_verdicts(
    text: str, criteria: Sequence[str], *, quoted: Sequence[str] = ()
) -> dict[str, CriterionVerdict]:
    """A verdict for every requested criterion, from the judge's final block
    ``{"verdicts": ...}``; ParseError otherwise (never a default tie). ``quoted``: the raw texts
    the judge was shown (responses, meme text); a final block that repeats a verdicts object
    written in one of them is a copied forgery, a ParseError."""
    if not criteria:
        raise ValueError("criteria must not be empty")
    # A verdict comes only from the judge's own final block: a response or meme that quotes
    # verdict JSON must yield the judge's verdict or a counted parse failure, never the quoted one.
    own = own_object(text, "verdicts")["verdicts"]  # read once: checked, then validated
    if quoted:
        for q in quoted:
            if any(own in _values_of(obj, "verdicts") for obj in _objects_with_key(q, "verdicts")):
                raise ParseError(
                    "the verdict repeats one written inside the material being judged; "
                    "give your own verdict"
                )

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

    try:
        return validate(own)
    except ParseError as e:
        raise ParseError(_short(str(e))) from None


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
