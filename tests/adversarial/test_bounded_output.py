"""Bounded rendering and strict JSON: a 20 MB model name is cut on the console (its full text
stays in --json) and `rank` stays fast; every JSON document the project writes is strict JSON
(a non-finite number is null, and the document lists where)."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

from typer.testing import CliRunner

from memearena.cli import app
from memearena.engine.leaderboard import merge_leaderboard
from memearena.jsonsafe import NON_FINITE_KEY, dumps_strict
from memearena.report.safe import NAME_CHARS, console_safe, name_cell

runner = CliRunner()
BIG = "m" * (20 * 1024 * 1024)


def _strict(text: str) -> object:
    def refuse(name: str) -> None:
        raise ValueError(f"not strict JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def _battles(path: Path) -> Path:
    lines = [json.dumps({"model_a": BIG, "model_b": "alpha", "winner": "model_a"})]
    for i in range(30):
        winner = ("model_a", "model_b", "tie")[i % 3]
        lines.append(json.dumps({"model_a": "alpha", "model_b": "beta", "winner": winner}))
    lines.append(json.dumps({"model_a": "beta", "model_b": BIG, "winner": "tie"}))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_rank_on_a_20_mb_model_name_is_fast_and_cuts_the_name(tmp_path: Path) -> None:
    path = _battles(tmp_path / "b.jsonl")
    t0 = time.perf_counter()
    done = runner.invoke(app, ["rank", str(path), "--bootstrap", "100"])
    wall = time.perf_counter() - t0
    assert done.exit_code == 0, done.output[-500:]
    # Past 900 s before names were cut: a bound far above a normal run (about 1 s) and far
    # below the failure, so that a loaded machine does not fail it.
    assert wall < 60.0, f"rank took {wall:.1f}s"
    assert len(done.output) < 20_000 and "alpha" in done.output
    full = runner.invoke(app, ["rank", str(path), "--bootstrap", "0", "--json"])
    models = {m["model"] for m in _strict(full.output)["models"]}  # type: ignore[index]
    assert BIG in models  # the full name stays in JSON


def test_console_cells_are_bounded_whatever_the_input() -> None:
    t0 = time.perf_counter()
    cell = name_cell("\x1b[31m" + BIG)
    text = console_safe(BIG)
    assert time.perf_counter() - t0 < 10.0  # far above its normal milliseconds
    assert len(cell) <= NAME_CHARS and cell.endswith("…") and "\x1b" not in cell
    assert len(text) < 5000


def test_non_finite_numbers_are_null_and_listed() -> None:
    doc = {"models": [{"elo": math.nan, "bt": 1.0}, {"elo": math.inf}], "n": -math.inf}
    out = _strict(dumps_strict(doc, indent=2))
    assert out == {
        "models": [{"elo": None, "bt": 1.0}, {"elo": None}],
        "n": None,
        NON_FINITE_KEY: ["$.models[0].elo", "$.models[1].elo", "$.n"],
    }
    # A document read back and written again carries no stale list.
    assert NON_FINITE_KEY not in _strict(dumps_strict({**out, "n": 1.0}))  # type: ignore[dict-item]


def test_the_leaderboard_file_is_strict_json_with_nan_scores(tmp_path: Path) -> None:
    board = {"adapt": {"models": [{"model": "m", "avg_score": math.nan}]}}
    merge_leaderboard(tmp_path, ["adapt"], board)
    doc = _strict((tmp_path / "leaderboard.json").read_text())
    assert doc["adapt"]["models"][0]["avg_score"] is None  # type: ignore[index]
    assert doc[NON_FINITE_KEY] == ["$.adapt.models[0].avg_score"]  # type: ignore[index]
