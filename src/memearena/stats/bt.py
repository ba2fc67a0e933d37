"""Bradley–Terry maximum likelihood with vectorised bootstrap confidence intervals.

All fits, the point estimate and every bootstrap round, go through one batched Newton solver
over a (rounds × models) array: each round's Hessian is a small models × models matrix, so a
thousand rounds cost about as much as a handful of numpy calls.

Scale: a rating difference of `scale` (400) means `base` (10) times the odds of winning.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from memearena.stats._scipy import connected_components, expit
from memearena.stats.battles import Battle
from memearena.stats.cluster import ClusteredCounts
from memearena.stats.counts import FloatArray, IntArray, PairCounts, as_counts
from memearena.stats.errors import DisconnectedComparisonError, StatsError, UnboundedRatingsError

TieModel = Literal["half", "davidson"]

FALLBACK_PRIOR = 1.0
"""Virtual ties per model used for a bootstrap resample whose MLE does not exist."""

_CHECKED_STEP = 0.1  # natural-log units; larger Newton steps get a likelihood check
_CHORD_STEPS = 30
_KAPPA_LIMIT = 30.0  # |log Davidson tie strength| when a round has no ties (or only ties)
_CHUNK_ELEMENTS = 4_000_000  # rounds per batch × models² (about 32 MB of float64)


@dataclass(frozen=True, eq=False)
class BTResult:
    """A Bradley–Terry fit on the Elo scale, with its bootstrap distribution if requested."""

    models: tuple[str, ...]
    ratings: FloatArray
    """Point estimates, in `models` order."""
    ci_low: FloatArray | None
    """Lower percentile bound of the bootstrap interval (None without bootstrap)."""
    ci_high: FloatArray | None
    """Upper percentile bound of the bootstrap interval (None without bootstrap)."""
    samples: FloatArray | None
    """Bootstrap ratings, shape (rounds, models), anchored like the point estimate."""
    anchor: str | None
    """The model pinned at `init`; None means the mean rating is pinned at `init`."""
    init: float
    prior: float
    """Virtual ties per model against an average opponent (0 = plain MLE)."""
    ties: TieModel
    tie_strength: float | None
    """Davidson's ν (tie propensity) when `ties="davidson"`."""
    regularised_rounds: int
    """Bootstrap rounds without a finite MLE, fitted with `FALLBACK_PRIOR` instead."""

    def rating(self, model: str) -> float:
        """The point rating of one model."""
        return float(self.ratings[self.models.index(model)])

    def as_dict(self) -> dict[str, float]:
        """Model → rating."""
        return {m: float(r) for m, r in zip(self.models, self.ratings, strict=True)}

    def ranking(self) -> list[str]:
        """Model names, best first."""
        return [self.models[k] for k in np.argsort(-self.ratings, kind="stable")]

    @property
    def note(self) -> str:
        """One line saying how the scale is anchored (and whether a prior was used)."""
        text = (
            f"BT anchored: {self.anchor} = {self.init:g}"
            if self.anchor
            else f"BT anchored: mean of all models = {self.init:g}"
        )
        if self.prior > 0:
            text += f"; weak prior of {self.prior:g} virtual tie(s) per model (not a plain MLE)"
        if self.regularised_rounds:
            text += (
                f"; {self.regularised_rounds} bootstrap round(s) had no finite MLE and were fitted"
                f" with {FALLBACK_PRIOR:g} virtual tie(s) per model"
            )
        return text


def _log_sigmoid(x: FloatArray) -> FloatArray:
    return np.minimum(x, 0.0) - np.log1p(np.exp(-np.abs(x)))


