"""Refusal detection: a refusal is its own recorded outcome, never an answer and never cached."""

from __future__ import annotations

import re

__all__ = ["detect_refusal"]

_CANT = r"(?:can(?:no|')?t|cannot|won'?t|will not|am (?:not able|unable))"
_ACTS = (
    r"(?:help|assist|comply|provide|fulfill|engage|support|do that|analy[sz]e|discuss|answer"
    r"|respond|create|generate|interpret|describe)"
)
_OPENINGS = (
    rf"(?:i'?m|i am) (?:really |very |so )?sorry,? (?:but )?(?:i|we) (?:{_CANT}|must decline)",
    rf"i (?:must )?apologi[sz]e,? (?:but )?(?:i|we) {_CANT}",
    rf"(?:sorry,? )?i {_CANT}(?: to)? {_ACTS}",
    rf"i(?:'m| am) (?:not able|unable) to {_ACTS}",
    r"(?:i|we) must (?:respectfully )?decline",
    rf"as an ai(?: language model)?,? i {_CANT}",
)
# Conservative on purpose: only a refusal phrasing at the very start of the answer counts, so an
# analysis that *quotes* or discusses a refusal later on is still an answer.
_REFUSAL_START = re.compile(r"^\W{0,3}(?:" + "|".join(_OPENINGS) + ")", re.IGNORECASE)
# Every opening starts with "i", "sorry", "we" or "as": an answer whose first word character is
# none of those (under the same case folding) cannot match, so the normalisation below is skipped.
# Normalising only turns one non-word character into another (whitespace, curly quote), so it
# never changes which character is the first word character.
_MAYBE_REFUSAL = re.compile(r"\W*[iswa]", re.IGNORECASE)


def detect_refusal(text: str, finish_reason: str | None, refusal_field: str | None) -> bool:
    """True for a content-filter stop, a provider refusal field, or an answer that opens with a
    common refusal phrasing ("I'm sorry, but I can't", "I can't help with", "I cannot assist")."""
    if finish_reason == "content_filter" or refusal_field:
        return True
    if _MAYBE_REFUSAL.match(text) is None:
        return False
    return _REFUSAL_START.match(" ".join(text[:200].replace("\u2019", "'").split())) is not None
