"""Validated shapes of the Arena agents' outputs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

__all__ = [
    "LEVELS",
    "Answer",
    "Context",
    "CriterionVerdict",
    "Level",
    "Winner",
    "verdict_response_format",
]

Level = Literal["high", "moderate", "unrelated"]
Winner = Literal["A", "B", "tie"]

LEVELS: tuple[Level, ...] = ("high", "moderate", "unrelated")
"""Context levels, in the order a context agent writes them (the first n are asked for)."""

CRITERIA: tuple[str, ...] = (
    "instruction_following",
    "redundancy",
    "correctness",
    "relevance",
    "accuracy",
)
"""The Arena's five judging criteria, in the order judges are asked for them."""


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


def verdict_response_format(criteria: Sequence[str]) -> str:
    """The OpenAI ``response_format`` (JSON text) constraining a judge's reply to one verdicts
    object with exactly the requested criteria: structured outputs, for endpoints that have
    them (``structured_outputs: true``)."""
    verdict = {
        "type": "object",
        "properties": {
            "winner": {"type": "string", "enum": ["A", "B", "tie"]},
            "rationale": {"type": "string"},
        },
        "required": ["winner", "rationale"],
        "additionalProperties": False,
    }
    schema = {
        "type": "object",
        "properties": {
            "verdicts": {
                "type": "object",
                "properties": dict.fromkeys(criteria, verdict),
                "required": list(criteria),
                "additionalProperties": False,
            }
        },
        "required": ["verdicts"],
        "additionalProperties": False,
    }
    payload = {
        "type": "json_schema",
        "json_schema": {"name": "pairwise_verdicts", "strict": True, "schema": schema},
    }
    return json.dumps(payload, separators=(",", ":"))