class _Problem:
    """Batched log-likelihood, gradient and Hessian for all rounds at once."""

    def __init__(
        self,
        i: IntArray,
        j: IntArray,
        w_ij: FloatArray,
        w_ji: FloatArray,
        t: FloatArray,
        m: int,
        prior: FloatArray,
        ties: TieModel,
    ) -> None:
        self.i, self.j, self.m, self.prior, self.ties = i, j, m, prior, ties
        p = len(i)
        self.inc = np.zeros((p, m))
        self.inc[np.arange(p), i] = 1.0
        self.inc[np.arange(p), j] = -1.0
        self.abs_inc = np.abs(self.inc)
        self.gauge = (prior == 0).astype(np.float64)
        if ties == "half":
            self.a, self.b, self.t = w_ij + 0.5 * t, w_ji + 0.5 * t, np.zeros_like(t)
        else:
            self.a, self.b, self.t = w_ij, w_ji, t
        self.n = self.a + self.b + self.t
        self.dim = m if ties == "half" else m + 1
        # Davidson's ν has no finite MLE without ties (or without decisive results): pin it.
        self.kappa_fixed = np.zeros(len(prior), dtype=bool)
        self.kappa_value = np.zeros(len(prior))
        if ties == "davidson":
            no_ties = self.t.sum(axis=1) == 0
            no_wins = (self.a + self.b).sum(axis=1) == 0
            self.kappa_fixed = no_ties | no_wins
            self.kappa_value = np.where(no_ties, -_KAPPA_LIMIT, _KAPPA_LIMIT)

    def start(self, x0: FloatArray | None = None) -> FloatArray:
        x = np.zeros((len(self.prior), self.dim))
        if x0 is not None:
            x[:] = x0
        if self.ties == "davidson":
            x[:, -1] = np.where(self.kappa_fixed, self.kappa_value, x[:, -1])
        return x

    def loglik(self, x: FloatArray, rows: IntArray) -> FloatArray:
        theta = x[:, : self.m]
        d = theta[:, self.i] - theta[:, self.j]
        a, b, n = self.a[rows], self.b[rows], self.n[rows]
        if self.ties == "half":
            ll = (a * _log_sigmoid(d) + b * _log_sigmoid(-d)).sum(axis=1)
        else:
            kappa = x[:, -1:]
            log_d = np.logaddexp(np.logaddexp(d / 2, -d / 2), kappa)
            ll = ((a - b) * d / 2 + self.t[rows] * kappa - n * log_d).sum(axis=1)
        pr = self.prior[rows]
        return ll + pr * 0.5 * (_log_sigmoid(theta) + _log_sigmoid(-theta)).sum(axis=1)

    def subset(self, rows: IntArray) -> _Problem:
        """The same problem restricted to some rounds."""
        sub = _Problem.__new__(_Problem)
        sub.__dict__.update(self.__dict__)
        for name in ("a", "b", "t", "n", "prior", "gauge", "kappa_fixed", "kappa_value"):
            setattr(sub, name, getattr(self, name)[rows])
        return sub

    def gradient(self, x: FloatArray) -> FloatArray:
        """Gradient of the log-likelihood (ties="half" only): the cheap part of a step."""
        theta = x[:, : self.m]
        s = expit(theta[:, self.i] - theta[:, self.j])
        grad: FloatArray = (self.a - self.n * s) @ self.inc
        return grad + self.prior[:, None] * (0.5 - expit(theta))

    def newton_step(self, x: FloatArray) -> FloatArray:
        grad, hess = self.derivatives(x)
        return np.asarray(np.linalg.solve(hess, grad[..., None])[..., 0], dtype=np.float64)

    def derivatives(self, x: FloatArray) -> tuple[FloatArray, FloatArray]:
        """Gradient and negative Hessian (gauge-fixed, positive definite) per round."""
        theta = x[:, : self.m]
        d = theta[:, self.i] - theta[:, self.j]
        rounds = len(x)
        hess = np.zeros((rounds, self.dim, self.dim))  # negative Hessian
        grad = np.zeros((rounds, self.dim))
        if self.ties == "half":
            s = expit(d)
            g_d = self.a - self.n * s
            h_d = self.n * s * (1.0 - s)
        else:
            kappa = x[:, -1:]
            log_d = np.logaddexp(np.logaddexp(d / 2, -d / 2), kappa)
            e_p, e_m, e_t = np.exp(d / 2 - log_d), np.exp(-d / 2 - log_d), np.exp(kappa - log_d)
            inv_d2 = np.exp(-2 * log_d)
            g_d = (self.a - self.b) / 2 - self.n * (e_p - e_m) / 2
            h_d = self.n * (inv_d2 + e_t * (e_p + e_m) / 4)
            free = ~self.kappa_fixed
            grad[:, -1] = np.where(free, (self.t - self.n * e_t).sum(axis=1), 0.0)
            hess[:, -1, -1] = np.where(free, (self.n * e_t * (e_p + e_m)).sum(axis=1), 1.0)
            cross = np.where(free[:, None], -(self.n * e_t * (e_p - e_m) / 2) @ self.inc, 0.0)
            hess[:, : self.m, -1] = cross
            hess[:, -1, : self.m] = cross
        grad[:, : self.m] = g_d @ self.inc
        hess[:, self.i, self.j] = -h_d
        hess[:, self.j, self.i] = -h_d
        diag = h_d @ self.abs_inc
        sp = expit(theta)
        grad[:, : self.m] += self.prior[:, None] * (0.5 - sp)
        diag += self.prior[:, None] * sp * (1.0 - sp)
        idx = np.arange(self.m)
        hess[:, idx, idx] = diag
        # Ratings are only defined up to a shift: adding c·11ᵀ to the θ block makes the system
        # solvable and, as the gradient sums to zero, yields the mean-zero Newton step.
        c = self.gauge * np.maximum(diag.mean(axis=1), 1e-12) / self.m
        hess[:, : self.m, : self.m] += c[:, None, None]
        return grad, hess


