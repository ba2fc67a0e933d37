"""The Arena's analysis: its outcome → the ``arena`` section of ``leaderboard.json``.

Every interval resamples the unit that was sampled (``arena.bootstrap_unit``, memes by
default): all battles and verdicts of one meme move together in a bootstrap round. Battles in
which a judge compares a model of its own family are kept out of the leaderboards by default
(``arena.self_judging``) and measured as self-preference instead. Battle streams are only
iterated (several passes), and aggregated per cluster as they go.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from itertools import combinations
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from memearena.config import RunConfig, SimModelConfig
from memearena.methods.arena.config import ArenaConfig
from memearena.methods.arena.convergence import AXES, KIND, RATINGS_VIEW
from memearena.methods.arena.schedule import owns
from memearena.methods.arena.stages import SEP as _SEP
from memearena.methods.arena.stages import ArenaOutcome, JudgedStream
from memearena.stats import (
    Estimate,
    StatsError,
    Verdict,
    VerdictMetrics,
    VerdictRow,
    kendall_tau,
    ndcg,
    spearman_rho,
)
from memearena.stats.bt import BTResult, fit_draws
from memearena.stats.cluster import (
    BattleCodes,
    ClusteredCounts,
    ClusteredCountsBuilder,
    ClusterIndex,
    cluster_weights,
)
from memearena.stats.errors import DisconnectedComparisonError, UnboundedRatingsError
from memearena.stats.leaderboard import LeaderboardAccumulator
from memearena.stats.ranking import kendall_tau_scores, ndcg_scores
from memearena.stats.style import LengthObservations, length_controlled_bt
from memearena.store import RunStore

__all__ = [
    "GROUPS",
    "WEAK_PRIOR",
    "answer_outcomes",
    "arena_leaderboard",
    "cluster_of",
    "own_models",
    "raw_verdicts",
    "self_judged",
    "setting_section",
    "settings_vs_truth",
    "true_ranking",
    "verdict_batches",
    "verdict_metrics",
    "verdict_row_batches",
    "write_battle_files",
]

WEAK_PRIOR = 1.0
"""Virtual ties per model used only when the plain MLE does not exist (reported as such)."""

JUDGE_BOOTSTRAP = 500
"""Most bootstrap rounds for the judge metrics (each round refits every judge's ranking)."""

GROUPS = {
    "by_criterion": "criterion",
    "by_judge": "judge",
    "by_context": "context",
    "by_source": "source",
}


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _estimate(e: Estimate | None) -> dict[str, Any] | None:
    """An estimate as strict JSON (NaN → null)."""
    if e is None:
        return None
    return {
        "value": _finite(e.value),
        "ci_low": _finite(e.ci_low),
        "ci_high": _finite(e.ci_high),
        "n": e.n,
    }


def _interval_dict(value: float, samples: np.ndarray | None, n: int) -> dict[str, Any]:
    """A point value and the 95% percentile interval of its bootstrap samples, as JSON."""
    low = high = None
    if samples is not None and len(samples):
        finite = samples[np.isfinite(samples)]
        if len(finite):
            low, high = (float(q) for q in np.percentile(finite, [2.5, 97.5]))
    return {"value": _finite(value), "ci_low": low, "ci_high": high, "n": n}


# ---- the sampled unit ---------------------------------------------------------------------


def cluster_of(unit: str, item: Any, context: Any, serial: int) -> Hashable:
    """The bootstrap unit of a battle or verdict: its meme, its task (meme × context), or
    itself (`serial` is unique per record)."""
    if unit == "meme":
        return item
    if unit == "task":
        return (item, context)
    return ("battle", serial)


def _families(cfg: RunConfig) -> dict[str, str | None]:
    return {n: m.family for n, m in cfg.models.items()}


def self_judged(judge: str | None, a: str, b: str, families: Mapping[str, str | None]) -> bool:
    """Whether a judge compares a model of its own family (or itself)."""
    return judge is not None and (owns(judge, a, families) or owns(judge, b, families))


# ---- leaderboards -------------------------------------------------------------------------


def _board_fit(
    acc: LeaderboardAccumulator, bootstrap: int, seed: int
) -> tuple[list[Any], str | None, BTResult]:
    """Leaderboard rows (as JSON) and the fit; when the MLE does not exist (a model never lost,
    or a disconnected comparison graph) the fit falls back to a weak prior and says so."""
    try:
        rows, fit = acc.fit(bootstrap=bootstrap, seed=seed)
        return [r.model_dump() for r in rows], None, fit
    except (UnboundedRatingsError, DisconnectedComparisonError) as e:
        rows, fit = acc.fit(bootstrap=bootstrap, seed=seed, prior=WEAK_PRIOR)
        note = f"{e} — fitted with a weak prior ({WEAK_PRIOR} virtual ties)"
        return [r.model_dump() for r in rows], note, fit


def _board(acc: LeaderboardAccumulator, bootstrap: int, seed: int) -> tuple[list[Any], str | None]:
    rows, note, _ = _board_fit(acc, bootstrap, seed)
    return rows, note


def _vs_truth(fit: BTResult, truth: Sequence[str], n: int) -> dict[str, Any]:
    """The leaderboard's Kendall τ and NDCG against the true order, with bootstrap intervals
    (the same resampled clusters as the ratings' intervals)."""
    known = [m for m in fit.models if m in truth]
    idx = [fit.models.index(m) for m in known]
    scores = np.array([-truth.index(m) for m in known], dtype=float)
    point = fit.ratings[idx]
    samples = None if fit.samples is None else fit.samples[:, idx]
    out: dict[str, Any] = {}
    for name, fn in (("kendall_tau", kendall_tau_scores), ("ndcg", ndcg_scores)):
        boot = None if samples is None else fn(samples, scores)
        out[name] = _interval_dict(float(fn(point, scores)[0]), boot, n)
    return out


def _order(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    return [str(r["model"]) for r in rows]


def _win_rate_intervals(
    counts: ClusteredCounts, bootstrap: int, seed: int
) -> dict[str, dict[str, Any]]:
    """Each model's average win rate with a cluster-bootstrap interval."""
    names = [m for m, g in zip(counts.models, counts.total.battles_per_model, strict=True) if g]
    counts = counts.subset(names)
    total = counts.total
    ci, cj, co, _ = total.cells()
    m = len(names)

    def rates(tables: np.ndarray) -> np.ndarray:
        r = len(tables)
        by_pair = np.zeros((m, m, r))  # points i scored against j, per round
        # cell outcome 0: i won, 1: j won, 2: tie (half each way)
        for kind, share_i in ((0, 1.0), (1, 0.0), (2, 0.5)):
            sel = co == kind
            np.add.at(by_pair, (ci[sel], cj[sel]), share_i * tables[:, sel].T)
            np.add.at(by_pair, (cj[sel], ci[sel]), (1 - share_i) * tables[:, sel].T)
        scores = by_pair.transpose(2, 0, 1)
        games = scores + scores.transpose(0, 2, 1)
        with np.errstate(invalid="ignore", divide="ignore"):
            w = np.where(games > 0, scores / games, np.nan)
        met = ~np.isnan(w)
        return np.where(met, w, 0.0).sum(axis=2) / np.maximum(met.sum(axis=2), 1)

    point = rates(total.cells()[3][None, :])[0]
    boot = counts.resample(bootstrap, seed) if bootstrap > 0 else None
    samples = rates(boot) if boot is not None else None
    played = total.battles_per_model
    return {
        name: _interval_dict(
            float(point[k]), None if samples is None else samples[:, k], round(float(played[k]))
        )
        for k, name in enumerate(names)
    }


def _pairwise(counts: ClusteredCounts) -> dict[str, Any]:
    """The pairwise win-rate matrix (row's share of its battles against column, ties half;
    None where two models never met) and the battle counts behind each cell."""
    names = [m for m, g in zip(counts.models, counts.total.battles_per_model, strict=True) if g]
    counts = counts.subset(names)
    ci, cj, co, n = counts.total.cells()
    m = len(names)
    scores = np.zeros((m, m))
    games = np.zeros((m, m))
    # cell outcome 0: i won, 1: j won, 2: tie (half each way)
    for kind, share_i in ((0, 1.0), (1, 0.0), (2, 0.5)):
        sel = co == kind
        np.add.at(scores, (ci[sel], cj[sel]), share_i * n[sel])
        np.add.at(scores, (cj[sel], ci[sel]), (1 - share_i) * n[sel])
        np.add.at(games, (ci[sel], cj[sel]), n[sel])
        np.add.at(games, (cj[sel], ci[sel]), n[sel])
    return {
        "models": names,
        "win_rate": [
            [_finite(float(scores[i, j] / games[i, j])) if games[i, j] else None for j in range(m)]
            for i in range(m)
        ],
        "battles": [[round(float(games[i, j])) for j in range(m)] for i in range(m)],
    }


_CHUNK = 1 << 16
"""Battle rows read per block of the analysis pass: memory is bounded by a block."""


class _Pass:
    """Everything the analysis aggregates in one pass over a setting's battle rows, read in
    blocks of rows turned into columns (model, outcome and cluster codes) and counted a block
    at a time; online Elo still replays the battles one by one in stream order."""

    def __init__(
        self,
        cfg: RunConfig,
        outcome: ArenaOutcome,
        with_groups: bool,
        files: _BattleFiles | None = None,
    ) -> None:
        acfg = cfg.arena
        assert acfg is not None
        self.acfg: ArenaConfig = acfg
        self._files = files  # the battle rows, written as they are read
        targets = list(acfg.targets)
        self._targets = sorted(targets)
        self._families = _families(cfg)
        self._unit, self._exclude = acfg.bootstrap_unit, acfg.self_judging == "exclude"
        self._with_groups = with_groups
        k = acfg.elo_k
        self.main = LeaderboardAccumulator(sorted(targets), elo_k=k)
        self.other = LeaderboardAccumulator(sorted(targets), elo_k=k)  # the other policy
        self.groups: dict[str, dict[str, LeaderboardAccumulator]] = {g: {} for g in GROUPS}
        # Judge metrics resample one shared set of clusters, so the tables share an index.
        self.index = ClusterIndex()
        self.judge_all: dict[str, ClusteredCountsBuilder] = {}
        self.judge_kept: dict[str, ClusteredCountsBuilder] = {}
        self.lengths = LengthObservations(sorted(targets))
        self.refusals = LeaderboardAccumulator(sorted(targets), elo_k=k)
        self.n_rows = 0
        self.n_self_judged = 0
        # Cluster keys → integer keys (first seen first), shared by every table of the pass
        # (refusal battles included), so that each table's own index sees its clusters in the
        # order a battle-by-battle pass would.
        self._keys: dict[Hashable, int] = {}
        self._own: dict[tuple[str | None, str, str], bool] = {}
        self._lengths_of: dict[tuple[str, str, str], int | None] = {}
        self._lengths_item: Any = None
        self._answers = outcome.answers
        block: list[dict[str, Any]] = []
        for row in outcome.battles:
            block.append(row)
            if len(block) >= _CHUNK:
                self._block(block)
                block = []
        if block:
            self._block(block)
        self._refusal_losses(outcome, self._families, self._unit, self._exclude)

    def _is_own(self, judge: str | None, a: str, b: str) -> bool:
        key = (judge, a, b)
        own = self._own.get(key)
        if own is None:
            own = self._own[key] = self_judged(judge, a, b, self._families)
        return own

    def _length(self, item: Any, context: Any, model: str) -> int | None:
        """The length of an answer with text (None: no such answer); remembered for the
        current meme only (rows come meme by meme)."""
        if item != self._lengths_item:
            self._lengths_of, self._lengths_item = {}, item
        key = (str(item), str(context), model)
        if key in self._lengths_of:
            return self._lengths_of[key]
        ans = self._answers.get(key)
        n = len(ans["text"]) if ans and "text" in ans else None
        self._lengths_of[key] = n
        return n

    def _block(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Aggregate one block of battle rows (in stream order)."""
        model_a = [r["model_a"] for r in rows]
        model_b = [r["model_b"] for r in rows]
        winner = [r["winner"] for r in rows]
        codes = BattleCodes.encode(self.main.builder.positions, model_a, model_b, winner)
        if codes.error is not None:
            raise codes.error
        a, b, kind = codes.a, codes.b, codes.kind
        judges = [r.get("judge") for r in rows]
        items = [r.get("item") for r in rows]
        contexts = [r.get("context") for r in rows]
        unit, keys = self._unit, self._keys
        first = self.n_rows
        if unit == "meme":
            raw: Iterable[Hashable] = items
        elif unit == "task":
            raw = zip(items, contexts, strict=True)
        else:
            raw = (("battle", first + n) for n in range(len(rows)))
        cl = np.fromiter((keys.setdefault(x, len(keys)) for x in raw), np.int64, len(rows))
        own = np.fromiter(
            (self._is_own(j, x, y) for j, x, y in zip(judges, model_a, model_b, strict=True)),
            bool,
            len(rows),
        )
        self.n_rows += len(rows)
        self.n_self_judged += int(own.sum())
        if self._files is not None:
            for row, is_own in zip(rows, own.tolist(), strict=True):
                self._files.write(row, is_own)
        keep = ~own if self._exclude else np.ones(len(rows), dtype=bool)

        def add(acc: LeaderboardAccumulator, sel: np.ndarray) -> None:
            acc.add_codes(a[sel], b[sel], kind[sel], acc.index.codes(cl[sel]))

        # The include-policy board sees every battle, the exclude-policy board the others.
        if self._exclude:
            add(self.main, keep)
            add(self.other, np.ones(len(rows), dtype=bool))
        else:
            add(self.main, np.ones(len(rows), dtype=bool))
            add(self.other, ~own)
        has_judge = np.fromiter((j is not None for j in judges), bool, len(rows))
        if has_judge.any():
            # Register the clusters in row order first: the judges' tables share the index.
            shared = np.full(len(rows), -1, dtype=np.int64)
            shared[has_judge] = self.index.codes(cl[has_judge])
            names = np.array([j if j is not None else "" for j in judges], dtype=object)
            for judge in dict.fromkeys(j for j in judges if j is not None):
                sel = has_judge & (names == judge)
                table = self._judge_table(self.judge_all, judge, self._targets)
                table.add_codes(a[sel], b[sel], kind[sel], shared[sel])
                sel &= keep
                if sel.any():
                    table = self._judge_table(self.judge_kept, judge, self._targets)
                    table.add_codes(a[sel], b[sel], kind[sel], shared[sel])
        kept = np.flatnonzero(keep)
        if self._with_groups:
            for key, fieldname in GROUPS.items():
                values = [rows[r].get(fieldname) for r in kept.tolist()]
                labels = np.array(["(none)" if v is None else str(v) for v in values], dtype=object)
                for group in dict.fromkeys(labels.tolist()):
                    acc = self.groups[key].get(group)
                    if acc is None:
                        acc = self.groups[key][group] = LeaderboardAccumulator(
                            self._targets, elo_k=self.acfg.elo_k
                        )
                    sel = kept[labels == group]
                    acc.add_codes(a[sel], b[sel], kind[sel], acc.index.codes(cl[sel]))
        with_len: list[int] = []
        len_a: list[int] = []
        len_b: list[int] = []
        for r in kept.tolist():
            item = items[r]
            if item is None:
                continue
            la = self._length(item, contexts[r], model_a[r])
            lb = self._length(item, contexts[r], model_b[r])
            if la is not None and lb is not None:
                with_len.append(r)
                len_a.append(la)
                len_b.append(lb)
        if with_len:
            sel = np.array(with_len, dtype=np.int64)
            self.lengths.add_codes(
                a[sel], b[sel], kind[sel], len_a, len_b, self.lengths.index.codes(cl[sel])
            )
        add(self.refusals, keep)

    def _judge_table(
        self, tables: dict[str, ClusteredCountsBuilder], judge: str, targets: Sequence[str]
    ) -> ClusteredCountsBuilder:
        table = tables.get(judge)
        if table is None:
            table = tables[judge] = ClusteredCountsBuilder(sorted(targets), self.index)
        return table

    def _refusal_losses(
        self,
        outcome: ArenaOutcome,
        families: Mapping[str, str | None],
        unit: str,
        exclude: bool,
    ) -> None:
        """A refusal counts as a loss against every answer of that task: one battle per judge
        and criterion, as if each judge had preferred the answer on every criterion."""
        by_task: dict[tuple[Any, Any], dict[str, bool]] = {}
        for (uid, level, target), art in outcome.answers.items():
            if not art:
                continue
            if art.get("refusal"):
                by_task.setdefault((uid, level), {})[target] = True
            elif "text" in art:
                by_task.setdefault((uid, level), {})[target] = False
        self.refusal_battles = 0
        serial = 10**12  # battle-level clusters of added rows must not collide with real ones
        winners: list[str] = []
        losers: list[str] = []
        clusters: list[int] = []
        keys = self._keys
        for (uid, level), seen in by_task.items():
            refused = [t for t, r in seen.items() if r]
            answered = [t for t, r in seen.items() if not r]
            for loser in refused:
                for winner in answered:
                    for judge in self.acfg.judges:
                        if exclude and self_judged(judge, loser, winner, families):
                            continue
                        for _crit in self.acfg.criteria:
                            serial += 1
                            key = cluster_of(unit, uid, level, serial)
                            winners.append(winner)
                            losers.append(loser)
                            clusters.append(keys.setdefault(key, len(keys)))
                            self.refusal_battles += 1
        if winners:
            codes = BattleCodes.encode(
                self.refusals.builder.positions, winners, losers, ["model_a"] * len(winners)
            )
            if codes.error is not None:
                raise codes.error
            cl = np.array(clusters, dtype=np.int64)
            self.refusals.add_codes(codes.a, codes.b, codes.kind, self.refusals.index.codes(cl))


def _point_theta(counts: ClusteredCounts) -> tuple[np.ndarray, bool]:
    """Natural-log ratings of a table (mean zero); a weak prior when the MLE does not exist."""
    total = counts.total
    *_, cell = total.cells()
    theta, regularised = fit_draws(total, cell[None, :])
    return theta[0], bool(regularised)


def _boot_theta(counts: ClusteredCounts, weights: np.ndarray, start: np.ndarray) -> np.ndarray:
    draws = counts.tables(weights)
    theta, _ = fit_draws(counts.total, draws, start=start)
    return theta


def _judge_rankings(
    p: _Pass, judges: Sequence[str], truth: Sequence[str] | None, n_boot: int, seed: int
) -> dict[str, dict[str, Any]]:
    """Each judge's ranking against the leave-one-out joint vote (the other judges' kept
    battles), the full joint vote, and the truth when known: NDCG and τ with intervals that
    resample the same clusters for the judge and its reference."""
    models = p.main.models
    tables_all = {j: b.build() for j, b in p.judge_all.items()}
    tables_kept = {j: b.build() for j, b in p.judge_kept.items()}
    out: dict[str, dict[str, Any]] = {}
    if not tables_kept:
        return out
    joint = ClusteredCounts.concat(list(tables_kept.values()))
    refs: dict[str, ClusteredCounts | None] = {}
    for j in judges:
        others = [t for k, t in tables_kept.items() if k != j]
        refs[j] = ClusteredCounts.concat(others) if others else None
    n_clusters = len(p.index)
    rng = np.random.default_rng(seed)
    weights = (
        np.concatenate(list(cluster_weights(n_clusters, n_boot, rng)))
        if n_boot > 0 and n_clusters
        else None
    )
    joint_theta, _ = _point_theta(joint)
    joint_boot = _boot_theta(joint, weights, joint_theta) if weights is not None else None
    truth_scores = (
        None if truth is None else np.array([-truth.index(mdl) for mdl in models], dtype=float)
    )
    for j in judges:
        table = tables_all.get(j)
        if table is None or table.total.total <= 0:
            continue
        theta, regularised = _point_theta(table)
        boot = _boot_theta(table, weights, theta) if weights is not None else None
        row: dict[str, Any] = {
            "ranking": [models[k] for k in np.argsort(-theta, kind="stable")],
            "regularised": regularised,
        }

        def both(
            reference: np.ndarray,
            ref_boot: np.ndarray | None,
            n: int,
            theta: np.ndarray = theta,
            boot: np.ndarray | None = boot,
        ) -> dict[str, Any]:
            nd = float(ndcg_scores(theta, reference)[0])
            tau = float(kendall_tau_scores(theta, reference)[0])
            nd_s = tau_s = None
            if boot is not None:
                rb = reference if ref_boot is None else ref_boot
                nd_s, tau_s = ndcg_scores(boot, rb), kendall_tau_scores(boot, rb)
            return {
                "ndcg": _interval_dict(nd, nd_s, n),
                "kendall_tau": _interval_dict(tau, tau_s, n),
            }

        n_units = len(np.unique(table.cluster))
        ref = refs.get(j)
        if ref is not None and ref.total.total > 0:
            ref_theta, _ = _point_theta(ref)
            ref_boot = _boot_theta(ref, weights, ref_theta) if weights is not None else None
            row["loo"] = both(ref_theta, ref_boot, n_units)
            row["loo_ranking"] = [models[k] for k in np.argsort(-ref_theta, kind="stable")]
        row["joint"] = both(joint_theta, joint_boot, n_units)
        if truth_scores is not None:
            row["truth"] = both(truth_scores, None, n_units)
        out[j] = row
    return out


def _length_section(p: _Pass, n_boot: int, seed: int) -> dict[str, Any] | None:
    """The length-controlled Bradley–Terry fit next to the plain one."""
    try:
        fit = length_controlled_bt(p.lengths, bootstrap=n_boot, seed=seed)
    except StatsError:
        return None
    played = set(
        p.main.counts().total.models[k]
        for k in np.flatnonzero(p.main.counts().total.battles_per_model)
    )
    order = [m for m in fit.ranking() if m in played]
    rows = []
    for rank, name in enumerate(order, start=1):
        k = fit.models.index(name)
        rows.append(
            {
                "model": name,
                "rank": rank,
                "bt": float(fit.ratings[k]),
                "ci_low": float(fit.ci_low[k]) if fit.ci_low is not None else None,
                "ci_high": float(fit.ci_high[k]) if fit.ci_high is not None else None,
            }
        )
    low, high = fit.length_ci if fit.length_ci else (None, None)
    return {
        "note": "Bradley–Terry with log2(length ratio) as a covariate (style control); "
        "ratings with length held equal",
        "overall": rows,
        "length_effect_elo_per_doubling": {
            "value": _finite(fit.length_effect),
            "ci_low": _finite(low) if low is not None else None,
            "ci_high": _finite(high) if high is not None else None,
            "n": fit.n,
        },
    }


def setting_section(
    cfg: RunConfig,
    outcome: ArenaOutcome,
    *,
    bootstrap: int,
    with_groups: bool = True,
    files: _BattleFiles | None = None,
) -> dict[str, Any]:
    """Leaderboards, sensitivity views and judge bias of one setting's battles (written to
    `files` as they are read, when given)."""
    acfg = cfg.arena
    assert acfg is not None
    seed = cfg.seed
    p = _Pass(cfg, outcome, with_groups, files)
    section: dict[str, Any] = {
        "setting": outcome.setting,
        "battles": p.main.n,
        "bootstrap_unit": acfg.bootstrap_unit,
        "self_judging": acfg.self_judging,
        "self_judged_battles": p.n_self_judged,
    }
    if not p.main.n:
        section["overall"] = []
        section["judges"] = []
        return section
    notes: dict[str, str] = {}
    section["overall"], note, fit = _board_fit(p.main, bootstrap, seed)
    if note:
        notes["overall"] = note
    truth = true_ranking(cfg)
    if truth is not None and len(fit.models) > 1:
        section["vs_truth"] = _vs_truth(fit, truth, p.main.counts().clusters_met)
    section["win_rates"] = _win_rate_intervals(p.main.counts(), min(bootstrap, 1000), seed)
    section["pairwise"] = _pairwise(p.main.counts())
    if with_groups:
        for key, groups in p.groups.items():
            section[key] = {}
            for group, acc in sorted(groups.items()):
                section[key][group], note = _board(acc, bootstrap, seed)
                if note:
                    notes[f"{key}.{group}"] = note
    sensitivity: dict[str, Any] = {}
    other_policy = "include" if acfg.self_judging == "exclude" else "exclude"
    if p.other.n and p.n_self_judged:
        rows, _ = _board(p.other, bootstrap, seed)
        sensitivity[f"self_judging_{other_policy}"] = {
            "battles": p.other.n,
            "overall": rows,
            "order_differs": _order(rows) != _order(section["overall"]),
        }
    if p.refusal_battles:
        rows, _ = _board(p.refusals, bootstrap, seed)
        sensitivity["refusals_as_losses"] = {
            "added_battles": p.refusal_battles,
            "overall": rows,
            "order_differs": _order(rows) != _order(section["overall"]),
        }
    n_boot = min(bootstrap, JUDGE_BOOTSTRAP)
    length = _length_section(p, n_boot, seed)
    if length is not None:
        length["order_differs"] = _order(length["overall"]) != _order(section["overall"])
        sensitivity["length_controlled"] = length
    section["sensitivity"] = sensitivity
    vm, failures = verdict_metrics(cfg, outcome)
    section["judges"] = judge_bias(cfg, vm, failures, p, truth, n_boot=n_boot)
    section["panel"] = panel_agreement(cfg, vm, n_boot=n_boot)
    if notes:
        section["notes"] = notes
    return section


# ---- judges -------------------------------------------------------------------------------


def verdict_batches(
    outcome: ArenaOutcome, unit: str = "meme", failures: Counter[str] | None = None
) -> Iterator[list[Verdict]]:
    """Every parsed verdict as shown to the judge (``model_a`` = the response shown first),
    both orders, per criterion, with the responses' lengths in characters and the bootstrap
    unit (`unit`) it belongs to: one list per meme, so that a meme's verdicts can be matched
    across orders and judges and then dropped. `failures`, when given, counts each judge's
    unparsed verdict calls."""
    for batch in verdict_row_batches(outcome, unit, failures):
        yield [Verdict(*row) for row in batch]  # type: ignore[arg-type]


def verdict_row_batches(
    outcome: ArenaOutcome, unit: str = "meme", failures: Counter[str] | None = None
) -> Iterator[list[VerdictRow]]:
    """`verdict_batches` as tuples (`stats.VerdictRow`: no object per verdict), for
    `VerdictMetrics.add_rows`."""
    as_winner = {"A": "model_a", "B": "model_b", "tie": "tie"}
    serial = 0
    batch: list[VerdictRow] = []
    current: str | None = None
    finished: set[str] = set()
    judged = outcome.judged
    # Read from the store by meme (run order can interleave a meme whose place changed).
    stream = judged.by_meme() if isinstance(judged, JudgedStream) else judged
    for jp in stream:
        t = jp.task
        if t.meme.uid != current:
            if batch:
                yield batch
                batch = []
            if current is not None:
                finished.add(current)
            if t.meme.uid in finished:
                raise RuntimeError(f"the verdicts of meme {t.meme.uid!r} are not stored together")
            current = t.meme.uid
        if failures is not None:
            failures[jp.judge] += ("verdicts" not in jp.forward) + ("verdicts" not in jp.backward)
        len_x = len(outcome.answers[(t.meme.uid, t.level, jp.x)]["text"])
        len_y = len(outcome.answers[(t.meme.uid, t.level, jp.y)]["text"])
        item = f"{t.meme.uid}|{t.level}"
        # A meme's or task's cluster does not depend on the serial; a battle is its own unit.
        cl = None if unit == "battle" else cluster_of(unit, t.meme.uid, t.level, serial)
        judge = jp.judge
        shown = ((jp.forward, jp.x, jp.y, len_x, len_y), (jp.backward, jp.y, jp.x, len_y, len_x))
        for art, first, second, len_first, len_second in shown:
            for crit, v in (art.get("verdicts") or {}).items():
                serial += 1
                batch.append(
                    (
                        judge,
                        item,
                        first,
                        second,
                        as_winner[v["winner"]],
                        crit,
                        len_first,
                        len_second,
                        cl,
                    )
                )
    if batch:
        yield batch


def raw_verdicts(outcome: ArenaOutcome, unit: str = "meme") -> list[Verdict]:
    """Every parsed verdict (see `verdict_batches`) in one list."""
    return [v for batch in verdict_batches(outcome, unit) for v in batch]


def verdict_metrics(cfg: RunConfig, outcome: ArenaOutcome) -> tuple[VerdictMetrics, Counter[str]]:
    """The panel's verdict-level metrics, aggregated meme by meme (memory grows with the
    memes, not the verdicts), and each judge's count of unparsed verdict calls."""
    acfg = cfg.arena
    assert acfg is not None
    judges = list(acfg.judges)
    metrics = VerdictMetrics(
        own_models=own_models(cfg), panel=judges, pairs=list(combinations(judges, 2))
    )
    failures: Counter[str] = Counter()
    for batch in verdict_row_batches(outcome, acfg.bootstrap_unit, failures):
        metrics.add_rows(batch)
    return metrics, failures


