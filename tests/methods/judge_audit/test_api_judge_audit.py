"""The notebook surface of the Judge audit: sync and async twins, a result object."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import memearena
from memearena.config import parse_config


def _cfg() -> memearena.RunConfig:
    return parse_config(
        {
            "models": {
                "r1": {"provider": "sim", "family": "r1"},
                "r2": {"provider": "sim", "family": "r2"},
                "j": {"provider": "sim"},
            },
            "data": [{"format": "demo", "limit": 3}],
            "judge_audit": {
                "judges": ["j"],
                "responders": ["r1", "r2"],
                "bootstrap": 50,
                "bias_types": ["text_dominance", "texture_insertion"],
            },
        }
    )


def test_run_and_plan_judge_audit(tmp_path: Path) -> None:
    pytest.importorskip("pandas")
    cfg = _cfg()
    planned = memearena.plan_judge_audit(cfg)
    result = memearena.run_judge_audit(cfg, tmp_path / "run", show_progress=False)
    assert result.new_calls == planned.calls  # the dry run counts exactly what a run calls
    board = result.leaderboard()
    assert list(board["judge"]) == ["j"]
    assert {"rank", "figure", "value", "ci_low", "ci_high", "flags"} <= set(board)
    figures = set(result.intervals()["figure"])
    assert {"trust", "overall", "p_prefer_first"} <= figures
    types = result.bias_types()
    assert set(types["bias_type"]) >= {"text_dominance", "texture_insertion"}
    assert len(result.scores()) == 3 * 2 * 2  # memes x responders x bias types, one judge


def test_async_twin(tmp_path: Path) -> None:
    async def go() -> memearena.JudgeAuditResult:
        return await memearena.arun_judge_audit(_cfg(), tmp_path / "run", show_progress=False)

    result = asyncio.run(go())
    assert result.section["items"] == 3