def _chord(problem: _Problem, x0: FloatArray, tol: float) -> tuple[FloatArray, np.ndarray]:
    """Warm-started bootstrap rounds: one Newton step each, then chord steps that reuse one
    averaged Hessian (a gradient and a small matrix product per step, no solves).

    Returns the iterates and which rounds converged; the others finish with full Newton.
    """
    x = problem.start(x0)
    grad, hess = problem.derivatives(x)
    step = np.linalg.solve(hess, grad[..., None])[..., 0]
    inverse = np.linalg.inv(hess.mean(axis=0))
    # Only plain-MLE rounds close to the start: anything else goes to damped Newton.
    ok = (problem.prior == 0) & (np.abs(step).max(axis=1) < _CHECKED_STEP)
    done = np.zeros(len(x), dtype=bool)
    previous = np.abs(step).max(axis=1)
    for _ in range(_CHORD_STEPS):
        x[ok] += step[ok]
        done |= ok & (previous < tol)
        ok &= ~done
        if not ok.any():
            break
        step = problem.gradient(x) @ inverse.T
        size = np.abs(step).max(axis=1)
        ok &= size < 0.5 * previous  # must contract fast, else leave it to Newton
        previous = size
    return x, done


def _newton(
    problem: _Problem, x0: FloatArray | None = None, tol: float = 1e-7, max_iter: int = 100
) -> FloatArray:
    """Damped Newton ascent on every round at once (the log-likelihood is concave)."""
    x = problem.start(x0)
    ll = np.zeros(len(x))
    fresh = np.zeros(len(x), dtype=bool)  # whether ll[r] is the likelihood at the current x[r]
    for _ in range(max_iter):
        step = problem.newton_step(x)
        if problem.ties == "davidson":
            step[:, -1] = np.clip(step[:, -1], -2.0, 2.0)
        size = np.ones(len(x))
        # Near the optimum a full Newton step on a concave likelihood cannot overshoot: only
        # rounds still taking large steps are checked, and backtracked if their likelihood drops.
        check = np.flatnonzero(np.abs(step).max(axis=1) > _CHECKED_STEP)
        if len(check):
            stale = check[~fresh[check]]
            ll[stale] = problem.loglik(x[stale], stale)
            trial = problem.loglik(x[check] + step[check], check)
            for _ in range(40):
                worse = trial < ll[check] - 1e-12 * (1.0 + np.abs(ll[check]))
                if not worse.any():
                    break
                bad = check[worse]
                size[bad] *= 0.5
                trial[worse] = problem.loglik(x[bad] + size[bad, None] * step[bad], bad)
            ll[check] = trial
        fresh[:] = False
        fresh[check] = True
        x = x + size[:, None] * step
        # Newton converges quadratically: after a step below tol the error is about tol².
        if np.max(np.abs(size[:, None] * step)) < tol:
            break
    return np.asarray(x, dtype=np.float64)


