"""The echo method's label queue: is a restatement faithful to its meme? (``QUEUES``)."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from memearena.labels.figures import Agreement, Labelled, choice_alpha, majority
from memearena.labels.items import Field, LabelItem, item_hash
from memearena.labels.queues import LabelQueue, Rating, Truth
from memearena.labels.runfiles import RunFiles
from memearena.stats.human import mean_codes

KIND = "echo.restate"
FIELDS = (Field("faithful", "Does it say what the meme says?", ("yes", "no"), ("y", "n")),)


def _items(run: RunFiles) -> list[LabelItem]:
    out = []
    for key, value in run.artifacts(KIND):
        meme = key.rpartition("|")[0]
        out.append(
            LabelItem(
                queue="restatements",
                key=item_hash("restatement", key)[:40],
                title=f"Meme {meme}",
                texts={"restatement": str(value.get("text") or "")},
                images={},
                fields=FIELDS,
                hidden={"meme": meme},
            )
        )
    return out


def _figures(
    out: Agreement,
    items: Sequence[LabelItem],
    labelled: Labelled,
    board: Mapping[str, Any],
    n_boot: int,
    seed: int,
) -> None:
    def meme(it: LabelItem) -> str:
        return str(it.hidden["meme"])

    choice_alpha(
        out, "restatements", items, labelled, "faithful", meme, n_boot, seed, ("yes", "no")
    )
    values, memes = [], []
    for it in items:
        m = majority((labelled.get(it.key) or {}).values(), "faithful")
        if m is not None:
            values.append(1.0 if m == "yes" else 0.0)
            memes.append(meme(it))
    out.add("faithful_share", "restatements", mean_codes(values, memes, n_boot=n_boot, seed=seed))


def _plant(item: LabelItem, world: random.Random) -> tuple[list[Truth], list[Rating]]:
    return [Truth("faithful", 0, 2, lambda code: ("yes", "no")[code])], []


QUEUES = (
    LabelQueue(
        name="restatements",
        title="Echo restatements",
        help="Does the restatement say what the meme says?",
        figure_titles=(("faithful_share", "Share of restatements the annotators call faithful"),),
        fields=FIELDS,
        items=_items,
        available=lambda run: bool(run.artifacts(KIND)),
        information=lambda item: 0.0,
        figures=_figures,
        plant=_plant,
    ),
)
