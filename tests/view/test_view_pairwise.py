"""The Arena page's pairwise matrix comes from the leaderboard, never from re-reading battles."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from memearena.methods.arena.pages import pairwise
from memearena.view import RunReader


def _copy(demo_run: Path, dst: Path, edit: Any = None) -> Path:
    """leaderboard.json and battles.jsonl of the demo, the board optionally edited."""
    dst.mkdir()
    shutil.copy(demo_run / "battles.jsonl", dst / "battles.jsonl")
    board = json.loads((demo_run / "leaderboard.json").read_text(encoding="utf-8"))
    if edit is not None:
        edit(board["arena"])
    (dst / "leaderboard.json").write_text(json.dumps(board), encoding="utf-8")
    return dst


def _pairwise(run: Path) -> dict[str, Any]:
    reader = RunReader(run)
    try:
        return pairwise(reader)
    finally:
        reader.close()


def test_stored_matrix_is_the_one_the_battles_give(demo_run: Path, tmp_path: Path) -> None:
    stored = _pairwise(_copy(demo_run, tmp_path / "stored"))
    older = _pairwise(_copy(demo_run, tmp_path / "older", lambda a: a.pop("pairwise")))
    assert stored == older
    ranked = [
        r["model"]
        for r in json.loads((demo_run / "leaderboard.json").read_text())["arena"]["overall"]
    ]
    assert stored["models"] == ranked  # in leaderboard order
    x, y = ranked[0], ranked[1]
    assert stored["rate"][x][y] + stored["rate"][y][x] == 1.0
    assert stored["count"][x][y] == stored["count"][y][x] > 0
    assert x not in stored["rate"][x] and x not in stored["count"][x]  # no self-battles


def test_the_page_never_reads_the_battles_when_the_matrix_is_stored(
    demo_run: Path, tmp_path: Path
) -> None:
    run = _copy(demo_run, tmp_path / "run")
    expected = _pairwise(run)
    (run / "battles.jsonl").write_text("not a battle\n", encoding="utf-8")
    assert _pairwise(run) == expected and expected["models"]


def test_a_malformed_stored_matrix_falls_back_to_the_battles(
    demo_run: Path, tmp_path: Path
) -> None:
    expected = _pairwise(_copy(demo_run, tmp_path / "good"))

    def ragged(arena: dict[str, Any]) -> None:
        arena["pairwise"]["battles"][0] = arena["pairwise"]["battles"][0][:-1]

    def not_names(arena: dict[str, Any]) -> None:
        arena["pairwise"]["models"] = [1, 2]

    for k, edit in enumerate((ragged, not_names)):
        assert _pairwise(_copy(demo_run, tmp_path / f"bad{k}", edit)) == expected
