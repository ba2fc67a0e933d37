"""The simulated world (a SIMULATOR for offline runs and tests, never results about real models).

Its names are imported when first used: the method registry registers each method's part here
(``sim.parts``) when the package is loaded, which must not load the world itself."""

from __future__ import annotations

from importlib import import_module
from typing import Any

__all__ = [
    "DEFAULT_PROFILE",
    "DEMO_CONTEXT_MODEL",
    "DEMO_JUDGES",
    "DEMO_TARGETS",
    "REFUSAL_TEXT",
    "SimWorld",
    "demo_models",
    "family_signature",
    "true_ranking",
]

_WHERE = {
    "DEMO_CONTEXT_MODEL": "memearena.sim.catalogue",
    "DEMO_JUDGES": "memearena.sim.catalogue",
    "DEMO_TARGETS": "memearena.sim.catalogue",
    "demo_models": "memearena.sim.catalogue",
    "true_ranking": "memearena.sim.catalogue",
    "DEFAULT_PROFILE": "memearena.sim.world",
    "REFUSAL_TEXT": "memearena.sim.world",
    "SimWorld": "memearena.sim.world",
    "family_signature": "memearena.sim.world",
}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'memearena.sim' has no attribute {name!r}")
    value = getattr(import_module(where), name)
    globals()[name] = value  # resolved once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
