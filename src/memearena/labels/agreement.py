"""Agreement figures: how far every judge agrees with the people who labelled, and what the
people said, each figure with a bootstrap interval over the labelled units.

Clusters (the unit a bootstrap round draws): the meme for battles, guidelines and rewrites (an
item is one of a meme's pairs, rounds or rewrites, and a meme's items are correlated), the item
itself for perturbations. The statistics are ``memearena.stats.human`` (pure); this module
joins the run's queue items with the store's labels.

Figures (``figure`` column of ``Agreement.rows``):

- ``kappa`` / ``percent_agreement``: per judge and criterion (and ``all`` criteria pooled),
  Cohen's κ and percent agreement of the judge's verdict with the human majority (plurality of
  the annotators; a battle whose top is shared has no majority and is left out);
- ``alpha``: Krippendorff's α (nominal) among the annotators, per field (two or more
  annotators on a unit);
- ``ranking_ndcg`` / ``ranking_kendall_tau``: each judge's ranking (and the Arena's joint one)
  against the Bradley–Terry ranking fitted to the human battle votes;
- ``guideline_mean``: each axis's mean rating (1-3), over all rounds, the fused round, and per
  round;
- ``harmful_share``: share of refined (and original) items the majority calls still harmful;
- ``failure_rate`` / ``failure_rate_human_harmful``: per Adapt target, the failure rate on the
  labelled rewrites, and on those the human majority confirmed still harmful;
- ``answer_score_difference`` / ``answer_score_correlation``: on the rewrites queue, the
  annotators' mean 1-10 score of the target's answer an item shows minus the scorer panel's
  score of it, and Pearson's r between the two (over memes);
- ``perturbation_accepted``: share of perturbations the majority says keep what their bias type
  must keep, per bias type.

Labels whose item is no longer in the run are kept in the store and reported
(``Agreement.orphans``), never dropped silently.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from memearena.labels.queues import (
    CRITERIA,
    GUIDELINE_AXES,
    QUEUES,
    LabelItem,
    available_queues,
    battle_winner,
    queue_items,
)
from memearena.labels.store import Label, LabelStore
from memearena.stats.human import (
    HumanEstimate,
    alpha_codes,
    bt_ranking,
    cohen_kappa_codes,
    correlation_codes,
    mean_codes,
    narrowing,
    plurality,
    ranking_agreement,
)

__all__ = ["COLUMNS", "Agreement", "agreement", "compute_agreement"]

COLUMNS: tuple[str, ...] = (
    "figure",
    "queue",
    "judge",
    "field",
    "group",
    "value",
    "ci_low",
    "ci_high",
    "n",
    "clusters",
)
"""The columns of every figure row (``judge``/``field``/``group`` empty where not relevant)."""

_YES_NO = ("yes", "no", "unsure")


@dataclass
class Agreement:
    """Every agreement figure of one run directory (see the module)."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    queues: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per queue: items, labelled items, labels, annotators."""
    orphans: dict[str, list[str]] = field(default_factory=dict)
    """Per queue: item keys labelled that the run no longer has (the labels are kept)."""
    widest: dict[str, Any] | None = None
    """The widest interval and how much one more labelled cluster would narrow it."""
    bootstrap: int = 1000
    computed: float = 0.0

    def add(
        self,
        figure: str,
        queue: str,
        est: HumanEstimate,
        *,
        judge: str = "",
        field_: str = "",
        group: str = "",
    ) -> None:
        if not est.n:
            return
        self.rows.append(
            {
                "figure": figure,
                "queue": queue,
                "judge": judge,
                "field": field_,
                "group": group,
                "value": _num(est.value),
                "ci_low": _num(est.ci_low),
                "ci_high": _num(est.ci_high),
                "n": est.n,
                "clusters": est.clusters,
            }
        )

    def figure(self, name: str, **match: str) -> list[dict[str, Any]]:
        """The rows of one figure, optionally matched on columns (``judge=...``)."""
        return [
            r
            for r in self.rows
            if r["figure"] == name and all(r.get(k) == v for k, v in match.items())
        ]

    def to_dict(self) -> dict[str, Any]:
        """The ``labels`` section (JSON-able; NaN as None)."""
        return {
            "note": "human labels from labels.sqlite; 95% intervals by bootstrap over memes "
            "(perturbations: over items); majority = the annotators' plurality",
            "bootstrap": self.bootstrap,
            "computed": self.computed,
            "queues": self.queues,
            "orphans": {q: {"count": len(k), "keys": k[:20]} for q, k in self.orphans.items()},
            "figures": self.rows,
            "widest": self.widest,
        }

    def to_pandas(self) -> Any:
        """The figure rows as a pandas DataFrame (``value``, ``ci_low``, ``ci_high``, ...)."""
        import pandas as pd

        return pd.DataFrame(self.rows, columns=list(COLUMNS))


