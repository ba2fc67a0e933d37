"""`memearena adapt import`: the originals' figures, unscored rows, and logs with nothing usable."""

from __future__ import annotations

import json
from pathlib import Path

from test_adapt_import import step, write_logs
from typer.testing import CliRunner

from memearena.cli import app
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


def test_the_originals_are_shown_on_the_console(tmp_path: Path) -> None:
    logs, orig = with_originals(tmp_path)
    r = runner.invoke(
        app, ["adapt", "import", str(logs), "--originals", str(orig), "--bootstrap", "50"]
    )
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "originals (scoring_res.json)" in text
    assert "2 matched, 1 without an original" in text
    assert "the seeds' originals fail 50.0% [" in text  # a: 8 passes, b: 2 fails
    assert "1 row(s) of the originals gave no score" in text and "'race' item 2" in text
    assert max(len(line) for line in r.output.splitlines()) <= 80 and "…" not in r.output


def test_the_originals_rates_carry_intervals(tmp_path: Path) -> None:
    logs, orig = with_originals(tmp_path)
    r = runner.invoke(
        app, ["adapt", "import", str(logs), "--originals", str(orig), "--json", "--bootstrap", "50"]
    )
    assert r.exit_code == 0, r.output
    o = json.loads(r.output)["originals"]
    for name in ("seed_original_failure_rate", "chain_failure_rate"):
        lo, hi = o[name + "_ci"]
        assert lo is not None and lo <= o[name] <= hi and hi - lo > 0, name
    # An original's judgment is not re-read, so no re-reading count is claimed for it.
    assert "reparse_disagrees" not in o["categories"]["race"]
    assert o["categories"]["race"]["scored"] == 2
    assert o["invalid"] == [f"{orig}: 'race' item 2: field 'score': no score in 1-10 (null)"]


def test_logs_without_a_judged_step_exit_1(tmp_path: Path) -> None:
    logs = write_logs(tmp_path / "logs", {"race": [step("invalid", 0, "a")], "animal": []})
    for extra in ([], ["--json"]):
        r = runner.invoke(app, ["adapt", "import", str(logs), "--bootstrap", "20", *extra])
        assert r.exit_code == 1, (extra, r.output)
        assert "no judged step" in r.output


def test_a_score_outside_the_scale_is_a_malformed_row(tmp_path: Path) -> None:
    rows = [step(3, 0, "a"), step(99, 1, "a"), step(-3, 0, "b"), step(0, 0, "c")]
    logs = read_published_logs(write_logs(tmp_path, {"race": rows}))
    doc = analyse_published_logs(logs, rounds=20)
    race = doc["categories"]["race"]
    assert race["scored"] == 1 and race["avg_score"] == 3.0 and race["invalid"] == 3
    assert "item 1: field 'score': 99 is outside the 1-10 scale" in doc["invalid"]["race"][0]


def test_the_selection_increase_is_in_points(tmp_path: Path) -> None:
    rows = [step(7, 0, "a"), step(2, 1, "a"), step(7, 0, "b"), step(8, 0, "c")]
    r = runner.invoke(
        app, ["adapt", "import", str(write_logs(tmp_path, {"race": rows})), "--bootstrap", "50"]
    )
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "a chain fails at some step +33.3 points [" in text