def own_models(cfg: RunConfig) -> dict[str, list[str]]:
    """Each judge's own targets (same name or family): every one, for self-preference."""
    assert cfg.arena is not None
    families = _families(cfg)
    out: dict[str, list[str]] = {}
    for judge in cfg.arena.judges:
        mine = [t for t in cfg.arena.targets if owns(judge, t, families)]
        if mine:
            out[judge] = mine
    return out


def judge_bias(
    cfg: RunConfig,
    vm: VerdictMetrics,
    failures: Mapping[str, int],
    p: _Pass,
    truth: Sequence[str] | None,
    *,
    n_boot: int,
) -> list[dict[str, Any]]:
    """Each judge's ranking against the leave-one-out joint vote (NDCG, τ, with intervals;
    the full joint vote and, when known, the truth as secondary figures), and its position
    consistency, P(prefer first), P(prefer longer) raw and relative to the other judges on the
    same presentations, self-preference and parse failures, each with an interval."""
    acfg = cfg.arena
    assert acfg is not None
    seed = cfg.seed
    consistency = vm.position_consistency(n_boot=n_boot, seed=seed)
    first = vm.prefer_first_rate(n_boot=n_boot, seed=seed)
    longer = vm.prefer_longer_rate(n_boot=n_boot, seed=seed)
    relative = vm.relative_longer_rate(n_boot=n_boot, seed=seed)
    selfpref = vm.self_preference(n_boot=n_boot, seed=seed)
    rankings = _judge_rankings(p, list(acfg.judges), truth, n_boot, seed)
    battles: Counter[str] = Counter()
    for j, b in p.judge_all.items():
        battles[j] = round(b.build().total.total)
    out: list[dict[str, Any]] = []
    for judge in acfg.judges:
        r = rankings.get(judge, {})
        row: dict[str, Any] = {"judge": judge, "battles": battles[judge]}
        row["ranking"] = r.get("ranking", [])
        loo = r.get("loo") or r.get("joint")
        row["ndcg"] = loo["ndcg"]["value"] if loo else None
        row["ndcg_ci_low"] = loo["ndcg"]["ci_low"] if loo else None
        row["ndcg_ci_high"] = loo["ndcg"]["ci_high"] if loo else None
        row["kendall_tau"] = loo["kendall_tau"]["value"] if loo else None
        row["kendall_tau_ci_low"] = loo["kendall_tau"]["ci_low"] if loo else None
        row["kendall_tau_ci_high"] = loo["kendall_tau"]["ci_high"] if loo else None
        row["reference"] = "leave-one-out joint vote" if r.get("loo") else "joint vote"
        row["vs_joint_vote"] = r.get("joint")
        if "truth" in r:
            row["vs_truth"] = r["truth"]
        if r.get("regularised"):
            row["note"] = "the judge's own ranking has no finite MLE; fitted with a weak prior"
        row["position_consistency"] = _estimate(consistency.get(judge))
        row["p_prefer_first"] = _estimate(first.get(judge))
        row["p_prefer_longer"] = _estimate(longer.get(judge))
        rel = relative.get(judge)
        row["p_prefer_longer_vs_panel"] = _estimate(rel)
        # Flagged only when longer answers win more often with this judge than with the rest of
        # the panel on the same presentations (quality held equal), beyond the interval.
        row["verbosity_flagged"] = bool(rel is not None and rel.ci_low > 0)
        sp = selfpref.get(judge)
        row["self_preference"] = (
            None
            if sp is None
            else {
                "model": sp.model,
                "own_win_rate": _finite(sp.own_win_rate),
                "panel_win_rate": _finite(sp.panel_win_rate),
                **(_estimate(sp.difference) or {}),
            }
        )
        row["parse_failures"] = failures.get(judge, 0)
        out.append(row)
    return out


