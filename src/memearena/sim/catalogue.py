"""The demo's SIMULATED models: targets of clearly different skill and a biased judge panel.

Every name starts with ``sim-``: these are simulator profiles, never real models."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from memearena.config import SimModelConfig

__all__ = [
    "DEMO_CONTEXT_MODEL",
    "DEMO_JUDGES",
    "DEMO_TARGETS",
    "NULL_WORLD",
    "WORLD",
    "demo_models",
    "register_demo_models",
    "served_models",
    "true_ranking",
]


WORLD: dict[str, float] = {"guideline_damping": 0.8, "family_misbeliefs": 0.5}
"""The demo world's parameters through which guidelines can matter: every judge's biases are
damped by what its beliefs settle after reading the guideline, and half of the misbelief draws
are shared within a family."""

NULL_WORLD: dict[str, float] = dict.fromkeys(WORLD, 0.0)
"""The null control: with these at 0 no guideline setting can change a judge's biases."""


def _sim(**fields: object) -> SimModelConfig:
    return SimModelConfig.model_validate({"provider": "sim", **WORLD, **fields})


DEMO_TARGETS: dict[str, SimModelConfig] = {
    "sim-aurora": _sim(skill=0.9, family="aurora"),
    "sim-borealis": _sim(skill=0.75, family="borealis", refusal_rate=0.03),
    "sim-cirrus": _sim(skill=0.6, family="cirrus"),
    "sim-drizzle": _sim(skill=0.45, family="drizzle", format_error_rate=0.05),
    "sim-ember": _sim(skill=0.3, family="ember", refusal_rate=0.05, format_error_rate=0.1),
}
"""Simulated targets, five families; the true ranking follows ``skill``."""

DEMO_JUDGES: dict[str, SimModelConfig] = {
    "sim-judge-falcon": _sim(skill=0.85, family="falcon", noise=0.15),
    "sim-judge-grove": _sim(
        skill=0.8, family="grove", noise=0.2, position_bias=0.1, format_error_rate=0.02
    ),
    "sim-judge-harbor": _sim(skill=0.75, family="harbor", noise=0.2, verbosity_bias=0.25),
    "sim-judge-drizzle": _sim(skill=0.7, family="drizzle", noise=0.2, self_bias=0.8),
}
"""Simulated judges of four families; ``sim-judge-drizzle`` strongly prefers the answers of its
own family, that of the mid/low-ranked ``sim-drizzle`` target, so its ranking departs most from
the panel's."""

DEMO_CONTEXT_MODEL: str = "sim-judge-falcon"
"""The simulated model that writes the demo's interpretive contexts."""


def demo_models() -> dict[str, SimModelConfig]:
    """Fresh copies of every demo target and judge, by name."""
    return {k: v.model_copy() for k, v in {**DEMO_TARGETS, **DEMO_JUDGES}.items()}


_REGISTERED: dict[str, SimModelConfig] = {}
"""Demo models a method's simulated part adds to the catalogue (the Judge audit's judges)."""


def register_demo_models(models: Mapping[str, SimModelConfig]) -> None:
    """Add a method's own demo models to the catalogue ``sim-serve`` serves (a method's
    simulated part calls it when imported; a name registered again is replaced)."""
    _REGISTERED.update(models)


def served_models() -> dict[str, SimModelConfig]:
    """Fresh copies of the whole demo catalogue: the demo targets and judges and every method's
    registered demo models (what ``sim-serve`` answers for)."""
    return {**demo_models(), **{k: v.model_copy() for k, v in _REGISTERED.items()}}


def true_ranking(models: Mapping[str, SimModelConfig], targets: Sequence[str]) -> list[str]:
    """The simulated targets best-first by latent skill (ties by name)."""
    missing = [t for t in targets if t not in models]
    if missing:
        raise ValueError(f"no simulated profile for target(s) {missing}")
    return sorted(targets, key=lambda t: (-models[t].skill, t))
