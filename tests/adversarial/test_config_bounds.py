"""Every numeric option is range-checked when the config is loaded (finite, positive, sane
maxima); run plans that rate limits would stretch past the wall-time ceiling are refused before
any call; answers are cut to a token budget before judges read them."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from memearena.cli import app
from memearena.config import (
    MAX_BOOTSTRAP,
    RunConfig,
    check_wall_time,
    load_config,
    parse_config,
)
from memearena.engine.lifecycle import run_method
from memearena.errors import ConfigError
from memearena.methods.arena.config import arena_call_estimate
from memearena.prompts.budget import shown_pair, truncate_to_tokens

runner = CliRunner()

BASE: dict[str, Any] = {
    "run": "bounds",
    "models": {
        "t1": {"provider": "sim", "skill": 0.9},
        "t2": {"provider": "sim", "skill": 0.3},
        "api": {"provider": "openai", "model": "gpt-x", "api_key_env": "OPENAI_API_KEY"},
    },
    "data": [{"format": "demo", "limit": 2}],
    "arena": {
        "targets": ["t1", "t2"],
        "judges": ["api"],
        "context_model": "api",
        "fusion_rounds": 1,
        "bootstrap": 10,
    },
}


def _with(path: str, value: Any) -> dict[str, Any]:
    cfg = copy.deepcopy(BASE)
    node = cfg
    *parents, last = path.split(".")
    for p in parents:
        node = node.setdefault(p, {})
    node[last] = value
    return cfg


def _one_line_error(cfg: dict[str, Any], tmp_path: Path, *extra: str) -> str:
    p = tmp_path / "cfg.yaml"
    p.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    result = runner.invoke(app, ["arena", str(p), "--dry-run", *extra])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1, result.output
    return lines[0]


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        ("models.api.timeout", float("inf"), "models.api.timeout"),
        ("models.api.timeout", float("nan"), "models.api.timeout"),
        ("models.api.timeout", 0, "models.api.timeout"),
        ("models.api.timeout", 86_400, "models.api.timeout"),
        ("models.api.price", {"input": float("inf")}, "models.api.price.input"),
        ("models.api.price", {"output": float("nan")}, "models.api.price.output"),
        ("models.api.price", {"input": -1}, "models.api.price.input"),
        ("models.api.rpm", 0, "models.api.rpm"),
        ("models.api.rpm", float("inf"), "models.api.rpm"),
        ("models.api.max_concurrency", 10**9, "models.api.max_concurrency"),
        ("models.api.max_tokens", 10**12, "models.api.max_tokens"),
        ("models.api.temperature", float("-inf"), "models.api.temperature"),
        ("models.t1.latency_ms", float("inf"), "models.t1.latency_ms"),
        ("arena.fusion_rounds", 10**9, "arena.fusion_rounds"),
        ("arena.fusion_rounds", 1e9, "arena.fusion_rounds"),
        ("arena.bootstrap", 10**12, "arena.bootstrap"),
        ("arena.bootstrap", -5, "arena.bootstrap"),
        ("arena.elo_k", float("nan"), "arena.elo_k"),
        ("arena.answer_max_tokens", 0, "arena.answer_max_tokens"),
        ("max_wall_hours", float("inf"), "max_wall_hours"),
        ("seed", 2**80, "seed"),
        ("image", {"max_side": 10**7}, "image.max_side"),
    ],
)
def test_out_of_range_numbers_are_one_line_errors(
    path: str, value: Any, expected: str, tmp_path: Path
) -> None:
    line = _one_line_error(_with(path, value), tmp_path)
    assert line.startswith("error:") and expected in line


def test_yaml_infinity_spellings_are_refused(tmp_path: Path) -> None:
    for spelling in (".inf", ".Inf", "-.inf", ".nan", ".NaN"):
        p = tmp_path / "cfg.yaml"
        text = yaml.safe_dump(BASE).replace("fusion_rounds: 1", "fusion_rounds: 1\n  elo_k: X")
        p.write_text(text.replace("X", spelling), encoding="utf-8")
        with pytest.raises(ConfigError, match=r"arena\.elo_k: must be a finite number"):
            load_config(p)


def test_numbers_in_every_section_are_checked_even_untyped_ones() -> None:
    cfg = copy.deepcopy(BASE)
    cfg["judge_audit"] = {"bootstrap": MAX_BOOTSTRAP + 1}
    with pytest.raises(ConfigError, match=r"judge_audit\.bootstrap: must be between 0 and"):
        parse_config(cfg)


def test_yaml_alias_bomb_is_refused(tmp_path: Path) -> None:
    lines = ["a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    for i in range(1, 9):
        lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]")
    p = tmp_path / "bomb.yaml"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="expands to more than") as err:
        load_config(p)
    # The message names the line of the anchor that blows up (a5: 10^6 values and more).
    assert str(err.value).startswith(f"{p}:6: ")


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-1", "-0.01"])
def test_max_cost_must_be_finite_and_not_negative(value: str, tmp_path: Path) -> None:
    line = _one_line_error(BASE, tmp_path, f"--max-cost={value}")
    assert "--max-cost: must be a finite number" in line


def test_max_cost_zero_and_positive_are_accepted(tmp_path: Path) -> None:
    p = tmp_path / "cfg.yaml"
    p.write_text(yaml.safe_dump(BASE), encoding="utf-8")
    for value in ("0", "12.5"):
        result = runner.invoke(app, ["arena", str(p), "--dry-run", "--max-cost", value])
        assert result.exit_code == 0, result.output


@pytest.mark.parametrize("value", ["-5", str(MAX_BOOTSTRAP + 1), str(10**12)])
@pytest.mark.parametrize("command", ["rank", "judge-audit metrics", "adapt import"])
def test_every_bootstrap_option_is_bounded(command: str, value: str, tmp_path: Path) -> None:
    battles = tmp_path / "b.jsonl"
    battles.write_text('{"model_a": "x", "model_b": "y", "winner": "model_a"}\n')
    result = runner.invoke(app, [*command.split(), str(battles), "--bootstrap", value])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and "--bootstrap" in result.output


# ---- the wall-time ceiling -------------------------------------------------------------------


def test_slow_rpm_is_refused_at_plan_time_with_the_estimate(tmp_path: Path) -> None:
    p = tmp_path / "cfg.yaml"
    p.write_text(yaml.safe_dump(_with("models.api.rpm", 0.0001)), encoding="utf-8")
    result = runner.invoke(app, ["arena", str(p), "--dry-run"])
    # The plan is printed, then the refusal with the estimate as the last line; exit 2.
    assert result.exit_code == 2 and "Traceback" not in result.output
    last = result.output.strip().splitlines()[-1]
    assert last.startswith("error: models.api.rpm: 0.0001 requests/min needs about 125 days")
    assert "18 planned calls to 'api'" in last and "max_wall_hours (72 h)" in last


def test_slow_rpm_is_refused_before_any_call_of_a_real_run(tmp_path: Path) -> None:
    p = tmp_path / "cfg.yaml"
    p.write_text(yaml.safe_dump(_with("models.api.rpm", 0.0001)), encoding="utf-8")
    result = runner.invoke(app, ["arena", str(p), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and "max_wall_hours" in result.output
    from memearena.store import RunStore

    with RunStore(tmp_path / "out" / "bounds" / "run.db") as store:
        assert store.calls() == []


def test_the_ceiling_is_configurable_and_the_estimate_is_the_plan() -> None:
    cfg = parse_config(_with("models.api.rpm", 1.0))
    calls = arena_call_estimate(cfg, n_memes=2)
    # 2 memes x 3 contexts: 2 context calls, 6 tasks x 1 pair x 2 orders, 2 x (1 + 1) guideline
    assert calls == {"t1": 6, "t2": 6, "api": 2 + 12 + 4}
    check_wall_time(cfg, calls)  # 18 calls at 1/min: well under 72 h
    tight = cfg.model_copy(update={"max_wall_hours": 0.1})
    with pytest.raises(ConfigError, match=r"about 0\.3 h for the 18 planned calls"):
        check_wall_time(tight, calls)


def test_the_estimate_matches_the_dry_run_plan() -> None:
    from memearena.engine.lifecycle import plan_method

    cfg = parse_config(BASE)
    plan = plan_method("arena", cfg)
    est = arena_call_estimate(cfg, n_memes=2)
    assert {m: int(r["calls"]) for m, r in plan.per_model.items()} == {
        m: int(n) for m, n in est.items()
    }


# ---- answers cut before the judges -------------------------------------------------------------


def test_long_answers_are_cut_to_the_budget_and_the_cut_is_recorded() -> None:
    text, cut = truncate_to_tokens("word " * 10_000, 100)
    assert cut and len(text) < 100 * 4 + 80 and "answer cut here" in text
    assert truncate_to_tokens("short answer", 100) == ("short answer", False)
    pair = shown_pair("x" * 5_000_000, "fine", 1000)
    assert len(pair.a) < 4_100 and pair.b == "fine"
    assert pair.record == {"truncated": {"A": True, "B": False, "max_tokens": 1000}}
    assert shown_pair("a", "b", 10).record == {}


def test_an_endless_answer_reaches_no_judge_whole(tmp_path: Path) -> None:
    """End to end: a target that writes 1 MB answers; every judge prompt stays small and every
    verdict involving it records the cut."""
    import memearena.engine.lifecycle as runner_mod
    from memearena.store import RunStore

    cfg_raw = _with("arena.answer_max_tokens", 500)
    cfg_raw["models"]["api"] = {"provider": "sim", "skill": 0.8}
    cfg = RunConfig.model_validate(cfg_raw)

    class Endless:
        def __init__(self, inner: Any) -> None:
            self.inner = inner
            self.judge_prompt_chars: list[int] = []

        def respond(self, model: str, role: str, messages: Any, params: Any) -> str:
            reply = self.inner.respond(model, role, messages, params)
            if role == "arena.judge":
                text = sum(len(getattr(p, "text", "")) for p in messages[-1].content)
                self.judge_prompt_chars.append(text)
            if role == "arena.answer" and model == "t2":
                return reply + " filler" * 140_000  # ~1 MB, under the response cap
            return reply

    worlds: list[Endless] = []
    real = runner_mod.sim_world

    def sim_world(c: RunConfig, memes: Any) -> Endless:
        worlds.append(Endless(real(c, memes)))
        return worlds[-1]

    mp = pytest.MonkeyPatch()
    mp.setattr(runner_mod, "sim_world", sim_world)
    try:
        run_method("arena", cfg, tmp_path / "run", show_progress=False, bootstrap=5)
    finally:
        mp.undo()
    assert worlds[-1].judge_prompt_chars and max(worlds[-1].judge_prompt_chars) < 20_000
    with RunStore(tmp_path / "run" / "run.db") as store:
        verdicts = [v for _, v in store.artifacts("verdict") if "verdicts" in v]
    assert verdicts and all(v.get("truncated", {}).get("max_tokens") == 500 for v in verdicts)