def panel_agreement(cfg: RunConfig, vm: VerdictMetrics, *, n_boot: int) -> dict[str, Any]:
    """Inter-judge agreement on the resolved per-order verdicts: Krippendorff's α across the
    panel and Cohen's κ for every pair of judges (intervals resample the bootstrap unit)."""
    assert cfg.arena is not None
    judges = list(cfg.arena.judges)
    doc: dict[str, Any] = {
        "krippendorff_alpha": _estimate(vm.krippendorff_alpha(n_boot=n_boot, seed=cfg.seed))
        if len(judges) > 1
        else None,
        "cohen_kappa": {},
    }
    for a, b in combinations(judges, 2):
        doc["cohen_kappa"][f"{a} vs {b}"] = _estimate(
            vm.cohen_kappa(a, b, n_boot=n_boot, seed=cfg.seed)
        )
    return doc


def answer_outcomes(outcome: ArenaOutcome) -> dict[str, dict[str, int]]:
    """Per target: answers, refusals and format failures (missing sections)."""
    counts: dict[str, Counter[str]] = {}
    for (_uid, _lvl, target), a in outcome.answers.items():
        c = counts.setdefault(target, Counter())
        c["answers"] += 1
        if a.get("refusal"):
            c["refusals"] += 1
        elif "error" in a:
            c["unparseable"] += 1
        elif not a.get("format_ok", True):
            c["format_failures"] += 1
    return {
        t: {k: int(c[k]) for k in ("answers", "refusals", "format_failures")}
        for t, c in sorted(counts.items())
    }


