"""What a person labels: one item of a queue and the questions asked about it.

``LabelItem.texts`` and ``images`` are what the person sees (an image as the sha256 of a file
under ``DIR/images/``); ``hidden`` must never be shown before the person answers (judge
verdicts, model names, an A/B mapping, whether an item is a rewrite). An item's ``key`` is
stable across reloads and re-runs of the same steps and never names a model."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Field", "LabelItem", "item_hash"]


@dataclass(frozen=True)
class Field:
    """One question of a queue."""

    name: str
    label: str
    choices: tuple[str, ...]
    keys: tuple[str, ...]
    """Keyboard keys, one per choice (same order)."""


@dataclass(frozen=True)
class LabelItem:
    """One thing to label (see the module for what may be shown)."""

    queue: str
    key: str
    title: str
    texts: dict[str, str]
    images: dict[str, str]
    fields: tuple[Field, ...]
    hidden: dict[str, Any] = field(default_factory=dict)


def item_hash(*parts: str) -> str:
    """The sha256 (hex) of ``parts`` joined by a unit separator: item keys and the orders and
    picks drawn from them."""
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()
