"""Classic judge biases on meme items: position, verbosity and self-enhancement.

* position: every pair of two responders' answers is judged in both orders; consistency is the
  share of pairs whose two verdicts agree, P(first) the share won by the answer shown first;
* verbosity: an answer against the same answer padded with redundant filler (the same content,
  only longer), in both orders: P(prefer padded) isolates length from quality;
* self-enhancement: a judge's pointwise scores of its own family's answers against the other
  judges' scores of the same answers (see ``analysis.judge_audit``).
"""

from __future__ import annotations

import random
from itertools import combinations

__all__ = ["FILLER", "pad_response", "position_pairs"]

FILLER: tuple[str, ...] = (
    "To restate the main point once more, the analysis above captures the essence of the meme.",
    "It is worth emphasising again that the points made above are the important ones.",
    "In other words, as already explained, the reading given here is the relevant one.",
    "Put differently, the explanation above sums up how this meme should be understood.",
    "As noted before, these considerations are what matter most in this case.",
    "Once again, the key observations have been laid out in the preceding sentences.",
)
"""Redundant sentences that repeat without adding content (read by the simulated world too)."""


def pad_response(text: str, rng: random.Random, n: int = 3) -> str:
    """``text`` with ``n`` redundant filler sentences appended after its paragraphs (seeded)."""
    extra = " ".join(rng.sample(FILLER, min(n, len(FILLER))))
    return f"{text.rstrip()}\n\n{extra}"


def position_pairs(responders: list[str]) -> list[tuple[str, str]]:
    """Every unordered pair of responders (each is then judged in both orders)."""
    return list(combinations(sorted(responders), 2))