def true_ranking(cfg: RunConfig) -> list[str] | None:
    """Best-first order of the targets by latent skill, when every target is simulated."""
    assert cfg.arena is not None
    sims = [cfg.models[t] for t in cfg.arena.targets]
    if not all(isinstance(m, SimModelConfig) for m in sims):
        return None
    skill = {t: m.skill for t, m in zip(cfg.arena.targets, sims, strict=True)}  # type: ignore[union-attr]
    return sorted(cfg.arena.targets, key=lambda t: (-skill[t], t))


def settings_vs_truth(
    sections: Mapping[str, Mapping[str, Any]], truth: Sequence[str] | None
) -> dict[str, Any]:
    """Per setting: the leaderboard's τ against the truth (when known), the panel's mean NDCG
    against the truth and against the leave-one-out joint vote, and the panel's mean measured
    biases, so settings can be told apart against the truth and not only by conformity."""
    out: dict[str, Any] = {}
    for name, sec in sections.items():
        judges = sec.get("judges") or []
        found = _order(sec.get("overall") or [])

        def mean(values: Iterable[Any]) -> float | None:
            vals = [float(v) for v in values if v is not None]
            return sum(vals) / len(vals) if vals else None

        row: dict[str, Any] = {
            "mean_ndcg_vs_loo": mean(j.get("ndcg") for j in judges),
            "mean_p_prefer_first": mean(
                (j.get("p_prefer_first") or {}).get("value") for j in judges
            ),
            "mean_p_prefer_longer": mean(
                (j.get("p_prefer_longer") or {}).get("value") for j in judges
            ),
            "mean_self_preference": mean(
                (j.get("self_preference") or {}).get("value") for j in judges
            ),
        }
        if truth is not None and len(found) > 1:
            row["leaderboard_tau_vs_truth"] = _finite(kendall_tau(found, list(truth)))
            row["mean_ndcg_vs_truth"] = mean(
                ((j.get("vs_truth") or {}).get("ndcg") or {}).get("value") for j in judges
            )
        out[name] = row
    return out


