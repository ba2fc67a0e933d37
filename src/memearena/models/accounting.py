"""Token estimates and cost accounting."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from memearena.models.types import ImagePart, Message, TextPart

if TYPE_CHECKING:
    from memearena.config import Price

__all__ = ["IMAGE_TOKENS", "cost_usd", "estimate_text_tokens", "estimate_tokens"]

IMAGE_TOKENS = 85
"""Tokens counted per image in estimates (a low-detail image tile)."""


def estimate_text_tokens(text: str) -> int:
    """About four characters a token, rounded up."""
    return -(-len(text) // 4)


def estimate_tokens(messages: Sequence[Message]) -> int:
    """Estimated input tokens of a request: ceil(chars / 4) plus a fixed count per image."""
    chars = 0
    images = 0
    for m in messages:
        for p in m.content:
            if isinstance(p, TextPart):
                chars += len(p.text)
            elif isinstance(p, ImagePart):
                images += 1
    return -(-chars // 4) + IMAGE_TOKENS * images


def cost_usd(price: Price, input_tokens: int, output_tokens: int) -> float:
    """USD cost of a call at ``price`` (USD per 1M tokens)."""
    return (input_tokens * price.input + output_tokens * price.output) / 1_000_000
