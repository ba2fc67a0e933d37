"""`memearena adapt import`: AdamMeme's published logs re-analysed with intervals."""

from __future__ import annotations

import json
import math
import os
import time
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
from memearena.stats.proportion import wilson_interval

REAL = (
    Path(
        os.environ.get(
            "MEMEARENA_REALDATA", Path(__file__).parents[3] / ".." / "shared" / "realdata"
        )
    )
    / "adammeme_llava_5k"
)
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


def test_every_judged_step_keeps_the_authors_score(tmp_path: Path) -> None:
    rows = [
        step(3, meme="a"),
        # The authors' code read "Rating: 5" (as real scorers write it): kept, and re-read alike.
        step(5, meme="b", run_step=1, comparison="Fine answer.\n\nRating: 5"),
        # The re-reading finds two ratings: the recorded score is kept, the disagreement counted.
        step(9, meme="c", comparison="It said Rating: [[10]] in the text.\nRating: [[2]]"),
        step("拒答", meme="e", run_step=None),
        {"meme_image_path": "f", "task": "race", "score": "invalid"},  # a rejected rewrite
    ]
    logs = read_published_logs(write_logs(tmp_path, {"race": rows}, {"model_name": "m"}))
    doc = analyse_published_logs(logs, rounds=200)
    race = doc["categories"]["race"]
    assert doc["model"] == "m"
    assert (race["steps"], race["scored"], race["refused"], race["unjudged"]) == (5, 3, 1, 1)
    assert race["avg_score"] == pytest.approx((3 + 5 + 9) / 3)
    assert race["failure_rate"] == pytest.approx(1 / 3)
    assert race["reparse_disagrees"] == 1
    assert doc["reparse"] == {"agree": 2, "disagree": 0, "unreadable": 1}


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


def test_chains_are_rebuilt_per_file_from_the_run_step_sequence(tmp_path: Path) -> None:
    # race: 0 1 2 | 0 1 (refused) 3: a refused row keeps its chain going.
    race = [step(2, 0, "r0"), step(3, 1, "r1"), step(7, 2, "r2")]
    race += [step(6, 0, "r3"), step(5, 1, "r4"), step("拒答", None, "r5"), step(8, 3, "r6")]
    # gender: 4 5 | 0 (a chain whose first steps were refused starts past 0).
    gender = [step(2, 4, "g0"), step(9, 5, "g1"), step(6, 0, "g2")]
    gender = [{**g, "task": "gender"} for g in gender]
    doc = analyse_published_logs(
        read_published_logs(write_logs(tmp_path, {"race": race, "gender": gender})), rounds=100
    )
    sel = doc["selection"]
    # Never across files: race's last chain (..., 3) does not go on into gender's 4, 5.
    assert sel["chains"] == 4 and sel["chains_crossing_categories"] == 0
    assert sel["chain_lengths"] == {"1": 1, "2": 1, "3": 2}
    assert sel["longest_chain"] == 3
    # First rewrites 2, 6, 2, 6: half fail; a chain fails at some step just as often.
    assert sel["first_rewrite_failure_rate"] == pytest.approx(1 / 2)
    assert sel["chain_failure_rate"] == pytest.approx(1 / 2)
    assert sel["observed_increase"] == pytest.approx(0.0)
    # Like with like: the later rewrites (3, 7, 5, 8, 9) against those chains' first (2, 6, 2).
    assert sel["chains_with_later_rewrites"] == 3
    assert sel["later_rewrite_failure_rate"] == pytest.approx(1 / 5)
    assert sel["first_rewrite_failure_rate_in_chains_with_later"] == pytest.approx(2 / 3)
    assert sel["later_minus_first"] == pytest.approx(1 / 5 - 2 / 3)
    lo, hi = sel["later_minus_first_ci"]
    assert lo <= sel["later_minus_first"] <= hi