_STEP_KINDS = frozenset(
    {"context", "answer", "guideline_round", "guideline_self", "verdict", "guideline_rating"}
)
"""The Arena's step kinds: each step's key ends with the fingerprint of the request it sends."""


def current_errors(acfg: ArenaConfig, store: RunStore) -> dict[str, int]:
    """The Arena's errors on record (``kind: reason`` -> count) that belong to the current
    config: a step's error counts only when a call for it was made, in its role, by a model the
    config now gives that role (a replaced target's refusals stay on record and count again when
    it is put back, but are not this config's). Other methods' step errors in a shared
    directory are not the Arena's; an item's error (``meme``, no call) always counts."""
    judges = set(acfg.judges)
    allowed: dict[str, set[str]] = {
        "arena.context": {acfg.context_model},
        "arena.answer": set(acfg.targets),
        "arena.guideline_draft": judges,
        "arena.guideline_refine": judges,
        "arena.guideline_self": judges,
        "arena.judge": judges,
        "arena.guideline_rating": judges,
    }
    named = set().union(*allowed.values())
    errors = [e for e in store.errors() if e.kind in _STEP_KINDS or e.kind == "meme"]
    request = {e.key: e.key.rsplit("|", 1)[-1] for e in errors if e.kind in _STEP_KINDS}
    callers = store.callers(request.values())
    counts: Counter[str] = Counter()
    for e in errors:
        made = callers.get(request.get(e.key, ""))
        if made and not any(model in allowed.get(role, named) for role, model in made):
            continue
        counts[f"{e.kind}: {e.reason.split(':')[0]}"] += 1
    return dict(sorted(counts.items()))


