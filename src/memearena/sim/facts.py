"""What the simulated world and its per-method parts share: the facts of one meme, the
profile of one simulated model, the seeded digest every draw is made from, and the reading of
one delimited block of a prompt. The parts (each method's ``methods/<name>/sim.py``) see the
world only through :class:`WorldCore`, so that neither imports the world's internals."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from memearena.config import SimModelConfig
from memearena.prompts.render import DELIMITER_TAGS

__all__ = ["SimMeme", "SimProfile", "WorldCore", "digest", "tag_block"]

_TAG_MARKS = {name: (f"<{name}>", f"</{name}>") for name in DELIMITER_TAGS}


def digest(*parts: object) -> int:
    """A seeded 64-bit draw from ``parts`` (every choice of the world is one)."""
    h = hashlib.blake2b("\x1f".join(str(p) for p in parts).encode(), digest_size=8)
    return int.from_bytes(h.digest(), "big")


@dataclass(frozen=True, slots=True)
class SimMeme:
    """The facts of one meme as the simulated world knows them."""

    key: str
    target: str
    category: str
    harm: str
    misbelief: str
    harmful: bool
    facts: tuple[str, ...]
    false_facts: tuple[str, ...]
    decoys: tuple[str, ...]
    facts_n: tuple[str, ...]
    false_n: tuple[str, ...]
    target_n: str
    decoys_n: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SimProfile:
    """One simulated model: its name, config, family and family signature."""

    name: str
    cfg: SimModelConfig
    family: str
    signature: str


def tag_block(text: str, name: str) -> str | None:
    """The first ``<name>`` block of a prompt (inserted values cannot hold delimiter tags)."""
    start_mark, end_mark = _TAG_MARKS[name]
    start = text.find(start_mark)
    if start == -1:
        return None
    start += len(start_mark)
    end = text.find(end_mark, start)
    return text[start:end].strip() if end != -1 else None


class WorldCore(Protocol):
    """What a per-method part of the world uses of the world itself."""

    seed: int

    @property
    def memes(self) -> Mapping[str, SimMeme]:
        """Every meme the world has met so far, by text."""
        ...

    def meme(self, text: str) -> SimMeme:
        """The meme a text belongs to (a synthetic one for a text the world never saw)."""
        ...

    def answer(self, prof: SimProfile, prompt: str, rng: random.Random, bad: bool) -> str:
        """An Arena-style answer of ``prof`` to ``prompt``."""
        ...
