"""Length-controlled Bradley–Terry: answer length as a covariate, next to the plain ratings.

Like Chatbot Arena's style control: P(i beats j) = σ(θ_i − θ_j + β·x), with x = log2 of the
ratio of the two answers' lengths (i's over j's). β is how much a judge panel rewards length
as such (log-odds per doubling); θ is what is left of a model's rating once length is held
equal. A ranking that moves between the plain and the controlled fit is partly a ranking of
length. Intervals come from the same cluster bootstrap as the plain fit.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from memearena.stats._scipy import expit
from memearena.stats.cluster import ClusterIndex, cluster_weights
from memearena.stats.counts import FloatArray, IntArray
from memearena.stats.errors import StatsError

__all__ = ["LengthControlled", "LengthObservations", "length_controlled_bt"]

RIDGE = 1e-3
"""L2 penalty on the ratings (natural-log units): negligible against real counts, it keeps a
resample in which some model never lost finite."""

_MAX_STEP = 2.0
_ELEMENTS = 1 << 20  # rounds × observations per block (the fit holds ~8 such arrays)


_Cells = tuple[IntArray, FloatArray, FloatArray, FloatArray]  # code, x, points, battles


def _collapse(code: IntArray, x: FloatArray, points: FloatArray, battles: FloatArray) -> _Cells:
    """Rows with the same (code, x) summed into one, in ascending (code, x) order."""
    if not len(code):
        return code, x, points, battles
    order = np.lexsort((x, code))
    code, x, points, battles = code[order], x[order], points[order], battles[order]
    new = np.ones(len(code), dtype=bool)
    new[1:] = (code[1:] != code[:-1]) | (x[1:] != x[:-1])
    starts = np.flatnonzero(new)
    return (
        code[starts],
        x[starts],
        np.add.reduceat(points, starts),
        np.add.reduceat(battles, starts),
    )


class LengthObservations:
    """Battles with the lengths of both answers, aggregated per (cluster, pair, lengths):
    memory grows with the distinct presentations (about 32 bytes each), not with judges ×
    criteria × orders. Battles wait in a small buffer, then are summed into sorted chunks,
    merged as they outgrow the merged part (as `ClusteredCountsBuilder` does)."""

    _BUFFER = 1 << 15

    def __init__(self, models: Sequence[str], index: ClusterIndex | None = None) -> None:
        self.models = tuple(models)
        self._pos = {m: k for k, m in enumerate(self.models)}
        self.index = index if index is not None else ClusterIndex()
        self._code = array("q")
        self._x = array("d")
        self._points = array("d")
        self._chunks: list[_Cells] = []
        self._merged = 0

    def add(
        self,
        model_a: str,
        model_b: str,
        winner: str,
        len_a: int,
        len_b: int,
        cluster: Hashable,
    ) -> None:
        """One battle (ties, of either kind, count half to each side)."""
        a, b = self._pos.get(model_a), self._pos.get(model_b)
        if a is None or b is None:
            raise StatsError(f"battle involves a model not in the list: {model_a}, {model_b}")
        score = 1.0 if winner == "model_a" else 0.0 if winner == "model_b" else 0.5
        x = math.log2((len_a + 1) / (len_b + 1))
        if a > b:
            a, b, x, score = b, a, -x, 1.0 - score
        m = len(self.models)
        self._code.append((self.index(cluster) * m + a) * m + b)
        self._x.append(x)
        self._points.append(score)
        if len(self._code) >= self._BUFFER:
            self._flush()

    def add_codes(
        self,
        a: IntArray,
        b: IntArray,
        kind: IntArray,
        len_a: Sequence[int],
        len_b: Sequence[int],
        cluster: IntArray,
    ) -> None:
        """Valid encoded battles (see `cluster.BattleCodes`; clusters already indices of
        `self.index`) with both answers' lengths, as one `add` per row would count them."""
        a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
        if not len(a):
            return
        # math.log2 per row: the same bits as `add` (a vectorised log2 may round differently).
        x = np.array(
            [math.log2((p + 1) / (q + 1)) for p, q in zip(len_a, len_b, strict=True)],
            dtype=np.float64,
        )
        score = np.array([1.0, 0.0, 0.5])[np.asarray(kind, dtype=np.int64)]
        flip = a > b
        x = np.where(flip, -x, x)
        score = np.where(flip, 1.0 - score, score)
        m = len(self.models)
        code = (np.asarray(cluster, dtype=np.int64) * m + np.minimum(a, b)) * m + np.maximum(a, b)
        self._flush()
        self._chunks.append(_collapse(code, x, score, np.ones(len(code))))
        self._flush()

    def _flush(self, everything: bool = False) -> None:
        if self._code:
            code = np.frombuffer(self._code, dtype=np.int64).copy()
            self._chunks.append(
                _collapse(
                    code,
                    np.frombuffer(self._x, dtype=np.float64).copy(),
                    np.frombuffer(self._points, dtype=np.float64).copy(),
                    np.ones(len(code)),
                )
            )
            self._code, self._x, self._points = array("q"), array("d"), array("d")
        pending = sum(len(c[0]) for c in self._chunks[1:])
        if len(self._chunks) > 1 and (everything or pending >= self._merged):
            parts = list(zip(*self._chunks, strict=True))
            merged = _collapse(*(np.concatenate(col) for col in parts))
            self._chunks = [merged]
            self._merged = len(merged[0])

    def arrays(self) -> tuple[IntArray, IntArray, IntArray, FloatArray, FloatArray, FloatArray]:
        """(cluster, i, j, x, points of i, battles) per aggregated observation."""
        self._flush(everything=True)
        if self._chunks:
            code, x, points, battles = self._chunks[0]
        else:
            code, x, points, battles = (np.zeros(0, np.int64), *(np.zeros(0),) * 3)
        m = max(len(self.models), 1)
        rest, j = np.divmod(code, m)
        cl, i = np.divmod(rest, m)
        return cl, i, j, x, points, battles