CONVERGENCE_BOOTSTRAP = 2000
"""Most bootstrap rounds of the fusion-convergence intervals."""


def fusion_convergence(
    store: RunStore, judges: Sequence[str], *, bootstrap: int, seed: int
) -> dict[str, Any]:
    """The panel's ratings of each fusion round's guideline: per round, each axis's mean and
    the overall mean (of the five axes) with 95% bootstrap intervals over memes (the unit
    sampled: a meme's rounds and judges are correlated), and the plateau round.

    A meme counts where every round of its chain was rated by at least one judge; a round's
    value for a meme is the mean of its judges' ratings. The plateau round is the first round
    whose overall-mean interval no later round's mean rises above; ``None`` when only the last
    round qualifies (still rising when fusion stopped). ``gain_after_plateau`` is the last
    round's overall mean minus the plateau round's, with a paired interval (same memes)."""
    panel = set(judges)
    per: dict[str, dict[int, list[list[int]]]] = {}
    for coord, _refs, values in store.iter_members(RATINGS_VIEW, (KIND, None, None)):
        uid, rnd, judge = coord.split(_SEP)
        art = values[0]
        if judge not in panel or art is None or not isinstance(art.get("ratings"), dict):
            continue
        r = art["ratings"]
        if not rnd.isdigit() or not all(r.get(a) in (1, 2, 3) for a in AXES):
            continue  # not a rating this parser could have accepted
        per.setdefault(uid, {}).setdefault(int(rnd), []).append([int(r[a]) for a in AXES])
    n_rounds = 1 + max((max(rs) for rs in per.values()), default=-1)
    complete = sorted(u for u, rs in per.items() if len(rs) == n_rounds)
    out: dict[str, Any] = {
        "axes": list(AXES),
        "scale": [1, 3],
        "unit": "meme",
        "memes": len(complete),
        "memes_incomplete": len(per) - len(complete),
        "judges": list(judges),
        "rounds": [],
        "plateau_round": None,
        "gain_after_plateau": None,
    }
    if not complete or n_rounds == 0:
        out["note"] = "no meme has every fusion round rated"
        return out
    # memes × rounds × axes: each cell the panel's mean rating.
    cube = np.array(
        [[np.mean(per[u][r], axis=0) for r in range(n_rounds)] for u in complete], dtype=float
    )
    n = len(complete)
    point = cube.mean(axis=0)  # rounds × axes
    overall = point.mean(axis=1)
    n_boot = min(max(bootstrap, 0), CONVERGENCE_BOOTSTRAP)
    boot: np.ndarray | None = None
    if n_boot and n > 1:
        rng = np.random.default_rng(seed)
        weights = rng.multinomial(n, np.full(n, 1.0 / n), size=n_boot) / n  # B × memes
        boot = np.einsum("bm,mra->bra", weights, cube)  # B × rounds × axes
    boot_overall = None if boot is None else boot.mean(axis=2)
    rounds: list[dict[str, Any]] = []
    for r in range(n_rounds):
        rounds.append(
            {
                "round": r,
                "overall": _interval_dict(
                    float(overall[r]), None if boot_overall is None else boot_overall[:, r], n
                ),
                "axes": {
                    a: _interval_dict(
                        float(point[r, k]), None if boot is None else boot[:, r, k], n
                    )
                    for k, a in enumerate(AXES)
                },
            }
        )
    out["rounds"] = rounds
    plateau = None
    for r in range(n_rounds - 1):
        high = rounds[r]["overall"]["ci_high"]
        if high is not None and all(overall[s] <= high for s in range(r + 1, n_rounds)):
            plateau = r
            break
    out["plateau_round"] = plateau
    if plateau is None:
        out["note"] = (
            "no plateau: a later round's mean rose above every earlier round's interval"
            if boot is not None
            else "no plateau: no interval (fewer than two memes or no bootstrap)"
        )
    else:
        last = n_rounds - 1
        gain = float(overall[last] - overall[plateau])
        samples = None if boot_overall is None else boot_overall[:, last] - boot_overall[:, plateau]
        out["gain_after_plateau"] = _interval_dict(gain, samples, n)
    return out


