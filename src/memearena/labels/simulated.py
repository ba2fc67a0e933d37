"""The demo's simulated annotators at work (a SIMULATOR: never labels of real people).

``simulate_labels`` has each annotator of ``memearena.sim.annotators`` answer every item of the
run's queues, writes the answers to ``labels.sqlite`` (UI version ``simulated``) and returns
what was planted: the truths are set by each queue (``LabelQueue.plant``, declared by the
method the queue belongs to), the noise by the annotators, so the α among the annotators and
the κ of every judge against their majority are known exactly
(``sim.annotators.planted_alpha`` / ``planted_kappa``) and the agreement figures can be checked
against them. A queue that plants nothing is not labelled.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memearena.labels.items import LabelItem
from memearena.labels.queues import available_queues, label_queues, queue_items
from memearena.labels.store import LabelStore
from memearena.sim.annotators import SimAnnotator, planted_alpha, planted_kappa

__all__ = ["SIMULATED_UI", "Planted", "simulate_labels"]

SIMULATED_UI = "simulated"
"""The UI version recorded with simulated labels (they never pass for a person's)."""


@dataclass
class Planted:
    """What the simulated labels were drawn to show (large-sample values)."""

    annotators: dict[str, float]
    """Annotator → noise rate."""
    kappa: dict[str, float] = field(default_factory=dict)
    """Judge → planted κ against the annotators' majority, its fields pooled."""
    alpha: dict[str, float] = field(default_factory=dict)
    """``queue.field`` → planted α among the annotators."""
    labels: int = 0
    """Simulated labels current in the store (written now or by an earlier run)."""


def simulate_labels(
    run_dir: Path,
    annotators: Sequence[SimAnnotator],
    *,
    seed: int = 0,
    queues: Sequence[str] | None = None,
) -> Planted:
    """Every annotator labels every item of the run's queues (``queues``: a subset); the
    labels are appended to ``labels.sqlite``; returns what was planted."""
    planted = Planted({a.name: a.noise for a in annotators})
    rows: list[dict[str, Any]] = []
    truths: dict[str, list[int]] = defaultdict(list)
    choices: dict[str, int] = {}
    rater: dict[str, tuple[list[int], list[int]]] = defaultdict(lambda: ([], []))
    rater_choices: dict[str, int] = {}
    specs = label_queues()

    def draw(item: LabelItem, a: SimAnnotator) -> random.Random:
        return random.Random(f"{seed}\x1fannotator\x1f{a.name}\x1f{item.queue}\x1f{item.key}")

    for queue in available_queues(run_dir):
        plant = specs[queue].plant
        if (queues is not None and queue not in queues) or plant is None:
            continue
        for item in queue_items(run_dir, queue):
            world = random.Random(f"{seed}\x1ftruth\x1f{queue}\x1f{item.key}")
            answers: dict[str, dict[str, str]] = {a.name: {} for a in annotators}
            rngs = {a.name: draw(item, a) for a in annotators}
            planted_truths, ratings = plant(item, world)
            for t in planted_truths:
                name = f"{queue}.{t.field}"
                truths[name].append(t.code)
                choices[name] = t.choices
                for a in annotators:
                    answers[a.name][t.field] = t.answer(a.answer(t.code, t.choices, rngs[a.name]))
            for r in ratings:
                rater[r.judge][0].append(r.code)
                rater[r.judge][1].append(r.truth)
                rater_choices[r.judge] = r.choices
            for who, answer in answers.items():
                if answer:
                    rows.append(
                        {
                            "queue": queue,
                            "item_key": item.key,
                            "annotator": who,
                            "answer": answer,
                            "ui_version": SIMULATED_UI,
                        }
                    )
    store = LabelStore(run_dir)
    try:
        # A re-run of the demo draws the same answers: those already current are not repeated.
        current = {(lab.queue, lab.item_key, lab.annotator): lab.answer for lab in store.labels()}
        fresh = [
            r
            for r in rows
            if current.get((r["queue"], r["item_key"], r["annotator"])) != r["answer"]
        ]
        store.add_many(fresh)
        planted.labels = len(rows)
    finally:
        store.close()
    for name, ts in truths.items():
        planted.alpha[name] = planted_alpha(ts, annotators, choices[name])
    for judge, (codes, ts) in sorted(rater.items()):
        planted.kappa[judge] = planted_kappa(codes, ts, annotators, rater_choices[judge])
    return planted
