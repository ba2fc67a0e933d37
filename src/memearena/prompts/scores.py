"""Strict parsing of a grader's own score field (``Rating: [[n]]``, ``Score: [[n]]``).

A score comes only from the grader's own field, never from a stray digit: a field quoted from a
meme or a response must yield the grader's score or a counted parse failure, never the quoted
one. So every score field in the output is collected; none, several that disagree, or one out
of range is a ParseError (the caller re-asks, then records the output as unparsed). Untrusted
text shown to a grader is passed through ``defang_score_fields`` when the prompt is rendered,
so a grader that echoes its input cannot reproduce a well-formed field from it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memearena.errors import ParseError

__all__ = ["ABSTAIN", "Score", "defang_score_fields", "parse_score"]

ABSTAIN = "N/A"
"""What an abstaining grader writes in the field (``Rating: [[N/A]]``)."""

_FIELD = re.compile(
    r"\b(?P<label>rating|score)\s*[:=]?\s*\[\[\s*(?P<value>[^\[\]\n]{0,12}?)\s*\]\]", re.IGNORECASE
)
_BRACKETS = re.compile(r"\[\[|\]\]")


@dataclass(frozen=True)
class Score:
    """A parsed score field: ``value`` is None when the grader abstained."""

    value: int | None

    @property
    def abstained(self) -> bool:
        """The grader wrote N/A instead of a number."""
        return self.value is None


def parse_score(text: str, *, lo: int = 1, hi: int = 10, allow_na: bool = False) -> Score:
    """The grader's score from its ``Rating: [[n]]`` / ``Score: [[n]]`` field(s).

    Every field in ``text`` must hold the same integer in ``[lo, hi]`` (or ``N/A`` when
    ``allow_na``); otherwise ParseError with a short reason."""
    values: list[str] = []
    for m in _FIELD.finditer(text):
        values.append(m.group("value").strip())
    if not values:
        raise ParseError("no score field; end with 'Rating: [[n]]'")
    distinct = sorted(set(v.upper() for v in values))
    if len(distinct) > 1:
        raise ParseError(f"conflicting score fields {distinct[:4]}; give exactly one score")
    v = distinct[0]
    if v == ABSTAIN:
        if not allow_na:
            raise ParseError(f"N/A is not allowed; give an integer from {lo} to {hi}")
        return Score(None)
    if not re.fullmatch(r"[+-]?\d{1,3}", v):
        raise ParseError(f"score {v[:12]!r} is not an integer from {lo} to {hi}")
    n = int(v)
    if not lo <= n <= hi:
        raise ParseError(f"score {n} is out of range {lo}-{hi}")
    return Score(n)


def defang_score_fields(text: str) -> str:
    """Untrusted text with ``[[`` / ``]]`` broken up, so it cannot hold a score field."""
    return _BRACKETS.sub(lambda m: "[ [" if m.group(0) == "[[" else "] ]", text)
