"""Progress bars count the work: a bar's total is the steps this run makes, a step found in the
run directory is shown as reused, a planned step the run does not need leaves the total, and a
finished bar reads what the closing "reused N, new M" line says."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

import memearena.engine.lifecycle as lifecycle
from memearena.config import DatasetConfig, RunConfig, SimModelConfig
from memearena.engine.lifecycle import run_method
from memearena.engine.progress import StageProgress
from memearena.methods.arena.config import ArenaConfig


def test_a_bar_counts_reused_and_drops_unneeded_steps() -> None:
    p = StageProgress(Console(file=io.StringIO()), enabled=True)
    with p:
        p.stage("judgments", 10)
        p.advance("judgments", 4, reused=True)
        p.advance("judgments", 3)
        p.drop("judgments", 2)
    assert p.counts() == {"judgments": (7, 4, 8)}


def test_a_disabled_bar_keeps_no_books() -> None:
    p = StageProgress(enabled=False)
    p.stage("x", 3)
    p.advance("x", 3, reused=True)
    p.drop("x", 1)
    assert p.counts() == {}


def _config() -> RunConfig:
    def sim(**kw: Any) -> SimModelConfig:
        return SimModelConfig(provider="sim", **kw)

    # One target refuses often: its pairs are not judged, so the planned judgments shrink.
    models = {
        "t-strong": sim(skill=0.9, family="s"),
        "t-shy": sim(skill=0.6, family="m", refusal_rate=0.5),
        "j-one": sim(skill=0.85, family="one"),
        "j-two": sim(skill=0.8, family="two"),
    }
    return RunConfig(
        run="r",
        models=models,
        data=[DatasetConfig(format="demo", limit=3)],
        arena=ArenaConfig(
            targets=["t-strong", "t-shy"],
            judges=["j-one", "j-two"],
            context_model="j-one",
            fusion_rounds=2,
            bootstrap=10,
        ),
    )


def test_the_arena_bars_equal_its_closing_counts_fresh_and_resumed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bars: list[StageProgress] = []

    class Recorded(StageProgress):
        def __init__(self, *a: Any, **kw: Any) -> None:
            super().__init__(*a, **kw)
            bars.append(self)

    monkeypatch.setattr(lifecycle, "StageProgress", Recorded)
    console = Console(file=io.StringIO(), width=120)
    for fresh in (True, False):
        bars.clear()
        result = run_method("arena", _config(), tmp_path / "run", console=console)
        shown = next(b for b in bars if b.counts()).counts()
        assert shown.keys() == result.stages.keys()
        for stage, c in result.stages.items():
            done, reused, total = shown[stage]
            assert (done, reused) == (c.reused + c.new + c.failed, c.reused), stage
            assert total == done, stage  # a complete run's bars end full, at the steps made
        if fresh:
            assert result.stages["judgments"].new > 0 and shown["judgments"][1] == 0
            # 3 memes x 3 contexts x 1 pair x 2 judges x both orders were planned; the pairs
            # with a refused answer left the total.
            assert shown["judgments"][2] < 3 * 3 * 2 * 2
        else:
            assert all(c.new == 0 for c in result.stages.values())
            assert all(r == d for d, r, _ in shown.values())  # every step shown as reused
