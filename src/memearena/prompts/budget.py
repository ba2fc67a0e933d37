"""Token budgets for untrusted text shown to an agent: an endless answer must not be forwarded to,
and paid at, every judge."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["CHARS_PER_TOKEN", "ShownPair", "shown_pair", "truncate_to_tokens"]

CHARS_PER_TOKEN = 4
"""Characters per token assumed when cutting (the estimate accounting uses too)."""

_BACKTRACK = 200  # cut at a whitespace boundary when one is this close to the limit


def truncate_to_tokens(text: str, max_tokens: int) -> tuple[str, bool]:
    """``text`` cut to about ``max_tokens`` tokens, with a visible note, and whether it was cut."""
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
    limit = max_tokens * CHARS_PER_TOKEN
    if len(text) <= limit:
        return text, False
    cut = text[:limit]
    space = max(cut.rfind(" ", limit - _BACKTRACK), cut.rfind("\n", limit - _BACKTRACK))
    if space > 0:
        cut = cut[:space]
    return f"{cut.rstrip()}\n[… answer cut here: it exceeded about {max_tokens:,} tokens]", True


@dataclass(frozen=True)
class ShownPair:
    """Two answers as a judge is shown them, and what the verdict records about the cut."""

    a: str
    """Response A, within the budget."""
    b: str
    """Response B, within the budget."""
    record: dict[str, Any]
    """``{"truncated": {"A": bool, "B": bool, "max_tokens": n}}`` when either was cut, else {}."""


def shown_pair(a: str, b: str, max_tokens: int) -> ShownPair:
    """Both answers of a comparison cut to ``max_tokens`` each (recorded in the verdict)."""
    ta, cut_a = truncate_to_tokens(a, max_tokens)
    tb, cut_b = truncate_to_tokens(b, max_tokens)
    record: dict[str, Any] = {}
    if cut_a or cut_b:
        record = {"truncated": {"A": cut_a, "B": cut_b, "max_tokens": max_tokens}}
    return ShownPair(ta, tb, record)
