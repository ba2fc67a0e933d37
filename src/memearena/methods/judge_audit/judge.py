"""Judging prompts and strict parsers: pointwise 1–10 scores and pairwise preferences.

The ``plain`` variant is MM-JudgeBias's ``EVAL_PROMPT`` as the reference sends it: one user
message, the prompt text first and the image after it, no system message, the reply in
``### Feedback: … ### Score: n`` form. ``guarded`` is the same task with the inputs delimited,
a system message, the image first and a ``Rating: [[n]]`` line (the other variants build on it).

A score comes only from the judge's own rating (``### Score: n`` for ``plain``, else
``prompts.parse_score``: a ``[[n]]`` or a ``Rating: n`` line): none, several that disagree, or
one out of range is unparsed (re-asked, then recorded), never guessed from a stray digit.
Every untrusted text shown to a judge (query, response, image description) is defanged first,
so a response that quotes a rating, a score field or a verdict cannot stand in for the judge's
own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from memearena.errors import ParseError
from memearena.methods.judge_audit.perturb import Triplet
from memearena.models.types import Message, TextPart
from memearena.prompts import (
    build_messages,
    defang_score_fields,
    parse_score_at,
    quoted_in,
    render,
)

__all__ = [
    "PAIR_V2",
    "PREFERENCES",
    "REFERENCE_VARIANT",
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


REFERENCE_VARIANT = "plain"
"""The variant sent as MM-JudgeBias sends its prompt (see module doc)."""
_SCORE_FIELD = re.compile(r"###\s*Score\s*:\s*(?P<value>[0-9]+(?:\.[0-9]+)?)(?![0-9.])")


@lru_cache(maxsize=_MEMO)
def _score_messages(triplet: Triplet, variant: str) -> tuple[Message, ...]:
    if variant == REFERENCE_VARIANT:
        text = render(
            score_template(variant),
            query=defang_score_fields(triplet.query),
            response=defang_score_fields(triplet.response),
        )
        image = triplet.image.part() if triplet.image is not None else None
        parts = (TextPart(text), image) if image is not None else (TextPart(text),)
        return (Message("user", parts),)
    return tuple(
        build_messages(
            score_template(variant),
            image=triplet.image.part() if triplet.image is not None else None,
            query=defang_score_fields(triplet.query),
            response=defang_score_fields(triplet.response),
        )
    )


PAIR_V2 = "pair-v2"
"""The pairwise prompt of MT-Bench (FastChat ``judge_prompts.jsonl`` ``pair-v2``): its system
prompt and question/answer template, the image (if any) first in the user message, the verdict
``[[A]]``, ``[[B]]`` or ``[[C]]`` (a tie)."""
_PAIR_V2_VERDICT = re.compile(r"\[\[\s*([ABC])\s*\]\]")


@lru_cache(maxsize=_MEMO)
def _pairwise_messages(
    triplet: Triplet, response_a: str, response_b: str, variant: str = PAIR_V2
) -> tuple[Message, ...]:
    if variant == PAIR_V2:
        text = render(
            "judge_audit/pairwise_v2.j2",
            query=_defang_all(triplet.query),
            response_a=_defang_all(response_a),
            response_b=_defang_all(response_b),
        )
        image = triplet.image.part() if triplet.image is not None else None
        parts = (image, TextPart(text)) if image is not None else (TextPart(text),)
        return (
            Message.text("system", render("judge_audit/system_pair_v2.j2")),
            Message("user", parts),
        )
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


def pairwise_messages(
    triplet: Triplet, response_a: str, response_b: str, variant: str = PAIR_V2
) -> list[Message]:
    """The pairwise request: the query and image of ``triplet`` with two responses, in MT-Bench's
    ``pair-v2`` prompt (default) or the ``guarded`` one (delimited inputs, ``Verdict: [[A]]``)."""
    return list(_pairwise_messages(triplet, response_a, response_b, variant))


def _defang_all(text: str) -> str:
    return defang_score_fields(text)


@dataclass(frozen=True)
class PointwiseScore:
    """A judge's parsed pointwise answer."""

    value: float | None
    """The score 1–10 (one decimal at most); None when the judge abstained (N/A)."""
    feedback: str
    """The judge's feedback (the text before its score field), at most 2,000 characters."""


def parse_pointwise(
    text: str, *, allow_na: bool, variant: str | None = None, shown: tuple[str, ...] = ()
) -> PointwiseScore:
    """The judge's score (strict; see module doc) and its feedback; ``shown``: the untrusted
    texts it was shown (a rating quoted from them is not the judge's)."""
    if variant == REFERENCE_VARIANT:
        return _parse_reference(text, shown)
    score, at = parse_score_at(text, lo=1, hi=10, allow_na=allow_na, shown=shown)
    feedback = text[:at].strip()
    return PointwiseScore(score.value, feedback[:2000])


_FEEDBACK_LABEL = re.compile(r"^###\s*Feedback\s*:\s*")


@lru_cache(maxsize=256)
def _may_quote_a_score(shown: tuple[str, ...]) -> bool:
    """Whether a text of ``shown``, normalised as an echo of it would be, spells ``score``.
    Every score field does, normalised too, so where none does no field of a reply can be a
    quote of them (``quoted_in`` would find none). The same texts are shown to every judge of
    a triplet: asked once for all of them."""
    return quoted_in("Score", shown)


def _parse_reference(text: str, shown: tuple[str, ...] = ()) -> PointwiseScore:
    """``### Feedback: … ### Score: n`` (every score field agreeing; the inputs' score labels
    were made inert, so a field in the reply is the judge's own); a ``Rating: [[n]]`` line is
    accepted too. An integer 1–10 or one decimal, as the other variants."""
    every = list(_SCORE_FIELD.finditer(text))
    found = (
        [m for m in every if not quoted_in(m.group(0), shown)]
        if every and _may_quote_a_score(tuple(shown))
        else every
    )
    if every and not found:
        raise ParseError(
            "the only score field is quoted from the material shown; "
            "end with your own '### Score: n'"
        )
    if not found:
        try:
            return parse_pointwise(text, allow_na=False, shown=shown)
        except ParseError:
            raise ParseError(
                "no score field; end with '### Score: n', n an integer between 1 and 10"
            ) from None
    values = {float(m.group("value")) for m in found}
    if len(values) > 1:
        raise ParseError(f"conflicting score fields {sorted(values)[:4]}; give exactly one")
    v = values.pop()
    if not 1 <= v <= 10 or round(v, 1) != v:
        raise ParseError(f"score {v:g} is not between 1 and 10 (one decimal at most)")
    feedback = text[: found[0].start()].strip()
    feedback = _FEEDBACK_LABEL.sub("", feedback)
    return PointwiseScore(int(v) if v.is_integer() else v, feedback[:2000])


def parse_preference(text: str, variant: str = "guarded") -> str:
    """``A``, ``B`` or ``tie`` from the judge's ``Verdict: [[...]]`` field(s) (``pair-v2``:
    ``[[A]]``, ``[[B]]``, ``[[C]]`` for a tie); none, several that disagree or another value is
    a ParseError. The responses' brackets were made inert, so every field is the judge's."""
    if variant == PAIR_V2:
        found = {m.group(1) for m in _PAIR_V2_VERDICT.finditer(text)}
        if not found:
            raise ParseError("no verdict; end with '[[A]]', '[[B]]' or '[[C]]' (a tie)")
        if len(found) > 1:
            raise ParseError(f"conflicting verdicts {sorted(found)}; give exactly one")
        return {"A": "A", "B": "B", "C": "tie"}[found.pop()]
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
