"""Adapt's dry run gives its planned count as a point estimate inside a range (its path follows
the answers: the re-ask and chain-length bounds); a method whose count is exact gives none."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from memearena.cli import app
from memearena.config import load_config
from memearena.engine.lifecycle import plan_method

runner = CliRunner()
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _limit(n: int) -> Callable[[Any], None]:
    def hook(raw: Any) -> None:
        for entry in raw["data"]:
            entry["limit"] = n

    return hook


def test_the_adapt_run_lands_inside_its_planned_range(tmp_path: Path) -> None:
    args = ["adapt", "run", str(EXAMPLES / "adapt.yaml"), "--limit", "2"]
    plan = runner.invoke(app, [*args, "--dry-run"])
    assert plan.exit_code == 0, plan.output
    text = " ".join(plan.output.split())
    found = re.search(
        r"Planned calls: ([\d,]+) is a point estimate .* makes ([\d,]+) to ([\d,]+)", text
    )
    assert found, text
    point, low, high = (int(g.replace(",", "")) for g in found.groups())
    assert low < point < high
    run = runner.invoke(app, [*args, "--out", str(tmp_path), "--no-progress"])
    assert run.exit_code in (0, 1), run.output
    made = re.search(r"([\d,]+) new model calls", run.output)
    assert made, run.output
    # The simulated models refuse and garble at their rates (re-asks): the plan does not.
    assert low <= int(made.group(1).replace(",", "")) <= high


def test_a_plan_that_is_exact_gives_no_range() -> None:
    cfg = load_config(EXAMPLES / "demo-arena.yaml", _limit(1))
    plan = plan_method("arena", cfg)
    assert plan.calls > 0 and plan.calls_low is None and plan.calls_high is None


def test_a_served_endpoint_is_planned_with_its_whole_profile() -> None:
    from memearena.engine.plan import stand_in_config
    from memearena.sim.catalogue import served_models

    cfg = load_config(EXAMPLES / "demo-arena.yaml")
    endpoint = {
        "provider": "openai",
        "base_url": "http://127.0.0.1:9/v1",
        "model": "sim-borealis",
        "family": "borealis",
    }
    raw = cfg.model_dump(mode="json")
    raw["models"]["borealis-endpoint"] = endpoint
    raw["models"]["unknown-endpoint"] = {**endpoint, "model": "gpt-x"}
    stand = stand_in_config(type(cfg).model_validate(raw)).models
    served = served_models()["sim-borealis"]
    assert served.refusal_rate > 0  # the catalogue's sim-borealis refuses at times
    assert stand["borealis-endpoint"].refusal_rate == served.refusal_rate  # as sim-serve does
    assert stand["sim-borealis"].refusal_rate == 0  # a simulated model: no re-asks planned
    assert stand["unknown-endpoint"].refusal_rate == 0
