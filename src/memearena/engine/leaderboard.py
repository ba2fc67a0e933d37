"""``leaderboard.json``: one document per run directory, one top-level key per method.

A method rewrites only the keys it owns (``Method.keys``); the others' stay as they are. The
run's facts (``"run"``) and status (``"status"``) are the latest run's. The file is replaced
atomically: a kill never leaves half a document, and a reader never sees one."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from memearena.engine.rundir import atomic_write

__all__ = ["LEADERBOARD_FILE", "merge_leaderboard", "read_leaderboard", "strict_json"]

LEADERBOARD_FILE = "leaderboard.json"


def read_leaderboard(run_dir: Path) -> dict[str, Any]:
    """The run directory's document, or ``{}`` (a damaged file is replaced, never trusted)."""
    path = Path(run_dir) / LEADERBOARD_FILE
    try:
        old = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    except (OSError, ValueError):
        return {}
    return old if isinstance(old, dict) else {}


def strict_json(obj: Any) -> Any:
    """``obj`` with every non-finite float as ``null`` (strict JSON has no NaN or Infinity)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: strict_json(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [strict_json(v) for v in obj]
    return obj


def merge_leaderboard(
    run_dir: Path, owned: Iterable[str], parts: Mapping[str, Any], *, write: bool = True
) -> dict[str, Any]:
    """The run's document with the ``owned`` keys replaced by ``parts`` (an owned key absent
    from ``parts`` is removed: an older result never passes for this run's), written
    atomically unless ``write`` is false; returns the document."""
    board = read_leaderboard(run_dir)
    for key in owned:
        board.pop(key, None)
    board.update(parts)
    if write:
        text = json.dumps(strict_json(board), indent=2, ensure_ascii=False)
        atomic_write(Path(run_dir) / LEADERBOARD_FILE, text)
    return board
