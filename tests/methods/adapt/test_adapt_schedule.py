"""Adapt's schedule keeps its window full: a group's refinement starts once its own originals
are scored, not after every group's (``bench/adapt_window.py`` checks that the request keys and
results stay those of the stage-by-stage schedule)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from adapt_helpers import run_pipeline, small_config

import memearena.methods.adapt.sim  # noqa: F401  (registers the world's Adapt part)
from memearena.models.types import GenParams, Message, TextPart


def _text(messages: Sequence[Message]) -> str:
    return "\n".join(p.text for m in messages for p in m.content if isinstance(p, TextPart))


def test_a_group_refines_while_other_groups_are_still_scored(tmp_path: Path) -> None:
    cfg = small_config(repeats=2)
    originals: set[str] = set()
    order: list[str] = []

    def answer(model: str, role: str, messages: Sequence[Message], params: GenParams) -> None:
        text = _text(messages)
        order.append("original" if any(t in text for t in originals) else "rewrite")

    def refine(model: str, role: str, messages: Sequence[Message], params: GenParams) -> None:
        order.append("refine")

    from memearena.data import load_dataset

    originals |= {
        m.text for m in load_dataset(cfg.data[0], check_images=False).memes if len(m.text) > 10
    }
    out, store, _ = run_pipeline(
        cfg, tmp_path / "run", {"adapt.answer": answer, "adapt.refine": refine}
    )
    store.close()
    assert out.chains and out.pending == 0
    # Refinement began before the last original was answered: no barrier between the stages.
    first_refine = order.index("refine")
    assert "original" in order[first_refine:], order
    # Each refinement stage's calls are told apart from scoring's all the same.
    assert out.stage_calls["refinement"] >= order.count("refine") > 0
