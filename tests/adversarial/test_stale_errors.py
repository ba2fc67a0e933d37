"""The Arena's and the Judge audit's ``errors`` blocks come from the current config's records
only: a model the config replaced leaves its errors on record, not in the block."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memearena.config import parse_config
from memearena.engine.lifecycle import run_method


def _arena(targets: list[str]) -> dict[str, Any]:
    return {
        "run": "a",
        "models": {
            "t-one": {"provider": "sim", "skill": 0.9, "family": "one"},
            "t-two": {"provider": "sim", "skill": 0.5, "family": "two"},
            "t-refuser": {"provider": "sim", "skill": 0.5, "family": "r", "refusal_rate": 1.0},
            "t-three": {"provider": "sim", "skill": 0.4, "family": "three"},
            "j-one": {"provider": "sim", "skill": 0.85, "family": "jo", "noise": 0.1},
            "j-two": {"provider": "sim", "skill": 0.8, "family": "jt", "noise": 0.1},
        },
        "data": [{"format": "demo", "limit": 1}],
        "arena": {
            "targets": targets,
            "judges": ["j-one", "j-two"],
            "context_model": "j-one",
            "fusion_rounds": 2,
            "bootstrap": 10,
        },
    }


def _errors(method: str, raw: dict[str, Any], run: Path) -> dict[str, int]:
    out = run_method(method, parse_config(raw), run, show_progress=False)
    return dict(out.section["errors"])


def test_a_replaced_arena_targets_refusals_leave_the_errors_block(tmp_path: Path) -> None:
    run = tmp_path / "run"
    before = _arena(["t-one", "t-two", "t-refuser"])
    assert _errors("arena", before, run).get("answer: refusal", 0) > 0
    after = _arena(["t-one", "t-two", "t-three"])
    assert _errors("arena", after, run) == _errors("arena", after, tmp_path / "fresh")
    assert "answer: refusal" not in _errors("arena", after, run)
    # The records stay: the target put back shows its refusals again.
    assert _errors("arena", before, run).get("answer: refusal", 0) > 0


def _audit(judges: list[str]) -> dict[str, Any]:
    return {
        "run": "ja",
        "models": {
            "sim-aurora": {"provider": "sim", "skill": 0.9, "family": "aurora"},
            "clean": {"provider": "sim", "noise": 0.1},
            "other": {"provider": "sim", "noise": 0.2},
            "broken": {"provider": "sim", "format_error_rate": 1.0},
        },
        "data": [{"format": "demo", "limit": 2}],
        "judge_audit": {
            "judges": judges,
            "responders": ["sim-aurora"],
            "bias_types": ["image_misalignment", "visual_transformation"],
            "bootstrap": 20,
            "max_reasks": 0,
        },
    }


def test_a_replaced_audit_judges_unparseable_scores_leave_the_errors_block(
    tmp_path: Path,
) -> None:
    run = tmp_path / "run"
    before = _audit(["clean", "broken"])
    assert any(k.startswith("ja_score: unparseable") for k in _errors("judge_audit", before, run))
    after = _audit(["clean", "other"])
    assert _errors("judge_audit", after, run) == _errors("judge_audit", after, tmp_path / "fresh")
    assert not any(k.startswith("ja_score") for k in _errors("judge_audit", after, run))