def test_no_original_figures_without_originals(tmp_path: Path) -> None:
    logs = read_published_logs(
        write_logs(tmp_path / "logs", {"race": [step(2, 0, "a"), step(6, 0, "b")]})
    )
    doc = analyse_published_logs(logs, rounds=50)
    assert doc["originals"] is None and "no original figures" in doc["originals_note"]
    assert "original" not in json.dumps(doc["categories"]) + json.dumps(doc["selection"])
    res = {"race": [{"meme_image_path": "a", "score": 8.0, "task": "race", "seed": 1}]}
    (tmp_path / "scoring_res.json").write_text(json.dumps(res))
    r = runner.invoke(
        app,
        ["adapt", "import", str(tmp_path / "logs"), "--json", "--bootstrap", "50",
         "--originals", str(tmp_path / "scoring_res.json")],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    orig = json.loads(r.output)["originals"]
    assert orig["chains_matched"] == 1 and orig["seed_original_failure_rate"] == 0.0
    assert orig["increase_over_seed_original"] == 1.0  # the chain of "a" fails (score 2)
    r = runner.invoke(app, ["adapt", "import", str(tmp_path / "logs")])
    assert r.exit_code == 0
    assert "no original figures without --originals" in " ".join(r.output.split())


def test_hostile_rows_are_per_row_errors(tmp_path: Path) -> None:
    good = json.dumps(step(3, 0, "a"))
    deep = "[" * 100_000 + "]" * 100_000
    digits = '{"meme_image_path": "b", "score": ' + "9" * 5000 + ', "run_step": 0}'
    nan = '{"meme_image_path": "c", "score": NaN, "run_step": 0}'
    text = "\ufeff[" + ",\n".join([good, deep, digits, nan, good]) + "]"
    d = tmp_path / "hostile"
    d.mkdir()
    (d / "log_race.json").write_text(text, encoding="utf-8")
    r = runner.invoke(app, ["adapt", "import", str(d), "--json", "--bootstrap", "20"])
    assert r.exit_code == 0, r.output
    assert "Traceback" not in r.output
    doc = json.loads(r.output, parse_constant=pytest.fail)  # strict: no bare NaN/Infinity
    race = doc["categories"]["race"]
    assert race["scored"] == 2 and race["invalid"] == 3
    reasons = doc["invalid"]["race"]
    assert any("item 1" in x and "deep" in x for x in reasons)
    assert any("item 2" in x and "number" in x for x in reasons)
    assert any("item 3" in x and "NaN" in x for x in reasons)


def test_json_is_strict_with_non_finite_as_null(tmp_path: Path) -> None:
    # One chain, one step that passes: no increase, so the share is undefined (null, flagged).
    logs = read_published_logs(write_logs(tmp_path, {"race": [step(7, 0, "a")]}))
    doc = analyse_published_logs(logs, rounds=20)
    text = json.dumps(doc, allow_nan=False)
    assert doc["selection"]["mechanical_share"] is None
    assert isinstance(doc["non_finite"], list) and "NaN" not in text


@pytest.mark.slow
def test_import_is_linear_in_steps(tmp_path: Path) -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).parents[3] / "bench"))
    from adapt_import import write_logs as bench_logs

    times = {}
    for n in (2_000, 40_000):
        root = tmp_path / str(n)
        root.mkdir()
        bench_logs(root, n)
        t0 = time.perf_counter()
        doc = analyse_published_logs(read_published_logs(root), rounds=1000)
        times[n] = time.perf_counter() - t0
        assert doc["overall"]["steps"] >= n - 8
        assert all(math.isfinite(x) for x in doc["overall"]["failure_rate_ci"])
    # 20 times the steps: well under 20 times the time (plus fixed costs).
    assert times[40_000] < 20 * times[2_000] + 5.0


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
    # Every judged step kept: 383 scored, 3 refused (拒答), none dropped.
    assert doc["overall"]["scored"] == 383 and doc["overall"]["refused"] == 3
    assert doc["overall"]["unjudged"] == 0 and doc["overall"]["invalid"] == 0
    assert doc["reparse"] == {"agree": 383, "disagree": 0, "unreadable": 0}
    # Per category, exactly the authors' recorded score field.
    for path in sorted(REAL.glob("log_*.json")):
        name = category_of(path)
        scores = [
            float(x["score"])
            for x in json.loads(path.read_text(encoding="utf-8"))
            if isinstance(x["score"], int | float)
        ]
        c = cats[name]
        assert c["scored"] == len(scores), name
        assert c["avg_score"] == pytest.approx(sum(scores) / len(scores)), name
        assert c["failure_rate"] == pytest.approx(sum(s < 4 for s in scores) / len(scores))
        lo, hi = c["failure_rate_ci"]
        assert lo <= c["failure_rate"] <= hi
    assert cats["child_exploitation"]["failure_rate"] == pytest.approx(11 / 40)
    assert cats["religion"]["failure_rate"] == pytest.approx(22 / 55)
    sel = doc["selection"]
    assert sel["chains"] == 146 and sel["chains_crossing_categories"] == 0
    assert sel["longest_chain"] <= 10 and sel["chains_longer_than_released_cap"] == 0
    # No "original" figures: the logs hold rewrites only.
    assert doc["originals"] is None
    table = runner.invoke(app, ["adapt", "import", str(REAL), "--bootstrap", "100"])
    assert table.exit_code == 0 and "child_exploitation" in table.output
    assert "no original figures" in " ".join(table.output.split())


