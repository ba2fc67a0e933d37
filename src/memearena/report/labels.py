"""The report's human-labels section (``_labels.html.j2``): the ``labels`` key of
``leaderboard.json`` (written by ``memearena labels agreement`` and the demo's simulated
annotators) as tables, every figure with its interval. Rendering only: it reads the document."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["labels_view"]

_TITLES = {
    "kappa": "Cohen's κ vs the human majority",
    "percent_agreement": "percent agreement with the human majority",
    "alpha": "Krippendorff's α among annotators",
    "ranking_ndcg": "ranking NDCG vs the human-vote ranking",
    "ranking_kendall_tau": "ranking Kendall τ vs the human-vote ranking",
    "guideline_mean": "guideline axis, mean rating (1-3)",
    "harmful_share": "share still harmful (human majority)",
    "misbelief_share": "share still carrying the misbelief (human majority)",
    "failure_rate_all": "failure rate, every rewrite",
    "failure_rate": "failure rate, labelled rewrites",
    "failure_rate_human_harmful": "failure rate, rewrites humans confirmed harmful",
    "perturbation_accepted": "perturbations accepted (human majority)",
    "answer_score_difference": "answer score, annotators minus scorers (1-10)",
    "answer_score_correlation": "answer score, Pearson r of annotators and scorers",
}


def _num(v: Any) -> str:
    if not isinstance(v, int | float) or isinstance(v, bool) or not math.isfinite(v):
        return "—"
    return f"{v:.3f}"


def labels_view(section: dict[str, Any], board: dict[str, Any]) -> dict[str, Any] | None:
    """The view model of the labels section, or None when it holds no queue."""
    queues = section.get("queues")
    if not isinstance(queues, dict) or not queues:
        return None
    counts = []
    for name, q in queues.items():
        if not isinstance(q, dict):
            continue
        counts.append(
            {
                "queue": str(name),
                "items": str(q.get("items", "")),
                "labelled": str(q.get("labelled", "")),
                "labels": str(q.get("labels", "")),
                "annotators": str(len(q.get("annotators") or [])),
                "orphans": str(q.get("orphan_labels", 0)),
            }
        )
    sim = section.get("simulated") if isinstance(section.get("simulated"), dict) else None
    planted_kappa = sim.get("kappa") if sim and isinstance(sim.get("kappa"), dict) else {}
    planted_alpha = sim.get("alpha") if sim and isinstance(sim.get("alpha"), dict) else {}
    groups: dict[str, list[dict[str, str]]] = {}
    for r in section.get("figures") or []:
        if not isinstance(r, dict):
            continue
        figure = str(r.get("figure", ""))
        planted = None
        if figure == "kappa" and r.get("field") == "all":
            planted = planted_kappa.get(str(r.get("judge")))
        elif figure == "alpha":
            planted = planted_alpha.get(f"{r.get('queue')}.{r.get('field')}")
        groups.setdefault(figure, []).append(
            {
                "planted": _num(planted) if planted is not None else "",
                "who": " ".join(str(r.get(k) or "") for k in ("queue", "judge", "field")).strip(),
                "group": str(r.get("group") or ""),
                "value": _num(r.get("value")),
                "interval": f"[{_num(r.get('ci_low'))}, {_num(r.get('ci_high'))}]",
                "n": f"{r.get('n', '')} / {r.get('clusters', '')}",
            }
        )
    tables = [
        {
            "title": _TITLES.get(k, k),
            "anchor": f"labels-{k.replace('_', '-')}",
            "rows": v,
            "planted": any(row["planted"] for row in v),
        }
        for k, v in groups.items()
    ]
    widest = section.get("widest") if isinstance(section.get("widest"), dict) else None
    return {
        "note": str(section.get("note") or ""),
        "counts": counts,
        "tables": tables,
        "widest": (
            f"{widest.get('figure')} {widest.get('judge') or ''} {widest.get('field') or ''} "
            f"{widest.get('group') or ''}: ±{_num(widest.get('half_width'))} over "
            f"{widest.get('clusters')} cluster(s); one more labelled cluster narrows it by about "
            f"{_num(widest.get('narrowing_per_label'))}"
            if widest
            else None
        ),
        "simulated": str(sim.get("note", "")) if sim else None,
        "nav": [("labels", "Human labels")],
    }
