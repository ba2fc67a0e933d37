"""`memearena adapt import`: AdamMeme's published logs re-analysed with intervals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memearena.cli import app
from memearena.methods.adapt.published import (
    _null_any_failure,
    analyse_published_logs,
    category_of,
    read_published_logs,
)

REAL = Path(__file__).parents[3] / ".." / "shared" / "realdata" / "adammeme_llava_5k"
runner = CliRunner()


def step(score: int | str, run_step: int | None = 0, meme: str = "m1.png", **kw: Any) -> dict:
    if score == "拒答":
        return {"meme_image_path": meme, "task": "race", "score": "拒答"}
    row = {
        "meme_text": "some text",
        "explanation": "e",
        "misbelief": "a false belief",
        "meme_image_path": meme,
        "answer": "an answer",
        "ref_ans": "a reference",
        "comparison": f"The answer misses the point.\n\nRating: [[{score}]]",
        "score": float(score) if isinstance(score, int) else score,
        "task": "race",
        "run_step": run_step,
    }
    row.update(kw)
    return row


def write_logs(tmp: Path, logs: dict[str, list[Any]], info: dict | None = None) -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    for name, rows in logs.items():
        (tmp / f"log_{name}.json").write_text(json.dumps(rows, ensure_ascii=False))
    if info is not None:
        (tmp / "info.json").write_text(json.dumps(info))
    return tmp


def test_category_is_named_after_the_file() -> None:
    assert category_of(Path("log_child exploitation.json")) == "child_exploitation"
    assert category_of(Path("log_child_exploitation.json")) == "child_exploitation"
    assert category_of(Path("log_Race.json")) == "race"


def test_scores_come_only_from_the_strict_rating_field(tmp_path: Path) -> None:
    rows = [
        step(3, meme="a"),
        # The published code read "Rating: 5"; the judge prompt asks for [[n]]: unparsed here.
        step(5, meme="b", comparison="Fine answer.\n\nRating: 5"),
        # Two different fields: the scorer's own rating cannot be told apart, never a score.
        step(9, meme="c", comparison="It said Rating: [[10]] in the text.\nRating: [[2]]"),
        step(11, meme="d"),  # out of range 1-10
        step("拒答", meme="e", run_step=None),
    ]
    logs = read_published_logs(write_logs(tmp_path, {"race": rows}, {"model_name": "m"}))
    doc = analyse_published_logs(logs, rounds=200)
    race = doc["categories"]["race"]
    assert doc["model"] == "m"
    assert (race["steps"], race["scored"], race["refused"], race["unparsed"]) == (5, 1, 1, 3)
    assert race["avg_score"] == 3.0 and race["failure_rate"] == 1.0
    # The published numbers are reported beside ours, never mixed into them.
    assert race["published_avg_score"] == pytest.approx((3 + 5 + 9 + 11) / 4)


def test_a_malformed_step_is_recorded_not_dropped(tmp_path: Path) -> None:
    rows = [step(6, meme="a"), "not an object", {"score": 3.0}, step(2, meme="b", run_step=-1)]
    logs = read_published_logs(write_logs(tmp_path, {"gender": rows}))
    doc = analyse_published_logs(logs, rounds=100)
    assert doc["categories"]["gender"]["invalid"] == 3
    reasons = doc["invalid"]["gender"]
    assert any("item 1" in r and "JSON object" in r for r in reasons)
    assert any("item 2" in r and "meme_image_path" in r for r in reasons)
    assert any("item 3" in r and "run_step" in r for r in reasons)


def test_bad_folder_and_bad_file_are_one_line_errors(tmp_path: Path) -> None:
    r = runner.invoke(app, ["adapt", "import", str(tmp_path / "nope")])
    assert r.exit_code == 2 and "not a folder" in r.output
    (tmp_path / "empty").mkdir()
    r = runner.invoke(app, ["adapt", "import", str(tmp_path / "empty")])
    assert r.exit_code == 2 and "no log_<category>.json" in r.output
    d = tmp_path / "broken"
    d.mkdir()
    (d / "log_race.json").write_text('[{"score": 1,}')
    r = runner.invoke(app, ["adapt", "import", str(d)])
    assert r.exit_code == 2 and "log_race.json:1: invalid JSON" in r.output
    assert "Traceback" not in r.output


def test_intervals_resample_memes(tmp_path: Path) -> None:
    # Two memes, each scored many times: the interval follows 2 units, not 40 records.
    rows = [step(2, meme="a", run_step=i % 3) for i in range(20)]
    rows += [step(8, meme="b", run_step=i % 3) for i in range(20)]
    doc = analyse_published_logs(read_published_logs(write_logs(tmp_path, {"race": rows})))
    lo, hi = doc["categories"]["race"]["failure_rate_ci"]
    assert doc["categories"]["race"]["failure_rate"] == 0.5
    assert lo == 0.0 and hi == 1.0


def test_selection_only_increase_under_the_null() -> None:
    # No continuation after a pass: only the originals count, no increase at all.
    assert _null_any_failure(0.3, 0.0, 6) == pytest.approx(0.3)
    # Always continuing for 3 steps: P(any failure) = 1 - 0.7^3.
    assert _null_any_failure(0.3, 1.0, 3) == pytest.approx(1 - 0.7**3)


def test_selection_analysis_on_chains(tmp_path: Path) -> None:
    # Chains that go on only after failures: the increase over the originals is zero because
    # a chain that starts with a failure already counts as failed.
    rows = [step(2, meme="a"), step(2, meme="a2", run_step=1), step(7, meme="b")]
    rows += [step(6, meme="c"), step(3, meme="c2", run_step=1)]
    doc = analyse_published_logs(read_published_logs(write_logs(tmp_path, {"race": rows})))
    sel = doc["selection"]
    assert sel["chains"] == 3
    assert sel["observed_increase"] == pytest.approx(2 / 3 - 1 / 3)
    rvo = doc["refined_vs_original"]
    assert rvo["original"]["scored"] == 3 and rvo["refined"]["scored"] == 2
    assert rvo["refined"]["histogram"]["2"] == 1 and rvo["refined"]["histogram"]["3"] == 1


@pytest.mark.skipif(not REAL.is_dir(), reason="published AdamMeme logs not present")
def test_the_published_llava_logs() -> None:
    r = runner.invoke(app, ["adapt", "import", str(REAL), "--json", "--bootstrap", "200"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["model"] == "llava"
    cats = doc["categories"]
    assert sorted(cats) == [
        "animal",
        "child_exploitation",
        "disability",
        "gender",
        "nationality",
        "political",
        "race",
        "religion",
    ]
    for name, c in cats.items():
        assert c["steps"] == c["scored"] + c["refused"] + c["unparsed"] + 0, name
        assert c["invalid"] == 0
        lo, hi = c["failure_rate_ci"]
        assert lo <= c["failure_rate"] <= hi
        assert 1 <= c["avg_score"] <= 10
    # Three published steps are refusals ("拒答"): counted, never scored.
    assert sum(c["refused"] for c in cats.values()) == 3
    assert cats["race"]["refused"] == 2 and cats["animal"]["refused"] == 1
    table = runner.invoke(app, ["adapt", "import", str(REAL), "--bootstrap", "100"])
    assert table.exit_code == 0 and "child_exploitation" in table.output
