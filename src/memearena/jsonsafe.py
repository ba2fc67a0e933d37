"""Bounded JSON parsing for untrusted text (model output, dataset rows, battle files).

The standard parser recurses once per nesting level (a deeply nested document raises
RecursionError or exhausts the stack), accepts documents of any size, turns a 5,000-digit number
into a ValueError deep inside ``int()`` and accepts ``NaN``/``Infinity``. ``loads_bounded``
checks size and depth before parsing and bounds numbers while parsing, so every bad input ends
in one ``ValueError`` (``JSONLimitError`` for a bound, ``json.JSONDecodeError`` for bad syntax)
whose message says what was wrong and where."""

from __future__ import annotations

import json
import re
from typing import Any

from memearena.errors import MemearenaError

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_NUMBER_CHARS",
    "JSONLimitError",
    "json_depth",
    "loads_bounded",
]

DEFAULT_MAX_DEPTH = 64
"""Deepest nesting of arrays/objects accepted (real answers, rows and battles use < 10)."""

DEFAULT_MAX_BYTES = 8 * 1024 * 1024
"""Largest document accepted, in UTF-8 bytes."""

DEFAULT_MAX_NUMBER_CHARS = 64
"""Longest number literal accepted, in characters (a float64 needs < 30)."""

# A JSON string literal (escapes included); brackets inside strings never count as nesting.
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")


class JSONLimitError(MemearenaError, ValueError):
    """A JSON document exceeds a bound (size, depth, number length) or holds NaN/Infinity."""


def json_depth(text: str, stop_at: int | None = None) -> int:
    """The deepest nesting of arrays/objects in ``text`` (0 for a scalar), without parsing it
    (brackets inside string literals are skipped). Stops counting past ``stop_at``."""
    depth = deepest = 0
    for m in _BRACKET.finditer(_STRING.sub('""', text)):
        if m.group() in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if stop_at is not None and deepest > stop_at:
                    return deepest
        else:
            depth -= 1
    return deepest


def loads_bounded(
    text: str | bytes,
    *,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_number_chars: int = DEFAULT_MAX_NUMBER_CHARS,
    allow_nan: bool = False,
) -> Any:
    """``json.loads`` with bounds: raises ``JSONLimitError`` when ``text`` is larger than
    ``max_bytes`` (UTF-8), nests deeper than ``max_depth``, holds a number literal longer than
    ``max_number_chars`` or (unless ``allow_nan``) NaN/Infinity; ``json.JSONDecodeError`` for
    bad syntax (both are ValueError)."""
    if isinstance(text, bytes | bytearray):
        if len(text) > max_bytes:
            raise JSONLimitError(f"JSON document of {len(text):,} bytes exceeds {max_bytes:,}")
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as e:
            raise JSONLimitError(f"JSON document is not UTF-8 (byte {e.start})") from None
    # A str needs at most 4 bytes a character: only encode when the length alone cannot decide.
    if len(text) > max_bytes or (
        len(text) * 4 > max_bytes and len(text.encode("utf-8", "surrogatepass")) > max_bytes
    ):
        raise JSONLimitError(f"JSON document of more than {max_bytes:,} bytes")
    depth = json_depth(text, stop_at=max_depth)
    if depth > max_depth:
        raise JSONLimitError(f"JSON nested deeper than {max_depth} levels")

    def parse_int(s: str) -> int:
        if len(s) > max_number_chars:
            raise JSONLimitError(f"JSON number of {len(s):,} characters (max {max_number_chars})")
        return int(s)

    def parse_float(s: str) -> float:
        if len(s) > max_number_chars:
            raise JSONLimitError(f"JSON number of {len(s):,} characters (max {max_number_chars})")
        value = float(s)
        if not allow_nan and value in (float("inf"), float("-inf")):
            raise JSONLimitError(f"JSON number {s[:20]} overflows a float")
        return value

    def parse_constant(s: str) -> float:
        if not allow_nan:
            raise JSONLimitError(f"JSON holds {s}, which is not a number")
        return float(s)

    return json.loads(
        text, parse_int=parse_int, parse_float=parse_float, parse_constant=parse_constant
    )
