"""The Judge audit's analysis: its records → the ``"judge_audit"`` section of
``leaderboard.json`` (an evaluator leaderboard, one row per judge, every figure with its
interval, bootstrapped over items), and the flags an Arena run warns about.

Flags: a judge is flagged on a BD/BC figure (a bias type, a category, overall) or on position
consistency when its whole interval lies below the reference's interval (the configured
``reference_judge``, else the panel's best judge on that figure), hence excludes its value;
on position when its P(first) interval excludes 0.5, on verbosity when its P(prefer padded)
interval excludes 0.5, and on self-enhancement when its interval lies above 0 — each only when
the point estimate also departs from the no-bias value by a practical margin
(``RATE_MARGIN``, ``SELF_MARGIN``), since a panel is many tests at once and a 95% interval
alone would flag one unbiased figure in twenty.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from memearena.config import RunConfig, SimModelConfig
from memearena.errors import DataError
from memearena.jsonsafe import loads_bounded
from memearena.pipelines.judge_audit.driver import JudgeAuditOutcome
from memearena.stats.judge_bias import (
    BIAS_CATEGORIES,
    BIAS_TYPES,
    BiasPair,
    RatioEstimate,
    bias_table,
    difference_in_differences,
    unit_ratio,
)
from memearena.store import RunStore

__all__ = [
    "CLASSIC_FLAGS",
    "audit_warnings",
    "expected_flags",
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
    return [
        {
            "id": r.item,
            "bias_type": r.bias_type,
            "unbiased_score": r.unbiased,
            "biased_score": r.biased,
            "judge": r.judge,
            "responder": r.responder,
            "status": [r.unbiased_status, r.biased_status],
        }
        for r in outcome.scores
    ]


def _self_enhancement(
    judge: str,
    outcome: JudgeAuditOutcome,
    n_boot: int,
    seed: int,
) -> dict[str, Any] | None:
    fam = outcome.families.get(judge, judge)
    responders = {r for _, _, r, _ in outcome.base_scores}
    own = sorted(r for r in responders if outcome.families.get(r, r) == fam or r == judge)
    if not own or len(own) == len(responders):
        return None
    parts: dict[str, list[float]] = defaultdict(lambda: [0.0] * 8)
    for j, item, responder, score in outcome.base_scores:
        if score is None:
            continue
        p = parts[item]
        slot = (0 if j == judge else 2) + (0 if responder in own else 4)
        p[slot] += score
        p[slot + 1] += 1
    est = difference_in_differences([parts[k] for k in sorted(parts)], n_boot=n_boot, seed=seed)
    return {**_est(est), "own": own}


def _usage(store: RunStore | None, judges: Sequence[str], n_boot: int, seed: int) -> dict[str, Any]:
    per: dict[str, dict[str, list[float]]] = {j: {"cost": [], "secs": []} for j in judges}
    if store is not None:
        for c in store.calls():
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


def _flag_below(rows: list[dict[str, Any]], get: Any, name: str, ref: str | None) -> None:
    """Flag judges whose interval lies wholly below the reference value on one figure."""
    vals = {r["judge"]: get(r) for r in rows}
    have = {j: v for j, v in vals.items() if v is not None and v.get("value") is not None}
    if len(have) < 2:
        return
    ref_judge = ref if ref in have else max(have, key=lambda j: have[j]["value"])
    # Both sides are estimates: flag only when the intervals do not overlap (the judge's whole
    # interval lies below the reference's), so noise in the reference cannot flag the panel.
    ref_est = have[ref_judge]
    bar = ref_est["ci_low"] if ref_est.get("ci_low") is not None else ref_est["value"]
    for r in rows:
        v = have.get(r["judge"])
        if r["judge"] == ref_judge or v is None or v.get("ci_high") is None:
            continue
        if v["ci_high"] < bar:
            r["flags"].append(name)


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
    usage = _usage(store, acfg.judges, n_boot, seed)
    rows: list[dict[str, Any]] = []
    for judge in acfg.judges:
        recs = by_judge.get(judge, [])
        table = bias_table(
            (BiasPair(r.item, r.bias_type, r.unbiased, r.biased) for r in recs),
            n_boot=n_boot,
            seed=seed,
        )
        statuses = [(r.item, s) for r in recs for s in (r.unbiased_status, r.biased_status)]
        abst = _per_item((i, float(s == "abstained"), 1.0) for i, s in statuses)
        fail = _per_item((i, float(s == "unparsed"), 1.0) for i, s in statuses)
        row: dict[str, Any] = {
            "judge": judge,
            "simulated": isinstance(cfg.models.get(judge), SimModelConfig),
            "judgments": len(statuses),
            "overall": table.overall.model_dump(),
            "categories": {k: v.model_dump() for k, v in table.categories.items()},
            "types": {k: v.model_dump() for k, v in table.types.items()},
            "abstention_rate": _est(unit_ratio(*abst, n_boot=n_boot, seed=seed)),
            "parse_failure_rate": _est(unit_ratio(*fail, n_boot=n_boot, seed=seed)),
            "refusals": sum(s == "refusal" for _, s in statuses),
            "failed_calls": sum(s == "error" for _, s in statuses),
            **usage.get(judge, {}),
        }
        vs = verdicts.get(judge, [])
        pos = [v for v in vs if v.probe == "position" and v.preference is not None]
        first = _per_item(
            (v.item, {"A": 1.0, "B": 0.0, "tie": 0.5}[v.preference], 1.0) for v in pos
        )
        row["p_prefer_first"] = _est(unit_ratio(*first, n_boot=n_boot, seed=seed))
        row["position_consistency"] = _est(unit_ratio(*_consistency(pos), n_boot=n_boot, seed=seed))
        verb = [v for v in vs if v.probe == "verbosity" and v.preference is not None]
        padded = _per_item(
            (
                v.item,
                {"A": float(v.first == "padded"), "B": float(v.second == "padded"), "tie": 0.5}[
                    v.preference
                ],
                1.0,
            )
            for v in verb
        )
        row["p_prefer_padded"] = _est(unit_ratio(*padded, n_boot=n_boot, seed=seed))
        row["pairwise_failures"] = sum(v.preference is None for v in vs)
        row["self_enhancement"] = _self_enhancement(judge, outcome, n_boot, seed)
        row["flags"] = []
        rows.append(row)
    ref = acfg.reference_judge
    for t in BIAS_TYPES:
        _flag_below(rows, lambda r, t=t: r["types"][t], t, ref)
    for c in BIAS_CATEGORIES:
        _flag_below(rows, lambda r, c=c: r["categories"][c], c, ref)
    _flag_below(rows, lambda r: r["overall"], "overall", ref)
    _flag_below(rows, lambda r: r["position_consistency"], "position_consistency", ref)
    for r in rows:
        if _excludes(r["p_prefer_first"], 0.5, RATE_MARGIN):
            r["flags"].append("position")
        if _excludes(r["p_prefer_padded"], 0.5, RATE_MARGIN):
            r["flags"].append("verbosity")
        se = r["self_enhancement"]
        se_low = se.get("ci_low") if se is not None else None
        if se is not None and se_low is not None and se_low > 0 and se["value"] >= SELF_MARGIN:
            r["flags"].append("self_enhancement")
    rows.sort(key=lambda r: -(r["overall"]["value"] if r["overall"]["value"] is not None else -1))
    for rank, r in enumerate(rows, start=1):
        r["rank"] = rank
    doc: dict[str, Any] = {
        "prompt": acfg.prompt,
        "items": outcome.items,
        "bias_types": list(acfg.bias_types),
        "reference_judge": ref,
        "bootstrap": n_boot,
        "leaderboard": rows,
        "examples": outcome.examples,
        "note": (
            "BD/BC: higher is better; intervals: 95% bootstrap over items. A judge is flagged "
            "where its interval lies wholly below the reference judge's (the panel's best when "
            "none is set), where P(first) or P(prefer padded) excludes 0.5, or where "
            "self-enhancement exceeds 0."
        ),
    }
    if store is not None:
        errs: dict[str, int] = defaultdict(int)
        for e in store.errors():
            if e.kind.startswith("ja_") or e.kind in ("meme", "data"):
                errs[f"{e.kind}: {e.reason.split(':')[0]}"] += 1
        doc["errors"] = dict(sorted(errs.items()))
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


def _consistency(verdicts: Sequence[Any]) -> tuple[list[float], list[float]]:
    """Per item: pairs judged in both orders whose two verdicts agree / such pairs."""
    seen: dict[tuple[str, str, str], str] = {}
    rows: list[tuple[str, float, float]] = []
    for v in verdicts:
        winner = {"A": v.first, "B": v.second, "tie": "tie"}[v.preference]
        back = seen.pop((v.item, v.second, v.first), None)
        if back is None:
            seen[(v.item, v.first, v.second)] = winner
        else:
            rows.append((v.item, float(back == winner), 1.0))
    return _per_item(rows)


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
