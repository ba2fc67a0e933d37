"""The simulated world's parts, registered per role prefix: how a method makes the simulator
answer its roles without the simulator's core naming it.

A part is built once per world (``factory(world)``: it may keep state, such as which image
shows which meme) and answers every role ``<prefix>.*``; the core answers no method's roles.
Each method's part lives in its package (``methods/<name>/sim.py``) and registers when that
module is imported (``register_part``). The method registry names each registered method's
part module here (``register_part_module``), so a world meeting a role of a method not loaded
yet (a bare world in a test, a served world in a fresh process) imports its part then."""

from __future__ import annotations

import importlib
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from memearena.models.types import GenParams, Message
    from memearena.sim.facts import SimProfile, WorldCore

__all__ = [
    "PartFactory",
    "SimPart",
    "SimRequest",
    "part_factories",
    "part_factory",
    "part_prefixes",
    "register_part",
    "register_part_module",
]


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
_MODULES: dict[str, str] = {}
"""The module holding each prefix's part (imported when a world first needs the prefix)."""


def register_part(prefix: str, factory: PartFactory) -> None:
    """Answer every role ``<prefix>.*`` with a part built by ``factory(world)`` for each world
    created afterwards (registering a prefix again replaces it)."""
    _PARTS[prefix] = factory


def part_factories() -> dict[str, PartFactory]:
    """The registered parts, by role prefix."""
    return dict(_PARTS)


def register_part_module(prefix: str, module: str | None) -> None:
    """Name the module whose import registers the part of ``prefix`` (None: forget it)."""
    if module is None:
        _MODULES.pop(prefix, None)
    else:
        _MODULES[prefix] = module


def part_factory(prefix: str) -> PartFactory | None:
    """The factory of ``prefix``'s part, importing its named module first if it has not
    registered yet (None: no part answers that prefix)."""
    make = _PARTS.get(prefix)
    if make is None and prefix in _MODULES:
        importlib.import_module(_MODULES[prefix])
        make = _PARTS.get(prefix)
    return make


def part_prefixes() -> list[str]:
    """Every prefix a part answers: registered, or named by its module."""
    return list(dict.fromkeys([*_PARTS, *_MODULES]))
