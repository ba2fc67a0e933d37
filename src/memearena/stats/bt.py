"""Bradley–Terry maximum likelihood with vectorised bootstrap confidence intervals.

All fits, the point estimate and every bootstrap round, go through one batched solver over a
(rounds × models) array. The work follows the pairs that met, not models²: pair terms reach the
models through a sparse incidence matrix, bootstrap rounds start at the fit of their average
counts and take chord steps (a gradient and one shared models × models inverse per step), and
only rounds that do not contract fast (or need their own prior) get full Newton steps with a
per-round Hessian. The small dense solves run on one BLAS thread: a BLAS thread pool fighting
over a few cores makes thousands of small solves several times slower.

Scale: a rating difference of `scale` (400) means `base` (10) times the odds of winning.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from memearena.stats._scipy import connected_components, expit
from memearena.stats.battles import Battle
from memearena.stats.cluster import ClusteredCounts
from memearena.stats.counts import FloatArray, IntArray, PairCounts, as_counts
from memearena.stats.errors import DisconnectedComparisonError, StatsError, UnboundedRatingsError

TieModel = Literal["half", "davidson"]

FALLBACK_PRIOR = 1.0
"""Virtual ties per model used where no MLE exists (a bootstrap resample, or `rank`'s groups)."""

MAX_BOOTSTRAP = 100_000
"""Most bootstrap rounds one fit may ask for (as `config.MAX_BOOTSTRAP`): rounds are drawn and
fitted in batches, so memory stays bounded, but time grows linearly with rounds."""

_CHECKED_STEP = 0.1  # natural-log units; larger Newton steps get a likelihood check
_CHORD_STEPS = 40
_CHORD_EXACT = 0.01  # chord rounds stop when their remaining error is below this × tol
_KAPPA_LIMIT = 30.0  # |log Davidson tie strength| when a round has no ties (or only ties)
_CHUNK_ELEMENTS = 4_000_000  # rounds per batch × max(pairs, models²): about 32 MB of float64
_BLAS_THREADS: int | None = 1  # threads for the batched dense solves (None: leave as found)
_CHORD_THREADS = 2  # threads stepping one batch of chord rounds (1: no threads)
_CHORD_SPLIT_ROUNDS = 128  # fewest rounds per thread (small products take other BLAS paths)


@contextmanager
def _blas_threads() -> Iterator[None]:
    """Pin BLAS to `_BLAS_THREADS` threads for the duration (threadpoolctl), if set."""
    if _BLAS_THREADS is None:
        yield
        return
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=_BLAS_THREADS, user_api="blas"):
        yield


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
    """Batched log-likelihood, gradient and Hessian for all rounds at once.

    Per-round arrays are (pairs × rounds), one column per round; pair terms reach the models
    through a sparse incidence matrix, so a gradient costs O(pairs × rounds), whatever the
    number of models, and no large array is ever copied to change its memory order.
    """

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
        from scipy.sparse import csr_matrix

        self.i, self.j, self.m, self.prior, self.ties = i, j, m, prior, ties
        p = len(i)
        pairs = np.arange(p)
        # inc[p, k] = +1 if k = i_p, -1 if k = j_p: inc @ θ gives θ_i − θ_j per pair, and
        # inc.T @ values sums each model's pair terms.
        self.inc = csr_matrix(
            (np.r_[np.ones(p), -np.ones(p)], (np.r_[pairs, pairs], np.r_[i, j])), shape=(p, m)
        )
        self.inc_t = self.inc.T.tocsr()
        self.abs_inc_t = abs(self.inc_t)
        self.gauge = (prior == 0).astype(np.float64)
        if ties == "half":
            half = 0.5 * t
            # No tie term: `t` has no rounds' columns, and n = a + b (adding zero ties would
            # change no bit: a + b >= 0).
            self.a, self.b, self.t = w_ij + half, w_ji + half, t[:, :0]
            self.n = self.a + self.b
        else:
            self.a, self.b, self.t = w_ij, w_ji, t
            self.n = self.a + self.b + self.t
        self.dim = m if ties == "half" else m + 1
        # Davidson's ν has no finite MLE without ties (or without decisive results): pin it.
        self.kappa_fixed = np.zeros(len(prior), dtype=bool)
        self.kappa_value = np.zeros(len(prior))
        if ties == "davidson":
            no_ties = self.t.sum(axis=0) == 0
            no_wins = (self.a + self.b).sum(axis=0) == 0
            self.kappa_fixed = no_ties | no_wins
            self.kappa_value = np.where(no_ties, -_KAPPA_LIMIT, _KAPPA_LIMIT)

    def scatter(self, values: FloatArray, signed: bool = True) -> FloatArray:
        """(pairs × rounds) pair terms summed onto models: (rounds × m)."""
        matrix = self.inc_t if signed else self.abs_inc_t
        return np.asarray(matrix @ values, dtype=np.float64).T

    def differences(self, x: FloatArray) -> FloatArray:
        """θ_i − θ_j for every pair (rows) and round (columns)."""
        return np.asarray(self.inc @ np.ascontiguousarray(x[:, : self.m].T), dtype=np.float64)

    def start(self, x0: FloatArray | None = None) -> FloatArray:
        x = np.zeros((len(self.prior), self.dim))
        if x0 is not None:
            x[:] = x0
        if self.ties == "davidson":
            x[:, -1] = np.where(self.kappa_fixed, self.kappa_value, x[:, -1])
        return x

    def loglik(self, x: FloatArray, rows: IntArray) -> FloatArray:
        theta = x[:, : self.m]
        d = self.differences(x)
        a, b, n = self.a[:, rows], self.b[:, rows], self.n[:, rows]
        if self.ties == "half":
            ll = (a * _log_sigmoid(d) + b * _log_sigmoid(-d)).sum(axis=0)
        else:
            kappa = x[:, -1][None, :]
            log_d = np.logaddexp(np.logaddexp(d / 2, -d / 2), kappa)
            ll = ((a - b) * d / 2 + self.t[:, rows] * kappa - n * log_d).sum(axis=0)
        pr = self.prior[rows]
        return np.asarray(
            ll + pr * 0.5 * (_log_sigmoid(theta) + _log_sigmoid(-theta)).sum(axis=1),
            dtype=np.float64,
        )

    def _columns(self) -> tuple[str, ...]:
        return ("a", "b", "n") if self.ties == "half" else ("a", "b", "t", "n")

    def subset(self, rows: IntArray | slice) -> _Problem:
        """The same problem restricted to some rounds (a slice of them: views, no copies)."""
        sub = _Problem.__new__(_Problem)
        sub.__dict__.update(self.__dict__)
        for name in self._columns():
            setattr(sub, name, getattr(self, name)[:, rows])
        for name in ("prior", "gauge", "kappa_fixed", "kappa_value"):
            setattr(sub, name, getattr(self, name)[rows])
        return sub

    def mean(self) -> _Problem:
        """One round holding the average counts of all rounds (their common centre)."""
        sub = self.subset(slice(0, 1))
        for name in self._columns():
            setattr(sub, name, getattr(self, name).mean(axis=1, keepdims=True))
        return sub

    def gradient(self, x: FloatArray) -> tuple[FloatArray, FloatArray]:
        """Gradient of the log-likelihood and the Hessian's diagonal (ties="half" only): the
        cheap part of a step, O(pairs × rounds)."""
        theta = x[:, : self.m]
        s = self.differences(x)
        expit(s, out=s)
        # The same operations as `a - n·s`, then `s·(1 − s)·n`, into one scratch array: large
        # temporaries cost page faults on every step.
        scratch = np.multiply(self.n, s)
        grad = self.scatter(np.subtract(self.a, scratch, out=scratch))
        s *= np.subtract(1.0, s, out=scratch)
        s *= self.n
        diag = self.scatter(s, signed=False)
        sp = expit(theta)
        grad = grad + self.prior[:, None] * (0.5 - sp)
        diag = diag + self.prior[:, None] * sp * (1.0 - sp)
        return grad, diag

    def newton_step(self, x: FloatArray) -> FloatArray:
        grad, hess = self.derivatives(x)
        return np.asarray(np.linalg.solve(hess, grad[..., None])[..., 0], dtype=np.float64)

    def derivatives(self, x: FloatArray) -> tuple[FloatArray, FloatArray]:
        """Gradient and negative Hessian (gauge-fixed, positive definite) per round."""
        theta = x[:, : self.m]
        d = self.differences(x)
        rounds = len(x)
        hess = np.zeros((rounds, self.dim, self.dim))  # negative Hessian
        grad = np.zeros((rounds, self.dim))
        if self.ties == "half":
            s = expit(d)
            g_d = self.a - self.n * s
            h_d = self.n * s * (1.0 - s)
        else:
            kappa = x[:, -1][None, :]
            log_d = np.logaddexp(np.logaddexp(d / 2, -d / 2), kappa)
            e_p, e_m, e_t = np.exp(d / 2 - log_d), np.exp(-d / 2 - log_d), np.exp(kappa - log_d)
            inv_d2 = np.exp(-2 * log_d)
            g_d = (self.a - self.b) / 2 - self.n * (e_p - e_m) / 2
            h_d = self.n * (inv_d2 + e_t * (e_p + e_m) / 4)
            free = ~self.kappa_fixed
            grad[:, -1] = np.where(free, (self.t - self.n * e_t).sum(axis=0), 0.0)
            hess[:, -1, -1] = np.where(free, (self.n * e_t * (e_p + e_m)).sum(axis=0), 1.0)
            cross = np.where(free[:, None], -self.scatter(self.n * e_t * (e_p - e_m) / 2), 0.0)
            hess[:, : self.m, -1] = cross
            hess[:, -1, : self.m] = cross
        grad[:, : self.m] = self.scatter(g_d)
        hess[:, self.i, self.j] = -h_d.T
        hess[:, self.j, self.i] = -h_d.T
        diag = self.scatter(h_d, signed=False)
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