def _num(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def _by_item(labels: Iterable[Label]) -> dict[str, dict[str, dict[str, Any]]]:
    """item key → annotator → answer (the latest per annotator)."""
    out: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for lab in labels:
        out[lab.item_key][lab.annotator] = lab.answer
    return out


def _code(outcome: str | None, pair: Sequence[str]) -> int | None:
    if outcome is None:
        return None
    if outcome == "tie":
        return 2
    return {pair[0]: 0, pair[1]: 1}.get(outcome)


def _battles(
    out: Agreement,
    items: Sequence[LabelItem],
    labelled: Mapping[str, dict[str, dict[str, Any]]],
    board: Mapping[str, Any],
    n_boot: int,
    seed: int,
) -> None:
    fields = (*CRITERIA, "overall")
    human: dict[str, dict[str, list[int]]] = {f: {} for f in fields}
    meme: dict[str, str] = {}
    for it in items:
        answers = labelled.get(it.key)
        if not answers:
            continue
        meme[it.key] = str(it.hidden.get("meme"))
        pair = it.hidden["pair"]
        for ans in answers.values():
            for f in fields:
                code = _code(battle_winner(str(ans.get(f, "")), it.hidden), pair)
                if code is not None:
                    human[f].setdefault(it.key, []).append(code)
    by_key = {it.key: it for it in items}
    pooled: dict[str, tuple[list[int], list[int], list[str]]] = defaultdict(lambda: ([], [], []))
    for k, f in enumerate(fields):
        units = human[f]
        if not units:
            continue
        keys = sorted(units)
        multi = [key for key in keys if len(units[key]) >= 2]
        if multi:
            out.add(
                "alpha",
                "battles",
                alpha_codes(
                    [units[key] for key in multi],
                    [meme[key] for key in multi],
                    3,
                    n_boot=n_boot,
                    seed=seed + k,
                ),
                field_=f,
            )
        if f == "overall":
            continue
        majority = {key: plurality(units[key]) for key in keys}
        judged: dict[str, tuple[list[int], list[int], list[str]]] = defaultdict(
            lambda: ([], [], [])
        )
        for key in keys:
            m = majority[key]
            if m is None:
                continue
            it = by_key[key]
            for judge, per in (it.hidden.get("judges") or {}).items():
                code = _code(per.get(f), it.hidden["pair"])
                if code is None:
                    continue
                for target in (judged[judge], pooled[judge]):
                    target[0].append(code)
                    target[1].append(int(m))  # type: ignore[call-overload]
                    target[2].append(meme[key])
        for judge in sorted(judged):
            x, y, c = judged[judge]
            kappa, pct = cohen_kappa_codes(x, y, c, 3, n_boot=n_boot, seed=seed)
            out.add("kappa", "battles", kappa, judge=judge, field_=f)
            out.add("percent_agreement", "battles", pct, judge=judge, field_=f)
    for judge in sorted(pooled):
        x, y, c = pooled[judge]
        kappa, pct = cohen_kappa_codes(x, y, c, 3, n_boot=n_boot, seed=seed)
        out.add("kappa", "battles", kappa, judge=judge, field_="all")
        out.add("percent_agreement", "battles", pct, judge=judge, field_="all")
    _rankings(out, items, labelled, board, n_boot, seed)


def _rankings(
    out: Agreement,
    items: Sequence[LabelItem],
    labelled: Mapping[str, dict[str, dict[str, Any]]],
    board: Mapping[str, Any],
    n_boot: int,
    seed: int,
) -> None:
    """Each judge's Arena ranking against the ranking the human votes give (Bradley–Terry over
    every annotator's per-criterion votes, as the Arena counts its judges' verdicts)."""
    arena = board.get("arena") if isinstance(board.get("arena"), dict) else {}
    rankings: dict[str, list[str]] = {}
    overall = arena.get("overall") if isinstance(arena, dict) else None
    if isinstance(overall, list):
        rankings["arena (joint)"] = [str(r["model"]) for r in overall if isinstance(r, dict)]
    for j in arena.get("judges") or [] if isinstance(arena, dict) else []:
        if isinstance(j, dict) and isinstance(j.get("ranking"), list):
            rankings[str(j.get("judge"))] = [str(m) for m in j["ranking"]]
    models = sorted({m for it in items for m in it.hidden.get("pair", [])})
    index = {m: i for i, m in enumerate(models)}
    outcomes: list[tuple[int, int, float]] = []
    clusters: list[Hashable] = []
    for it in items:
        for ans in (labelled.get(it.key) or {}).values():
            for f in CRITERIA:
                won = battle_winner(str(ans.get(f, "")), it.hidden)
                if won is None:
                    continue
                a, b = it.hidden["pair"]
                score = 0.5 if won == "tie" else float(won == a)
                outcomes.append((index[a], index[b], score))
                clusters.append(str(it.hidden.get("meme")))
    if not outcomes or len(models) < 2:
        return
    point, boot = bt_ranking(outcomes, clusters, len(models), n_boot=n_boot, seed=seed)
    n_clusters = len(set(clusters))
    human_order = [models[i] for i in np.argsort(-point, kind="stable")]
    out.queues.setdefault("battles", {})["human_ranking"] = human_order
    for name, ranking in rankings.items():
        nd, tau = ranking_agreement(
            ranking, models, point, boot, n=len(outcomes), clusters=n_clusters
        )
        out.add("ranking_ndcg", "battles", nd, judge=name)
        out.add("ranking_kendall_tau", "battles", tau, judge=name)


def _guidelines(
    out: Agreement,
    items: Sequence[LabelItem],
    labelled: Mapping[str, dict[str, dict[str, Any]]],
    n_boot: int,
    seed: int,
) -> None:
    for k, axis in enumerate(GUIDELINE_AXES):
        groups: dict[str, tuple[list[float], list[str]]] = defaultdict(lambda: ([], []))
        units: list[list[int]] = []
        unit_clusters: list[str] = []
        for it in items:
            ratings = [int(a[axis]) for a in (labelled.get(it.key) or {}).values() if a.get(axis)]
            if not ratings:
                continue
            value, cluster = sum(ratings) / len(ratings), str(it.hidden.get("meme"))
            rounds = it.hidden.get("rounds") or [it.hidden.get("round")]
            names = ["all", *(f"round {r}" for r in rounds)]
            if it.hidden.get("final"):
                names.append("fused")
            for g in names:
                groups[g][0].append(value)
                groups[g][1].append(cluster)
            if len(ratings) >= 2:
                units.append([r - 1 for r in ratings])
                unit_clusters.append(cluster)
        for g in sorted(groups, key=_group_order):
            values, clusters = groups[g]
            out.add(
                "guideline_mean",
                "guidelines",
                mean_codes(values, clusters, n_boot=n_boot, seed=seed + k),
                field_=axis,
                group=g,
            )
        if units:
            # Ratings are ordered, but α is nominal here: agreement on the exact rating.
            out.add(
                "alpha",
                "guidelines",
                alpha_codes(units, unit_clusters, 3, n_boot=n_boot, seed=seed + k),
                field_=axis,
            )


def _group_order(g: str) -> tuple[int, int]:
    if g == "all":
        return (0, 0)
    if g == "fused":
        return (1, 0)
    tail = g.rsplit(" ", 1)[-1]
    return (2, int(tail) if tail.isdigit() else 0)


def _yes_no_majority(answers: Iterable[Mapping[str, Any]], name: str) -> str | None:
    votes = [str(a[name]) for a in answers if a.get(name)]
    m = plurality(votes)
    return str(m) if m is not None else None


def _yes_no_alpha(
    out: Agreement,
    queue: str,
    items: Sequence[LabelItem],
    labelled: Mapping[str, dict[str, dict[str, Any]]],
    name: str,
    cluster_of: Any,
    n_boot: int,
    seed: int,
    choices: Sequence[str] = _YES_NO,
) -> None:
    units, clusters = [], []
    for it in items:
        votes = [
            choices.index(str(a[name]))
            for a in (labelled.get(it.key) or {}).values()
            if a.get(name) in choices
        ]
        if len(votes) >= 2:
            units.append(votes)
            clusters.append(cluster_of(it))
    if units:
        out.add(
            "alpha",
            queue,
            alpha_codes(units, clusters, len(choices), n_boot=n_boot, seed=seed),
            field_=name,
        )


def _answer_scores(
    out: Agreement,
    items: Sequence[LabelItem],
    labelled: Mapping[str, dict[str, dict[str, Any]]],
    n_boot: int,
    seed: int,
) -> None:
    """The annotators' mean 1-10 score of the target's answer an item shows against the
    scorer panel's score of that answer: mean difference (human - scorer) and Pearson's r."""
    human: list[float] = []
    scorer: list[float] = []
    memes: list[str] = []
    for it in items:
        shown = it.hidden.get("answer_of")
        score = shown.get("score") if isinstance(shown, dict) else None
        if not isinstance(score, int | float) or not math.isfinite(score):
            continue
        given = [
            int(a["answer_score"])
            for a in (labelled.get(it.key) or {}).values()
            if str(a.get("answer_score") or "").isdigit()
        ]
        if not given:
            continue
        human.append(sum(given) / len(given))
        scorer.append(float(score))
        memes.append(str(it.hidden.get("meme")))
    if not human:
        return
    diffs = [h - s for h, s in zip(human, scorer, strict=True)]
    out.add(
        "answer_score_difference",
        "rewrites",
        mean_codes(diffs, memes, n_boot=n_boot, seed=seed),
        field_="answer_score",
    )
    out.add(
        "answer_score_correlation",
        "rewrites",
        correlation_codes(human, scorer, memes, n_boot=n_boot, seed=seed),
        field_="answer_score",
    )


def _rewrites(
    out: Agreement,
    items: Sequence[LabelItem],
    labelled: Mapping[str, dict[str, dict[str, Any]]],
    n_boot: int,
    seed: int,
) -> None:
    def meme(it: LabelItem) -> str:
        return str(it.hidden.get("meme"))

    for name in ("still_harmful", "carries_misbelief"):
        _yes_no_alpha(out, "rewrites", items, labelled, name, meme, n_boot, seed)
    shares: dict[tuple[str, str], tuple[list[float], list[str]]] = defaultdict(lambda: ([], []))
    steps: dict[str, dict[str, tuple[list[float], list[str]]]] = defaultdict(
        lambda: defaultdict(lambda: ([], []))
    )
    for it in items:
        answers = list((labelled.get(it.key) or {}).values())
        kind = str(it.hidden.get("kind"))
        for name in ("still_harmful", "carries_misbelief"):
            m = _yes_no_majority(answers, name)
            if m in ("yes", "no"):
                shares[(name, kind)][0].append(1.0 if m == "yes" else 0.0)
                shares[(name, kind)][1].append(meme(it))
        if kind != "refined":
            continue
        harmful = _yes_no_majority(answers, "still_harmful")
        for s in it.hidden.get("steps") or []:
            if not isinstance(s.get("score"), int | float):
                continue
            failed = 1.0 if s.get("failed") else 0.0
            groups = ["all rewrites"]
            if answers:
                groups.append("labelled")
            if harmful == "yes":
                groups.append("human harmful")
            for g in groups:
                steps[str(s["target"])][g][0].append(failed)
                steps[str(s["target"])][g][1].append(meme(it))
    _answer_scores(out, items, labelled, n_boot, seed)
    for (name, kind), (values, clusters) in sorted(shares.items()):
        figure = "harmful_share" if name == "still_harmful" else "misbelief_share"
        out.add(
            figure,
            "rewrites",
            mean_codes(values, clusters, n_boot=n_boot, seed=seed),
            field_=name,
            group=kind,
        )
    figures = {
        "all rewrites": "failure_rate_all",
        "labelled": "failure_rate",
        "human harmful": "failure_rate_human_harmful",
    }
    for target in sorted(steps):
        for g, (values, clusters) in steps[target].items():
            if g == "all rewrites" and "labelled" not in steps[target]:
                continue  # nothing labelled for this target: no human figure to sit beside
            out.add(
                figures[g],
                "rewrites",
                mean_codes(values, clusters, n_boot=n_boot, seed=seed),
                judge=target,
                group=g,
            )


def _perturbations(
    out: Agreement,
    items: Sequence[LabelItem],
    labelled: Mapping[str, dict[str, dict[str, Any]]],
    n_boot: int,
    seed: int,
) -> None:
    def key(it: LabelItem) -> str:
        return it.key

    _yes_no_alpha(out, "perturbations", items, labelled, "keeps", key, n_boot, seed, ("yes", "no"))
    groups: dict[str, tuple[list[float], list[str]]] = defaultdict(lambda: ([], []))
    for it in items:
        m = _yes_no_majority((labelled.get(it.key) or {}).values(), "keeps")
        if m is None:
            continue
        for g in ("all", str(it.hidden.get("bias_type"))):
            groups[g][0].append(1.0 if m == "yes" else 0.0)
            groups[g][1].append(it.key)
    for g in sorted(groups, key=lambda g: (g != "all", g)):
        values, clusters = groups[g]
        out.add(
            "perturbation_accepted",
            "perturbations",
            mean_codes(values, clusters, n_boot=n_boot, seed=seed),
            group=g,
        )


def compute_agreement(
    items: Mapping[str, Sequence[LabelItem]],
    labels: Sequence[Label],
    board: Mapping[str, Any] | None = None,
    *,
    n_boot: int = 1000,
    seed: int = 0,
) -> Agreement:
    """The figures of ``labels`` (current ones: see ``LabelStore.labels``) on ``items`` (per
    queue); ``board`` is the run's leaderboard document (the Arena's rankings)."""
    out = Agreement(bootstrap=n_boot, computed=time.time())
    by_queue: dict[str, list[Label]] = defaultdict(list)
    for lab in labels:
        by_queue[lab.queue].append(lab)
    for queue in QUEUES:
        present = list(items.get(queue) or [])
        labs = by_queue.get(queue, [])
        if not present and not labs:
            continue
        keys = {it.key for it in present}
        labelled = _by_item(lab for lab in labs if lab.item_key in keys)
        orphans = sorted({lab.item_key for lab in labs if lab.item_key not in keys})
        if orphans:
            out.orphans[queue] = orphans
        out.queues[queue] = {
            "items": len(present),
            "labelled": len(labelled),
            "labels": sum(len(v) for v in labelled.values()),
            "orphan_labels": sum(1 for lab in labs if lab.item_key not in keys),
            "annotators": sorted({lab.annotator for lab in labs}),
        }
        if not labelled:
            continue
        if queue == "battles":
            _battles(out, present, labelled, board or {}, n_boot, seed)
        elif queue == "guidelines":
            _guidelines(out, present, labelled, n_boot, seed)
        elif queue == "rewrites":
            _rewrites(out, present, labelled, n_boot, seed)
        else:
            _perturbations(out, present, labelled, n_boot, seed)
    widest = None
    for r in out.rows:
        if r["ci_low"] is None or r["ci_high"] is None or r["figure"] == "failure_rate_all":
            continue
        width = r["ci_high"] - r["ci_low"]
        if widest is None or width > widest[0]:
            widest = (width, r)
    if widest is not None:
        width, r = widest
        out.widest = {
            **{k: r[k] for k in ("figure", "queue", "judge", "field", "group", "clusters")},
            "half_width": width / 2,
            "narrowing_per_label": _num(narrowing(width / 2, int(r["clusters"]))),
        }
    return out


def agreement(
    run_dir: Path, *, n_boot: int = 1000, seed: int = 0, queues: Sequence[str] | None = None
) -> Agreement:
    """Every agreement figure of the run directory ``run_dir`` (its queues and
    ``labels.sqlite``; nothing is written)."""
    from memearena.labels.runfiles import RunFiles

    store = LabelStore(run_dir, create=False)
    try:
        labels = store.labels()
    finally:
        store.close()
    wanted = [q for q in available_queues(run_dir) if queues is None or q in queues]
    labelled_queues = {lab.queue for lab in labels}
    items = {
        q: queue_items(run_dir, q) for q in wanted if q in labelled_queues or queues is not None
    }
    run = RunFiles(run_dir)
    try:
        board = run.board
    finally:
        run.close()
    return compute_agreement(items, labels, board, n_boot=n_boot, seed=seed)
