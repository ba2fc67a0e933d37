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


def _adapt_config() -> RunConfig:
    from memearena.methods.adapt.config import AdaptConfig
    from memearena.sim import demo_models

    judge = "sim-judge-falcon"
    fields = {
        "targets": ["sim-aurora", "sim-ember"],
        **dict.fromkeys(
            ("miner", "text_judge", "image_examiner", "instruction_writer", "narrator"), judge
        ),
        "reference_model": judge,
        "reference_judge": "sim-judge-harbor",
        "scorers": ["sim-judge-harbor"],
        "refiner": "sim-judge-grove",
        "checker": judge,
        "repeats": 1,
        "reference_candidates": 2,
        "seed_samples": 1,
        "steps": 3,
        "bootstrap": 20,
        "window": 8,
    }
    return RunConfig(
        run="a",
        models=dict(demo_models()),
        data=[DatasetConfig(format="demo", limit=6)],
        cache=False,
        adapt=AdaptConfig.model_validate(fields),
    )


def test_the_adapt_bars_are_its_step_kinds_and_equal_its_closing_counts(
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
        result = run_method("adapt", _adapt_config(), tmp_path / "run", console=console)
        shown = next(b for b in bars if b.counts()).counts()
        # One bar per step kind the closing line counts, none counting items (memes, chains).
        assert shown.keys() == result.stages.keys() and "adapt.rewrite" in shown
        for kind, c in result.stages.items():
            done, reused, total = shown[kind]
            assert (done, reused) == (c.reused + c.new + c.failed, c.reused), kind
            assert total == done, kind  # a complete run's bars end full, at the steps made
        if fresh:
            assert result.stages["adapt.answer"].new > 0 and shown["adapt.answer"][1] == 0
        else:
            assert all(c.new == 0 for c in result.stages.values())
            assert all(r == d for d, r, _ in shown.values())  # every step shown as reused


def test_a_bar_by_step_kind_grows_as_steps_are_reached() -> None:
    p = StageProgress(Console(file=io.StringIO()), enabled=True)
    with p:
        p.stage("scoring", 10)  # an item-level bar: not shown once bars count step kinds
        p.by_step_kind()
        p.stage("refinement", 4)
        p.advance("refinement")
        for _ in range(3):
            p.reach("adapt.score")
        p.made("adapt.score", "reused")
        p.made("adapt.score", "new")
        p.unreach("adapt.score")  # stopped before it was counted
    assert p.counts() == {"adapt.score": (2, 1, 2)}