def _mle_exists(tables: FloatArray, i: IntArray, j: IntArray, m: int) -> np.ndarray:
    """Per round: is the graph "i scored on j" strongly connected? Exactly then the
    Bradley–Terry MLE exists (Zermelo, Ford). `tables` is (3, rounds, pairs): i won, j won, tie."""
    forward = (tables[0] + tables[2]) > 0
    backward = (tables[1] + tables[2]) > 0
    rounds = tables.shape[1]
    out = np.zeros(rounds, dtype=bool)
    chunk = max(1, _CHUNK_ELEMENTS // (m * m))
    if m > 64:  # boolean matrix powers get costly: use a graph search per round
        for r in range(rounds):
            rows = np.concatenate([i[forward[r]], j[backward[r]]])
            cols = np.concatenate([j[forward[r]], i[backward[r]]])
            graph = np.zeros((m, m), dtype=bool)
            graph[rows, cols] = True
            out[r] = connected_components(graph, connection="strong")[0] == 1
        return out
    for start in range(0, rounds, chunk):
        sl = slice(start, start + chunk)
        reach = np.zeros((len(out[sl]), m, m), dtype=np.float32)
        reach[:, i, j] = forward[sl]
        reach[:, j, i] = backward[sl]
        reach[:, np.arange(m), np.arange(m)] = 1.0
        for _ in range(max(1, math.ceil(math.log2(m)))):
            reach = ((reach @ reach) > 0).astype(np.float32)
        out[sl] = reach.all(axis=(1, 2))
    return out


def check_identifiable(counts: PairCounts) -> None:
    """Raise if the plain MLE does not exist: a disconnected graph, or unbounded ratings."""
    components = counts.components()
    if len(components) > 1:
        listing = "; ".join("{" + ", ".join(c) + "}" for c in components)
        raise DisconnectedComparisonError(
            f"the comparison graph is not connected, so ratings across its {len(components)} "
            f"components are not comparable: {listing}; add battles between them, or fit with "
            "a weak prior (prior > 0)",
            components,
        )
    n, labels = connected_components(counts.scores > 0, connection="strong")
    if n == 1:
        return
    # A strongly connected component nobody outside it ever scored against never lost.
    scored = counts.scores > 0
    for c in range(n):
        inside = labels == c
        if not scored[np.ix_(~inside, inside)].any():
            group = [counts.models[k] for k in np.flatnonzero(inside)]
            rest = [counts.models[k] for k in np.flatnonzero(~inside)]
            raise UnboundedRatingsError(
                f"the Bradley–Terry MLE does not exist: {{{', '.join(group)}}} never lost or "
                f"tied against {{{', '.join(rest)}}}, so their ratings are unbounded; add "
                "battles, or fit with a weak prior (prior > 0)",
                group,
            )


def resample(counts: PairCounts, rounds: int, seed: int | np.random.Generator = 0) -> FloatArray:
    """Multinomial bootstrap draws of the outcome counts: shape (rounds, len(counts.cells()[0]))."""
    rng = np.random.default_rng(seed)
    *_, cell_counts = counts.cells()
    total = round(float(cell_counts.sum()))
    return rng.multinomial(total, cell_counts / cell_counts.sum(), size=rounds).astype(np.float64)


def _pair_tables(
    counts: PairCounts, cell_counts: FloatArray
) -> tuple[IntArray, IntArray, FloatArray]:
    """Pairs (i < j) met in `counts`, and per-round tables (3, rounds, pairs) of cell counts."""
    i_c, j_c, outcome, _ = counts.cells()
    cell_counts = np.atleast_2d(cell_counts)
    m = counts.n_models
    pair_keys, pair_of_cell = np.unique(i_c * m + j_c, return_inverse=True)
    tables = np.zeros((3, len(cell_counts), len(pair_keys)))
    tables[outcome, :, pair_of_cell] = cell_counts.T
    return pair_keys // m, pair_keys % m, tables


def fit_cells(
    counts: PairCounts,
    cell_counts: FloatArray,
    *,
    prior: float | FloatArray = 0.0,
    ties: TieModel = "half",
    start: FloatArray | None = None,
    tol: float = 1e-7,
) -> tuple[FloatArray, FloatArray | None]:
    """Fit many count vectors over `counts.cells()` at once; natural-log ratings (rounds × m).

    `start` (θ, then log ν for Davidson) warm-starts every round, e.g. at the point estimate.
    Returns (θ, Davidson log ν or None). No identifiability check: see `bradley_terry`.
    """
    i, j, tables = _pair_tables(counts, cell_counts)
    m = counts.n_models
    rounds = tables.shape[1]
    priors = np.broadcast_to(np.asarray(prior, dtype=np.float64), (rounds,))
    dim = m + (ties == "davidson")
    chunk = max(1, _CHUNK_ELEMENTS // (dim * dim))  # bounds the (rounds × dim × dim) Hessians
    parts = []
    for first in range(0, rounds, chunk):
        sl = slice(first, first + chunk)
        t = tables[:, sl]
        problem = _Problem(i, j, t[0], t[1], t[2], m, priors[sl].copy(), ties)
        if start is None or ties != "half":
            parts.append(_newton(problem, start, tol=tol))
            continue
        x, done = _chord(problem, start, tol)
        rest = np.flatnonzero(~done)
        if len(rest):
            x[rest] = _newton(problem.subset(rest), x[rest], tol=tol)
        parts.append(x)
    x = np.concatenate(parts)
    return x[:, :m], (x[:, -1] if ties == "davidson" else None)


def fit_draws(
    counts: PairCounts,
    draws: FloatArray,
    *,
    prior: float = 0.0,
    ties: TieModel = "half",
    start: FloatArray | None = None,
) -> tuple[FloatArray, int]:
    """Fit resampled cell counts (rounds × cells of `counts.cells()`), however they were drawn;
    natural-log ratings (rounds × m) and how many rounds had no finite MLE (those are fitted
    with `FALLBACK_PRIOR` virtual ties per model instead)."""
    rounds = len(draws)
    priors = np.full(rounds, prior)
    regularised = 0
    if prior == 0:
        i, j, tables = _pair_tables(counts, draws)
        ok = _mle_exists(tables, i, j, counts.n_models)
        priors[~ok] = FALLBACK_PRIOR
        regularised = int((~ok).sum())
    theta, _ = fit_cells(counts, draws, prior=priors, ties=ties, start=start)
    return theta, regularised


def bradley_terry(
    data: PairCounts | ClusteredCounts | Iterable[Battle],
    *,
    models: Sequence[str] | None = None,
    anchor: str | None = None,
    bootstrap: int = 0,
    seed: int = 0,
    prior: float = 0.0,
    ties: TieModel = "half",
    ci: float = 0.95,
    scale: float = 400.0,
    base: float = 10.0,
    init: float = 1000.0,
) -> BTResult:
    """Bradley–Terry MLE on aggregated counts, on the Elo scale, with bootstrap CIs.

    Ties count half a win each way (`ties="half"`), or are modelled by Davidson's tie
    parameter (`ties="davidson"`). Ratings are mean-anchored at `init`, or `anchor` gets
    exactly `init`. `bootstrap` rounds resample the outcome counts multinomially (seeded) and
    give `ci` percentile intervals; given `ClusteredCounts`, they resample whole clusters (the
    unit that was sampled, e.g. memes) instead of single battles. A disconnected comparison
    graph or unbounded MLE raises (`DisconnectedComparisonError`, `UnboundedRatingsError`)
    unless `prior` > 0: that many virtual ties per model against an average opponent,
    reported in `BTResult.note`.
    """
    clustered = data if isinstance(data, ClusteredCounts) else None
    if clustered is not None and models is not None and tuple(models) != clustered.models:
        raise StatsError("clustered counts fix their own model order")
    counts = clustered.total if clustered is not None else as_counts(data, models)  # type: ignore[arg-type]
    if counts.total <= 0:
        raise StatsError("no battles to rate")
    if anchor is not None and anchor not in counts.models:
        raise StatsError(f"anchor model {anchor!r} is not among the rated models")
    if ties not in ("half", "davidson"):
        raise StatsError(f"ties must be 'half' or 'davidson', got {ties!r}")
    if prior < 0:
        raise StatsError("prior must be >= 0")
    if prior == 0:
        check_identifiable(counts)
    *_, cell_counts = counts.cells()
    theta, kappa = fit_cells(counts, cell_counts[None, :], prior=prior, ties=ties)
    factor = scale / math.log(base)
    anchor_idx = None if anchor is None else counts.models.index(anchor)

    def to_elo(th: FloatArray) -> FloatArray:
        ref = th.mean(axis=1) if anchor_idx is None else th[:, anchor_idx]
        return init + factor * (th - ref[:, None])

    ratings = to_elo(theta)[0]
    tie_strength = float(np.exp(kappa[0])) if kappa is not None else None
    samples = ci_low = ci_high = None
    regularised = 0
    if bootstrap > 0:
        draws = (
            clustered.resample(bootstrap, seed)
            if clustered is not None
            else resample(counts, bootstrap, seed)
        )
        # Resampled fits lie near the point estimate: starting there saves Newton steps.
        start = theta[0] if kappa is None else np.append(theta[0], kappa[0])
        boot_theta, regularised = fit_draws(counts, draws, prior=prior, ties=ties, start=start)
        samples = to_elo(boot_theta)
        tail = 100 * (1 - ci) / 2
        ci_low, ci_high = np.percentile(samples, [tail, 100 - tail], axis=0)
    return BTResult(
        models=counts.models,
        ratings=ratings,
        ci_low=ci_low,
        ci_high=ci_high,
        samples=samples,
        anchor=anchor,
        init=init,
        prior=prior,
        ties=ties,
        tie_strength=tie_strength,
        regularised_rounds=regularised,
    )


def bt_probability(
    rating_a: float, rating_b: float, scale: float = 400.0, base: float = 10.0
) -> float:
    """P(a beats b) under Bradley–Terry for two ratings on the Elo scale (ties as half)."""
    return 1.0 / (1.0 + base ** ((rating_b - rating_a) / scale))
