"""Command-line overrides on every method command: validated as the config's own keys,
recorded in the run's config snapshot, resumed with no new calls."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memearena.cli import app
from memearena.store import RunStore

runner = CliRunner()
DEMO = Path(__file__).resolve().parents[1] / "examples" / "demo-arena.yaml"
OVERRIDES = ["--limit", "3", "-T", "arena.fusion_rounds=6", "--seed", "2"]
MORE = ["--bootstrap", "50", "--max-concurrency", "4"]


def test_arena_overrides_are_recorded_and_resume_with_no_new_calls(tmp_path: Path) -> None:
    args = ["arena", str(DEMO), *OVERRIDES, *MORE, "--out", str(tmp_path), "--no-progress"]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    run_dir = tmp_path / "demo-arena"
    with RunStore(run_dir / "run.db") as store:
        snap = store.latest_snapshot()
        assert snap is not None
        cfg = snap["config"]
        assert cfg["arena"]["fusion_rounds"] == 6
        assert cfg["seed"] == 2
        assert [d["limit"] for d in cfg["data"]] == [3]
        assert cfg["arena"]["bootstrap"] == 50
        assert {m["max_concurrency"] for m in cfg["models"].values()} == {4}
    board = json.loads((run_dir / "leaderboard.json").read_text(encoding="utf-8"))
    assert board["run"]["seed"] == 2
    assert board["run"]["config"]["arena"]["fusion_rounds"] == 6
    assert "contexts: reused 0, new 3" in " ".join(first.output.split())  # 3 memes

    second = runner.invoke(app, args)
    assert second.exit_code == 0, second.output
    assert "0 new model calls" in second.output


def test_dry_run_takes_the_overrides(tmp_path: Path) -> None:
    base = runner.invoke(app, ["arena", str(DEMO), "--dry-run", "--limit", "3"])
    more = runner.invoke(
        app, ["arena", str(DEMO), "--dry-run", "--limit", "3", "-T", "arena.fusion_rounds=6"]
    )
    assert base.exit_code == 0 and more.exit_code == 0, base.output + more.output
    assert base.output != more.output  # more fusion rounds: more planned guideline calls
    assert not (tmp_path / "demo-arena").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-T", "arena.fusion_round=6"], "arena.fusion_round (did you mean 'fusion_rounds'?)"),
        (["-T", "arnea.fusion_rounds=6"], "arnea (did you mean 'arena'?)"),
        (["-T", "arena.fusion_rounds=many"], "arena.fusion_rounds"),
        (["-T", "arena.fusion_rounds"], "expected section.key=value"),
        (["--bootstrap", "1000000"], "--bootstrap: must be between 0 and 100,000"),
    ],
)
def test_a_bad_override_is_one_line_and_exit_2(
    tmp_path: Path, args: list[str], message: str
) -> None:
    result = runner.invoke(app, ["arena", str(DEMO), *args, "--out", str(tmp_path)])
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and message in " ".join(result.output.split()), result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "demo-arena").exists()


def test_every_method_command_takes_the_overrides() -> None:
    for command in (["arena"], ["adapt", "run"], ["judge-audit", "run"], ["run"]):
        result = runner.invoke(app, [*command, "--help"])
        assert result.exit_code == 0, result.output
        for option in ("--limit", "--set", "--seed", "--bootstrap", "--max-concurrency"):
            assert option in result.output, (command, option)
