"""The notebook API of Adapt: run_adapt / arun_adapt / plan_adapt and AdaptResult's frames."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from adapt_helpers import small_config

import memearena


def test_run_adapt_returns_results_read_from_the_run_dir(tmp_path: Path) -> None:
    pytest.importorskip("pandas")
    cfg = small_config(steps=2)
    plan = memearena.plan_adapt(cfg)
    assert plan.calls > 0
    res = memearena.run_adapt(cfg, tmp_path / "run", show_progress=False)
    assert isinstance(res, memearena.AdaptResult) and res.new_calls and not res.stopped
    models = res.models()
    assert list(models["model"]) == ["sim-aurora", "sim-ember"]
    assert {"failure_rate", "failure_rate_ci", "control_increase"} <= set(models.columns)
    scores = res.scores()
    assert set(scores["outcome"]) <= {"scored", "refused", "unparsed", "no_reference"}
    chains = res.chains()
    assert {"target", "mode", "step", "text", "score_before"} <= set(chains.columns)
    assert set(res.by_category()["category"]) <= {"Race", "Gender"}
    # The async twin resumes the same run: nothing new to call.
    again = asyncio.run(memearena.arun_adapt(cfg, tmp_path / "run", show_progress=False))
    assert again.new_calls == 0
