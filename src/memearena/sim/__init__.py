"""The simulated world (a SIMULATOR for offline runs and tests, never results about real models)."""

from memearena.sim.catalogue import (
    DEMO_CONTEXT_MODEL,
    DEMO_JUDGES,
    DEMO_TARGETS,
    demo_models,
    true_ranking,
)
from memearena.sim.world import DEFAULT_PROFILE, REFUSAL_TEXT, SimWorld, family_signature

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
