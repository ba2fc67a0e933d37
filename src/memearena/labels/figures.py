"""The rows of the agreement figures, and the arithmetic a queue's figures share.

A queue computes its own figures (its ``LabelQueue.figures``) into an :class:`Agreement`;
``memearena.labels.agreement`` joins the run's queue items with the store's labels and hands
each queue its labelled items. The statistics are ``memearena.stats.human`` (pure)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memearena.labels.items import LabelItem
from memearena.stats.human import HumanEstimate, alpha_codes, plurality

__all__ = [
    "COLUMNS",
    "YES_NO",
    "Agreement",
    "Labelled",
    "choice_alpha",
    "majority",
    "num",
]

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

YES_NO: tuple[str, ...] = ("yes", "no", "unsure")

Labelled = Mapping[str, dict[str, dict[str, Any]]]
"""Item key → annotator → answer (the latest per annotator), the labelled items of a queue."""


@dataclass
class Agreement:
    """Every agreement figure of one run directory (``memearena.labels.agreement``)."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    queues: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per queue: items, labelled items, labels, annotators."""
    orphans: dict[str, list[str]] = field(default_factory=dict)
    """Per queue: item keys labelled that the run no longer has (the labels are kept)."""
    widest: dict[str, Any] | None = None
    """The widest interval and how much one more labelled cluster would narrow it."""
    bootstrap: int = 1000
    computed: float = 0.0
    note: str = ""
    """What the intervals are over (each queue's cluster), shown with the figures."""

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
                "value": num(est.value),
                "ci_low": num(est.ci_low),
                "ci_high": num(est.ci_high),
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
            "note": self.note,
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


def num(x: float) -> float | None:
    """A figure's number as JSON holds it (NaN and infinities as None)."""
    return float(x) if math.isfinite(x) else None


def majority(answers: Iterable[Mapping[str, Any]], name: str) -> str | None:
    """The annotators' plurality choice on field ``name`` (None when the top is shared or
    nobody answered it)."""
    votes = [str(a[name]) for a in answers if a.get(name)]
    m = plurality(votes)
    return str(m) if m is not None else None


def choice_alpha(
    out: Agreement,
    queue: str,
    items: Sequence[LabelItem],
    labelled: Labelled,
    name: str,
    cluster_of: Callable[[LabelItem], str],
    n_boot: int,
    seed: int,
    choices: Sequence[str] = YES_NO,
) -> None:
    """Krippendorff's α (nominal) among the annotators on field ``name`` of ``queue``, over
    the items two or more annotators answered, clustered by ``cluster_of``."""
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
