"""Judging prompts and strict parsers: pointwise 1–10 scores and pairwise preferences.

A score comes only from the judge's own rating (``prompts.parse_score``: a ``[[n]]`` or a
``Rating: n`` line): none, several that disagree, or one out of range is unparsed (re-asked,
then recorded), never guessed from a stray digit. Every untrusted text shown to a judge (query,
response, image description) is defanged first, so a response that quotes a rating or a verdict
cannot stand in for the judge's own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from memearena.errors import ParseError
from memearena.methods.judge_audit.perturb import Triplet
from memearena.models.types import Message
from memearena.prompts import build_messages, defang_score_fields, parse_score_at

__all__ = [
    "PREFERENCES",
    "PointwiseScore",
    "pairwise_messages",
    "parse_pointwise",
    "parse_preference",
    "score_messages",
    "score_template",
]

PREFERENCES: tuple[str, ...] = ("A", "B", "tie")
"""What a pairwise verdict may say."""

_VERDICT = re.compile(r"\bverdict\s*[:=]?\s*\[\[\s*(?P<value>[^\[\]\n]{0,12}?)\s*\]\]", re.I)


def score_template(variant: str) -> str:
    """The template of a pointwise prompt variant."""
    return f"judge_audit/score_{variant}.j2"


# Every judge is sent the very same request for a triplet (and the unbiased triplet recurs for
# every bias type): it is rendered once while its jobs are in flight, not once per judge. The
# bound is small on purpose: an entry holds its image's data URL, and a triplet's jobs are
# drawn one after the other (pair-major, then judge), so a window's worth is all that repeats.
_MEMO = 64


@lru_cache(maxsize=_MEMO)
def _score_messages(triplet: Triplet, variant: str) -> tuple[Message, ...]:
    return tuple(
        build_messages(
            score_template(variant),
            image=triplet.image.part() if triplet.image is not None else None,
            query=defang_score_fields(triplet.query),
            response=defang_score_fields(triplet.response),
        )
    )


@lru_cache(maxsize=_MEMO)
def _pairwise_messages(triplet: Triplet, response_a: str, response_b: str) -> tuple[Message, ...]:
    return tuple(
        build_messages(
            "judge_audit/pairwise.j2",
            image=triplet.image.part() if triplet.image is not None else None,
            query=_defang_all(triplet.query),
            response_a=_defang_all(response_a),
            response_b=_defang_all(response_b),
        )
    )


def score_messages(triplet: Triplet, variant: str) -> list[Message]:
    """The pointwise request for a triplet: the image (if any) and the prompt; a removed
    modality is absent from the request."""
    return list(_score_messages(triplet, variant))


def pairwise_messages(triplet: Triplet, response_a: str, response_b: str) -> list[Message]:
    """The pairwise request: the query and image of ``triplet`` with two responses."""
    return list(_pairwise_messages(triplet, response_a, response_b))


def _defang_all(text: str) -> str:
    return defang_score_fields(text)


@dataclass(frozen=True)
class PointwiseScore:
    """A judge's parsed pointwise answer."""

    value: float | None
    """The score 1–10 (one decimal at most); None when the judge abstained (N/A)."""
    feedback: str
    """The judge's feedback (the text before its score field), at most 2,000 characters."""


def parse_pointwise(text: str, *, allow_na: bool, shown: tuple[str, ...] = ()) -> PointwiseScore:
    """The judge's score (strict; see module doc) and its feedback; ``shown``: the untrusted
    texts it was shown (a rating quoted from them is not the judge's)."""
    score, at = parse_score_at(text, lo=1, hi=10, allow_na=allow_na, shown=shown)
    feedback = text[:at].strip()
    return PointwiseScore(score.value, feedback[:2000])


def parse_preference(text: str) -> str:
    """``A``, ``B`` or ``tie`` from the judge's ``Verdict: [[...]]`` field(s); none, several
    that disagree or another value is a ParseError."""
    values = {m.group("value").strip().lower() for m in _VERDICT.finditer(text)}
    if not values:
        raise ParseError("no verdict field; end with 'Verdict: [[A]]', '[[B]]' or '[[tie]]'")
    if len(values) > 1:
        raise ParseError(f"conflicting verdict fields {sorted(values)[:4]}; give exactly one")
    v = values.pop()
    for p in PREFERENCES:
        if v == p.lower():
            return p
    raise ParseError(f"verdict {v[:12]!r} is not A, B or tie")
