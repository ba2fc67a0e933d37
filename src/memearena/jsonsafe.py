"""Bounded JSON parsing for untrusted text (model output, dataset rows, battle files).

The standard parser recurses once per nesting level (a deeply nested document raises
RecursionError or exhausts the stack), accepts documents of any size, turns a 5,000-digit number
into a ValueError deep inside ``int()`` and accepts ``NaN``/``Infinity``. ``loads_bounded``
checks size and depth before parsing and bounds numbers while parsing, so every bad input ends
in one ``ValueError`` (``JSONLimitError`` for a bound, ``json.JSONDecodeError`` for bad syntax)
whose message says what was wrong and where."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memearena.errors import DataError, MemearenaError

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_NUMBER_CHARS",
    "JSONLimitError",
    "dumps_strict",
    "json_depth",
    "jsonl_lines",
    "loads_bounded",
    "nests_deeper_than",
    "strict_json",
]

NON_FINITE_KEY = "non_finite"
"""Key `dumps_strict` adds to a top-level object: the paths of values written as null."""

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


def nests_deeper_than(text: str, limit: int) -> bool:
    """Whether ``text`` nests arrays/objects deeper than ``limit`` (``json_depth`` past it): a
    text with no more opening brackets than the limit cannot, which is a C-speed count, so
    only texts with more brackets are scanned."""
    if text.count("[") + text.count("{") <= limit:
        return False
    return json_depth(text, stop_at=limit) > limit


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
    if nests_deeper_than(text, max_depth):
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


def jsonl_lines(path: Path) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of every non-blank line of a JSONL file, streamed, with a UTF-8
    BOM accepted at the start of any line (concatenated files keep theirs). Parse each with
    `loads_bounded` (a ValueError is that line's error). An unreadable file, or one that is not
    UTF-8, is a DataError naming it (and the line)."""
    n = 0
    try:
        with path.open("rb") as f:
            for n, raw in enumerate(f, start=1):
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError:
                    raise DataError(f"{path}:{n}: not valid UTF-8") from None
                text = text.removeprefix("\ufeff")
                if text.strip():
                    yield n, text
    except OSError as e:
        raise DataError(f"{path}: cannot read ({e.strerror or e})") from None


def strict_json(
    value: Any, _path: str = "$", _found: list[str] | None = None
) -> tuple[Any, list[str]]:
    """`value` with every NaN or infinite float replaced by None, and the paths replaced
    (``$.models[0].elo``); containers are copied only where they change nothing else."""
    found: list[str] = [] if _found is None else _found
    if isinstance(value, float):
        if math.isfinite(value):
            return value, found
        found.append(_path)
        return None, found
    if isinstance(value, dict):
        return {k: strict_json(v, f"{_path}.{k}", found)[0] for k, v in value.items()}, found
    if isinstance(value, list | tuple):
        return [strict_json(v, f"{_path}[{i}]", found)[0] for i, v in enumerate(value)], found
    return value, found


def dumps_strict(value: Any, **kwargs: Any) -> str:
    """JSON that every parser reads: never a bare ``NaN`` / ``Infinity``. A non-finite number
    is written as null, and a top-level object says which ones were (`NON_FINITE_KEY`:
    their paths), so a null is never mistaken for "no data" silently."""
    if isinstance(value, dict) and NON_FINITE_KEY in value:  # a re-read document's old flag
        value = {k: v for k, v in value.items() if k != NON_FINITE_KEY}
    clean, found = strict_json(value)
    if found and isinstance(clean, dict):
        clean[NON_FINITE_KEY] = found
    return json.dumps(clean, allow_nan=False, **kwargs)
