"""Run configs: valid ones load, invalid ones fail with one line naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from memearena.config import OpenAIModelConfig, load_config, parse_config
from memearena.errors import ConfigError
from memearena.models.types import GenParams

BASE = {
    "models": {"a": {"provider": "sim"}, "b": {"provider": "sim"}},
    "data": [{"format": "demo"}],
}


def _err(raw: object) -> str:
    with pytest.raises(ConfigError) as e:
        parse_config(raw, "c.yaml")
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_a_full_config_loads_and_resolves_paths(tmp_path: Path) -> None:
    (tmp_path / "cfg.yaml").write_text(
        """
run: r1
seed: 3
models:
  gpt:
    provider: openai
    model: gpt-4o
    api_key_env: OPENAI_API_KEY
    base_url: [http://h1:8000/v1, http://h2:8000/v1]
    max_concurrency: 8
    rpm: 100
    temperature: 0
    seed: 1
    max_tokens: 512
    reasoning_effort: low
    price: {input: 2.5, output: 10}
  s: {provider: sim, skill: 0.7}
data:
  - {format: fhm, path: data/dev.jsonl, harmful_only: true, limit: 5}
arena: {targets: [gpt, s], judges: [gpt], context_model: gpt, fusion_rounds: 2}
"""
    )
    cfg = load_config(tmp_path / "cfg.yaml")
    gpt = cfg.models["gpt"]
    assert isinstance(gpt, OpenAIModelConfig)
    assert gpt.urls() == ["http://h1:8000/v1", "http://h2:8000/v1"]
    assert GenParams.of(gpt).max_tokens == 512
    assert cfg.data[0].path == (tmp_path / "data" / "dev.jsonl").resolve()
    assert cfg.arena is not None and cfg.arena.fusion_rounds == 2


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        ({"models": {"a": {"provider": "sim", "skill": 2}}}, "models.a.skill"),
        (
            {"models": {"a": {"provider": "openai", "model": "m", "max_concurrency": 0}}},
            "models.a.max_concurrency",
        ),
        (
            {"models": {"a": {"provider": "openai", "model": "m", "base_url": "ftp://x"}}},
            "models.a.base_url",
        ),
        (
            {"models": {"a": {"provider": "openai", "model": "m", "api_key_env": "sk-abc123"}}},
            "models.a.api_key_env",
        ),
        ({"models": {"a": {"provider": "nope"}}}, "models.a"),
        ({"data": [{"format": "fhm"}]}, "data.0"),
        ({"data": [{"format": "parquet", "path": "x"}]}, "data.0.format"),
        (
            {"arena": {"targets": ["a", "zz"], "judges": ["a"], "context_model": "a"}},
            "arena.targets: model 'zz'",
        ),
        (
            {
                "arena": {
                    "targets": ["a", "b"],
                    "judges": ["a", "b"],
                    "context_model": "a",
                    "fusion_rounds": 1,
                }
            },
            "fusion_rounds",
        ),
        (
            {
                "arena": {
                    "targets": ["a", "b"],
                    "judges": ["a"],
                    "context_model": "a",
                    "pairs": "active",
                }
            },
            "battle_budget",
        ),
        (
            {
                "arena": {
                    "targets": ["a", "b"],
                    "judges": ["a"],
                    "context_model": "a",
                    "criteria": ["vibes"],
                }
            },
            "arena.criteria",
        ),
        ({"bogus": 1}, "bogus"),
    ],
)
def test_invalid_config_names_the_field(patch: dict[str, object], expected: str) -> None:
    msg = _err({**BASE, **patch})
    assert msg.startswith("c.yaml: ")
    assert expected in msg


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text("models:\n  a: {provider: sim\ndata: []\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml:\d+: invalid YAML"):
        load_config(p)


def test_missing_file_and_non_mapping(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config(tmp_path / "nope.yaml")
    assert "mapping" in _err([1, 2])


ARENA = {"targets": ["a", "b"], "judges": ["a"], "context_model": "a"}


def test_a_misspelt_required_key_is_named_with_the_key_it_should_be() -> None:
    # Misspelt, the required key is also missing; the misspelling is what the user can act on.
    arena = {"targets": ["a", "b"], "judges": ["a"], "context_modle": "a"}
    msg = _err({**BASE, "arena": arena})
    expected = "c.yaml: unknown key: arena.context_modle (did you mean 'context_model'?)"
    assert msg.startswith(expected)
    assert "Field required" not in msg


def test_every_misspelt_key_is_named_in_one_line_with_its_closest_valid_name() -> None:
    msg = _err(
        {
            "models": {"a": {"provider": "sim", "skil": 0.5}, "b": {"provider": "sim"}},
            "data": [{"format": "demo", "pth": "x"}],
            "arena": {**ARENA, "fusion_round": 3},
            "imag": {"max_side": 512},
        }
    )
    assert msg.startswith("c.yaml: unknown keys: ")
    for key, near in (
        ("models.a.skil", "skill"),
        ("data.0.pth", "path"),
        ("arena.fusion_round", "fusion_rounds"),
        ("imag", "image"),
    ):
        assert f"{key} (did you mean {near!r}?)" in msg
    # A key close to nothing valid is named without a guess.
    assert _err({**BASE, "arena": {**ARENA, "zzzz": 1}}) == "c.yaml: unknown key: arena.zzzz"


def test_unknown_criteria_are_listed_as_words_not_a_python_list() -> None:
    msg = _err({**BASE, "arena": {**ARENA, "criteria": ["corectness"]}})
    assert "unknown criteria 'corectness'; choose from " in msg
    assert "correctness" in msg and "[" not in msg
