"""The Judge audit's analysis: its records → the ``"judge_audit"`` section of
``leaderboard.json`` (an evaluator leaderboard, one row per judge, every figure with its
interval, bootstrapped over items), and the flags an Arena run warns about.

Streaming: the outcome's logs (every scored pair and verdict, spooled as they came) are read
once, in arrival order, a chunk at a time, into per-item sums per judge (BD/BC terms, status
counts, verdict sums, the base scores self-enhancement compares); a cell's sum adds its terms
in the order they arrived, so the figures are those of the records held in a list.

One bootstrap: a single draw of resampling weights over the items (the sampled unit) is shared
by every judge and every figure, so a comparison between two judges is paired (both are
resampled on the same items) and the rank interval comes from the same replicates as the
figures.

Flags hold a stated error rate. Each judge faces one family of tests (``FLAG_TESTS``): every
BD/BC figure (nine types, three categories, overall) and position consistency against its
comparator — the reference judge (``reference_judge``), and for the reference judge itself, or
for every judge without one, the mean of the other judges — where it is worse; P(first) against
0.5 (either way), P(prefer padded) above 0.5 (preferring the concise original is what an
unbiased judge should do) and self-enhancement above 0. Each test's p-value is a t-test on its
bootstrap standard error (``studentized_p``: the replicates every figure shares; for a paired
test, the replicates of the difference), and the family's p-values are adjusted together by
Holm (``holm_adjusted``, valid whatever the tests' dependence), so a judge without any of those
biases is flagged on anything with probability at most about ``family_alpha``. A flag also
needs the point estimate to depart from the no-bias value by a practical margin
(``PAIRED_MARGIN``, ``RATE_MARGIN``, ``SELF_MARGIN``); a test with fewer than
``flag_min_pairs`` pairs per type, or a zero-width interval, is not tested. Each row lists its
tests with their adjusted p-values (``tests``) and its flags' (``flag_p_adjusted``).

Ranking: by default the judges are ordered by MM-JudgeBias's Overall (the mean of the nine
types' BD/BC, as the reference orders them; ``order_by`` says so), with ``trust`` breaking
ties; ``rank_by: composite`` orders by ``trust`` = 1 − the mean of four shortfalls from the
ideal, each on a 0–1 scale: 1 − overall BD/BC; position 1 − decisive consistency (the same
winner in both orders, a tie not counted: an always-tie or coin-flip judge falls short);
verbosity 1 − P(prefer concise) (the share strictly preferring the concise original, the
paper's quantity, reported beside P(prefer padded)); self-enhancement max(0, points) / 9 (a
share of the 1–10 scale), capped at 1. A component without data is left out of that judge's
mean (the row says which entered). The rank interval is the 95% percentile range of the
judge's rank over the bootstrap replicates of the figure ordered by; a flagged judge's rank
label carries ``*``.
"""

from __future__ import annotations

import json
import warnings
from array import array
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from memearena.config import RunConfig, SimModelConfig
from memearena.errors import DataError
from memearena.jsonsafe import loads_bounded
from memearena.methods.judge_audit.config import JudgeAuditConfig
from memearena.methods.judge_audit.records import MISSING, PREFERENCES, ScoreLog, VerdictLog
from memearena.methods.judge_audit.stages import JudgeAuditOutcome
from memearena.stats.judge_bias import (
    BIAS_CATEGORIES,
    BIAS_TYPES,
    BiasTermsBuilder,
    RatioEstimate,
    bias_table_of,
    bootstrap_weights,
    category_of,
    holm_adjusted,
    mean_of_types,
    studentized_p,
    type_values,
    unit_ratios,
)
from memearena.stats.proportion import widened_interval
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


def score_rows(outcome: JudgeAuditOutcome) -> list[dict[str, Any]]:
    """Every scored pair in the ``judge-audit metrics`` input format (plus judge, status and
    each score's request key, ``unbiased_request`` and ``biased_request``: calls.request_hash,
    null where not recorded)."""
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
            "unbiased_request": r.unbiased_request,
            "biased_request": r.biased_request,
        }


