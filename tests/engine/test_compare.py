"""``memearena compare RUN_A RUN_B``: rank changes with intervals, what moved beyond its
intervals, the judges' agreement between the runs and the config keys that differ."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memearena.cli import app
from memearena.engine.compare import compare_runs

runner = CliRunner()
DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo-arena.yaml"


@pytest.fixture(scope="module")
def two_seeds(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two small Arena runs of the demo config that differ only in their seed."""
    out = tmp_path_factory.mktemp("compare")
    runs = []
    for seed in (1, 2):
        args = ["arena", str(DEMO), "--limit", "2", "--seed", str(seed), "--bootstrap", "100"]
        args += ["--targets", "sim-aurora,sim-cirrus,sim-ember"]
        args += ["--judges", "sim-judge-falcon,sim-judge-grove", "-T", "arena.fusion_rounds=2"]
        args += ["-T", f"run=seed{seed}", "--out", str(out), "--no-progress"]
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        runs.append(out / f"seed{seed}")
    return runs[0], runs[1]


def test_two_demo_runs_with_different_seeds_report_rank_changes_with_intervals(
    two_seeds: tuple[Path, Path],
) -> None:
    a, b = two_seeds
    c = compare_runs(a, b)
    assert c.method == "arena"
    assert {r["model"] for r in c.rows} == {"sim-aurora", "sim-cirrus", "sim-ember"}
    for r in c.rows:
        assert isinstance(r["rank_a"], int) and isinstance(r["rank_b"], int)
        assert r["rank_change"] == r["rank_a"] - r["rank_b"]
        for side, ranks in (("a", "rank_range_a"), ("b", "rank_range_b")):
            est = r[side]
            assert est["ci_low"] <= est["value"] <= est["ci_high"]
            lo, hi = r[ranks]
            assert lo <= r[f"rank_{side}"] <= hi
        assert r["moved"] == (
            r["a"]["ci_high"] < r["b"]["ci_low"] or r["b"]["ci_high"] < r["a"]["ci_low"]
        )
    assert {"key": "seed", "a": 1, "b": 2} in c.config
    assert not any(d["key"].startswith(("arena.", "models.", "data")) for d in c.config)
    judges = {v["judge"] for v in c.verdicts}
    assert judges == {"sim-judge-falcon", "sim-judge-grove"}
    for v in c.verdicts:
        assert 0 <= v["ci_low"] <= v["value"] <= v["ci_high"] <= 1 and v["memes"] == 2
    assert {f["figure"] for f in c.judges} >= {"judge.ndcg", "judge.kendall_tau"}

    shown = runner.invoke(app, ["compare", str(a), str(b)])
    assert shown.exit_code == 0, shown.output
    text = " ".join(shown.output.split())
    assert "rank A → B" in text and "moved beyond their intervals" in text
    assert "verdicts given the same way in both runs" in text and "seed" in text
    as_json = runner.invoke(app, ["compare", str(a), str(b), "--json"])
    assert as_json.exit_code == 0, as_json.output
    data = json.loads(as_json.output)
    assert data["rows"][0]["rank_range_a"] and "moved" in data


def _board(path: Path, rows: list[tuple[str, int, float, float, float]], seed: int) -> Path:
    path.mkdir(parents=True)
    overall = [
        {"model": m, "rank": rank, "bt": v, "ci_low": lo, "ci_high": hi}
        for m, rank, v, lo, hi in rows
    ]
    board = {"arena": {"overall": overall}, "run": {"config": {"seed": seed, "run": "x"}}}
    (path / "leaderboard.json").write_text(json.dumps(board), encoding="utf-8")
    return path


def test_a_model_moved_beyond_its_intervals_only_when_they_do_not_overlap(
    tmp_path: Path,
) -> None:
    a = _board(
        tmp_path / "a",
        [("m1", 1, 1100, 1080, 1120), ("m2", 2, 1000, 980, 1020), ("m3", 3, 990, 900, 1010)],
        1,
    )
    b = _board(
        tmp_path / "b",
        [("m2", 1, 1130, 1125, 1140), ("m1", 2, 1090, 1070, 1110), ("m3", 3, 950, 900, 1000)],
        2,
    )
    c = compare_runs(a, b)
    by = {r["model"]: r for r in c.rows}
    assert [m["model"] for m in c.moved] == ["m2"]  # 980-1020 against 1125-1140
    assert by["m2"]["rank_change"] == 1 and by["m1"]["rank_change"] == -1
    assert by["m1"]["rank_range_a"] == (1, 1)  # no other interval reaches 1080
    assert by["m2"]["rank_range_a"] == (2, 3) and by["m3"]["rank_range_a"] == (2, 3)
    assert c.config == [{"key": "seed", "a": 1, "b": 2}]
    assert c.verdicts == []  # no battles kept: no verdicts to match


def test_runs_of_different_methods_or_no_run_are_one_line(tmp_path: Path) -> None:
    a = _board(tmp_path / "a", [("m1", 1, 1.0, 0.5, 1.5)], 1)
    other = tmp_path / "b"
    other.mkdir()
    (other / "leaderboard.json").write_text(json.dumps({"adapt": {"models": []}}), "utf-8")
    for args, message in [
        ([str(a), str(other)], "hold no results of the same method"),
        ([str(a), str(tmp_path / "none")], "no leaderboard.json"),
        ([str(a), str(a), "--method", "adapt"], "--method: 'adapt' is not in both runs"),
    ]:
        result = runner.invoke(app, ["compare", *args])
        assert result.exit_code == 2 and message in " ".join(result.output.split()), result.output
