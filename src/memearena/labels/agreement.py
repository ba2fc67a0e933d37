"""Agreement figures: how far every judge agrees with the people who labelled, and what the
people said, each figure with a bootstrap interval over the labelled units.

This module joins the run's queue items with the store's labels and hands each queue its
labelled items; the figures themselves are the queue's (``LabelQueue.figures``, declared by
the method the queue belongs to, with the unit its bootstrap draws: ``LabelQueue.cluster``).
Every row has the columns ``figures.COLUMNS`` (``figure``, ``queue``, ``judge``, ``field``,
``group``, ``value``, ``ci_low``, ``ci_high``, ``n``, ``clusters``); the statistics are
``memearena.stats.human`` (pure).

Labels whose item is no longer in the run are kept in the store and reported
(``Agreement.orphans``), never dropped silently.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from memearena.labels.figures import COLUMNS, Agreement, num
from memearena.labels.items import LabelItem
from memearena.labels.queues import LabelQueue, available_queues, label_queues, queue_items
from memearena.labels.store import Label, LabelStore
from memearena.stats.human import narrowing

__all__ = ["COLUMNS", "Agreement", "agreement", "compute_agreement"]


def _by_item(labels: Iterable[Label]) -> dict[str, dict[str, dict[str, Any]]]:
    """item key → annotator → answer (the latest per annotator)."""
    out: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for lab in labels:
        out[lab.item_key][lab.annotator] = lab.answer
    return out


def _note(queues: Iterable[LabelQueue]) -> str:
    """What the intervals are over: the clusters most queues draw, the others named."""
    clusters = [q.cluster for q in queues]
    usual = max(clusters, key=clusters.count) if clusters else "memes"
    others = "; ".join(f"{q.name}: over {q.cluster}" for q in queues if q.cluster != usual)
    return (
        f"human labels from labels.sqlite; 95% intervals by bootstrap over {usual}"
        + (f" ({others})" if others else "")
        + "; majority = the annotators' plurality"
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
    queue); ``board`` is the run's leaderboard document (the methods' own rankings)."""
    queues = label_queues()
    out = Agreement(bootstrap=n_boot, computed=time.time(), note=_note(queues.values()))
    by_queue: dict[str, list[Label]] = defaultdict(list)
    for lab in labels:
        by_queue[lab.queue].append(lab)
    for queue, spec in queues.items():
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
        spec.figures(out, present, labelled, board or {}, n_boot, seed)
    unlabelled = {f for spec in queues.values() for f in spec.unlabelled_figures}
    widest = None
    for r in out.rows:
        if r["ci_low"] is None or r["ci_high"] is None or r["figure"] in unlabelled:
            continue
        width = r["ci_high"] - r["ci_low"]
        if widest is None or width > widest[0]:
            widest = (width, r)
    if widest is not None:
        width, r = widest
        out.widest = {
            **{k: r[k] for k in ("figure", "queue", "judge", "field", "group", "clusters")},
            "half_width": width / 2,
            "narrowing_per_label": num(narrowing(width / 2, int(r["clusters"]))),
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
