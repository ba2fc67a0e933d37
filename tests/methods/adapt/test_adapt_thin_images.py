"""A thin strip in a dataset (40000x1, 1x40000) is one item error and the Adapt run goes on."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from adapt_helpers import small_config
from PIL import Image

import memearena
from memearena.config import DatasetConfig


def test_thin_strips_are_item_errors_and_the_run_finishes(tmp_path: Path) -> None:
    root = tmp_path / "strips"
    root.mkdir()
    Image.new("L", (40_000, 1), 255).save(root / "wide.png")
    Image.new("L", (1, 40_000), 255).save(root / "tall.png")
    rows = [
        {"id": "wide", "image": "wide.png", "text": "a wide strip"},
        {"id": "tall", "image": "tall.png", "text": "a tall strip"},
    ]
    (root / "x.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    cfg = small_config(limit=4, steps=1)
    cfg = cfg.model_copy(
        update={"data": [*cfg.data, DatasetConfig(format="jsonl", path=root / "x.jsonl")]}
    )
    res = memearena.run_adapt(cfg, tmp_path / "run", show_progress=False)
    assert res.stopped is None and res.new_calls > 0
    db = sqlite3.connect(tmp_path / "run" / "run.db")
    errors = dict(db.execute("SELECT key, reason FROM errors WHERE kind='data'").fetchall())
    db.close()
    assert sorted(k.rsplit("|", 1)[1] for k in errors) == ["tall", "wide"]
    assert all("image.max_dimension" in reason for reason in errors.values())
