"""Seeded schedules of the Arena: who refines the guideline when, with whose analysis."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations


@dataclass(frozen=True)
class FusionPlan:
    """Who drafts a meme's guideline and which judge refines it in each round."""

    drafter: str
    refiners: tuple[str, ...]


def fusion_plan(judges: Sequence[str], rounds: int, rng: random.Random) -> FusionPlan:
    """Draft by a random judge, then ``rounds`` refinements by random judges, each judge at
    least once (requires ``rounds >= len(judges)``)."""
    if rounds < len(judges):
        raise ValueError(f"fusion rounds ({rounds}) must be >= number of judges ({len(judges)})")
    drafter = rng.choice(list(judges))
    refiners = list(judges) + [rng.choice(list(judges)) for _ in range(rounds - len(judges))]
    rng.shuffle(refiners)
    return FusionPlan(drafter, tuple(refiners))


def owns(judge: str, target: str, families: Mapping[str, str | None]) -> bool:
    """Whether ``target``'s output counts as the judge's own model's (same name or family)."""
    if judge == target:
        return True
    fj, ft = families.get(judge), families.get(target)
    return fj is not None and fj == ft


def pick_analysis(
    judge: str,
    candidates: Sequence[tuple[str, str]],
    families: Mapping[str, str | None],
    rng: random.Random,
) -> tuple[str, str] | None:
    """One random ``(context level, target)`` analysis not written by the judge's own model.

    Fusion never shows a judge its own model's analysis (self-preference)."""
    eligible = [c for c in candidates if not owns(judge, c[1], families)]
    return rng.choice(eligible) if eligible else None


def target_pairs(targets: Sequence[str]) -> list[tuple[str, str]]:
    """Every unordered pair of targets, in config order (round-robin)."""
    return list(combinations(targets, 2))
