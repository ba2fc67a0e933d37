"""The simulated world's parts, registered per role prefix: how a method makes the simulator
answer its roles without the simulator's core naming it.

A part is built once per world (``factory(world)``: it may keep state, such as which image
shows which meme) and answers every role ``<prefix>.*``; the core answers the roles no part
claims (the Arena's). Each method's part lives in its package and registers when its method is
loaded (``memearena.methods.adapt.sim``, ``memearena.methods.judge_audit.sim``)."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from memearena.models.types import GenParams, Message
    from memearena.sim.facts import SimProfile, WorldCore

__all__ = ["PartFactory", "SimPart", "SimRequest", "part_factories", "register_part"]


@dataclass(frozen=True)
class SimRequest:
    """One request to a simulated model, as a part sees it."""

    profile: SimProfile
    role: str
    prompt: str
    """The user messages' text, joined (tags as rendered)."""
    messages: Sequence[Message]
    params: GenParams
    rng: random.Random
    """Seeded by (world seed, model, role, the original request): the same request, the same
    reply, however many re-asks came before."""
    bad_format: bool
    """This attempt is a malformed reply (the profile's ``format_error_rate``)."""


class SimPart(Protocol):
    """What answers one role prefix."""

    def reply(self, request: SimRequest) -> str:
        """The simulated reply to ``request``."""
        ...


PartFactory = Callable[["WorldCore"], SimPart]

_PARTS: dict[str, PartFactory] = {}


def register_part(prefix: str, factory: PartFactory) -> None:
    """Answer every role ``<prefix>.*`` with a part built by ``factory(world)`` for each world
    created afterwards (registering a prefix again replaces it)."""
    _PARTS[prefix] = factory


def part_factories() -> dict[str, PartFactory]:
    """The registered parts, by role prefix."""
    return dict(_PARTS)
