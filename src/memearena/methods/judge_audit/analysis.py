"""The Judge audit's analysis: its records → the ``"judge_audit"`` section of
``leaderboard.json`` (an evaluator leaderboard, one row per judge, every figure with its
interval, bootstrapped over items), and the flags an Arena run warns about.

One bootstrap: a single draw of resampling weights over the items (the sampled unit) is shared
by every judge and every figure, so a comparison between two judges is paired (both are
resampled on the same items) and the rank interval comes from the same replicates as the
figures.

Flags. On a BD/BC figure (a bias type, a category, overall) and on position consistency, a
judge is flagged when the paired bootstrap interval of its difference from the reference judge
(``reference_judge``; without one, the mean of the other judges) lies wholly below 0 and the
difference is at least ``PAIRED_MARGIN``; on position when its P(first) interval excludes 0.5,
on verbosity when its P(prefer padded) interval lies above 0.5 (preferring the concise original
is what an unbiased judge should do), and on self-enhancement when its interval lies above 0 —
each only when the point estimate also departs from the no-bias value by a practical margin
(``RATE_MARGIN``, ``SELF_MARGIN``, ``PAIRED_MARGIN``), since a panel is many tests at once.

Trust ranking: judges are ranked by ``trust`` = 1 − the mean of four shortfalls from the ideal,
each on a 0–1 scale: 1 − overall BD/BC; position |P(first) − 0.5| × 2; verbosity
max(0, P(prefer padded) − 0.5) × 2; self-enhancement max(0, points) / 9 (a share of the 1–10
scale), capped at 1. A component without data is left out of that judge's mean (the row says
which entered). The rank interval is the 95% percentile range of the judge's rank over the
bootstrap replicates; a flagged judge's rank label carries ``*``.
"""

from __future__ import annotations

import json
import warnings
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from memearena.config import RunConfig, SimModelConfig
from memearena.errors import DataError
from memearena.jsonsafe import loads_bounded
from memearena.methods.judge_audit.stages import JudgeAuditOutcome
from memearena.stats.judge_bias import (
    BIAS_CATEGORIES,
    BIAS_TYPES,
    BiasPair,
    RatioEstimate,
    bias_table,
    bias_terms,
    bootstrap_weights,
    mean_of_types,
    type_values,
    unit_ratio,
)
from memearena.store import RunStore

__all__ = [
    "CLASSIC_FLAGS",
    "audit_warnings",
    "expected_flags",
    "iter_score_rows",
    "judge_audit_section",
    "score_rows",
]

CLASSIC_FLAGS: tuple[str, ...] = (
    "position",
    "position_consistency",
    "verbosity",
    "self_enhancement",
)
"""Flags of the classic biases (the others are bias types, categories and ``overall``)."""

RATE_MARGIN = 0.08
"""P(first) and P(prefer padded) flag only beyond 0.5 ± this (and with the interval)."""
SELF_MARGIN = 0.25
"""Self-enhancement (score points, 1–10 scale) flags only beyond this (and with the interval)."""
PAIRED_MARGIN = 0.05
"""A BD/BC or consistency figure flags only when it is at least this far below the reference
(and the paired interval lies below 0)."""
SELF_SCALE = 9.0
"""Self-enhancement's shortfall in the trust composite: its points as a share of the 1–10 scale."""

_SCORE_ROLES = ("judge_audit.score", "judge_audit.pairwise")
_BOARD_BYTES = 1 << 30  # an audit's leaderboard embeds its examples' thumbnails


def _est(e: RatioEstimate) -> dict[str, Any]:
    return {"value": e.value, "ci_low": e.ci_low, "ci_high": e.ci_high, "n": e.n}


def _per_item(
    rows: Iterable[tuple[str, float, float]],
) -> tuple[list[float], list[float]]:
    num: dict[str, float] = defaultdict(float)
    den: dict[str, float] = defaultdict(float)
    for item, x, d in rows:
        num[item] += x
        den[item] += d
    keys = sorted(den)
    return [num[k] for k in keys], [den[k] for k in keys]


