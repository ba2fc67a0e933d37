"""Bounded JSON for dataset files: depth, number length and non-finite values are capped.

Threat: a dataset row is untrusted text. Deep nesting exhausts the recursion limit, a
5,000-digit integer trips Python's int-conversion limit and a huge float becomes ``inf``; each
must be one error line for that row, never a traceback and never a silently altered value.
"""

from __future__ import annotations

import json
import math
from typing import Any

MAX_DEPTH = 32
"""Deepest nesting of arrays/objects a dataset row may have."""
MAX_NUMBER_CHARS = 64
"""Longest number literal a dataset row may hold (ids, labels, scores are short)."""


class JSONBoundError(ValueError):
    """A JSON value that is well-formed but outside the bounds above (or not valid JSON)."""


def _int(s: str) -> int:
    if len(s) > MAX_NUMBER_CHARS:
        raise JSONBoundError(f"number with {len(s)} digits (limit {MAX_NUMBER_CHARS})")
    return int(s)


def _float(s: str) -> float:
    if len(s) > MAX_NUMBER_CHARS:
        raise JSONBoundError(f"number with {len(s)} characters (limit {MAX_NUMBER_CHARS})")
    v = float(s)
    if not math.isfinite(v):
        raise JSONBoundError(f"number {s[:20]!r} is out of range")
    return v


def _constant(s: str) -> Any:
    raise JSONBoundError(f"{s} is not valid JSON")


DECODER = json.JSONDecoder(parse_int=_int, parse_float=_float, parse_constant=_constant)
"""A decoder applying the number bounds; use :func:`loads` or :func:`raw_decode`."""


def _check_depth(value: Any) -> None:
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, dict | list):
            if depth > MAX_DEPTH:
                raise JSONBoundError(f"nested more than {MAX_DEPTH} levels deep")
            children = v.values() if isinstance(v, dict) else v
            stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))


def raw_decode(text: str, pos: int) -> tuple[Any, int]:
    """Decode one JSON value at ``pos``: (value, end); JSONDecodeError or JSONBoundError."""
    try:
        value, end = DECODER.raw_decode(text, pos)
    except RecursionError:
        raise JSONBoundError(f"nested more than {MAX_DEPTH} levels deep") from None
    _check_depth(value)
    return value, end


def loads(text: str) -> Any:
    """Parse one JSON document within the bounds; JSONDecodeError or JSONBoundError."""
    try:
        value = DECODER.decode(text)
    except RecursionError:
        raise JSONBoundError(f"nested more than {MAX_DEPTH} levels deep") from None
    _check_depth(value)
    return value
