"""Two runs of a method side by side (``memearena compare RUN_A RUN_B``), read only from their
run directories through the method's result class (``MethodResult``), naming no method.

- **Ranks**: each leaderboard row of either run (rank, figure, value with its interval) and its
  rank range in each run (the method's own, else from the intervals: a row's best rank counts
  only the rows whose interval lies wholly better than its own, its worst every row whose
  interval reaches past its own); a row *moved beyond its intervals* when its two intervals do
  not overlap.
- **Figures**: every figure with an interval in both runs (``MethodResult.figures``), the same
  test; the ones about judges are the judges' agreement between the runs.
- **Verdicts**: where both runs kept their judges' verdicts (a result with ``iter_battles``),
  the share of verdicts given the same way on the same (meme, context, criterion, judge, pair),
  with an interval from a bootstrap over memes (the unit that was sampled).
- **Config**: every key whose value differs between the two runs' config snapshots (other
  methods' sections left out).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from memearena.engine.results import INTERVAL, MethodResult, read_json
from memearena.errors import MemearenaError

__all__ = ["Comparison", "compare_runs", "methods_in"]

BOOTSTRAP_ROUNDS = 1_000
"""Bootstrap rounds of the verdict agreement's interval."""


@dataclass
class Comparison:
    """Two runs of one method compared; ``to_dict`` is the ``--json`` form."""

    method: str
    entity: str
    run_a: str
    run_b: str
    rows: list[dict[str, Any]]
    """One per leaderboard entry of either run: ``rank_a``/``rank_b``, their ranges, the rank
    change (positive: better in B), the figure's value and interval in each, ``moved``."""
    figures: list[dict[str, Any]]
    """Every figure with an interval in both runs, ``delta`` and ``moved``."""
    judges: list[dict[str, Any]] = field(default_factory=list)
    """The figures about judges (a subset of ``figures``)."""
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    """Per judge: verdicts matched across the runs, the share given the same way, interval."""
    config: list[dict[str, Any]] = field(default_factory=list)
    """``{"key", "a", "b"}`` for every config key whose value differs."""

    @property
    def moved(self) -> list[dict[str, Any]]:
        """The leaderboard rows that moved beyond their intervals."""
        return [r for r in self.rows if r["moved"]]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"moved": [r[self.entity] for r in self.moved]}


def methods_in(run_dir: Path) -> list[str]:
    """The registered methods whose section ``run_dir``'s leaderboard.json holds."""
    from memearena.engine.registry import method_names

    board = read_json(Path(run_dir) / "leaderboard.json")
    return [m for m in method_names() if isinstance(board.get(m), dict)]


def _result(method: str, run_dir: Path) -> MethodResult:
    """The method's result class over ``run_dir``: found in its package's ``result`` module
    (a reader needs no stage loaded), else the method's ``result``, else the generic one."""
    import importlib

    from memearena.engine.registry import get_method, method_spec

    package = method_spec(method).method.partition(":")[0].rpartition(".")[0]
    try:
        module = importlib.import_module(f"{package}.result")
    except ImportError:
        module = None
    found = (
        [
            c
            for c in vars(module).values()
            if isinstance(c, type) and issubclass(c, MethodResult) and c.method == method
        ]
        if module is not None
        else []
    )
    cls: type[MethodResult] = (
        found[0] if found else getattr(get_method(method), "result", MethodResult)
    )
    return cls(run_dir, method=method)


