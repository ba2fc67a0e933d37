"""Validated shapes of the Arena agents' outputs."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

__all__ = ["LEVELS", "Answer", "Context", "CriterionVerdict", "Level", "Winner"]

Level = Literal["high", "moderate", "unrelated"]
Winner = Literal["A", "B", "tie"]

LEVELS: tuple[Level, ...] = ("high", "moderate", "unrelated")
"""Context levels, in the order a context agent writes them (the first n are asked for)."""


class Context(BaseModel):
    """One interpretive context: a viewer's background and the task built from it."""

    model_config = ConfigDict(frozen=True)

    level: Level
    """How relevant the viewer's background is to the meme: high, moderate or unrelated."""
    background: str
    """The viewer's background, as the target model reads it."""
    task: str
    """The instruction the target model answers from that standpoint."""


class Answer(BaseModel):
    """A target model's two-section answer; kept even when the sections are missing."""

    model_config = ConfigDict(frozen=True)

    background: str
    """Text of the [Background Knowledge] section ("" when it is missing)."""
    reasoning: str
    """Text of the [Reasoning] section (the whole answer when the sections are missing)."""
    format_ok: bool
    """Both sections present, non-empty and in order (what Instruction Following checks)."""


class CriterionVerdict(BaseModel):
    """A judge's verdict on one criterion of one pairwise comparison."""

    model_config = ConfigDict(frozen=True)

    winner: Winner
    """The better response as shown to the judge: "A", "B" or "tie"."""
    rationale: str = ""
    """The judge's one-sentence reason."""
