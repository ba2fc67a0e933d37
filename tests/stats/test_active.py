"""Active pair sampling: seeded, and spends battles where the order is uncertain."""

from __future__ import annotations

from collections import Counter

import numpy as np

from memearena.stats import PairCounts, next_pairs

MODELS = ["a", "b", "c", "d"]


def settled_except_c_and_d() -> PairCounts:
    """a ≫ b ≫ {c, d} established by many battles; c vs d close and barely measured."""
    wins = np.zeros((4, 4))
    wins[0, 1], wins[1, 0] = 180, 20
    wins[0, 2], wins[2, 0] = 195, 5
    wins[0, 3], wins[3, 0] = 195, 5
    wins[1, 2], wins[2, 1] = 170, 30
    wins[1, 3], wins[3, 1] = 170, 30
    wins[2, 3], wins[3, 2] = 2, 2
    return PairCounts.from_arrays(MODELS, wins)


def test_picks_the_uncertain_overlapping_pair() -> None:
    pairs = next_pairs(settled_except_c_and_d(), MODELS, 100, np.random.default_rng(0))
    tally = Counter(frozenset(p) for p in pairs)
    # c vs d overlap: their order is the open question, so they get the most battles; a vs b
    # is settled and never drawn.
    assert tally.most_common(1)[0][0] == frozenset("cd")
    assert tally[frozenset("cd")] >= 40
    assert tally[frozenset("ab")] == 0


def test_is_seeded() -> None:
    counts = settled_except_c_and_d()
    assert next_pairs(counts, MODELS, 20, 1) == next_pairs(counts, MODELS, 20, 1)
    assert next_pairs(counts, MODELS, 20, 1) != next_pairs(counts, MODELS, 20, 2)


def test_works_from_no_battles_and_returns_valid_pairs_in_both_orders() -> None:
    pairs = next_pairs([], MODELS, 60, np.random.default_rng(3))
    assert len(pairs) == 60
    assert all(a != b and {a, b} <= set(MODELS) for a, b in pairs)
    assert len({frozenset(p) for p in pairs}) == 6  # spreads over all pairs at the start
    assert any(p[0] > p[1] for p in pairs) and any(p[0] < p[1] for p in pairs)