def score_rows(outcome: JudgeAuditOutcome) -> list[dict[str, Any]]:
    """Every scored pair in the ``judge-audit metrics`` input format (plus judge and status)."""
    return list(iter_score_rows(outcome))


def iter_score_rows(outcome: JudgeAuditOutcome) -> Iterator[dict[str, Any]]:
    """``score_rows`` one at a time (a writer holds one row, not one per pair)."""
    for r in outcome.scores:
        yield {
            "id": r.item,
            "bias_type": r.bias_type,
            "unbiased_score": r.unbiased,
            "biased_score": r.biased,
            "judge": r.judge,
            "responder": r.responder,
            "status": [r.unbiased_status, r.biased_status],
        }


def _self_enhancement(
    judge: str,
    outcome: JudgeAuditOutcome,
    index: dict[str, int],
    W: np.ndarray,
) -> tuple[tuple[float | None, np.ndarray], dict[str, Any]] | None:
    fam = outcome.families.get(judge, judge)
    responders = {r for _, _, r, _ in outcome.base_scores}
    own = sorted(r for r in responders if outcome.families.get(r, r) == fam or r == judge)
    if not own or len(own) == len(responders):
        return None
    parts = np.zeros((len(index), 8))
    for j, item, responder, score in outcome.base_scores:
        if score is None:
            continue
        slot = (0 if j == judge else 2) + (0 if responder in own else 4)
        parts[index[item], slot] += score
        parts[index[item], slot + 1] += 1

    def did(t: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return (t[..., 0] / t[..., 1] - t[..., 2] / t[..., 3]) - (
                t[..., 4] / t[..., 5] - t[..., 6] / t[..., 7]
            )

    tot = parts.sum(axis=0)
    n = int((parts[:, [1, 3, 5, 7]].sum(axis=1) > 0).sum())
    if np.any(tot[[1, 3, 5, 7]] <= 0):
        reps = np.full(len(W), np.nan)
        return (None, reps), {**_est_of(None, reps, n), "own": own}
    value = float(did(tot))
    reps = did(W @ parts) if len(W) else np.zeros(0)
    return (value, reps), {**_est_of(value, reps, n), "own": own}


def _usage(store: RunStore | None, judges: Sequence[str], n_boot: int, seed: int) -> dict[str, Any]:
    per: dict[str, dict[str, list[float]]] = {j: {"cost": [], "secs": []} for j in judges}
    if store is not None:
        for c in store.iter_calls():  # streamed: one chunk of records at a time
            if c.role in _SCORE_ROLES and c.model in per and c.status not in ("cached", "budget"):
                per[c.model]["cost"].append(c.cost_usd * 1000)
                per[c.model]["secs"].append(c.latency_s * 1000)
    out: dict[str, Any] = {}
    for j, d in per.items():
        ones = [1.0] * len(d["cost"])
        out[j] = {
            "cost_usd_per_1k": _est(unit_ratio(d["cost"], ones, n_boot=n_boot, seed=seed)),
            "seconds_per_1k": _est(unit_ratio(d["secs"], ones, n_boot=n_boot, seed=seed)),
        }
    return out


def _est_of(value: float | None, reps: np.ndarray, n: int) -> dict[str, Any]:
    """A figure with its percentile interval over the replicates (None without data)."""
    if value is None or not np.isfinite(value):
        return {"value": None, "ci_low": None, "ci_high": None, "n": n}
    finite = reps[np.isfinite(reps)]
    lo = hi = None
    if len(finite):
        lo, hi = (float(x) for x in np.percentile(finite, [2.5, 97.5]))
    return {"value": float(value), "ci_low": lo, "ci_high": hi, "n": n}


def _ratio(num: np.ndarray, den: np.ndarray, W: np.ndarray) -> tuple[float | None, np.ndarray]:
    tot = float(den.sum())
    value = float(num.sum()) / tot if tot > 0 else None
    with np.errstate(invalid="ignore", divide="ignore"):
        bn, bd = W @ num, W @ den
        reps = np.where(bd > 0, bn / np.maximum(bd, 1e-300), np.nan)
    return value, reps


def _vectors(
    rows: Iterable[tuple[str, float, float]], index: dict[str, int]
) -> tuple[np.ndarray, np.ndarray]:
    num, den = np.zeros(len(index)), np.zeros(len(index))
    for item, x, d in rows:
        i = index[item]
        num[i] += x
        den[i] += d
    return num, den


@dataclass
class _JudgeFigures:
    """One judge's figures: point values and their bootstrap replicates (shared weights)."""

    types: np.ndarray
    types_boot: np.ndarray
    have: list[int]
    figures: dict[str, tuple[float | None, np.ndarray]] = field(default_factory=dict)

    def mean_cols(self, cols: list[int]) -> tuple[float | None, np.ndarray]:
        have = [c for c in cols if c in self.have]
        if not have:
            return None, np.full(len(self.types_boot), np.nan)
        return float(np.mean(self.types[have])), mean_of_types(self.types_boot, have)


def _rates(
    recs: Sequence[Any], index: dict[str, int], W: np.ndarray, status: str
) -> dict[str, Any]:
    """The share of judgements with ``status``: over all distinct judgements, per side
    (unbiased / biased) and per bias type and side; the unbiased triplet shared by several
    types is one judgement in the overall and per-side figures."""
    seen: set[tuple[str, str | None, bool]] = set()
    uni: list[tuple[str, float, float]] = []
    bia: list[tuple[str, float, float]] = []
    by_type: dict[str, dict[str, list[tuple[str, float, float]]]] = defaultdict(
        lambda: {"unbiased": [], "biased": []}
    )
    for r in recs:
        key = (r.item, r.responder, r.bias_type == "unnecessary_image")
        u = (r.item, float(r.unbiased_status == status), 1.0)
        b = (r.item, float(r.biased_status == status), 1.0)
        if key not in seen:
            seen.add(key)
            uni.append(u)
        bia.append(b)
        by_type[r.bias_type]["unbiased"].append(u)
        by_type[r.bias_type]["biased"].append(b)

    def est(rows: list[tuple[str, float, float]]) -> dict[str, Any]:
        num, den = _vectors(rows, index)
        v, reps = _ratio(num, den, W)
        out = _est_of(v, reps, int((den > 0).sum()))
        out["judgements"] = int(den.sum())
        return out

    return {
        "all": est(uni + bia),
        "unbiased": est(uni),
        "biased": est(bia),
        "by_type": {t: {k: est(v) for k, v in sides.items()} for t, sides in by_type.items()},
    }


def _shortfalls(
    overall: float | None, p_first: float | None, p_padded: float | None, se: float | None
) -> dict[str, float | None]:
    return {
        "bd_bc": None if overall is None else 1.0 - overall,
        "position": None if p_first is None else abs(p_first - 0.5) * 2,
        "verbosity": None if p_padded is None else max(0.0, p_padded - 0.5) * 2,
        "self_enhancement": None if se is None else min(1.0, max(0.0, se) / SELF_SCALE),
    }


def _shortfalls_boot(
    overall: np.ndarray, p_first: np.ndarray, p_padded: np.ndarray, se: np.ndarray
) -> np.ndarray:
    return np.stack(
        [
            1.0 - overall,
            np.abs(p_first - 0.5) * 2,
            np.maximum(0.0, p_padded - 0.5) * 2,
            np.minimum(1.0, np.maximum(0.0, se) / SELF_SCALE),
        ],
        axis=1,
    )


def judge_audit_section(
    cfg: RunConfig,
    outcome: JudgeAuditOutcome,
    store: RunStore | None = None,
    *,
    bootstrap: int | None = None,
) -> dict[str, Any]:
    """The ``"judge_audit"`` document: the evaluator leaderboard and its context."""
    assert cfg.judge_audit is not None
    acfg = cfg.judge_audit
    n_boot = acfg.bootstrap if bootstrap is None else bootstrap
    seed = cfg.seed
    by_judge: dict[str, list[Any]] = defaultdict(list)
    for rec in outcome.scores:
        by_judge[rec.judge].append(rec)
    verdicts: dict[str, list[Any]] = defaultdict(list)
    for v in outcome.verdicts:
        verdicts[v.judge].append(v)
    # The items every figure is resampled over, and one draw of weights shared by all.
    all_items = sorted(
        {r.item for r in outcome.scores}
        | {v.item for v in outcome.verdicts}
        | {item for _, item, _, _ in outcome.base_scores}
    )
    index = {k: i for i, k in enumerate(all_items)}
    W = bootstrap_weights(len(all_items), n_boot, seed)
    n_rep = len(W)
    usage = _usage(store, acfg.judges, n_boot, seed)
    rows: list[dict[str, Any]] = []
    figs: dict[str, _JudgeFigures] = {}
    t_index = {t: i for i, t in enumerate(BIAS_TYPES)}
    for judge in acfg.judges:
        recs = by_judge.get(judge, [])
        pairs = [BiasPair(r.item, r.bias_type, r.unbiased, r.biased) for r in recs]
        table = bias_table(pairs, n_boot=0, seed=seed)
        terms = bias_terms(pairs).aligned(all_items)
        point = type_values(terms.sums.sum(0), terms.counts.sum(0), terms.scored.sum(0))
        boot = (
            type_values(W @ terms.sums, W @ terms.counts, W @ terms.scored)
            if n_rep
            else np.full((0, len(BIAS_TYPES)), np.nan)
        )
        jf = _JudgeFigures(
            point, boot, [i for i in range(len(BIAS_TYPES)) if np.isfinite(point[i])]
        )
        for t in BIAS_TYPES:
            i = t_index[t]
            jf.figures[t] = (float(point[i]) if np.isfinite(point[i]) else None, boot[:, i])
        for c in BIAS_CATEGORIES:
            jf.figures[c] = jf.mean_cols([t_index[t] for t in BIAS_TYPES if BIAS_TYPES[t][0] == c])
        jf.figures["overall"] = jf.mean_cols(list(range(len(BIAS_TYPES))))

        def with_ci(fig: Any, name: str, jf: _JudgeFigures = jf) -> dict[str, Any]:
            d = fig.model_dump()
            v, reps = jf.figures[name]
            e = _est_of(v, reps, 0)
            d["ci_low"], d["ci_high"] = e["ci_low"], e["ci_high"]
            return d

        abst = _rates(recs, index, W, "abstained")
        unparsed = _rates(recs, index, W, "unparsed")
        statuses = [s for r in recs for s in (r.unbiased_status, r.biased_status)]
        n_judgements = abst["unbiased"]["judgements"] + abst["biased"]["judgements"]
        row: dict[str, Any] = {
            "judge": judge,
            "simulated": isinstance(cfg.models.get(judge), SimModelConfig),
            "judgments": n_judgements,
            "overall": with_ci(table.overall, "overall"),
            "categories": {k: with_ci(v, k) for k, v in table.categories.items()},
            "types": {k: with_ci(v, k) for k, v in table.types.items()},
            "abstention_rate": abst["all"],
            "parse_failure_rate": unparsed["all"],
            "abstention": abst,
            "unparsed": unparsed,
            "refusals": sum(s == "refusal" for s in statuses),
            "failed_calls": sum(s == "error" for s in statuses),
            **usage.get(judge, {}),
        }
        vs = verdicts.get(judge, [])
        pos = [v for v in vs if v.probe == "position" and v.preference is not None]
        first = _vectors(
            ((v.item, {"A": 1.0, "B": 0.0, "tie": 0.5}[v.preference], 1.0) for v in pos), index
        )
        jf.figures["p_prefer_first"] = _ratio(*first, W)
        row["p_prefer_first"] = _est_of(*jf.figures["p_prefer_first"], int((first[1] > 0).sum()))
        cons = _vectors(_consistency(pos), index)
        jf.figures["position_consistency"] = _ratio(*cons, W)
        row["position_consistency"] = _est_of(
            *jf.figures["position_consistency"], int((cons[1] > 0).sum())
        )
        verb = [v for v in vs if v.probe == "verbosity" and v.preference is not None]
        padded = _vectors(
            (
                (
                    v.item,
                    {
                        "A": float(v.first == "padded"),
                        "B": float(v.second == "padded"),
                        "tie": 0.5,
                    }[v.preference],
                    1.0,
                )
                for v in verb
            ),
            index,
        )
        jf.figures["p_prefer_padded"] = _ratio(*padded, W)
        row["p_prefer_padded"] = _est_of(*jf.figures["p_prefer_padded"], int((padded[1] > 0).sum()))
        row["pairwise_failures"] = sum(v.preference is None for v in vs)
        se = _self_enhancement(judge, outcome, index, W)
        jf.figures["self_enhancement"] = se[0] if se is not None else (None, np.full(n_rep, np.nan))
        row["self_enhancement"] = se[1] if se is not None else None
        row["flags"] = []
        figs[judge] = jf
        rows.append(row)
    ref = acfg.reference_judge if acfg.reference_judge in figs else None
    for name in (*BIAS_TYPES, *BIAS_CATEGORIES, "overall", "position_consistency"):
        _flag_paired(rows, figs, name, ref)
    for r in rows:
        if _excludes(r["p_prefer_first"], 0.5, RATE_MARGIN):
            r["flags"].append("position")
        pp = r["p_prefer_padded"]
        if pp.get("ci_low") is not None and pp["ci_low"] > 0.5 and pp["value"] - 0.5 >= RATE_MARGIN:
            r["flags"].append("verbosity")
        se = r["self_enhancement"]
        se_low = se.get("ci_low") if se is not None else None
        if se is not None and se_low is not None and se_low > 0 and se["value"] >= SELF_MARGIN:
            r["flags"].append("self_enhancement")
    _trust(rows, figs, n_rep)
    doc: dict[str, Any] = {
        "prompt": acfg.prompt,
        "items": outcome.items,
        "bias_types": list(acfg.bias_types),
        "reference_judge": ref,
        "bootstrap": n_boot,
        "leaderboard": rows,
        "examples": outcome.examples,
        "construction": _construction(outcome, acfg.texture_max_cover),
        "note": (
            "Ranked by trust = 1 − mean shortfall from the ideal of BD/BC overall, position "
            "(|P(first) − 0.5| × 2), verbosity (max(0, P(padded) − 0.5) × 2) and "
            "self-enhancement (points / 9); * = flagged. BD/BC: higher is better; intervals: "
            "95% bootstrap over items, one draw shared by every judge. A judge is flagged "
            "where the paired interval of its difference from the reference judge (the other "
            "judges' mean when none is set) lies below 0, where P(first) excludes 0.5, where "
            "P(prefer padded) lies above 0.5, or where self-enhancement exceeds 0."
        ),
    }
    if store is not None:
        errs: dict[str, int] = defaultdict(int)
        for e in store.errors():
            if e.kind.startswith("ja_") or e.kind in ("meme", "data"):
                errs[f"{e.kind}: {e.reason.split(':')[0]}"] += 1
        doc["errors"] = dict(sorted(errs.items()))
        doc["usage"] = store.usage_summary("judge_audit.")
    sims = {j: cfg.models[j] for j in acfg.judges if isinstance(cfg.models.get(j), SimModelConfig)}
    if len(sims) == len(acfg.judges):
        doc["simulated"] = {
            "note": "judges are simulated; this checks the method, not real models",
            "injected": {j: sorted(expected_flags(m)) for j, m in sims.items()},  # type: ignore[arg-type]
            "weak": {
                j: sorted(expected_flags(m, strong_only=False) - expected_flags(m))  # type: ignore[arg-type]
                for j, m in sims.items()
            },
        }
    if outcome.stopped:
        doc["stopped"] = outcome.stopped
    return doc


def _construction(outcome: JudgeAuditOutcome, max_cover: float) -> dict[str, Any]:
    """How the perturbations were built, as measured: texture_insertion's covered share per
    item, and the integrality pairs left out because the item does not need what is removed."""
    shares = sorted(outcome.covered.values())
    return {
        "texture_insertion": {
            "max_cover": max_cover,
            "items": len(shares),
            "covered_mean": float(np.mean(shares)) if shares else None,
            "covered_max": shares[-1] if shares else None,
            "covered_by_item": dict(sorted(outcome.covered.items())),
        },
        "integrality_excluded": dict(sorted(outcome.integrality_excluded.items())),
    }


def _flag_paired(
    rows: list[dict[str, Any]], figs: dict[str, _JudgeFigures], name: str, ref: str | None
) -> None:
    """Flag judges whose paired difference from the reference on ``name`` lies below 0."""
    have = {j: f.figures[name] for j, f in figs.items() if f.figures[name][0] is not None}
    if len(have) < 2:
        return
    for r in rows:
        j = r["judge"]
        if j == ref or j not in have:
            continue
        v, reps = have[j]
        assert v is not None
        if ref is not None:
            if ref not in have:
                return
            rv, rreps = have[ref]
            assert rv is not None
        else:
            others = [k for k in have if k != j]
            rv = float(np.mean([have[k][0] for k in others]))  # type: ignore[misc]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                rreps = np.nanmean(np.stack([have[k][1] for k in others]), axis=0)
        diff = v - rv
        d = reps - rreps
        d = d[np.isfinite(d)]
        if not len(d):
            continue
        hi = float(np.percentile(d, 97.5))
        r.setdefault("paired", {})[name] = {
            "difference": diff,
            "ci_low": float(np.percentile(d, 2.5)),
            "ci_high": hi,
        }
        if hi < 0 and diff <= -PAIRED_MARGIN:
            r["flags"].append(name)


def _trust(rows: list[dict[str, Any]], figs: dict[str, _JudgeFigures], n_rep: int) -> None:
    """Rank by the trust composite (see module doc), with the rank interval over replicates."""
    points: list[float] = []
    reps: list[np.ndarray] = []
    for r in rows:
        f = figs[r["judge"]]
        comp = _shortfalls(
            f.figures["overall"][0],
            f.figures["p_prefer_first"][0],
            f.figures["p_prefer_padded"][0],
            f.figures["self_enhancement"][0],
        )
        have = [k for k, v in comp.items() if v is not None]
        trust = 1.0 - float(np.mean([comp[k] for k in have])) if have else float("nan")
        boot = _shortfalls_boot(
            f.figures["overall"][1],
            f.figures["p_prefer_first"][1],
            f.figures["p_prefer_padded"][1],
            f.figures["self_enhancement"][1],
        )
        cols = [i for i, k in enumerate(comp) if comp[k] is not None]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            tb = 1.0 - np.nanmean(boot[:, cols], axis=1) if cols else np.full(n_rep, np.nan)
        points.append(trust)
        reps.append(tb)
        r["trust"] = _est_of(trust, tb, 0)
        r["trust"]["components"] = comp
        r["trust"]["entered"] = have
    order = sorted(range(len(rows)), key=lambda i: -points[i] if np.isfinite(points[i]) else 1.0)
    if n_rep and rows:
        R = np.stack(reps, axis=1)  # replicates × judges
        R = np.where(np.isfinite(R), R, -np.inf)
        # Rank 1 = highest trust in that replicate (ties share the better rank).
        rank_b = 1 + (R[:, None, :] > R[:, :, None]).sum(axis=2)
    for pos, i in enumerate(order, start=1):
        r = rows[i]
        r["rank"] = pos
        r["rank_label"] = f"{pos}*" if r["flags"] else str(pos)
        if n_rep:
            lo, hi = np.percentile(rank_b[:, i], [2.5, 97.5])
            r["rank_ci"] = [int(np.floor(lo)), int(np.ceil(hi))]
        else:
            r["rank_ci"] = None
    rows[:] = [rows[i] for i in order]


def _consistency(verdicts: Sequence[Any]) -> list[tuple[str, float, float]]:
    """(item, 1 if the two verdicts of a pair judged in both orders agree, 1) per such pair."""
    seen: dict[tuple[str, str, str], str] = {}
    rows: list[tuple[str, float, float]] = []
    for v in verdicts:
        winner = {"A": v.first, "B": v.second, "tie": "tie"}[v.preference]
        back = seen.pop((v.item, v.second, v.first), None)
        if back is None:
            seen[(v.item, v.first, v.second)] = winner
        else:
            rows.append((v.item, float(back == winner), 1.0))
    return rows


def _excludes(est: dict[str, Any], value: float, margin: float) -> bool:
    lo, hi, v = est.get("ci_low"), est.get("ci_high"), est.get("value")
    if lo is None or hi is None or v is None:
        return False
    return (lo > value or hi < value) and abs(v - value) >= margin


def expected_flags(m: SimModelConfig, *, strong_only: bool = True) -> set[str]:
    """The flags a simulated judge's injected failure modes should raise: with
    ``strong_only``, only those injected at the strength the demo's sample is sized to detect
    (weaker ones may or may not be flagged)."""
    cut = {"image": 0.5, "query": 0.5, "text": 0.3, "position": 0.2, "verbosity": 0.2, "self": 0.3}
    if not strong_only:
        cut = dict.fromkeys(cut, 1e-9)
    out: set[str] = set()
    if m.ignores_image >= cut["image"]:
        out |= {"text_dominance", "image_misalignment"}
    if m.query_trust >= cut["query"]:
        out |= {"instruction_misalignment", "detail_description"}
    if m.text_sway >= cut["text"]:
        out.add("texture_insertion")
    if abs(m.position_bias) >= cut["position"]:
        out.add("position")
    if m.verbosity_bias >= cut["verbosity"]:
        out.add("verbosity")
    if m.self_bias >= cut["self"]:
        out.add("self_enhancement")
    return out


def audit_warnings(path: Path, judges: Sequence[str]) -> list[str]:
    """One line per panel judge that the audit run at ``path`` (its ``leaderboard.json``)
    flagged; a judge the audit did not cover is said so too."""
    try:
        doc = loads_bounded(Path(path).read_bytes().decode("utf-8-sig"), max_bytes=_BOARD_BYTES)
    except OSError as e:
        raise DataError(f"{path}: cannot read the judge audit ({e.strerror})") from None
    except json.JSONDecodeError as e:
        raise DataError(f"{path}:{e.lineno}: invalid JSON ({e.msg})") from None
    except ValueError as e:  # not UTF-8, too deep, a huge number
        raise DataError(f"{path}: invalid JSON ({e})") from None
    section = doc.get("judge_audit") if isinstance(doc, dict) else None
    rows = section.get("leaderboard") if isinstance(section, dict) else None
    if not isinstance(rows, list):
        raise DataError(f"{path}: no 'judge_audit' leaderboard in this file")
    flagged = {
        str(r.get("judge")): [str(f) for f in r.get("flags") or []]
        for r in rows
        if isinstance(r, dict)
    }
    out: list[str] = []
    for j in judges:
        if j not in flagged:
            out.append(f"judge {j!r} was not covered by the judge audit {path}")
        elif flagged[j]:
            out.append(f"judge {j!r} is flagged by the judge audit: {', '.join(flagged[j])}")
    return out
