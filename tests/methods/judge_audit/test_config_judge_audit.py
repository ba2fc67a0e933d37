"""The ``judge_audit:`` config section: validation names the field."""

from __future__ import annotations

from typing import Any

import pytest

from memearena.config import parse_config
from memearena.errors import ConfigError


def _cfg(**audit: Any) -> dict[str, Any]:
    return {
        "models": {"j1": {"provider": "sim"}, "j2": {"provider": "sim"}, "r1": {"provider": "sim"}},
        "data": [{"format": "demo"}],
        "judge_audit": {"judges": ["j1", "j2"], "responders": ["r1"], **audit},
    }


def test_defaults() -> None:
    ja = parse_config(_cfg()).judge_audit
    assert ja is not None
    assert len(ja.bias_types) == 9 and ja.prompt == "plain"
    assert ja.classic == ["position", "verbosity", "self_enhancement"]


@pytest.mark.parametrize(
    ("audit", "message"),
    [
        ({"judges": ["j1", "nope"]}, "judge_audit.judges: model 'nope' is not defined"),
        ({"responders": ["ghost"]}, "judge_audit.responders: model 'ghost'"),
        ({"describer": "ghost"}, "judge_audit.describer: model 'ghost'"),
        ({"bias_types": ["texture_insertion", "halo"]}, "judge_audit.bias_types"),
        ({"prompt": "fancy"}, "judge_audit.prompt"),
        ({"reference_judge": "r1"}, "reference_judge 'r1' is not among judges"),
        ({"surprise": 1}, "judge_audit.surprise"),
        ({"max_reasks": 1000}, "judge_audit.max_reasks: Input should be less than or equal to 10"),
    ],
)
def test_errors_name_the_field(audit: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config(_cfg(**audit))


def test_arena_may_name_an_audit_run(tmp_path: Any) -> None:
    raw = _cfg()
    raw["models"]["t2"] = {"provider": "sim"}
    raw["arena"] = {
        "targets": ["r1", "t2"],
        "judges": ["j1"],
        "context_model": "j1",
        "judge_audit": "audit/leaderboard.json",
    }
    cfg = parse_config(raw, base_dir=tmp_path)
    assert cfg.arena is not None
    assert cfg.arena.judge_audit == (tmp_path / "audit" / "leaderboard.json").resolve()


def test_the_describer_is_not_an_audited_judge_by_default() -> None:
    ja = parse_config(_cfg()).judge_audit
    assert ja is not None and ja.describer_model() == "r1"
    ja = parse_config(_cfg(responders=["j1", "r1"])).judge_audit
    assert ja is not None and ja.describer_model() == "r1"  # j1 is audited: skipped
    ja = parse_config(_cfg(responders=["j1"])).judge_audit
    assert ja is not None and ja.describer_model() is None
    ja = parse_config(_cfg(responders=["j1"], describer="j2")).judge_audit
    assert ja is not None and ja.describer_model() == "j2"  # configured: as asked


def test_a_meme_audit_without_a_describer_outside_the_judges_is_one_line(tmp_path: Any) -> None:
    from memearena.methods.judge_audit.stages import JudgeAuditPipeline

    cfg = parse_config(_cfg(responders=["j1"]))
    with pytest.raises(ConfigError, match=r"judge_audit\.describer: set the model"):
        JudgeAuditPipeline(cfg, [object()], [], None, None, tmp_path)  # type: ignore[arg-type]