@dataclass(frozen=True, eq=False)
class LengthControlled:
    """A length-controlled Bradley–Terry fit on the Elo scale (mean-anchored)."""

    models: tuple[str, ...]
    ratings: FloatArray
    """Ratings with length held equal, in `models` order."""
    ci_low: FloatArray | None
    """Lower bootstrap percentile bound per model."""
    ci_high: FloatArray | None
    """Upper bootstrap percentile bound per model."""
    length_effect: float
    """Elo points the panel adds per doubling of an answer's length relative to the other."""
    length_ci: tuple[float, float] | None
    """Bootstrap interval of `length_effect`."""
    log_odds_per_doubling: float
    """β: the same effect in log-odds units."""
    n: int
    """Battles fitted."""

    def ranking(self) -> list[str]:
        """Model names, best first."""
        return [self.models[k] for k in np.argsort(-self.ratings, kind="stable")]


def _fit(
    i: IntArray,
    j: IntArray,
    x: FloatArray,
    a: FloatArray,
    n: FloatArray,
    w: FloatArray,
    m: int,
    tol: float = 1e-8,
) -> FloatArray:
    """Batched penalised Newton: parameters (rounds × (m + 1)), θ mean-zero, β last."""
    rounds, obs = w.shape
    design = np.zeros((obs, m + 1))
    design[np.arange(obs), i] = 1.0
    design[np.arange(obs), j] = -1.0
    design[:, m] = x
    p = np.zeros((rounds, m + 1))
    ridge = np.full(m + 1, RIDGE)
    ridge[m] = 1e-9  # β is left free; this only keeps a resample without length spread solvable
    aw, nw = a * w, n * w
    for _ in range(100):
        s = expit(p @ design.T)
        grad = (aw - nw * s) @ design - ridge * p
        h = nw * s * (1.0 - s)
        hess = np.einsum("ro,op,oq->rpq", h, design, design)
        hess[:, np.arange(m + 1), np.arange(m + 1)] += ridge
        # Ratings are defined up to a shift: c·11ᵀ on the θ block gives the mean-zero step.
        c = np.maximum(np.diagonal(hess, axis1=1, axis2=2)[:, :m].mean(axis=1), 1e-12) / m
        hess[:, :m, :m] += c[:, None, None]
        try:
            step = np.linalg.solve(hess, grad[..., None])[..., 0]
        except np.linalg.LinAlgError:
            # A resample can leave β without support; the least-norm step keeps it where it is.
            step = (np.linalg.pinv(hess) @ grad[..., None])[..., 0]
        biggest = np.abs(step).max(axis=1, keepdims=True)
        step *= np.minimum(1.0, _MAX_STEP / np.maximum(biggest, 1e-300))
        p += step
        p[:, :m] -= p[:, :m].mean(axis=1, keepdims=True)
        if biggest.max() < tol:
            break
    return p


def _check_separable(i: IntArray, j: IntArray, x: FloatArray, n: FloatArray, m: int) -> None:
    """StatsError when length differences are a function of which models met (e.g. one model
    always the longer by the same factor): length and rating cannot then be told apart, and a
    fit would report an arbitrary split between them."""
    seen = n > 0
    obs = int(seen.sum())
    design = np.zeros((obs, m))
    design[np.arange(obs), i[seen]] = 1.0
    design[np.arange(obs), j[seen]] = -1.0
    with_x = np.column_stack([design, x[seen]])
    if np.linalg.matrix_rank(with_x) <= np.linalg.matrix_rank(design):
        raise StatsError(
            "answer lengths are confounded with the models compared: no separate length effect"
        )


def length_controlled_bt(
    data: LengthObservations,
    *,
    bootstrap: int = 0,
    seed: int = 0,
    ci: float = 0.95,
    scale: float = 400.0,
    base: float = 10.0,
    init: float = 1000.0,
) -> LengthControlled:
    """Fit θ and β on the aggregated observations; `bootstrap` rounds resample clusters."""
    cl, i, j, x, a, n = data.arrays()
    if not len(n) or n.sum() <= 0:
        raise StatsError("no battles with known lengths to fit")
    if not np.any(x):
        raise StatsError("every compared pair of answers has the same length: no length effect")
    m = len(data.models)
    _check_separable(i, j, x, n, m)
    factor = scale / math.log(base)
    point = _fit(i, j, x, a, n, np.ones((1, len(n))), m)[0]
    ratings = init + factor * point[:m]
    ci_low = ci_high = None
    length_ci = None
    if bootstrap > 0:
        met, local = np.unique(cl, return_inverse=True)
        rng = np.random.default_rng(seed)
        draws = []
        for wc in cluster_weights(len(met), bootstrap, rng):
            step = max(1, _ELEMENTS // max(len(n), 1))
            for s0 in range(0, len(wc), step):
                draws.append(_fit(i, j, x, a, n, wc[s0 : s0 + step][:, local], m))
        boot = np.concatenate(draws)
        tail = 100 * (1 - ci) / 2
        lo, hi = np.percentile(boot, [tail, 100 - tail], axis=0)
        ci_low, ci_high = init + factor * lo[:m], init + factor * hi[:m]
        length_ci = (float(factor * lo[m]), float(factor * hi[m]))
    return LengthControlled(
        models=data.models,
        ratings=ratings,
        ci_low=ci_low,
        ci_high=ci_high,
        length_effect=float(factor * point[m]),
        length_ci=length_ci,
        log_odds_per_doubling=float(point[m]),
        n=round(float(n.sum())),
    )