def _pick_method(a: Path, b: Path, method: str | None) -> str:
    for run in (a, b):
        if not (run / "leaderboard.json").is_file():
            raise MemearenaError(f"{run}: no leaderboard.json (not a finished run directory)")
    both = [m for m in methods_in(a) if m in methods_in(b)]
    if method is not None:
        method = method.replace("-", "_")
        if method not in both:
            raise MemearenaError(
                f"--method: {method!r} is not in both runs (both hold: {', '.join(both) or 'none'})"
            )
        return method
    if not both:
        raise MemearenaError(f"{a} and {b} hold no results of the same method")
    if len(both) > 1:
        raise MemearenaError(f"both runs hold several methods ({', '.join(both)}): pick --method")
    return both[0]


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _disjoint(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """The two rows' intervals do not overlap (both present)."""
    lo_a, hi_a = _num(a.get("ci_low")), _num(a.get("ci_high"))
    lo_b, hi_b = _num(b.get("ci_low")), _num(b.get("ci_high"))
    if lo_a is None or hi_a is None or lo_b is None or hi_b is None:
        return False
    return hi_a < lo_b or hi_b < lo_a


def _rank_ranges(rows: list[dict[str, Any]]) -> dict[Any, tuple[int, int] | None]:
    """Each row's rank range: the method's own (``rank_ci_low``/``rank_ci_high``), else from
    the value intervals in the direction the ranks run; None for rows that are not ranked."""
    ranked = [r for r in rows if isinstance(r.get("rank"), int)]
    out: dict[Any, tuple[int, int] | None] = {}
    if not ranked:
        return out
    first = min(ranked, key=lambda r: r["rank"])
    last = max(ranked, key=lambda r: r["rank"])
    higher_better = (_num(first.get("value")) or 0.0) >= (_num(last.get("value")) or 0.0)
    for r in ranked:
        lo_own, hi_own = r.get("rank_ci_low"), r.get("rank_ci_high")
        if isinstance(lo_own, int) and isinstance(hi_own, int):
            out[r["_key"]] = (lo_own, hi_own)
            continue
        lo, hi = _num(r.get("ci_low")), _num(r.get("ci_high"))
        if lo is None or hi is None:
            out[r["_key"]] = None
            continue
        better = worse_or_tied = 0
        for o in ranked:
            if o is r:
                continue
            o_lo, o_hi = _num(o.get("ci_low")), _num(o.get("ci_high"))
            if o_lo is None or o_hi is None:
                continue
            if (o_lo > hi) if higher_better else (o_hi < lo):
                better += 1
            if (o_hi >= lo) if higher_better else (o_lo <= hi):
                worse_or_tied += 1
        out[r["_key"]] = (1 + better, 1 + worse_or_tied)
    return out


def _rows(ra: MethodResult, rb: MethodResult, entity: str) -> list[dict[str, Any]]:
    a_rows = [r | {"_key": r.get(entity)} for r in ra.ranked()]
    b_rows = [r | {"_key": r.get(entity)} for r in rb.ranked()]
    ranges_a, ranges_b = _rank_ranges(a_rows), _rank_ranges(b_rows)
    by_a = {r["_key"]: r for r in a_rows}
    by_b = {r["_key"]: r for r in b_rows}
    out = []
    for key in list(by_a) + [k for k in by_b if k not in by_a]:
        a, b = by_a.get(key, {}), by_b.get(key, {})
        rank_a, rank_b = a.get("rank"), b.get("rank")
        va, vb = _num(a.get("value")), _num(b.get("value"))
        out.append(
            {
                entity: key,
                "figure": a.get("figure") or b.get("figure"),
                "rank_a": rank_a,
                "rank_b": rank_b,
                "rank_range_a": ranges_a.get(key),
                "rank_range_b": ranges_b.get(key),
                "rank_change": (
                    rank_a - rank_b if isinstance(rank_a, int) and isinstance(rank_b, int) else None
                ),
                "a": {k: a.get(k) for k in INTERVAL} if a else None,
                "b": {k: b.get(k) for k in INTERVAL} if b else None,
                "delta": vb - va if va is not None and vb is not None else None,
                "moved": bool(a and b and _disjoint(a, b)),
            }
        )
    return sorted(out, key=lambda r: (r["rank_b"] is None, r["rank_b"] or 0, str(r[entity])))


def _figures(ra: MethodResult, rb: MethodResult, entity: str) -> list[dict[str, Any]]:
    def keyed(result: MethodResult) -> dict[tuple[Any, str], dict[str, Any]]:
        return {(f.get(entity), str(f.get("figure"))): f for f in result.figures()}

    fa, fb = keyed(ra), keyed(rb)
    out = []
    for key, a in fa.items():
        b = fb.get(key)
        if b is None:
            continue
        va, vb = _num(a.get("value")), _num(b.get("value"))
        out.append(
            {
                entity: key[0],
                "figure": key[1],
                "a": {k: a.get(k) for k in INTERVAL},
                "b": {k: b.get(k) for k in INTERVAL},
                "delta": vb - va if va is not None and vb is not None else None,
                "moved": _disjoint(a, b),
            }
        )
    return out


_VERDICT_KEY = ("item", "context", "criterion", "setting", "judge")


def _verdicts(battles: Iterable[Mapping[str, Any]]) -> dict[tuple[Any, ...], str]:
    """Each verdict by what it judged (the pair unordered), as the winner's name or tie."""
    out: dict[tuple[Any, ...], str] = {}
    for row in battles:
        a, b, winner = row.get("model_a"), row.get("model_b"), row.get("winner")
        pair = tuple(sorted((str(a), str(b))))
        named = {"model_a": a, "model_b": b}.get(str(winner), "tie")
        out[(*(row.get(k) for k in _VERDICT_KEY), pair)] = str(named)
    return out


def _verdict_agreement(ra: MethodResult, rb: MethodResult, seed: int) -> list[dict[str, Any]]:
    """Per judge: the share of verdicts both runs gave the same way, over the verdicts both
    made, with a percentile interval from resampling memes."""
    import numpy as np

    from memearena.stats.cluster import cluster_weights

    read_a, read_b = getattr(ra, "iter_battles", None), getattr(rb, "iter_battles", None)
    if not callable(read_a) or not callable(read_b):
        return []
    va, vb = _verdicts(read_a()), _verdicts(read_b())
    per_judge: dict[str, dict[Any, list[int]]] = {}
    for key, winner in va.items():
        other = vb.get(key)
        if other is None:
            continue
        cell = per_judge.setdefault(str(key[4]), {}).setdefault(key[0], [0, 0])
        cell[0] += int(winner == other)
        cell[1] += 1
    out = []
    rng = np.random.default_rng(seed)
    for judge in sorted(per_judge):
        counts = np.array(list(per_judge[judge].values()), dtype=np.float64)
        same, n = counts[:, 0], counts[:, 1]
        shares = []
        for w in cluster_weights(len(counts), BOOTSTRAP_ROUNDS, rng):
            total = w @ n
            shares.extend(((w @ same) / np.where(total > 0, total, 1)).tolist())
        lo, hi = np.percentile(shares, [2.5, 97.5]).tolist()
        out.append(
            {
                "judge": judge,
                "verdicts": int(n.sum()),
                "memes": len(counts),
                "value": float(same.sum() / n.sum()),
                "ci_low": lo,
                "ci_high": hi,
            }
        )
    return out


def _snapshot_config(run_dir: Path) -> dict[str, Any]:
    """The config the run last recorded (run.db's snapshot, else leaderboard.json's)."""
    db = run_dir / "run.db"
    if db.is_file():
        from memearena.store import RunStore

        with RunStore(db) as store:
            snap = store.latest_snapshot()
        if snap and isinstance(snap.get("config"), dict):
            return snap["config"]
    run = read_json(run_dir / "leaderboard.json").get("run")
    config = run.get("config") if isinstance(run, dict) else None
    return config if isinstance(config, dict) else {}


def _flat(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict) and value:
        for k, v in value.items():
            yield from _flat(v, f"{prefix}.{k}" if prefix else str(k))
    else:
        yield prefix, value


def _config_diff(a: Mapping[str, Any], b: Mapping[str, Any], method: str) -> list[dict[str, Any]]:
    """Every key whose value differs, other methods' sections left out."""
    from memearena.engine.registry import method_names

    others = set(method_names()) - {method}
    a = {k: v for k, v in a.items() if k not in others}
    b = {k: v for k, v in b.items() if k not in others}
    fa, fb = dict(_flat(a)), dict(_flat(b))
    missing = object()
    out = []
    for key in sorted(set(fa) | set(fb)):
        x, y = fa.get(key, missing), fb.get(key, missing)
        if x != y:
            out.append(
                {"key": key, "a": None if x is missing else x, "b": None if y is missing else y}
            )
    return out


def compare_runs(
    run_a: str | Path, run_b: str | Path, *, method: str | None = None, seed: int = 0
) -> Comparison:
    """Compare two run directories of one method (``method``: which, when both hold several).
    MemearenaError when either is not a finished run or they share no method."""
    a, b = Path(run_a), Path(run_b)
    name = _pick_method(a, b, method)
    ra, rb = _result(name, a), _result(name, b)
    entity = type(ra).entity
    figures = _figures(ra, rb, entity)
    judges = [
        f for f in figures if entity == "judge" or str(f.get("figure", "")).startswith("judge.")
    ]
    return Comparison(
        method=name,
        entity=entity,
        run_a=str(a),
        run_b=str(b),
        rows=_rows(ra, rb, entity),
        figures=figures,
        judges=judges,
        verdicts=_verdict_agreement(ra, rb, seed),
        config=_config_diff(_snapshot_config(a), _snapshot_config(b), name),
    )
