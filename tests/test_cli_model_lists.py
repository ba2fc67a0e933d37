"""``--models a,b`` / ``--targets`` / ``--judges`` on every method command: each method's section
maps them to its own model lists; the config validates the names; the snapshot and the dry
run take them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memearena.cli import app
from memearena.cli.run import Overrides
from memearena.store import RunStore

runner = CliRunner()
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
ARENA = EXAMPLES / "demo-arena.yaml"


def _one_line(output: str) -> str:
    lines = [ln for ln in output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in output, output
    return " ".join(output.split())


def test_arena_model_lists_reach_the_snapshot(tmp_path: Path) -> None:
    args = ["arena", str(ARENA), "--limit", "2", "--out", str(tmp_path), "--no-progress"]
    args += ["--targets", "sim-aurora, sim-cirrus", "--judges", "sim-judge-falcon"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    with RunStore(tmp_path / "demo-arena" / "run.db") as store:
        snap = store.latest_snapshot()
        assert snap is not None
        assert snap["config"]["arena"]["targets"] == ["sim-aurora", "sim-cirrus"]
        assert snap["config"]["arena"]["judges"] == ["sim-judge-falcon"]
        called = {r.model for r in store.iter_calls()}
    assert called <= {"sim-aurora", "sim-cirrus", "sim-judge-falcon"}, called


def test_the_dry_run_plans_only_the_models_given() -> None:
    result = runner.invoke(
        app, ["arena", str(ARENA), "--dry-run", "--limit", "2", "--models", "sim-aurora,sim-ember"]
    )
    assert result.exit_code == 0, result.output
    assert "sim-ember" in result.output and "sim-borealis" not in result.output


def test_each_method_maps_models_to_its_own_list() -> None:
    adapt = runner.invoke(
        app,
        ["adapt", "run", str(EXAMPLES / "adapt.yaml"), "--dry-run", "--models", "sim-drizzle"],
    )
    assert adapt.exit_code == 0, adapt.output
    rows = {ln.split()[1] for ln in adapt.output.splitlines() if ln.startswith("│ sim")}
    assert "sim-drizzle" in rows and "sim-aurora" not in rows  # --models: adapt.targets
    for method, option, key in [
        ("adapt", "judges", "scorers"),
        ("judge_audit", "models", "judges"),
        ("arena", "models", "targets"),
    ]:
        raw: dict[str, Any] = {method: {key: ["old"]}}
        Overrides(model_lists=((option, "a,b"),)).apply(raw, method)
        assert raw[method][key] == ["a", "b"], (method, option)


@pytest.mark.parametrize(
    ("command", "args", "message"),
    [
        (
            ["arena", str(ARENA)],
            ["--targets", "sim-aurora,sim-nope"],
            "arena.targets: model 'sim-nope' is not defined under 'models'",
        ),
        (["arena", str(ARENA)], ["--judges", " , "], "--judges: expected model names"),
        (
            ["arena", str(ARENA)],
            ["--models", "sim-aurora,sim-cirrus", "--targets", "sim-ember,sim-cirrus"],
            "--targets and --models both set arena.targets",
        ),
        (
            ["judge-audit", "run", str(EXAMPLES / "judge-audit.yaml")],
            ["--targets", "sim-aurora"],
            "--targets: the judge_audit section has no such model list",
        ),
    ],
)
def test_a_bad_model_list_is_one_line_and_exit_2(
    tmp_path: Path, command: list[str], args: list[str], message: str
) -> None:
    result = runner.invoke(app, [*command, *args, "--out", str(tmp_path), "--dry-run"])
    assert result.exit_code == 2, result.output
    assert message in _one_line(result.output)


def test_every_method_command_takes_the_model_lists() -> None:
    for command in (["arena"], ["adapt", "run"], ["judge-audit", "run"], ["run"]):
        result = runner.invoke(app, [*command, "--help"])
        assert result.exit_code == 0, result.output
        for option in ("--models", "--targets", "--judges"):
            assert option in result.output, (command, option)
