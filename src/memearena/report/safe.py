"""Untrusted text on safe output channels: the console and spreadsheets.

Model names, replies, dataset text and error messages are untrusted: on the console they must not
be read as rich markup (``[/bold]`` crashes a summary after the money is spent) nor reach the
terminal as control or escape sequences (which can rewrite the screen or the window title); in a
CSV export a cell must not start a spreadsheet formula (``=HYPERLINK(...)``)."""

from __future__ import annotations

import re
import unicodedata

from rich.markup import escape

__all__ = [
    "FORMULA_PREFIXES",
    "NAME_CHARS",
    "TEXT_CHARS",
    "clip",
    "console_safe",
    "csv_safe",
    "name_cell",
    "shown",
    "strip_control",
]

NAME_CHARS = 60
"""Longest untrusted name (model, judge, dataset) shown in a console table cell; the full text
stays in the JSON outputs."""

TEXT_CHARS = 4000
"""Longest untrusted text `console_safe` prints by default: rendering time and memory must not
follow a 20 MB model name or reply (rich's layout is superlinear in a cell's length)."""

_PLAIN = re.compile(r"[ -~]*")  # printable ASCII: nothing to strip

# ANSI/VT escape sequences: CSI (ESC [ ... final), OSC (ESC ] ... BEL or ST), other ESC pairs,
# and the 8-bit CSI/OSC introducers.
_ESCAPE_SEQ = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"
    r"|\x1b[ -~]?"
    r"|\x9b[0-?]*[ -/]*[@-~]"
    r"|\x9d[^\x07\x9c]*[\x07\x9c]?"
)
# Bidirectional overrides and isolates reorder what is shown (the "Trojan Source" trick).
_BIDI = dict.fromkeys(map(ord, "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"))


def strip_control(text: str, *, multiline: bool = False) -> str:
    """``text`` without escape sequences, control characters and bidi overrides; newlines and
    tabs become spaces unless ``multiline`` (then newlines are kept)."""
    if _PLAIN.fullmatch(text):
        return text
    text = _ESCAPE_SEQ.sub("", text).translate(_BIDI)
    out: list[str] = []
    for ch in text:
        if ch == "\n" and multiline:
            out.append(ch)
        elif ch in "\t\n\r":
            out.append(" ")
        elif unicodedata.category(ch) == "Cc":
            continue
        else:
            out.append(ch)
    return "".join(out)


def clip(text: str, max_chars: int) -> str:
    """`text` cut to `max_chars` characters, the cut marked with an ellipsis and the length."""
    if len(text) <= max_chars:
        return text
    mark = f"… ({len(text):,} chars)"
    if max_chars <= len(mark) + 8:
        return text[: max(max_chars - 1, 0)] + "…"
    return text[: max_chars - len(mark)] + mark


def console_safe(
    value: object, *, multiline: bool = False, max_chars: int | None = TEXT_CHARS
) -> str:
    """An untrusted value as text that rich prints literally: no markup, no control sequences
    (one line unless ``multiline``), cut to ``max_chars`` (`TEXT_CHARS` unless told; None: no
    cut) with an ellipsis."""
    text = str(value)
    if max_chars is not None and len(text) > 4 * max_chars + 256:
        text = text[: 4 * max_chars + 256]  # what stripping could shorten, no more
    text = strip_control(text, multiline=multiline)
    if max_chars is not None and len(text) > max_chars:
        text = text[: max(max_chars - 1, 0)] + "…"
    return escape(text)


def name_cell(value: object) -> str:
    """An untrusted name for a console table cell: inert and cut to `NAME_CHARS`."""
    return console_safe(value, max_chars=NAME_CHARS)


def shown(value: object, limit: int = NAME_CHARS) -> str:
    """An untrusted value quoted (repr) for an error message, cut to about `limit` chars."""
    if isinstance(value, str) and len(value) > 4 * limit:
        value = value[: 4 * limit]
    return clip(repr(value), limit)


FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
"""Cell prefixes a spreadsheet reads as the start of a formula (OWASP CSV injection)."""


def csv_safe(value: object) -> object:
    """A CSV cell that a spreadsheet shows as text: strings starting a formula get a leading
    apostrophe; numbers and other values are returned unchanged."""
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES):
        return "'" + value
    return value