def arena_leaderboard(
    cfg: RunConfig,
    outcomes: Sequence[ArenaOutcome],
    store: RunStore,
    *,
    bootstrap: int | None = None,
    run_dir: Path | None = None,
) -> dict[str, Any]:
    """The ``leaderboard.json`` document of an Arena run (see DESIGN: contracts); with
    `run_dir`, also its battle files (as `write_battle_files`), written while the battles are
    read for the analysis and put in place only when the whole document is computed."""
    assert cfg.arena is not None
    exclude = cfg.arena.self_judging == "exclude"
    files = (
        [_BattleFiles(run_dir, _battle_stem(i, o), exclude) for i, o in enumerate(outcomes)]
        if run_dir is not None
        else None
    )
    try:
        doc = _leaderboard_doc(cfg, outcomes, store, bootstrap, files)
    except BaseException:
        for f in files or ():
            f.discard()
        raise
    for f in files or ():
        f.commit()
    return doc


def _leaderboard_doc(
    cfg: RunConfig,
    outcomes: Sequence[ArenaOutcome],
    store: RunStore,
    bootstrap: int | None,
    files: Sequence[_BattleFiles] | None,
) -> dict[str, Any]:
    assert cfg.arena is not None
    n_boot = cfg.arena.bootstrap if bootstrap is None else bootstrap
    main = setting_section(cfg, outcomes[0], bootstrap=n_boot, files=files[0] if files else None)
    main["answers"] = answer_outcomes(outcomes[0])
    main["errors"] = current_errors(cfg.arena, store)
    main["usage"] = store.usage_summary("arena.")  # a run directory may hold other methods'
    if cfg.arena.rate_fusion_rounds:
        main["fusion_convergence"] = fusion_convergence(
            store, cfg.arena.judges, bootstrap=n_boot, seed=cfg.seed
        )
    truth = true_ranking(cfg)
    if len(outcomes) > 1:
        # Settings are compared with a smaller bootstrap: their point figures are the contrast.
        small = min(n_boot, 200)
        main["settings"] = {
            o.setting: setting_section(
                cfg,
                o,
                bootstrap=small,
                with_groups=False,
                files=files[i] if files is not None and i > 0 else None,  # the first: written
            )
            for i, o in enumerate(outcomes)
        }
        main["settings_comparison"] = settings_vs_truth(main["settings"], truth)
    doc: dict[str, Any] = {"arena": main}
    if truth is not None:
        found = [r["model"] for r in main.get("overall", [])]
        doc["simulated"] = {
            "note": "targets are simulated; this checks the method, not real models",
            "true_ranking": truth,
            "kendall_tau": _finite(kendall_tau(found, truth)) if len(found) > 1 else None,
            "leaderboard_vs_truth": main.get("vs_truth"),
            "spearman_rho": _finite(spearman_rho(found, truth)) if len(found) > 1 else None,
            "ndcg": _finite(ndcg(found, truth)) if found else None,
        }
    return doc


