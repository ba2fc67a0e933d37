"""Cluster bootstrap: resample the unit that was sampled (a meme, a task), not single battles.

All battles of one meme share the meme (five criteria × both orders × every pair and judge), so
they are not independent draws; resampling single battles makes intervals too narrow. Here the
outcome counts are kept per cluster, a bootstrap round draws clusters with replacement (a
multinomial weight per cluster), and each round's count table is the weighted sum of the
clusters' tables: the same per-round cell counts that `bt.fit_cells` fits all at once.

Memory grows with the number of (cluster, pair, outcome) cells met, never with battles.
"""

from __future__ import annotations

from array import array
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from memearena.stats.battles import Battle
from memearena.stats.counts import FloatArray, IntArray, PairCounts
from memearena.stats.errors import StatsError

__all__ = [
    "BattleCodes",
    "ClusterIndex",
    "ClusteredCounts",
    "ClusteredCountsBuilder",
    "cluster_weights",
    "clustered_counts",
]

_OUTCOME = {"model_a": 0, "model_b": 1, "tie": 2, "tie (bothbad)": 2}
_FLIP = (1, 0, 2)  # the outcome seen from the other side
_FLIP_CODES = np.array(_FLIP, dtype=np.int64)
_WEIGHT_ELEMENTS = 1 << 23  # rounds × clusters per block of weights (64 MB of int64)


class ClusterIndex:
    """Cluster keys → dense indices, shared by every table built from one stream of records, so
    that one set of bootstrap weights resamples all of them jointly (the same memes)."""

    def __init__(self) -> None:
        self._index: dict[Hashable, int] = {}

    def __call__(self, key: Hashable) -> int:
        """The index of `key` (a new key gets the next index)."""
        k = self._index.get(key)
        if k is None:
            k = self._index[key] = len(self._index)
        return k

    def codes(self, keys: IntArray) -> IntArray:
        """The indices of integer keys, as one call of the index per key in order would give
        them (new keys get the next indices in order of first occurrence)."""
        keys = np.asarray(keys, dtype=np.int64)
        if not len(keys):
            return np.zeros(0, dtype=np.int64)
        uniq, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        out = np.empty(len(uniq), dtype=np.int64)
        index = self._index
        for pos in np.argsort(first, kind="stable").tolist():
            out[pos] = index.setdefault(int(uniq[pos]), len(index))
        return out[inverse.ravel()]

    def __len__(self) -> int:
        return len(self._index)

    def keys(self) -> list[Hashable]:
        """The keys in index order."""
        return list(self._index)


