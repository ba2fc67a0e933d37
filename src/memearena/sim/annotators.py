"""Simulated annotators (a SIMULATOR: never labels of real people).

Each annotator has a known noise rate ε: on a unit whose true answer is ``t`` (one of k
choices) it answers ``t`` with probability 1 − ε and each other choice with probability
ε / (k − 1), independently of everyone else. From the noise rates and the truths the figures
the label statistics estimate are known exactly (their large-sample values):

- ``planted_alpha``: Krippendorff's α among the annotators (the α of the expected
  coincidence matrix);
- ``planted_kappa``: Cohen's κ of a fixed rater (a simulated judge's verdicts) against the
  annotators' plurality (the κ of the expected contingency table, units without a unique
  plurality left out, as the estimator leaves them out).

The truths themselves are the caller's (the demo: the panel's plurality on each battle
criterion, a quality that grows with the fusion round for guidelines, seeded draws for
rewrites and perturbations): what is planted is the annotators' noise, and through it their
agreement with each other and with every judge.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "DEMO_ANNOTATORS",
    "SimAnnotator",
    "demo_annotators",
    "planted_alpha",
    "planted_kappa",
]


@dataclass(frozen=True)
class SimAnnotator:
    """A simulated annotator: its name and its noise rate."""

    name: str
    noise: float
    """Probability of answering anything but the truth (spread evenly over the others)."""

    def answer(self, truth: int, k: int, rng: random.Random) -> int:
        """The annotator's answer (a choice index) on a unit whose true answer is ``truth``."""
        if k < 2 or rng.random() >= self.noise:
            return truth
        other = rng.randrange(k - 1)
        return other if other < truth else other + 1

    def probabilities(self, truth: int, k: int) -> np.ndarray:
        p = np.full(k, self.noise / (k - 1)) if k > 1 else np.ones(1)
        p[truth] = 1.0 - self.noise if k > 1 else 1.0
        return p


DEMO_ANNOTATORS: tuple[SimAnnotator, ...] = (
    SimAnnotator("sim-annotator-1", 0.10),
    SimAnnotator("sim-annotator-2", 0.20),
    SimAnnotator("sim-annotator-3", 0.30),
    SimAnnotator("sim-annotator-4", 0.15),
    SimAnnotator("sim-annotator-5", 0.25),
)
"""The demo's panel of simulated annotators (``demo_annotators(n)`` takes the first n)."""


def demo_annotators(n: int) -> tuple[SimAnnotator, ...]:
    """The first ``n`` demo annotators (more than five repeat the noise rates under new
    names)."""
    base = DEMO_ANNOTATORS
    return tuple(
        SimAnnotator(f"sim-annotator-{i + 1}", base[i % len(base)].noise) for i in range(n)
    )


def planted_alpha(truths: Sequence[int], annotators: Sequence[SimAnnotator], k: int) -> float:
    """α among ``annotators`` when every one labels every unit (see the module)."""
    m = len(annotators)
    if m < 2 or not truths:
        return float("nan")
    o = np.zeros((k, k))
    for t in truths:
        p = [a.probabilities(t, k) for a in annotators]
        for i, j in itertools.permutations(range(m), 2):
            o += np.outer(p[i], p[j]) / (m - 1)
    n_c = o.sum(axis=1)
    n = n_c.sum()
    observed = o.sum() - np.trace(o)
    expected = (np.outer(n_c, n_c).sum() - (n_c**2).sum()) / (n - 1)
    return float(1.0 - observed / expected)


def _plurality_probabilities(truth: int, annotators: Sequence[SimAnnotator], k: int) -> np.ndarray:
    """P(the annotators' plurality is c) for each c (the rest: no unique plurality)."""
    p = [a.probabilities(truth, k) for a in annotators]
    out = np.zeros(k)
    for answers in itertools.product(range(k), repeat=len(annotators)):
        prob = float(np.prod([p[i][c] for i, c in enumerate(answers)]))
        counts = np.bincount(answers, minlength=k)
        top = counts.max()
        if (counts == top).sum() == 1:
            out[int(counts.argmax())] += prob
    return out


def planted_kappa(
    rater: Sequence[int], truths: Sequence[int], annotators: Sequence[SimAnnotator], k: int
) -> float:
    """κ of ``rater`` (a fixed answer per unit) against the annotators' plurality."""
    table = np.zeros((k, k))
    cache: dict[int, np.ndarray] = {}
    for r, t in zip(rater, truths, strict=True):
        if t not in cache:
            cache[t] = _plurality_probabilities(t, annotators, k)
        table[r] += cache[t]
    n = table.sum()
    if not n:
        return float("nan")
    p_o = np.trace(table) / n
    p_e = float((table.sum(axis=1) * table.sum(axis=0)).sum() / n**2)
    return float((p_o - p_e) / (1 - p_e)) if p_e < 1 else float("nan")
