"""Adapt's leaderboard ``errors`` come from the current config's records only."""

from __future__ import annotations

import json
from pathlib import Path

from adapt_helpers import small_config

import memearena


def _errors(run: Path) -> dict[str, int]:
    board = json.loads((run / "leaderboard.json").read_text(encoding="utf-8"))
    return dict(board["adapt"]["errors"])


def test_a_replaced_targets_refusals_leave_the_errors_block(tmp_path: Path) -> None:
    run = tmp_path / "run"
    # sim-borealis refuses some Adapt answers on the first eight demo memes.
    before = small_config(limit=8, steps=1, targets=["sim-aurora", "sim-borealis"])
    memearena.run_adapt(before, run, show_progress=False)
    assert _errors(run).get("adapt.answer: refusal", 0) > 0
    # The same run directory with the refusing target replaced reads as a fresh run does.
    after = small_config(limit=8, steps=1, targets=["sim-aurora", "sim-cirrus"])
    memearena.run_adapt(after, run, show_progress=False)
    fresh = tmp_path / "fresh"
    memearena.run_adapt(after, fresh, show_progress=False)
    assert _errors(run) == _errors(fresh)
    assert "adapt.answer: refusal" not in _errors(run)
    # The records stay on record: putting the target back shows its refusals again.
    memearena.run_adapt(before, run, show_progress=False)
    assert _errors(run).get("adapt.answer: refusal", 0) > 0
