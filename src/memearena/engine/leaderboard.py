"""``leaderboard.json``: one document per run directory, one top-level key per method.

A method rewrites only the keys it owns (``Method.keys``); the others' stay as they are. The
run's facts (``"run"``) and status (``"status"``) are the latest run's. The file is replaced
atomically: a kill never leaves half a document, and a reader never sees one."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from memearena.engine.rundir import atomic_write
from memearena.jsonsafe import dumps_strict, loads_bounded

__all__ = ["LEADERBOARD_FILE", "merge_leaderboard", "read_leaderboard"]

LEADERBOARD_FILE = "leaderboard.json"
BOARD_BYTES = 1 << 30
"""Largest document read back (an audit's board embeds its examples' thumbnails)."""


def read_leaderboard(run_dir: Path) -> dict[str, Any]:
    """The run directory's document, or ``{}`` (a damaged file is replaced, never trusted)."""
    path = Path(run_dir) / LEADERBOARD_FILE
    try:
        if not path.exists():
            return {}
        old = loads_bounded(path.read_bytes().decode("utf-8-sig"), max_bytes=BOARD_BYTES)
    except (OSError, ValueError):
        return {}
    return old if isinstance(old, dict) else {}


def merge_leaderboard(
    run_dir: Path, owned: Iterable[str], parts: Mapping[str, Any], *, write: bool = True
) -> dict[str, Any]:
    """The run's document with the ``owned`` keys replaced by ``parts`` (an owned key absent
    from ``parts`` is removed: an older result never passes for this run's), written
    atomically unless ``write`` is false; returns the document. It is written as strict JSON
    (``jsonsafe.dumps_strict``: a non-finite number is null, and ``non_finite`` lists where)."""
    board = read_leaderboard(run_dir)
    for key in owned:
        board.pop(key, None)
    board.update(parts)
    if write:
        text = dumps_strict(board, indent=2, ensure_ascii=False)
        atomic_write(Path(run_dir) / LEADERBOARD_FILE, text)
    return board
