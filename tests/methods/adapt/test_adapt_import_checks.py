"""`memearena adapt import`: the originals' figures, unscored rows, and logs with nothing usable."""

from __future__ import annotations

import json
from pathlib import Path

from test_adapt_import import step, write_logs
from typer.testing import CliRunner

from memearena.methods.adapt.published import analyse_published_logs, read_published_logs

runner = CliRunner()


def with_originals(tmp: Path) -> tuple[Path, Path]:
    rows = [step(2, 0, "a"), step(6, 1, "a"), step(7, 0, "b"), step(3, 0, "c")]
    logs = write_logs(tmp / "logs", {"race": rows})
    res = {
        "race": [
            {"meme_image_path": "a", "score": 8.0, "task": "race"},
            {"meme_image_path": "b", "score": 2.0, "task": "race"},
            {"meme_image_path": "c", "score": None, "task": "race"},  # judgment not read
        ]
    }
    orig = tmp / "scoring_res.json"
    orig.write_text(json.dumps(res))
    return logs, orig


def test_a_score_outside_the_scale_is_a_malformed_row(tmp_path: Path) -> None:
    rows = [step(3, 0, "a"), step(99, 1, "a"), step(-3, 0, "b"), step(0, 0, "c")]
    logs = read_published_logs(write_logs(tmp_path, {"race": rows}))
    doc = analyse_published_logs(logs, rounds=20)
    race = doc["categories"]["race"]
    assert race["scored"] == 1 and race["avg_score"] == 3.0 and race["invalid"] == 3
    assert "item 1: field 'score': 99 is outside the 1-10 scale" in doc["invalid"]["race"][0]