_line_encoder = msgspec.json.Encoder(order="sorted")
"""One battle per line, keys sorted (7x faster than ``json.dumps`` on battle rows); a line
with non-ASCII text is written by ``json.dumps`` instead, escaped."""


def _battle_line(b: Mapping[str, Any]) -> str:
    line = _line_encoder.encode(b).decode("utf-8")
    if not line.isascii():  # escaped, so that no reader splits a line (U+2028)
        line = json.dumps(b, sort_keys=True)
    return line + "\n"


class _BattleFiles:
    """One setting's battle files (kept battles, and those the self-judging policy leaves
    out), streamed to temporary files and renamed by `commit`: a kill or an error never
    leaves half a file, nor replaces the previous one."""

    def __init__(self, run_dir: Path, stem: str, exclude: bool) -> None:
        self.kept, self.left = run_dir / f"{stem}.jsonl", run_dir / f"{stem}.self_judged.jsonl"
        self._tmp_kept = self.kept.with_suffix(".jsonl.tmp")
        self._tmp_left = self.left.with_suffix(".jsonl.tmp")
        self._exclude = exclude
        self._fk = self._tmp_kept.open("w", encoding="utf-8")
        self._fl = self._tmp_left.open("w", encoding="utf-8")
        self.n_left = 0

    def write(self, row: Mapping[str, Any], own: bool) -> None:
        if self._exclude and own:
            self._fl.write(_battle_line(row))
            self.n_left += 1
        else:
            self._fk.write(_battle_line(row))

    def commit(self) -> None:
        self._fk.close()
        self._fl.close()
        os.replace(self._tmp_kept, self.kept)
        if self.n_left:
            os.replace(self._tmp_left, self.left)
        else:
            self._tmp_left.unlink()
            self.left.unlink(missing_ok=True)

    def discard(self) -> None:
        self._fk.close()
        self._fl.close()
        self._tmp_kept.unlink(missing_ok=True)
        self._tmp_left.unlink(missing_ok=True)


def _battle_stem(i: int, outcome: ArenaOutcome) -> str:
    return "battles" if i == 0 else f"battles.{outcome.setting}"


def write_battle_files(run_dir: Path, outcomes: Sequence[ArenaOutcome], cfg: RunConfig) -> None:
    """Write the battle files: ``battles.jsonl`` holds the battles
    the main leaderboard is fitted on, so ``memearena rank --cluster item`` reproduces it;
    battles left out by the self-judging policy go to ``battles.self_judged.jsonl``; other
    settings to ``battles.<setting>.jsonl`` (and ``battles.<setting>.self_judged.jsonl``).
    (`arena_leaderboard` with ``run_dir`` writes the same files while it reads the battles.)"""
    assert cfg.arena is not None
    families = _families(cfg)
    exclude = cfg.arena.self_judging == "exclude"
    for i, o in enumerate(outcomes):
        files = _BattleFiles(run_dir, _battle_stem(i, o), exclude)
        try:
            for b in o.battles:
                files.write(b, self_judged(b.get("judge"), b["model_a"], b["model_b"], families))
        except BaseException:
            files.discard()
            raise
        files.commit()
