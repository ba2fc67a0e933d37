"""Bounded JSON for dataset files, on top of :mod:`memearena.jsonsafe`.

Threat: a dataset row is untrusted text. Deep nesting exhausts the recursion limit, a
5,000-digit integer trips Python's int-conversion limit and a huge float becomes ``inf``; each
must be one error line for that row, never a traceback and never a silently altered value.
JSONL rows go through :func:`memearena.jsonsafe.loads_bounded`; a file holding one JSON array
is decoded element by element (to name each element's line) with the same bounds.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from memearena.errors import DataError
from memearena.jsonsafe import (
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_NUMBER_CHARS,
    JSONLimitError,
    loads_bounded,
    nests_deeper_than,
)

__all__ = ["JSONLimitError", "check_array_depth", "iter_json_array", "loads_row", "raw_decode"]


def loads_row(text: str) -> Any:
    """One JSONL row within the bounds: JSONDecodeError or JSONLimitError (both ValueError)."""
    return loads_bounded(text)


def _int(s: str) -> int:
    if len(s) > DEFAULT_MAX_NUMBER_CHARS:
        raise JSONLimitError(
            f"JSON number of {len(s):,} characters (max {DEFAULT_MAX_NUMBER_CHARS})"
        )
    return int(s)


def _float(s: str) -> float:
    if len(s) > DEFAULT_MAX_NUMBER_CHARS:
        raise JSONLimitError(
            f"JSON number of {len(s):,} characters (max {DEFAULT_MAX_NUMBER_CHARS})"
        )
    value = float(s)
    if value in (float("inf"), float("-inf")):
        raise JSONLimitError(f"JSON number {s[:20]} overflows a float")
    return value


def _constant(s: str) -> Any:
    raise JSONLimitError(f"JSON holds {s}, which is not a number")


_DECODER = json.JSONDecoder(parse_int=_int, parse_float=_float, parse_constant=_constant)


def check_array_depth(text: str) -> int | None:
    """Offset of the first character nested deeper than allowed (array level included), or None."""
    # One array around the rows: its elements may nest as deep as a JSONL row.
    limit = DEFAULT_MAX_DEPTH + 1
    if not nests_deeper_than(text, limit):
        return None
    depth = 0
    in_string = escaped = False
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return i
        elif ch in "]}":
            depth -= 1
    return None  # pragma: no cover - nests_deeper_than found it


def raw_decode(text: str, pos: int) -> tuple[Any, int]:
    """Decode one array element at ``pos`` with the number bounds (call
    :func:`check_array_depth` first): (value, end); JSONDecodeError or JSONLimitError."""
    return _DECODER.raw_decode(text, pos)


def iter_json_array(text: str, where: str) -> Iterator[tuple[int, Any]]:
    """``(line, element)`` of a text holding one JSON array, element by element within the
    bounds. A broken array cannot be resynchronised, so its first error is a DataError naming
    ``where`` and the line."""

    def fail(i: int, msg: str) -> DataError:
        return DataError(f"{where}:{text.count(chr(10), 0, i) + 1}: invalid JSON ({msg})")

    def skip(i: int) -> int:
        while i < len(text) and text[i] in " \t\r\n":
            i += 1
        return i

    deep = check_array_depth(text)
    if deep is not None:
        raise fail(deep, "JSON nested deeper than the limit")
    pos = skip(text.index("[") + 1)
    if pos < len(text) and text[pos] == "]":
        if text[pos + 1 :].strip():
            raise fail(pos + 1, "extra data after the array")
        return
    line, counted = 1, 0  # the line of offset `counted`: lines are counted once, forward
    while True:
        pos = skip(pos)
        line += text.count("\n", counted, pos)
        counted = pos
        try:
            row, pos = raw_decode(text, pos)
        except json.JSONDecodeError as e:
            raise fail(e.pos, e.msg) from None
        except ValueError as e:  # JSONLimitError: the element's end is unknown
            raise fail(pos, str(e)) from None
        yield line, row
        pos = skip(pos)
        if pos >= len(text):
            raise fail(pos, "unterminated array")
        if text[pos] == "]":
            if text[pos + 1 :].strip():
                raise fail(pos + 1, "extra data after the array")
            return
        if text[pos] != ",":
            raise fail(pos, "expected ',' or ']'")
        pos += 1