def _chord(
    problem: _Problem, x0: FloatArray, tol: float
) -> tuple[FloatArray, np.ndarray[Any, np.dtype[np.bool_]]]:
    """Rounds sharing one prior, from the fit of their average counts: preconditioned chord
    steps that reuse that fit's inverse Hessian H⁻¹, rescaled per round and step by the
    round's own Hessian diagonal D (step = S·H⁻¹·S·g with S = √(diag H / D)). A step costs a
    gradient and a small matrix product, no solve; the rescaling absorbs most of the
    round-to-round change of the Hessian, so steps contract ~50-fold rather than ~8-fold.

    Returns the iterates and which rounds converged; the others finish with full Newton. Each
    round's steps read only that round and the shared centre, so a large batch is stepped in
    two halves on two threads (numpy releases the GIL), with the same results.
    """
    centre = problem.mean()
    x_c = _newton(centre, x0[None, :], tol=tol)
    _, hess = centre.derivatives(x_c)
    inverse = np.linalg.inv(hess[0])
    _, diag_c = centre.gradient(x_c)
    rounds = len(problem.prior)
    if _CHORD_THREADS < 2 or rounds < 2 * _CHORD_SPLIT_ROUNDS:
        return _chord_steps(problem, x_c, inverse, diag_c, tol)
    halves = [slice(h[0], h[-1] + 1) for h in np.array_split(np.arange(rounds), _CHORD_THREADS)]
    with ThreadPoolExecutor(max_workers=len(halves) - 1) as pool:
        rest = [
            pool.submit(_chord_steps, problem.subset(h), x_c, inverse, diag_c, tol)
            for h in halves[1:]
        ]
        first = _chord_steps(problem.subset(halves[0]), x_c, inverse, diag_c, tol)
        parts = [first, *(f.result() for f in rest)]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def _chord_steps(
    problem: _Problem, x_c: FloatArray, inverse: FloatArray, diag_c: FloatArray, tol: float
) -> tuple[FloatArray, np.ndarray[Any, np.dtype[np.bool_]]]:
    """The chord steps of `_chord` from the centre's fit `x_c`, H⁻¹ and Hessian diagonal."""
    x = problem.start(x_c[0])
    ok = np.ones(len(x), dtype=bool)
    done = np.zeros(len(x), dtype=bool)
    previous = np.full(len(x), np.inf)
    for _ in range(_CHORD_STEPS):
        grad, diag = problem.gradient(x)
        scale = np.sqrt(diag_c / np.maximum(diag, 1e-300))
        step = scale * ((scale * grad) @ inverse.T)
        size = np.abs(step).max(axis=1)
        # Must contract fast, else leave it to Newton.
        ok &= size < 0.5 * previous
        x[ok] += step[ok]
        # Linear convergence at ratio r leaves an error of about size·r/(1−r) after this step:
        # stop when that is far below `tol`, as close as Newton's final step gets.
        known = np.isfinite(previous) & (previous > 0)
        ratio = np.minimum(np.divide(size, previous, out=np.full_like(size, 0.5), where=known), 0.5)
        done |= ok & (size * ratio / (1.0 - ratio) < _CHORD_EXACT * tol)
        ok &= ~done
        previous = size
        if not ok.any():
            break
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
    Bradley–Terry MLE exists (Zermelo, Ford). `tables` is (3, rounds, pairs): i won, j won, tie.

    All rounds of a batch are one block-diagonal sparse graph (round r's model k is node
    r·m + k) searched once: linear in the edges, no loop over rounds.
    """
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components as components

    forward = (tables[0] + tables[2]) > 0
    backward = (tables[1] + tables[2]) > 0
    rounds, pairs = forward.shape
    out = np.zeros(rounds, dtype=bool)
    per = max(1, _CHUNK_ELEMENTS // max(2 * pairs, m))
    for first in range(0, rounds, per):
        f, b = forward[first : first + per], backward[first : first + per]
        n = len(f)
        rf, pf = np.nonzero(f)
        rb, pb = np.nonzero(b)
        src = np.concatenate([rf * m + i[pf], rb * m + j[pb]])
        dst = np.concatenate([rf * m + j[pf], rb * m + i[pb]])
        graph = csr_matrix((np.ones(len(src), dtype=np.int8), (src, dst)), shape=(n * m,) * 2)
        _, labels = components(graph, directed=True, connection="strong")
        labels = labels.reshape(n, m)
        out[first : first + n] = (labels == labels[:, :1]).all(axis=1)
    return out


_SOLID = 30.0  # an edge scored this often in the data is all but never lost by a resample


@dataclass(frozen=True)
class _Sufficient:
    """A cheap per-round certificate that the MLE exists (see `_certificate`)."""

    tree_cells: tuple[IntArray, IntArray]
    """Per tree edge, its decisive cell and its tie cell (-1: none)."""
    weak_out: tuple[IntArray, IntArray]
    """(cells, starts): the cells by which weak model k scores on the core are
    cells[starts[k]:starts[k + 1]] (never none)."""
    weak_in: tuple[IntArray, IntArray]
    """(cells, starts): the cells by which the core scores on weak model k, as `weak_out`."""


def _strong_labels(adjacency: np.ndarray) -> IntArray:
    """A label per model, shared exactly by the models of one strongly connected component."""
    reach = _reachability(adjacency)
    if reach is None:  # too many models to square out densely: scipy's graph search
        from scipy.sparse import csr_matrix
        from scipy.sparse.csgraph import connected_components as components

        _, labels = components(csr_matrix(adjacency), directed=True, connection="strong")
        return np.asarray(labels, dtype=np.int64)
    # u and v share a component iff each reaches the other; label: its first model.
    return np.asarray((reach & reach.T).argmax(axis=1), dtype=np.int64)


def _bfs_predecessors(graph: np.ndarray, root: int) -> IntArray:
    """Breadth-first tree from `root` along the dense boolean `graph`: each model's parent
    (the root's own entry is the root; -1: not reached)."""
    pred = np.full(len(graph), -1, dtype=np.int64)
    pred[root] = root
    frontier = np.array([root])
    while len(frontier):
        hit = graph[frontier]
        nodes = np.flatnonzero(hit.any(axis=0) & (pred < 0))
        pred[nodes] = frontier[hit[:, nodes].argmax(axis=0)]
        frontier = nodes
    return pred


def _certificate(counts: PairCounts) -> _Sufficient | None:
    """Edges whose presence in a round proves its "scored on" graph strongly connected.

    The core C is the largest strongly connected set of models over edges scored at least
    `_SOLID` times; an out-tree and an in-tree from one root inside C (2(|C|−1) solid edges)
    keep C strongly connected, and every other ("weak") model needs one edge to C and one
    from C. A round with all of these has an MLE; any other round gets the full graph search.
    Dense numpy up to `_CLOSURE_MODELS` models: no scipy import before the rounds are fitted.
    """
    i_c, j_c, outcome, cell_counts = counts.cells()
    m = counts.n_models
    # Each cell is an edge u→v ("u scored on v"): i won → i→j, j won → j→i, tie → both ways.
    src = np.concatenate([i_c[outcome != 1], j_c[outcome != 0]])
    dst = np.concatenate([j_c[outcome != 1], i_c[outcome != 0]])
    cell = np.concatenate([np.flatnonzero(outcome != 1), np.flatnonzero(outcome != 0)])
    weight = np.zeros((m, m))
    np.add.at(weight, (src, dst), cell_counts[cell])
    solid = weight >= _SOLID
    labels = _strong_labels(solid)
    core = labels == np.bincount(labels).argmax()
    weak = np.flatnonzero(~core)
    if core.sum() < 2:
        return None
    root = int(np.flatnonzero(core)[0])
    # A strongly connected component is strongly connected on its own edges.
    inside = solid & np.outer(core, core)
    tree: list[tuple[int, int]] = []
    for graph, forward in ((inside, True), (inside.T, False)):
        pred = _bfs_predecessors(graph, root)
        for v in np.flatnonzero(core):
            if v != root:
                u = int(pred[v])
                tree.append((u, int(v)) if forward else (int(v), u))
    edge_cell: dict[tuple[int, int], list[int]] = {}  # (u, v) → [decisive cell, tie cell]
    for c, u, v in zip(cell.tolist(), src.tolist(), dst.tolist(), strict=True):
        slot = edge_cell.setdefault((u, v), [-1, -1])
        slot[1 if outcome[c] == 2 else 0] = c
    tree_cells = np.array([edge_cell[e] for e in tree], dtype=np.int64).reshape(-1, 2)
    column = np.full(m, -1)
    column[weak] = np.arange(len(weak))

    def links(from_weak: bool) -> tuple[IntArray, IntArray] | None:
        a, b = (src, dst) if from_weak else (dst, src)
        keep = ~core[a] & core[b]
        owner = column[a[keep]]
        per = np.bincount(owner, minlength=len(weak))
        if (per == 0).any():  # a weak model with no such edge: no round can be certified
            return None
        order = np.argsort(owner, kind="stable")
        return cell[keep][order], np.cumsum(per) - per

    weak_out, weak_in = links(True), links(False)
    if weak_out is None or weak_in is None:
        return None
    return _Sufficient((tree_cells[:, 0], tree_cells[:, 1]), weak_out, weak_in)


def _mle_exists_draws(
    counts: PairCounts, draws: FloatArray, certificate: _Sufficient | None = None
) -> np.ndarray:
    """Per resampled round (rows of cell counts): does its Bradley–Terry MLE exist?"""
    ok = np.zeros(len(draws), dtype=bool)
    if certificate is not None:
        decisive, tie = certificate.tree_cells
        scored = draws > 0

        def kept(cells: IntArray) -> np.ndarray:
            present = np.zeros((len(draws), len(cells)), dtype=bool)
            has = cells >= 0
            present[:, has] = scored[:, cells[has]]
            return present

        ok = (kept(decisive) | kept(tie)).all(axis=1)
        for cells, starts in (certificate.weak_out, certificate.weak_in):
            if len(starts):  # every weak model: one of its cells scored in the round
                ok &= np.logical_or.reduceat(scored[:, cells], starts, axis=1).all(axis=1)
    rest = np.flatnonzero(~ok)
    if len(rest):
        i, j, tables = _pair_tables(counts, draws[rest])
        ok[rest] = _mle_exists(tables, i, j, counts.n_models)
    return ok


_CLOSURE_MODELS = 512  # most models whose reachability is squared out densely


def _reachability(adjacency: np.ndarray) -> np.ndarray | None:
    """`reach[u, v]`: v can be reached from u along `adjacency` (u from itself); None past
    `_CLOSURE_MODELS` models. Repeated squaring of the reachability matrix: no scipy, whose
    import would otherwise come before the bootstrap draws could start."""
    m = len(adjacency)
    if m > _CLOSURE_MODELS:
        return None
    reach = (adjacency | np.eye(m, dtype=bool)).astype(np.float32)  # sums stay exact
    for _ in range(max(1, math.ceil(math.log2(max(m, 2)))) + 1):
        step = ((reach @ reach) > 0).astype(np.float32)
        if np.array_equal(step, reach):
            break
        reach = step
    return reach > 0


def _strongly_connected(adjacency: np.ndarray) -> bool:
    """Whether every model reaches every other along `adjacency` (False: not, or too many
    models to tell this way)."""
    reach = _reachability(adjacency)
    return reach is not None and bool(reach.all())


def check_identifiable(counts: PairCounts) -> None:
    """Raise if the plain MLE does not exist: a disconnected graph, or unbounded ratings."""
    if _strongly_connected(counts.scores > 0):  # the usual case, answered without a search
        return
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


def _pair_index(counts: PairCounts) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    """Pairs (i < j) met in `counts`, and for each cell its outcome and its pair's position."""
    i_c, j_c, outcome, _ = counts.cells()
    m = counts.n_models
    pair_keys, pair_of_cell = np.unique(i_c * m + j_c, return_inverse=True)
    return pair_keys // m, pair_keys % m, outcome, pair_of_cell.reshape(-1)


def _tables(
    outcome: IntArray, pair_of_cell: IntArray, pairs: int, cell_counts: FloatArray
) -> FloatArray:
    tables = np.zeros((3, len(cell_counts), pairs))
    tables[outcome, :, pair_of_cell] = cell_counts.T
    return tables


def _columns(
    outcome: IntArray, pair_of_cell: IntArray, pairs: int, cell_counts: FloatArray
) -> FloatArray:
    """Per-round tables laid out (3, pairs, rounds): one column per round."""
    tables = np.zeros((3, pairs, len(cell_counts)))
    tables[outcome, pair_of_cell, :] = cell_counts.T
    return tables


def _pair_tables(
    counts: PairCounts, cell_counts: FloatArray
) -> tuple[IntArray, IntArray, FloatArray]:
    """Pairs (i < j) met in `counts`, and per-round tables (3, rounds, pairs) of cell counts."""
    i, j, outcome, pair_of_cell = _pair_index(counts)
    return i, j, _tables(outcome, pair_of_cell, len(i), np.atleast_2d(cell_counts))


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

    `start` (θ, then log ν for Davidson) warm-starts every round, e.g. at the point estimate;
    with it, rounds are fitted by chord steps from the fit of their average counts. Returns
    (θ, Davidson log ν or None). No identifiability check: see `bradley_terry`.
    """
    i, j, outcome, pair_of_cell = _pair_index(counts)
    cell_counts = np.atleast_2d(cell_counts)
    m = counts.n_models
    rounds = len(cell_counts)
    priors = np.broadcast_to(np.asarray(prior, dtype=np.float64), (rounds,))
    dim = m + (ties == "davidson")
    # Bounds the (rounds × pairs) arrays and the (rounds × dim × dim) Newton Hessians.
    chunk = max(1, _CHUNK_ELEMENTS // max(dim * dim, len(i)))
    out = np.empty((rounds, dim))
    with _blas_threads():
        for first in range(0, rounds, chunk):
            sl = slice(first, first + chunk)
            t = _columns(outcome, pair_of_cell, len(i), cell_counts[sl])
            problem = _Problem(i, j, t[0], t[1], t[2], m, priors[sl].copy(), ties)
            if start is None or ties != "half":
                out[sl] = _newton(problem, start, tol=tol)
                continue
            x = problem.start(start)
            done = np.zeros(len(x), dtype=bool)
            for value in np.unique(problem.prior):
                rows = np.flatnonzero(problem.prior == value)
                sub = problem if len(rows) == len(x) else problem.subset(rows)
                x[rows], done[rows] = _chord(sub, np.asarray(start, dtype=np.float64), tol)
            rest = np.flatnonzero(~done)
            if len(rest):
                x[rest] = _newton(problem.subset(rest), x[rest], tol=tol)
            out[sl] = x
    return out[:, :m], (out[:, -1] if ties == "davidson" else None)


def fit_draws(
    counts: PairCounts,
    draws: FloatArray,
    *,
    prior: float = 0.0,
    ties: TieModel = "half",
    start: FloatArray | None = None,
    certificate: _Sufficient | None = None,
) -> tuple[FloatArray, int]:
    """Fit resampled cell counts (rounds × cells of `counts.cells()`), however they were drawn;
    natural-log ratings (rounds × m) and how many rounds had no finite MLE (those are fitted
    with `FALLBACK_PRIOR` virtual ties per model instead). `certificate` (from
    `_certificate(counts)`) saves recomputing it for every batch."""
    rounds = len(draws)
    priors = np.full(rounds, prior)
    regularised = 0
    if prior == 0:
        if certificate is None:
            certificate = _certificate(counts)
        ok = _mle_exists_draws(counts, draws, certificate)
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
    meanwhile: Callable[[], object] | None = None,
) -> BTResult:
    """Bradley–Terry MLE on aggregated counts, on the Elo scale, with bootstrap CIs.

    Ties count half a win each way (`ties="half"`), or are modelled by Davidson's tie
    parameter (`ties="davidson"`). Ratings are mean-anchored at `init`, or `anchor` gets
    exactly `init`. `bootstrap` rounds resample the outcome counts multinomially (seeded) and
    give `ci` percentile intervals; given `ClusteredCounts`, they resample whole clusters (the
    unit that was sampled, e.g. memes) instead of single battles. A disconnected comparison
    graph or unbounded MLE raises (`DisconnectedComparisonError`, `UnboundedRatingsError`)
    unless `prior` > 0: that many virtual ties per model against an average opponent,
    reported in `BTResult.note`. `meanwhile` (e.g. online Elo, pure Python) is called once on
    this thread while the first bootstrap batch is drawn on another, which does not hold the
    GIL.
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
    if not prior >= 0:
        raise StatsError("prior must be >= 0")
    if not 0 <= bootstrap <= MAX_BOOTSTRAP:
        raise StatsError(
            f"bootstrap must be between 0 and {MAX_BOOTSTRAP:,} rounds; got {bootstrap}"
        )
    *_, cell_counts = counts.cells()
    # Draw and fit in batches of rounds: memory stays bounded whatever `bootstrap` is
    # (one generator drawn in sequence, so the draws are those of a single call).
    batch = max(1, _CHUNK_ELEMENTS // max(len(cell_counts), 1))
    sizes = [min(batch, bootstrap - first) for first in range(0, bootstrap, batch)]
    rng = np.random.default_rng(seed)

    def draw(rounds: int) -> FloatArray:
        if clustered is not None:
            return clustered.resample(rounds, rng)
        return resample(counts, rounds, rng)

    # Each batch is drawn on a worker thread (numpy releases the GIL) while this thread fits the
    # point estimate or the previous batch, and runs `meanwhile`: one generator, drawn in
    # order, so the draws are those of one call.
    pool = ThreadPoolExecutor(max_workers=1) if sizes else None
    try:
        pending = pool.submit(draw, sizes[0]) if pool is not None else None
        if prior == 0:
            check_identifiable(counts)
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
        if meanwhile is not None:
            meanwhile()
        if pool is not None and pending is not None:
            # Resampled fits lie near the point estimate: starting there saves Newton steps.
            start = theta[0] if kappa is None else np.append(theta[0], kappa[0])
            samples = np.empty((bootstrap, counts.n_models))
            certificate = _certificate(counts) if prior == 0 else None
            first = 0
            for k, rounds in enumerate(sizes):
                draws = pending.result()
                if k + 1 < len(sizes):
                    pending = pool.submit(draw, sizes[k + 1])
                boot_theta, failed = fit_draws(
                    counts, draws, prior=prior, ties=ties, start=start, certificate=certificate
                )
                del draws
                regularised += failed
                samples[first : first + rounds] = to_elo(boot_theta)
                first += rounds
            tail = 100 * (1 - ci) / 2
            ci_low, ci_high = np.percentile(samples, [tail, 100 - tail], axis=0)
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
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