def cluster_weights(n_clusters: int, rounds: int, rng: np.random.Generator) -> Iterator[FloatArray]:
    """Bootstrap weights in blocks of rounds: row r says how often round r drew each cluster
    (n_clusters draws with replacement, so each row sums to n_clusters)."""
    if n_clusters <= 0:
        raise StatsError("no clusters to resample")
    step = max(1, _WEIGHT_ELEMENTS // n_clusters)
    p = np.full(n_clusters, 1.0 / n_clusters)
    for start in range(0, rounds, step):
        k = min(step, rounds - start)
        yield rng.multinomial(n_clusters, p, size=k).astype(np.float64)


@dataclass(frozen=True, eq=False)
class BattleCodes:
    """Battles as columns: each side's position in a model list and the outcome (0 = `a`
    won, 1 = `b` won, 2 = tie) seen from `a`. Rows before `valid` are valid battles; `error`,
    when set, is row `valid`'s error (the one a battle-by-battle `add` raises first)."""

    a: IntArray
    b: IntArray
    kind: IntArray
    valid: int
    error: StatsError | None

    @staticmethod
    def encode(
        positions: Mapping[str, int],
        model_a: Sequence[str],
        model_b: Sequence[str],
        winner: Sequence[str],
    ) -> BattleCodes:
        """Encode named battles (one dict lookup per name): an unknown model, a model
        against itself or an unknown winner ends the valid rows, as `add` would raise."""
        n = len(model_a)
        get, out = positions.get, _OUTCOME.get
        a = np.fromiter((get(x, -1) for x in model_a), np.int64, n)
        b = np.fromiter((get(x, -1) for x in model_b), np.int64, n)
        kind = np.fromiter((out(w, -1) for w in winner), np.int64, n)
        bad = np.flatnonzero((a < 0) | (b < 0) | (a == b) | (kind < 0))
        if not len(bad):
            return BattleCodes(a, b, kind, n, None)
        r = int(bad[0])
        if a[r] < 0 or b[r] < 0:
            unknown = model_a[r] if a[r] < 0 else model_b[r]
            error = StatsError(f"battle involves model {unknown!r}, not in the model list")
        elif a[r] == b[r]:
            error = StatsError(f"battle compares {model_a[r]!r} with itself")
        else:
            error = StatsError(f"unknown winner {winner[r]!r}")
        return BattleCodes(a[:r], b[:r], kind[:r], r, error)


@dataclass(frozen=True, eq=False)
class ClusteredCounts:
    """Outcome counts between models, split by cluster.

    Entry e says: in cluster `cluster[e]`, the pair (`i[e]` < `j[e]`) had `count[e]` outcomes of
    kind `outcome[e]` (0 = i won, 1 = j won, 2 = tie).
    """

    models: tuple[str, ...]
    n_clusters: int
    cluster: IntArray
    i: IntArray
    j: IntArray
    outcome: IntArray
    count: FloatArray

    @property
    def total(self) -> PairCounts:
        """The counts summed over clusters."""
        m = len(self.models)
        wins = np.zeros((m, m))
        ties = np.zeros((m, m))
        for kind, (a, b) in ((0, (self.i, self.j)), (1, (self.j, self.i))):
            sel = self.outcome == kind
            np.add.at(wins, (a[sel], b[sel]), self.count[sel])
        sel = self.outcome == 2
        np.add.at(ties, (self.i[sel], self.j[sel]), self.count[sel])
        return PairCounts(self.models, wins, ties + ties.T)

    @property
    def clusters_met(self) -> int:
        """Clusters holding at least one battle."""
        return len(np.unique(self.cluster))

    def _cell_columns(self) -> IntArray:
        """Each entry's column in `self.total.cells()` (cells are in ascending key order)."""
        m = len(self.models)
        ci, cj, co, _ = self.total.cells()
        cell_keys = (ci * m + cj) * 3 + co
        keys = (self.i * m + self.j) * 3 + self.outcome
        return np.searchsorted(cell_keys, keys).astype(np.int64)

    def tables(self, weights: FloatArray) -> FloatArray:
        """Per-round cell counts (rounds × cells of `self.total.cells()`) for cluster weights
        (rounds × n_clusters): each round's table is the weighted sum of its clusters' tables."""
        weights = np.atleast_2d(weights)
        if weights.shape[1] < self.n_clusters:
            raise StatsError(
                f"weights cover {weights.shape[1]} clusters, the counts {self.n_clusters}"
            )
        from scipy.sparse import csr_matrix

        n_cells = len(self.total.cells()[0])
        # One sparse (clusters × cells) table; each round's counts are its weights times it.
        per_cluster = csr_matrix(
            (self.count, (self.cluster, self._cell_columns())), shape=(weights.shape[1], n_cells)
        )
        return np.asarray(per_cluster.T @ weights.T, dtype=np.float64).T

    def resample(self, rounds: int, seed: int | np.random.Generator = 0) -> FloatArray:
        """Cluster-bootstrap draws of the cell counts: shape (rounds, cells). Only the clusters
        met here are drawn (a group's interval is conditional on its own clusters)."""
        rng = np.random.default_rng(seed)
        met = np.unique(self.cluster)
        if len(met) == len(self.cluster) and bool(np.all(self.count == 1)):
            # Every cluster is one battle: drawing clusters is drawing battles, which is the
            # multinomial over the cells (same distribution, cost independent of the battles).
            *_, cell = self.total.cells()
            total = round(float(cell.sum()))
            return rng.multinomial(total, cell / cell.sum(), size=rounds).astype(np.float64)
        parts = []
        for w in cluster_weights(len(met), rounds, rng):
            full = np.zeros((len(w), max(self.n_clusters, 1)))
            full[:, met] = w
            parts.append(self.tables(full))
        return np.concatenate(parts) if parts else np.zeros((0, len(self.total.cells()[0])))

    def subset(self, models: Sequence[str]) -> ClusteredCounts:
        """The counts between `models` only (in that order), clusters unchanged."""
        pos = {m: k for k, m in enumerate(models)}
        old = np.array([pos.get(m, -1) for m in self.models], dtype=np.int64)
        a, b = old[self.i], old[self.j]
        keep = (a >= 0) & (b >= 0)
        a, b, out = a[keep], b[keep], self.outcome[keep]
        flip = a > b
        out = np.where(flip & (out < 2), 1 - out, out)
        return ClusteredCounts(
            tuple(models),
            self.n_clusters,
            self.cluster[keep],
            np.where(flip, b, a),
            np.where(flip, a, b),
            out,
            self.count[keep],
        )

    @staticmethod
    def concat(parts: Sequence[ClusteredCounts]) -> ClusteredCounts:
        """Counts of several tables over the same models and clusters, added together."""
        if not parts:
            raise StatsError("nothing to concatenate")
        models, n = parts[0].models, max(p.n_clusters for p in parts)
        if any(p.models != models for p in parts):
            raise StatsError("clustered counts over different model lists")
        return ClusteredCounts(
            models,
            n,
            np.concatenate([p.cluster for p in parts]),
            np.concatenate([p.i for p in parts]),
            np.concatenate([p.j for p in parts]),
            np.concatenate([p.outcome for p in parts]),
            np.concatenate([p.count for p in parts]),
        )

    def restrict(self, keep: Sequence[int]) -> ClusteredCounts:
        """The same counts with only some entries (e.g. one judge's), clusters unchanged."""
        idx = np.asarray(keep, dtype=np.int64)
        return ClusteredCounts(
            self.models,
            self.n_clusters,
            self.cluster[idx],
            self.i[idx],
            self.j[idx],
            self.outcome[idx],
            self.count[idx],
        )


class ClusteredCountsBuilder:
    """Aggregates battles one at a time into per-cluster counts (streaming: memory grows with
    the cells met, not with the battles).

    A battle is one 8-byte cell code in a buffer; full buffers are counted into sorted
    (code, count) chunks, merged when they outgrow the merged counts, so memory stays about 16
    bytes per cell met (plus a 512 KB buffer) however many battles arrive."""

    _BUFFER = 1 << 16

    def __init__(self, models: Sequence[str], index: ClusterIndex | None = None) -> None:
        self.models = tuple(models)
        self._pos = {m: k for k, m in enumerate(self.models)}
        self.index = index if index is not None else ClusterIndex()
        self._buf = array("q")
        self._chunks: list[tuple[IntArray, FloatArray]] = []
        self._merged = 0  # cells in the first chunk after the last merge

    @property
    def positions(self) -> Mapping[str, int]:
        """Each model's position in `models` (what `BattleCodes.encode` takes)."""
        return self._pos

    def add(self, model_a: str, model_b: str, winner: str, cluster: Hashable) -> None:
        """Count one battle in its cluster."""
        a, b = self._pos.get(model_a), self._pos.get(model_b)
        if a is None or b is None:
            unknown = model_a if a is None else model_b
            raise StatsError(f"battle involves model {unknown!r}, not in the model list")
        if a == b:
            raise StatsError(f"battle compares {model_a!r} with itself")
        kind = _OUTCOME.get(winner)
        if kind is None:
            raise StatsError(f"unknown winner {winner!r}")
        if a > b:
            a, b = b, a
            kind = _FLIP[kind]
        m = len(self.models)
        self._buf.append(((self.index(cluster) * m + a) * m + b) * 3 + kind)
        if len(self._buf) >= self._BUFFER:
            self._flush()

    def add_many(
        self,
        model_a: Sequence[str],
        model_b: Sequence[str],
        winner: Sequence[str],
        clusters: Sequence[Hashable],
    ) -> None:
        """Count battles given as columns, as one `add` per row in order would (an invalid
        row raises the same error, after the rows before it are counted)."""
        codes = BattleCodes.encode(self._pos, model_a, model_b, winner)
        index = self.index
        cluster = np.fromiter(
            (index(clusters[r]) for r in range(codes.valid)), np.int64, codes.valid
        )
        self.add_codes(codes.a, codes.b, codes.kind, cluster)
        if codes.error is not None:
            raise codes.error

    def add_codes(self, a: IntArray, b: IntArray, kind: IntArray, cluster: IntArray) -> None:
        """Count valid encoded battles (see `BattleCodes`) whose clusters are already indices
        of `self.index` (e.g. from `ClusterIndex.codes`)."""
        a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
        if not len(a):
            return
        kind = np.asarray(kind, dtype=np.int64)
        flip = a > b
        kind = np.where(flip, _FLIP_CODES[kind], kind)
        m = len(self.models)
        codes = (
            (np.asarray(cluster, dtype=np.int64) * m + np.minimum(a, b)) * m + np.maximum(a, b)
        ) * 3 + kind
        uniq, counts = np.unique(codes, return_counts=True)
        self._chunks.append((uniq.astype(np.int64), counts.astype(np.float64)))
        self._flush()

    def _flush(self) -> None:
        """Count the buffer into a chunk; merge the chunks once they outgrow the merged part."""
        if self._buf:
            codes, counts = np.unique(np.frombuffer(self._buf, dtype=np.int64), return_counts=True)
            self._chunks.append((codes.astype(np.int64), counts.astype(np.float64)))
            self._buf = array("q")
        pending = sum(len(c) for c, _ in self._chunks[1:])
        if len(self._chunks) > 1 and pending >= self._merged:
            codes = np.concatenate([c for c, _ in self._chunks])
            counts = np.concatenate([n for _, n in self._chunks])
            uniq, inverse = np.unique(codes, return_inverse=True)
            merged = np.bincount(inverse, weights=counts, minlength=len(uniq))
            self._chunks = [(uniq, merged.astype(np.float64))]
            self._merged = len(uniq)

    def build(self) -> ClusteredCounts:
        """The counts so far (cluster indices cover every cluster the shared index has seen),
        entries in ascending (cluster, i, j, outcome) order."""
        self._flush()
        self._merged = 0  # force the merge of every chunk into one
        self._flush()
        codes, cnt = self._chunks[0] if self._chunks else (np.zeros(0, np.int64), np.zeros(0))
        m = len(self.models)
        rest, kind = np.divmod(codes, 3)
        rest, j = np.divmod(rest, max(m, 1))
        cluster, i = np.divmod(rest, max(m, 1))
        return ClusteredCounts(
            self.models,
            len(self.index),
            cluster.astype(np.int64),
            i.astype(np.int64),
            j.astype(np.int64),
            kind.astype(np.int64),
            cnt.astype(np.float64),
        )


def clustered_counts(
    battles: Iterable[Battle],
    by: str | Sequence[str],
    models: Sequence[str] | None = None,
) -> ClusteredCounts:
    """Counts of `battles` per cluster, the cluster being the value of the battle field `by`
    (or the joint value of several fields). A battle lacking a cluster field is an error that
    names the field: silently treating it as its own cluster would shrink the interval."""
    fields = (by,) if isinstance(by, str) else tuple(by)
    battles = list(battles)
    names = (
        list(models)
        if models is not None
        else sorted({b.model_a for b in battles} | {b.model_b for b in battles})
    )
    builder = ClusteredCountsBuilder(names)
    for n, b in enumerate(battles, start=1):
        key = tuple(b.field(f) for f in fields)
        if any(v is None for v in key):
            missing = next(f for f, v in zip(fields, key, strict=True) if v is None)
            raise StatsError(
                f"battle {n} ({b.model_a} vs {b.model_b}) has no {missing!r} field to cluster by"
            )
        builder.add(b.model_a, b.model_b, b.winner, key)
    return builder.build()
