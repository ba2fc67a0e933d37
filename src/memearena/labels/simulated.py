"""The demo's simulated annotators at work (a SIMULATOR: never labels of real people).

``simulate_labels`` has each annotator of ``memearena.sim.annotators`` answer every item of the
run's queues, writes the answers to ``labels.sqlite`` (UI version ``simulated``) and returns
what was planted: the truths are set here, the noise by the annotators, so the α among the
annotators and the κ of every judge against their majority are known exactly
(``sim.annotators.planted_alpha`` / ``planted_kappa``) and the agreement figures can be checked
against them.

Truths: a battle criterion's is the judges' plurality on it (a tie when their top is shared),
so every judge's disagreement with the truth is its disagreement with the panel; the overall
answer's is the plurality of the criteria truths; a guideline axis's rating is 1 before round
2, 2 before round 5, 3 from then on (a quality that plateaus); a rewrite is still harmful with
probability 0.7 (an original 0.95) and still carries its misbelief with probability 0.8; a
perturbation keeps what its type must keep with probability 0.9 (0.6 for texture insertion).
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memearena.labels.queues import (
    CRITERIA,
    GUIDELINE_AXES,
    LabelItem,
    available_queues,
    queue_items,
)
from memearena.labels.store import LabelStore
from memearena.sim.annotators import SimAnnotator, planted_alpha, planted_kappa

__all__ = ["SIMULATED_UI", "Planted", "simulate_labels"]

SIMULATED_UI = "simulated"
"""The UI version recorded with simulated labels (they never pass for a person's)."""

_PERTURBATION_KEEPS = {"texture_insertion": 0.6}


@dataclass
class Planted:
    """What the simulated labels were drawn to show (large-sample values)."""

    annotators: dict[str, float]
    """Annotator → noise rate."""
    kappa: dict[str, float] = field(default_factory=dict)
    """Judge → planted κ against the annotators' majority, battle criteria pooled."""
    alpha: dict[str, float] = field(default_factory=dict)
    """``queue.field`` → planted α among the annotators."""
    labels: int = 0
    """Simulated labels current in the store (written now or by an earlier run)."""


def _code(outcome: str | None, pair: Sequence[str]) -> int:
    if outcome == pair[0]:
        return 0
    if outcome == pair[1]:
        return 1
    return 2


def _plurality(codes: Sequence[int]) -> int:
    counts = Counter(codes).most_common()
    if not counts or (len(counts) > 1 and counts[0][1] == counts[1][1]):
        return 2
    return counts[0][0]


def _letter(code: int, item: LabelItem) -> str:
    if code == 2:
        return "tie"
    model = item.hidden["pair"][code]
    return "A" if item.hidden["A"] == model else "B"


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
    rater: dict[str, tuple[list[int], list[int]]] = defaultdict(lambda: ([], []))

    def draw(item: LabelItem, a: SimAnnotator) -> random.Random:
        return random.Random(f"{seed}\x1fannotator\x1f{a.name}\x1f{item.queue}\x1f{item.key}")

    for queue in available_queues(run_dir):
        if queues is not None and queue not in queues:
            continue
        for item in queue_items(run_dir, queue):
            world = random.Random(f"{seed}\x1ftruth\x1f{queue}\x1f{item.key}")
            answers: dict[str, dict[str, str]] = {a.name: {} for a in annotators}
            rngs = {a.name: draw(item, a) for a in annotators}
            if queue == "battles":
                pair = item.hidden["pair"]
                judges = item.hidden.get("judges") or {}
                crit_truths = []
                for c in CRITERIA:
                    votes = [_code(per.get(c), pair) for per in judges.values() if c in per]
                    if not votes:
                        continue
                    t = _plurality(votes)
                    crit_truths.append(t)
                    truths[f"battles.{c}"].append(t)
                    for judge, per in judges.items():
                        if c in per:
                            rater[judge][0].append(_code(per[c], pair))
                            rater[judge][1].append(t)
                    for a in annotators:
                        answers[a.name][c] = _letter(a.answer(t, 3, rngs[a.name]), item)
                t = _plurality(crit_truths)
                truths["battles.overall"].append(t)
                for a in annotators:
                    answers[a.name]["overall"] = _letter(a.answer(t, 3, rngs[a.name]), item)
            elif queue == "guidelines":
                rnd = int(item.hidden.get("round") or 0)  # the version's first round
                t = 0 if rnd < 2 else 1 if rnd < 5 else 2
                for axis in GUIDELINE_AXES:
                    truths[f"guidelines.{axis}"].append(t)
                    for a in annotators:
                        answers[a.name][axis] = str(a.answer(t, 3, rngs[a.name]) + 1)
            elif queue == "rewrites":
                original = item.hidden.get("kind") == "original"
                for name, p in (
                    ("still_harmful", 0.95 if original else 0.7),
                    ("carries_misbelief", 0.8),
                ):
                    t = 0 if world.random() < p else 1  # 0 yes, 1 no
                    truths[f"rewrites.{name}"].append(t)
                    for a in annotators:
                        answers[a.name][name] = ("yes", "no")[a.answer(t, 2, rngs[a.name])]
            else:
                p = _PERTURBATION_KEEPS.get(str(item.hidden.get("bias_type")), 0.9)
                t = 0 if world.random() < p else 1
                truths["perturbations.keeps"].append(t)
                for a in annotators:
                    answers[a.name]["keeps"] = ("yes", "no")[a.answer(t, 2, rngs[a.name])]
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
        k = 2 if name.startswith(("rewrites.", "perturbations.")) else 3
        planted.alpha[name] = planted_alpha(ts, annotators, k)
    for judge, (codes, ts) in sorted(rater.items()):
        planted.kappa[judge] = planted_kappa(codes, ts, annotators, 3)
    return planted
