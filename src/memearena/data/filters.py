"""Dataset filters: harmful-only, seeded stratified sampling, limit — in that order."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Protocol, TypeVar


class _Labelled(Protocol):
    @property
    def harmful(self) -> bool | None: ...


T = TypeVar("T", bound=_Labelled)

_STRATA: tuple[bool | None, ...] = (True, False, None)


def stratified_sample(items: Sequence[T], n: int, seed: int) -> list[T]:
    """Draw ``n`` items stratified by the harmful label (harmful / not / unlabelled).

    Allocation is proportional to stratum size, rounded by largest remainder (ties: harmful, then
    not harmful, then unlabelled), so 30/70 in gives 30/70 out. Deterministic for a given
    ``seed`` and input order; the sample keeps the input order. ``n >= len(items)`` returns all.
    """
    if n <= 0:
        return []
    if n >= len(items):
        return list(items)
    groups: dict[bool | None, list[int]] = {s: [] for s in _STRATA}
    for i, item in enumerate(items):
        groups[item.harmful].append(i)
    total = len(items)
    exact = {s: n * len(groups[s]) / total for s in _STRATA}
    quota = {s: int(exact[s]) for s in _STRATA}
    short = n - sum(quota.values())
    by_remainder = sorted(_STRATA, key=lambda s: (-(exact[s] - quota[s]), _STRATA.index(s)))
    for s in by_remainder[:short]:
        quota[s] += 1
    rng = random.Random(seed)
    chosen: list[int] = []
    for s in _STRATA:
        chosen.extend(rng.sample(groups[s], quota[s]))
    return [items[i] for i in sorted(chosen)]


def apply_filters(
    items: Sequence[T],
    *,
    harmful_only: bool = False,
    sample: int | None = None,
    sample_seed: int = 0,
    limit: int | None = None,
) -> list[T]:
    """Apply ``harmful_only``, then a stratified ``sample`` (seeded), then ``limit`` (first N)."""
    out = [m for m in items if m.harmful is True] if harmful_only else list(items)
    if sample is not None:
        out = stratified_sample(out, sample, sample_seed)
    if limit is not None:
        out = out[:limit]
    return out