def _self_enhancement(
    judge: str,
    families: dict[str, str],
    tally: _ScoreTally,
    W: np.ndarray,
) -> tuple[tuple[float | None, np.ndarray], dict[str, Any]] | None:
    fam = families.get(judge, judge)
    base = tally.base
    names = tally.responders
    responders = {names[r] for r in np.unique(base["responder"]).tolist()}
    own = sorted(r for r in responders if families.get(r, r) == fam or r == judge)
    if not own or len(own) == len(responders):
        return None
    parts = np.zeros((tally.n_items, 8))
    scored = base[base["kind"] != MISSING]
    is_own = np.array([n in own for n in names], dtype=bool)
    slot = np.where(scored["judge"] == tally.judge_code(judge), 0, 2) + np.where(
        is_own[scored["responder"]], 0, 4
    )
    # In arrival order, as the scores came (ufunc.at adds unbuffered, in index order).
    np.add.at(parts, (scored["item"], slot), scored["score"])
    np.add.at(parts, (scored["item"], slot + 1), 1.0)

    def did(t: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return (t[..., 0] / t[..., 1] - t[..., 2] / t[..., 3]) - (
                t[..., 4] / t[..., 5] - t[..., 6] / t[..., 7]
            )

    tot = parts.sum(axis=0)
    n = int((parts[:, [1, 3, 5, 7]].sum(axis=1) > 0).sum())
    least = int(tot[[1, 3, 5, 7]].min())
    if least <= 0:
        reps = np.full(len(W), np.nan)
        return (None, reps), {**_est_of(None, reps, n), "own": own, "min_scores": least}
    value = float(did(tot))
    reps = did(W @ parts) if len(W) else np.zeros(0)
    return (value, reps), {**_est_of(value, reps, n), "own": own, "min_scores": least}


def _usage(store: RunStore | None, judges: Sequence[str], n_boot: int, seed: int) -> dict[str, Any]:
    """Cost and latency per 1k judgements, bootstrapped over calls (one draw of weights for
    both figures of a judge, a block of replicates at a time)."""
    cost: dict[str, array[float]] = {j: array("d") for j in judges}
    secs: dict[str, array[float]] = {j: array("d") for j in judges}
    if store is not None:
        for model, usd, latency in store.call_spend(_SCORE_ROLES):  # streamed, oldest first
            if model in cost:
                cost[model].append(usd * 1000)
                secs[model].append(latency * 1000)
    out: dict[str, Any] = {}
    for j in judges:
        ones = np.ones(len(cost[j]))
        c_est, s_est = unit_ratios([cost[j], secs[j]], ones, n_boot=n_boot, seed=seed)
        out[j] = {"cost_usd_per_1k": _est(c_est), "seconds_per_1k": _est(s_est)}
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


def _widened(est: dict[str, Any], units: int) -> dict[str, Any]:
    """A rate's bootstrap interval widened to the Wilson interval over its ``units`` items:
    a percentile bootstrap of 0 abstentions is [0, 0], which claims a certainty the sample
    does not give."""
    est["ci_low"], est["ci_high"] = widened_interval(
        est["value"], units, est["ci_low"], est["ci_high"]
    )
    return est


def _ratio(num: np.ndarray, den: np.ndarray, W: np.ndarray) -> tuple[float | None, np.ndarray]:
    tot = float(den.sum())
    value = float(num.sum()) / tot if tot > 0 else None
    with np.errstate(invalid="ignore", divide="ignore"):
        bn, bd = W @ num, W @ den
        reps = np.where(bd > 0, bn / np.maximum(bd, 1e-300), np.nan)
    return value, reps


@dataclass
class _JudgeFigures:
    """One judge's figures: point values and their bootstrap replicates (shared weights)."""

    types: np.ndarray
    types_boot: np.ndarray
    have: list[int]
    figures: dict[str, tuple[float | None, np.ndarray]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    """Per test: the pairs (verdicts, scores) behind it, for the minimum a flag needs."""
    units: dict[str, int] = field(default_factory=dict)
    """Per test: the items behind it (the resampled units: a t-test's degrees of freedom)."""

    def mean_cols(self, cols: list[int]) -> tuple[float | None, np.ndarray]:
        have = [c for c in cols if c in self.have]
        if not have:
            return None, np.full(len(self.types_boot), np.nan)
        return float(np.mean(self.types[have])), mean_of_types(self.types_boot, have)


_TYPES = {t: i for i, t in enumerate(BIAS_TYPES)}
_RATE_STATUSES = ("abstained", "unparsed")
"""The statuses whose share of judgements the row reports (``abstention``, ``unparsed``)."""
_BASE_DTYPE = np.dtype(
    [("judge", np.intp), ("item", np.intp), ("responder", np.intp), ("score", "f8"), ("kind", "u1")]
)


def _lookup(codes: list[int]) -> np.ndarray:
    return np.array(codes, dtype=np.intp) if codes else np.zeros(1, dtype=np.intp)


def _first_new(keys: np.ndarray, seen: np.ndarray) -> np.ndarray:
    """Positions, in order, of each key's first occurrence in ``keys`` not yet ``seen``
    (which are then marked seen)."""
    uniq, first = np.unique(keys, return_index=True)
    fresh = ~seen[uniq]
    seen[uniq[fresh]] = True
    return np.sort(first[fresh])


class _ScoreTally:
    """One pass over the score log, in arrival order, into per-item figures of every judge:
    BD/BC term sums (``BiasTermsBuilder``), abstention and unparsed counts (all distinct
    judgements, per side, per bias type and side; the unbiased triplet shared by several types
    counted once, at its first judgement), refusals and failed calls, and the base triplets'
    scores that self-enhancement compares (the first score of each judge, item and responder)."""

    def __init__(self, log: ScoreLog, judges: Sequence[str], index: dict[str, int]) -> None:
        n, n_types, n_judges = len(index), len(BIAS_TYPES), len(judges)
        group = {j: g for g, j in enumerate(judges)}
        self.n_items = n
        self.responders: list[str | None] = list(log.responders.names)
        self._judge_codes = log.judges.codes
        self.terms = BiasTermsBuilder(sorted(index, key=index.__getitem__), n_judges)
        self.den = np.zeros((2, n_judges, n), dtype=np.int64)  # [unbiased, biased]
        self.num = np.zeros((len(_RATE_STATUSES), 2, n_judges, n), dtype=np.int64)
        self.type_den = np.zeros((n_judges, n_types, 2, n), dtype=np.int64)
        self.type_num = np.zeros((len(_RATE_STATUSES), n_judges, n_types, 2, n), dtype=np.int64)
        self.refusals = np.zeros(n_judges, dtype=np.int64)
        self.failed = np.zeros(n_judges, dtype=np.int64)
        g_of = _lookup([group.get(j, -1) for j in log.judges.names])
        i_of = _lookup([index[k] for k in log.items.names])
        t_of = _lookup([_TYPES.get(t, -1) for t in log.bias_types.names])
        ui = log.bias_types.codes.get("unnecessary_image", -1)
        none = log.responders.codes.get(None, -1)
        st = log.statuses.codes
        rate_codes = [st.get(s, -1) for s in _RATE_STATUSES]
        refusal, error = st.get("refusal", -1), st.get("error", -1)
        n_resp = max(1, len(log.responders))
        seen_unbiased = np.zeros(n_judges * n * n_resp * 2, dtype=bool)
        seen_base = np.zeros(max(1, len(log.judges)) * n * n_resp, dtype=bool)
        base: list[np.ndarray] = []
        for chunk in log.chunks():
            # Self-enhancement's base scores: every judge, the image triplets' unbiased side.
            resp = chunk["responder"].astype(np.intp)
            item = i_of[chunk["item"]]
            jc = chunk["judge"].astype(np.intp)
            cand = np.flatnonzero((resp != none) & (chunk["bias_type"] != ui))
            key = (jc[cand] * n + item[cand]) * n_resp + resp[cand]
            pick = cand[_first_new(key, seen_base)]
            b = np.empty(len(pick), dtype=_BASE_DTYPE)
            b["judge"], b["item"], b["responder"] = jc[pick], item[pick], resp[pick]
            b["score"], b["kind"] = chunk["unbiased"][pick], chunk["unbiased_kind"][pick]
            base.append(b)
            # Everything else is per configured judge.
            g = g_of[chunk["judge"]]
            mine = np.flatnonzero(g >= 0)
            if not len(mine):
                continue
            c, g, item, resp = chunk[mine], g[mine], item[mine], resp[mine]
            t = t_of[c["bias_type"]]
            if np.any(t < 0):
                category_of(log.bias_types.names[int(c["bias_type"][np.argmin(t)])])
            u = np.where(c["unbiased_kind"] == MISSING, np.nan, c["unbiased"])
            h = np.where(c["biased_kind"] == MISSING, np.nan, c["biased"])
            self.terms.add(g, item, t, u, h)
            us, bs = c["unbiased_status"].astype(np.intp), c["biased_status"].astype(np.intp)
            for sts in (us, bs):
                self.refusals += np.bincount(g[sts == refusal], minlength=n_judges)
                self.failed += np.bincount(g[sts == error], minlength=n_judges)
            key = ((g * n + item) * n_resp + resp) * 2 + (c["bias_type"] == ui)
            first = _first_new(key, seen_unbiased)
            sides = (first, np.arange(len(c)))
            cells = g * n + item
            tcells = ((g * n_types + t) * 2) * n + item
            for side, (sel, sts) in enumerate(zip(sides, (us, bs), strict=True)):
                self.den[side] += np.bincount(cells[sel], minlength=n_judges * n).reshape(-1, n)
                tc = tcells + side * n
                self.type_den += np.bincount(tc, minlength=self.type_den.size).reshape(
                    self.type_den.shape
                )
                for s, code in enumerate(rate_codes):
                    hit = sts == code
                    self.num[s, side] += np.bincount(
                        cells[sel][hit[sel]], minlength=n_judges * n
                    ).reshape(-1, n)
                    self.type_num[s] += np.bincount(tc[hit], minlength=self.type_den.size).reshape(
                        self.type_den.shape
                    )
        self.base = np.concatenate(base) if base else np.empty(0, dtype=_BASE_DTYPE)

    def judge_code(self, judge: str) -> int:
        """The judge's code in the log (-1: it scored nothing)."""
        return self._judge_codes.get(judge, -1)

    def rates(self, g: int, status: str, W: np.ndarray) -> dict[str, Any]:
        """The share of judge ``g``'s judgements with ``status``: over all distinct
        judgements, per side (unbiased / biased), and per bias type it judged (in taxonomy
        order, whatever order the judgements came in) and side."""
        s = _RATE_STATUSES.index(status)

        def est(num: np.ndarray, den: np.ndarray) -> dict[str, Any]:
            num, den = num.astype(np.float64), den.astype(np.float64)
            v, reps = _ratio(num, den, W)
            units = int((den > 0).sum())
            out = _widened(_est_of(v, reps, units), units)
            out["judgements"] = int(den.sum())
            return out

        num, den = self.num[s, :, g], self.den[:, g]
        types = list(BIAS_TYPES)
        return {
            "all": est(num[0] + num[1], den[0] + den[1]),
            "unbiased": est(num[0], den[0]),
            "biased": est(num[1], den[1]),
            "by_type": {
                types[t]: {
                    side: est(self.type_num[s, g, t, k], self.type_den[g, t, k])
                    for k, side in enumerate(("unbiased", "biased"))
                }
                for t in range(len(types))
                if self.type_den[g, t].any()
            },
        }


class _VerdictTally:
    """One pass over the verdict log into per-item sums of every judge: P(first) over position
    verdicts, consistency over pairs judged in both orders (the same winner, or a tie both
    times) and decisive consistency (the same winner, not a tie), P(prefer padded) over
    verbosity verdicts (a tie counts half) and P(prefer concise) (the original strictly
    preferred, as MM-JudgeBias's §H counts robustness), and the verdicts that failed."""

    FIGURES = ("first", "consistency", "padded", "decisive", "concise")
    """Figure ``k`` of ``vectors``: numerators in ``sums[2k]``, denominators in ``sums[2k+1]``."""

    def __init__(self, log: VerdictLog, judges: Sequence[str], index: dict[str, int]) -> None:
        n = len(index)
        group = {j: g for g, j in enumerate(judges)}
        self.sums = [[[0.0] * n for _ in range(2 * len(self.FIGURES))] for _ in judges]
        """Per judge: each figure's numerator and denominator, per item."""
        self.failures = [0] * len(judges)
        g_of = [group.get(j, -1) for j in log.judges.names]
        i_of = [index[k] for k in log.items.names]
        probes = log.probes.codes
        position, verbosity = probes.get("position", -1), probes.get("verbosity", -1)
        labels = log.labels.codes
        padded, tie = labels.get("padded", -1), labels.get("tie", -2)
        a, b, t = (PREFERENCES.index(p) for p in ("A", "B", "tie"))
        first_value = {a: 1.0, b: 0.0, t: 0.5}
        seen: list[dict[tuple[int, int, int], int]] = [{} for _ in judges]
        for chunk in log.chunks():
            for jc, probe, ic, first, second, pref, _lf, _ls, _rq in chunk.tolist():
                g = g_of[jc]
                if g < 0:
                    continue
                if pref == 0:
                    self.failures[g] += 1
                    continue
                sums, i = self.sums[g], i_of[ic]
                if probe == position:
                    sums[0][i] += first_value[pref]
                    sums[1][i] += 1.0
                    winner = first if pref == a else second if pref == b else tie
                    back = seen[g].pop((i, second, first), None)
                    if back is None:
                        seen[g][(i, first, second)] = winner
                    else:
                        sums[2][i] += float(back == winner)
                        sums[3][i] += 1.0
                        sums[6][i] += float(back == winner and winner != tie)
                        sums[7][i] += 1.0
                elif probe == verbosity:
                    v = float(first == padded) if pref == a else float(second == padded)
                    sums[4][i] += v if pref != t else 0.5
                    sums[5][i] += 1.0
                    sums[8][i] += (1.0 - v) if pref != t else 0.0
                    sums[9][i] += 1.0

    def vectors(self, g: int, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Figure ``k`` (``FIGURES``: 0 P(first), 1 consistency, 2 P(padded), 3 decisive
        consistency, 4 P(prefer concise)) of judge ``g``: per-item numerators and
        denominators."""
        return np.array(self.sums[g][2 * k]), np.array(self.sums[g][2 * k + 1])


def _shortfalls(
    overall: float | None, decisive: float | None, concise: float | None, se: float | None
) -> dict[str, float | None]:
    return {
        "bd_bc": None if overall is None else 1.0 - overall,
        "position": None if decisive is None else 1.0 - decisive,
        "verbosity": None if concise is None else 1.0 - concise,
        "self_enhancement": None if se is None else min(1.0, max(0.0, se) / SELF_SCALE),
    }


def _shortfalls_boot(
    overall: np.ndarray, decisive: np.ndarray, concise: np.ndarray, se: np.ndarray
) -> np.ndarray:
    return np.stack(
        [
            1.0 - overall,
            1.0 - decisive,
            1.0 - concise,
            np.minimum(1.0, np.maximum(0.0, se) / SELF_SCALE),
        ],
        axis=1,
    )


_CALL_KINDS = frozenset({"ja_response", "ja_description", "ja_score", "ja_pairwise"})
"""Step kinds whose key ends with the fingerprint of the request the step sends."""
_PAIR_KINDS = frozenset({"ja_integrality", "ja_perturb"})
"""Pairs not built (``meme|responder|bias type``): no call."""


def current_errors(acfg: JudgeAuditConfig, store: RunStore) -> dict[str, int]:
    """The audit's errors on record (``kind: reason`` -> count) that belong to the current
    config: a step's error counts only when a call for it was made, in its role, by a model the
    config now gives that role; a pair not built counts only for a responder and a bias type
    the config still names (a replaced judge's unparseable scores stay on record and count
    again when it is put back, but are not this config's). An item's error (``meme``,
    ``data``) always counts."""
    describer = acfg.describer_model()
    judges = set(acfg.judges)
    allowed: dict[str, set[str]] = {
        "judge_audit.respond": set(acfg.responders),
        "judge_audit.describe": {describer} if describer else set(),
        "judge_audit.score": judges,
        "judge_audit.pairwise": judges,
    }
    named = set().union(*allowed.values())
    errors = [e for e in store.errors() if e.kind.startswith("ja_") or e.kind in ("meme", "data")]
    request = {e.key: e.key.rsplit("|", 1)[-1] for e in errors if e.kind in _CALL_KINDS}
    callers = store.callers(request.values())
    responders, bias_types = set(acfg.responders), set(acfg.bias_types)
    counts: dict[str, int] = defaultdict(int)
    for e in errors:
        if e.kind in _PAIR_KINDS:
            parts = e.key.rsplit("|", 2)
            if len(parts) == 3 and (parts[1] not in responders or parts[2] not in bias_types):
                continue
        made = callers.get(request.get(e.key, ""))
        if made and not any(model in allowed.get(role, named) for role, model in made):
            continue
        counts[f"{e.kind}: {e.reason.split(':')[0]}"] += 1
    return dict(sorted(counts.items()))


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
    # The items every figure is resampled over, and one draw of weights shared by all.
    all_items = sorted(set(outcome.scores.items.names) | set(outcome.verdicts.items.names))
    index = {k: i for i, k in enumerate(all_items)}
    # Cost and latency first: their pass over every call record, and its bootstrap over
    # calls, then never holds its memory on top of the per-item sums below.
    usage = _usage(store, acfg.judges, n_boot, seed)
    # The records stream once, in the order they arrived, into per-item sums.
    tally = _ScoreTally(outcome.scores, acfg.judges, index)
    vtally = _VerdictTally(outcome.verdicts, acfg.judges, index)
    W = bootstrap_weights(len(all_items), n_boot, seed)
    n_rep = len(W)
    rows: list[dict[str, Any]] = []
    figs: dict[str, _JudgeFigures] = {}
    t_index = {t: i for i, t in enumerate(BIAS_TYPES)}
    for g, judge in enumerate(acfg.judges):
        own_terms = tally.terms.terms(g)
        table = bias_table_of(own_terms, n_boot=0, seed=seed)
        terms = own_terms.aligned(all_items)
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

        abst = tally.rates(g, "abstained", W)
        unparsed = tally.rates(g, "unparsed", W)
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
            "refusals": int(tally.refusals[g]),
            "failed_calls": int(tally.failed[g]),
            **usage.get(judge, {}),
        }
        first = vtally.vectors(g, 0)
        jf.figures["p_prefer_first"] = _ratio(*first, W)
        row["p_prefer_first"] = _est_of(*jf.figures["p_prefer_first"], int((first[1] > 0).sum()))
        cons = vtally.vectors(g, 1)
        jf.figures["position_consistency"] = _ratio(*cons, W)
        row["position_consistency"] = _est_of(
            *jf.figures["position_consistency"], int((cons[1] > 0).sum())
        )
        padded = vtally.vectors(g, 2)
        jf.figures["p_prefer_padded"] = _ratio(*padded, W)
        row["p_prefer_padded"] = _est_of(*jf.figures["p_prefer_padded"], int((padded[1] > 0).sum()))
        concise = vtally.vectors(g, 4)
        jf.figures["p_prefer_concise"] = _ratio(*concise, W)
        row["p_prefer_concise"] = _est_of(
            *jf.figures["p_prefer_concise"], int((concise[1] > 0).sum())
        )
        decisive = vtally.vectors(g, 3)
        jf.figures["decisive_consistency"] = _ratio(*decisive, W)
        row["decisive_consistency"] = _est_of(
            *jf.figures["decisive_consistency"], int((decisive[1] > 0).sum())
        )
        row["pairwise_failures"] = vtally.failures[g]
        se = _self_enhancement(judge, outcome.families, tally, W)
        jf.figures["self_enhancement"] = se[0] if se is not None else (None, np.full(n_rep, np.nan))
        row["self_enhancement"] = se[1] if se is not None else None
        scored = terms.scored.sum(0)
        jf.counts = {t: int(scored[t_index[t]]) for t in BIAS_TYPES}
        jf.counts["position"] = int(first[1].sum())
        jf.counts["position_consistency"] = int(cons[1].sum())
        jf.counts["verbosity"] = int(padded[1].sum())
        jf.counts["self_enhancement"] = int(se[1].get("min_scores", 0)) if se is not None else 0
        n_scored = int((terms.scored.sum(1) > 0).sum())
        jf.units = dict.fromkeys((*BIAS_TYPES, *BIAS_CATEGORIES, "overall"), n_scored)
        jf.units["position"] = row["p_prefer_first"]["n"]
        jf.units["position_consistency"] = row["position_consistency"]["n"]
        jf.units["verbosity"] = row["p_prefer_padded"]["n"]
        jf.units["self_enhancement"] = row["self_enhancement"]["n"] if se is not None else 0
        row["flags"] = []
        figs[judge] = jf
        rows.append(row)
    ref = acfg.reference_judge if acfg.reference_judge in figs else None
    _flag(rows, figs, ref, alpha=acfg.family_alpha, min_pairs=acfg.flag_min_pairs)
    _rank(rows, figs, n_rep, acfg.rank_by)
    doc: dict[str, Any] = {
        "prompt": acfg.prompt,
        "items": outcome.items,
        "bias_types": list(acfg.bias_types),
        "reference_judge": ref,
        "bootstrap": n_boot,
        "leaderboard": rows,
        "examples": outcome.examples,
        "construction": _construction(outcome, acfg.texture_max_cover),
        "order_by": acfg.rank_by,
        "flagging": {
            "method": FLAG_METHOD,
            "family_wise_alpha": acfg.family_alpha,
            "min_pairs": acfg.flag_min_pairs,
            "tests": list(FLAG_TESTS),
        },
        "note": _note(acfg.rank_by, acfg.family_alpha, acfg.flag_min_pairs),
    }
    if store is not None:
        doc["errors"] = current_errors(acfg, store)
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
        "donors": dict(outcome.donor_checks),
    }


PAIRED_TESTS: tuple[str, ...] = (*BIAS_TYPES, *BIAS_CATEGORIES, "overall", "position_consistency")
"""Tests of a judge against its comparator (the reference judge; for the reference judge, or
without one, the mean of the other judges): flagged when the judge is worse."""
FLAG_TESTS: tuple[str, ...] = (*PAIRED_TESTS, "position", "verbosity", "self_enhancement")
"""Every test of one judge, in the order its flags are listed: one family for the error rate."""
FLAG_METHOD = (
    "Holm over each judge's tests, each a t-test on its bootstrap standard error over items "
    "(Student's t, items − 1 degrees of freedom)"
)
"""How the flags' family-wise error rate is controlled (``studentized_p``, ``holm_adjusted``)."""

_SIDE = {name: -1 for name in PAIRED_TESTS} | {
    "position": 0,
    "verbosity": 1,
    "self_enhancement": 1,
}
_NULL = {name: 0.0 for name in PAIRED_TESTS} | {
    "position": 0.5,
    "verbosity": 0.5,
    "self_enhancement": 0.0,
}
_MARGIN = {name: PAIRED_MARGIN for name in PAIRED_TESTS} | {
    "position": RATE_MARGIN,
    "verbosity": RATE_MARGIN,
    "self_enhancement": SELF_MARGIN,
}
_FIGURE = {name: name for name in PAIRED_TESTS} | {
    "position": "p_prefer_first",
    "verbosity": "p_prefer_padded",
    "self_enhancement": "self_enhancement",
}


def _cols(name: str) -> list[str]:
    """The bias types a BD/BC figure averages (a classic test: itself)."""
    if name in BIAS_TYPES:
        return [name]
    if name in BIAS_CATEGORIES:
        return [t for t in BIAS_TYPES if BIAS_TYPES[t][0] == name]
    if name == "overall":
        return list(BIAS_TYPES)
    return [name]


def _enough(name: str, judges: Sequence[_JudgeFigures], min_pairs: int) -> bool:
    """Each type the figure averages (where the judge has data) holds ``min_pairs`` pairs for
    every judge the test reads."""
    cols = [c for c in _cols(name) if judges[0].counts.get(c, 0) > 0]
    return bool(cols) and all(f.counts.get(c, 0) >= min_pairs for f in judges for c in cols)


def _flag(
    rows: list[dict[str, Any]],
    figs: dict[str, _JudgeFigures],
    ref: str | None,
    *,
    alpha: float,
    min_pairs: int,
) -> None:
    """Test every judge on ``FLAG_TESTS`` and flag those whose family-wise adjusted p-value is
    at most ``alpha`` and whose figure departs from the no-bias value by the practical margin.
    Paired tests compare a judge with the reference judge, and the reference judge (or every
    judge without one) with the mean of the other judges, on the same bootstrap replicates."""
    for r in rows:
        j = r["judge"]
        mine = figs[j]
        others = [k for k in figs if k != j]
        comparators = [ref] if ref is not None and j != ref else others
        names: list[str] = []
        values: list[float | None] = []
        reps: list[np.ndarray] = []
        counted: list[bool] = []
        readers_of: list[list[_JudgeFigures]] = []
        for name in FLAG_TESTS:
            v, rep = mine.figures[_FIGURE[name]]
            readers = [mine]
            if name in PAIRED_TESTS:
                have = [k for k in comparators if figs[k].figures[name][0] is not None]
                if v is None or not have or (ref is not None and j != ref and have != [ref]):
                    continue
                readers += [figs[k] for k in have]
                rv = float(np.mean([figs[k].figures[name][0] for k in have]))  # type: ignore[misc]
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)
                    rrep = np.nanmean(np.stack([figs[k].figures[name][1] for k in have]), axis=0)
                d = rep - rrep
                finite = d[np.isfinite(d)]
                r.setdefault("paired", {})[name] = {
                    "difference": v - rv,
                    "against": have[0] if len(have) == 1 else "mean of the other judges",
                    "ci_low": float(np.percentile(finite, 2.5)) if len(finite) else None,
                    "ci_high": float(np.percentile(finite, 97.5)) if len(finite) else None,
                }
                v, rep = v - rv, d
            elif v is None:
                continue
            names.append(name)
            values.append(v)
            reps.append(rep)
            counted.append(_enough(name, readers, min_pairs))
            readers_of.append(readers)
        if not names:
            r["tests"] = {}
            continue
        # Too few pairs: not in the family at all (no flag, no share of the error rate).
        raw = [
            studentized_p(
                v,
                rep,
                _NULL[name],
                _SIDE[name],
                min(f.units.get(name, 0) for f in rd),
                degenerate_se=_rate_floor(name, v, mine.units.get(name, 0)),
            )
            if enough
            else None
            for name, v, rep, enough, rd in zip(
                names, values, reps, counted, readers_of, strict=True
            )
        ]
        p_of = dict(zip(names, holm_adjusted(raw), strict=True))
        tests: dict[str, Any] = {}
        flag_p: dict[str, float] = {}
        for name, v, enough in zip(names, values, counted, strict=True):
            p = p_of.get(name)
            assert v is not None
            gap = v - _NULL[name]
            side = _SIDE[name]
            practical = (abs(gap) if side == 0 else side * gap) >= _MARGIN[name]
            why = None
            if not enough:
                why = f"fewer than {min_pairs} pairs"
            elif p is None:
                why = "zero-width interval"
            tests[name] = {"value": v, "p_adjusted": p, "untested": why}
            if p is not None and p <= alpha and practical:
                r["flags"].append(name)
                flag_p[name] = p
        r["tests"] = tests
        r["flag_p_adjusted"] = flag_p


def _rate_floor(name: str, value: float | None, units: int) -> float:
    """The standard error of a proportion (P(first), P(prefer padded)) whose bootstrap has
    zero width: its Wilson 95% interval over the items, half-width / 1.96, so a rate of 100%
    over many items is evidence, not an untested zero-width interval (0 for other tests)."""
    if name not in ("position", "verbosity") or value is None or units <= 0:
        return 0.0
    lo, hi = widened_interval(value, units, None, None)
    return 0.0 if lo is None or hi is None else (hi - lo) / (2 * 1.96)


def _note(order_by: str, alpha: float, min_pairs: int) -> str:
    order = (
        "Ordered by overall (MM-JudgeBias's Overall: the mean of the nine types' BD/BC, higher "
        "is better; ties broken by trust)"
        if order_by == "overall"
        else "Ordered by trust (ties broken by overall)"
    )
    return (
        f"{order}; * = flagged. trust = 1 − the mean shortfall from the ideal of BD/BC overall, "
        "position (1 − decisive consistency: the same winner in both orders, not a tie), "
        "verbosity (1 − P(prefer concise): the concise original strictly preferred) and "
        "self-enhancement (points / 9). Intervals: 95% bootstrap over items, one draw shared by "
        "every judge. Flags hold a family-wise error rate of "
        f"{alpha:g} per judge over its {len(FLAG_TESTS)} tests ({FLAG_METHOD}): a judge is "
        "flagged on a BD/BC figure or position consistency where it is worse than the reference "
        "judge (the reference judge, or every judge when none is set, against the mean of the "
        f"other judges) by at least {PAIRED_MARGIN:g}; on position where P(first) is at least "
        f"{RATE_MARGIN:g} from 0.5; on verbosity where P(prefer padded) is at least "
        f"{0.5 + RATE_MARGIN:g}; on self-enhancement where it is at least {SELF_MARGIN:g} "
        f"points; each with its adjusted p-value at most {alpha:g}. A test with fewer than "
        f"{min_pairs} pairs per type, or a zero-width interval, never flags."
    )


def _rank(rows: list[dict[str, Any]], figs: dict[str, _JudgeFigures], n_rep: int, by: str) -> None:
    """Order the rows by ``by`` (``overall`` or ``composite``; the other breaks ties), with the
    trust composite (see module doc) on every row and the rank interval over replicates of the
    figure ordered by."""
    trusts: list[float] = []
    treps: list[np.ndarray] = []
    for r in rows:
        f = figs[r["judge"]]
        comp = _shortfalls(
            f.figures["overall"][0],
            f.figures["decisive_consistency"][0],
            f.figures["p_prefer_concise"][0],
            f.figures["self_enhancement"][0],
        )
        have = [k for k, v in comp.items() if v is not None]
        trust = 1.0 - float(np.mean([comp[k] for k in have])) if have else float("nan")
        boot = _shortfalls_boot(
            f.figures["overall"][1],
            f.figures["decisive_consistency"][1],
            f.figures["p_prefer_concise"][1],
            f.figures["self_enhancement"][1],
        )
        cols = [i for i, k in enumerate(comp) if comp[k] is not None]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            tb = 1.0 - np.nanmean(boot[:, cols], axis=1) if cols else np.full(n_rep, np.nan)
        trusts.append(trust)
        treps.append(tb)
        r["trust"] = _est_of(trust, tb, 0)
        r["trust"]["components"] = comp
        r["trust"]["entered"] = have

    def val(x: float | None) -> float:
        return x if x is not None and np.isfinite(x) else -np.inf

    overall = [val(figs[r["judge"]].figures["overall"][0]) for r in rows]
    trust_v = [val(t) for t in trusts]
    if by == "overall":
        key = [(overall[i], trust_v[i]) for i in range(len(rows))]
        reps = [figs[r["judge"]].figures["overall"][1] for r in rows]
    else:
        key = [(trust_v[i], overall[i]) for i in range(len(rows))]
        reps = treps
    order = sorted(range(len(rows)), key=lambda i: (-key[i][0], -key[i][1]))
    if n_rep and rows:
        R = np.stack(reps, axis=1)  # replicates × judges
        R = np.where(np.isfinite(R), R, -np.inf)
        # Rank 1 = the highest figure in that replicate (ties share the better rank).
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