def test_a_bad_originals_file_is_a_one_line_error(tmp_path: Path) -> None:
    logs = write_logs(tmp_path / "logs", {"race": [step(2, 0, "a")]})
    bad = tmp_path / "scoring_res.json"
    for content, says in (("[1,", "invalid JSON"), ('{"race": [{"score": 3}]}', "no scored")):
        bad.write_text(content)
        r = runner.invoke(app, ["adapt", "import", str(logs), "--originals", str(bad)])
        assert r.exit_code == 2 and says in r.output and "Traceback" not in r.output


def test_a_category_without_failures_has_an_interval_of_positive_width(tmp_path: Path) -> None:
    # 20 memes, two passing rewrites each: a percentile bootstrap says [0, 0]; the interval is
    # Wilson's over the 20 memes (the independent units), not over the 40 steps.
    rows = [step(s, run_step=i, meme=f"m{m}.png") for m in range(20) for i, s in enumerate((7, 8))]
    rows += [step(2, meme=f"r{m}.png") for m in range(10)]  # another category fails always
    logs = read_published_logs(write_logs(tmp_path, {"race": rows[:40], "animal": rows[40:]}))
    doc = analyse_published_logs(logs, rounds=200)
    race, animal = doc["categories"]["race"], doc["categories"]["animal"]
    assert race["failure_rate"] == 0.0
    assert race["failure_rate_ci"][0] == 0.0
    assert race["failure_rate_ci"][1] == pytest.approx(wilson_interval(0, 20)[1])
    assert 0.15 < race["failure_rate_ci"][1] < 0.17  # 0 of 20 memes: [0, 0.16]
    assert animal["failure_rate"] == 1.0
    assert animal["failure_rate_ci"] == pytest.approx([wilson_interval(10, 10)[0], 1.0])
    # Where the bootstrap is wider (a rate between the edges), it is kept.
    overall = doc["overall"]
    assert overall["failure_rate_ci"][0] < overall["failure_rate"] < overall["failure_rate_ci"][1]
    sel = doc["selection"]
    assert sel["first_rewrite_failure_rate"] == pytest.approx(10 / 30)
    lo, hi = sel["first_rewrite_failure_rate_ci"]
    assert lo < 10 / 30 < hi


def test_chains_follow_adammemes_seed_flags_when_given_and_the_output_says_which_rule(
    tmp_path: Path,
) -> None:
    # Seed a: rewrites at run_step 0 and 1 (hop to b). Seed c: its first rewrite was refused
    # (logged with no run_step), its next at run_step 2 after a hop: by run_step it merges into
    # a's chain; by the seed flags it is a chain of its own.
    rows = [
        step(6, 0, "a.png"),
        step(3, 1, "b.png"),
        {"meme_image_path": "c.png", "task": "race", "score": "Refusal"},
        step(5, 2, "c.png"),
        step(2, 3, "d.png"),
    ]
    folder = write_logs(tmp_path / "logs", {"race": rows})
    flags = tmp_path / "cls_res_full.json"
    flags.write_text(
        json.dumps(
            {
                "race": [
                    {"image": "a.png", "seed": 1, "task": "race"},
                    {"image": "b.png", "seed": None, "task": "race"},
                    {"image": "c.png", "seed": 1, "task": "race"},
                    {"image": "d.png", "task": "race"},
                ]
            }
        )
    )
    by_step = runner.invoke(app, ["adapt", "import", str(folder), "--json", "--bootstrap", "20"])
    assert by_step.exit_code == 0, by_step.output
    doc = json.loads(by_step.stdout)
    assert doc["selection"]["chains"] == 1 and doc["chain_rule"]["rule"] == "run_step"
    flagged = runner.invoke(
        app,
        ["adapt", "import", str(folder), "--json", "--bootstrap", "20", "--seeds", str(flags)],
    )
    assert flagged.exit_code == 0, flagged.output
    doc = json.loads(flagged.stdout)
    rule = doc["chain_rule"]
    assert doc["selection"]["chains"] == 2 and rule["rule"] == "seed_flags"
    assert rule["source"] == str(flags) and rule["seeds_flagged"] == 2
    assert rule["chains_by_run_step"] == 1 and rule["seed_memes_mid_chain_by_run_step"] == 1
    # The file in the log folder is found without --seeds, and the console says the rule.
    (folder / "cls_res_full.json").write_text(flags.read_text())
    shown = runner.invoke(app, ["adapt", "import", str(folder), "--bootstrap", "20"])
    assert shown.exit_code == 0, shown.output
    assert "from the seed flags of" in " ".join(shown.output.split())
    # A flag file with no seed at all is one line naming it.
    bad = tmp_path / "none.json"
    bad.write_text(json.dumps({"race": [{"image": "a.png", "seed": 0}]}))
    got = runner.invoke(app, ["adapt", "import", str(folder), "--seeds", str(bad)])
    assert got.exit_code == 2 and "no meme flagged as a seed" in got.output
    assert "Traceback" not in got.output
