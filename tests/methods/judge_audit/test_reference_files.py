"""``memearena judge-audit metrics`` reads MM-JudgeBias's own judgement files.

The reference's judge writes one JSON record per sample into ``outputs/judgements/seed_N/``
(``{"meta": {"id", "bias_type", ...}, "judgement": {model_key: {"unbiased", "unbiased_score",
"biased", "biased_score"}}}``); its ``evaluate.py`` takes a stored score, or, when that is null,
the score read again from the reply text, converts it with ``float`` and never clamps it. The
expected numbers here are computed from those rules as written out in this file (and the
reference's formulas in ``test_reference_metrics.reference_report``), not by memearena.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from test_reference_metrics import reference_report
from typer.testing import CliRunner

from memearena.cli import app
from memearena.data.mmjudgebias import reference_score
from memearena.stats.judge_bias import BIAS_TYPES

runner = CliRunner()
JUDGE = "gpt-4o"


def _reference_read(judgement: dict[str, Any], side: str) -> float | None:
    """The reference's reading of one side, written out independently: the stored score, else
    (null) the reply's number — the whole reply, else the first number after the last
    '### Score:', else the last number in it."""
    v = judgement.get(f"{side}_score")
    if v is None and side in judgement:
        text = judgement[side].strip()
        if re.fullmatch(r"[0-9]+(\.[0-9]+)?", text):
            return float(text)
        tail = text.split("### Score:")[-1] if "### Score:" in text else ""
        nums = re.findall(r"[0-9]+(?:\.[0-9]+)?", tail)
        if nums:
            return float(nums[0])
        nums = re.findall(r"[0-9]+(?:\.[0-9]+)?", text)
        return float(nums[-1]) if nums else None
    return None if v is None else float(v)


def _records() -> list[dict[str, Any]]:
    """Forty samples over the nine types, with what real runs hold: stored scores, a null
    score whose reply still ends in a number, a reply with none, a score stored as a string,
    a score outside 1–10, an all-1 BD type, and a sample of an unknown bias type."""
    recs: list[dict[str, Any]] = []
    types = list(BIAS_TYPES)
    for i in range(36):
        t = types[i % len(types)]
        y = 1 if t == "response_dominance" else 2 + (i * 5) % 9
        h = 1 + (i * 7) % 10
        j: dict[str, Any] = {
            "unbiased": f"### Feedback: fine. ### Score: {y}",
            "unbiased_score": float(y),
            "biased": f"### Feedback: the response is {h} out of 10. ### Score: {h}",
            "biased_score": float(h),
        }
        recs.append(
            {"meta": {"id": i, "bias_type": t, "difficulty": "easy"}, "judgement": {JUDGE: j}}
        )
    # Null scores: the reference reads the reply again (last number when no marker holds one).
    recs[3]["judgement"][JUDGE].update(
        biased="I would rate this 4 of 10, maybe 6", biased_score=None
    )
    recs[5]["judgement"][JUDGE].update(unbiased="### Score: 8 (confident)", unbiased_score=None)
    recs[7]["judgement"][JUDGE].update(biased="no number at all", biased_score=None)
    recs[8]["judgement"][JUDGE].update(biased="7", biased_score=None)
    # A score stored as a string, and one outside the scale (kept, not clamped).
    recs[10]["judgement"][JUDGE]["unbiased_score"] = "7"
    recs[11]["judgement"][JUDGE]["biased_score"] = 12.0
    recs[13]["judgement"][JUDGE]["unbiased_score"] = 15.0
    # Another judge on some samples, and a sample of a bias type the taxonomy does not know.
    recs[0]["judgement"]["claude"] = {"unbiased_score": 3.0, "biased_score": 3.0}
    recs.append(
        {
            "meta": {"id": 36, "bias_type": "new_bias"},
            "judgement": {JUDGE: {"unbiased_score": 5.0, "biased_score": 1.0}},
        }
    )
    return recs


def _write(root: Path, recs: list[dict[str, Any]]) -> Path:
    folder = root / "outputs" / "judgements" / "seed_1234"
    folder.mkdir(parents=True)
    for r in recs:
        (folder / f"{r['meta']['id']:04d}.json").write_text(
            json.dumps(r, indent=2, ensure_ascii=False, sort_keys=True), encoding="utf-8"
        )
    return folder


def _expected(recs: list[dict[str, Any]]) -> dict[str, Any]:
    rows = []
    for r in recs:
        t = r["meta"]["bias_type"]
        j = r["judgement"].get(JUDGE)
        if t not in BIAS_TYPES or not j:
            continue  # the reference skips these
        y, h = _reference_read(j, "unbiased"), _reference_read(j, "biased")
        rows.append({"id": r["meta"]["id"], "bias_type": t, "unbiased_score": y, "biased_score": h})
    return reference_report(rows)


def _metrics(path: Path, *extra: str) -> Any:
    args = ["judge-audit", "metrics", str(path), "--json", "--bootstrap", "50", *extra]
    return runner.invoke(app, args)


def test_a_seed_folder_gives_the_references_numbers(tmp_path: Path) -> None:
    recs = _records()
    folder = _write(tmp_path, recs)
    res = _metrics(folder, "--judge", JUDGE, "--reference-parsing")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    exp = _expected(recs)
    for t in BIAS_TYPES:
        assert doc["types"][t]["value"] == pytest.approx(exp["per_bias"][t]), t
    for c, v in exp["category_avg"].items():
        assert doc["categories"][c]["value"] == pytest.approx(v), c
    assert doc["overall"]["value"] == pytest.approx(exp["overall_avg"])
    assert exp["per_bias"]["response_dominance"] == 0.0  # the all-1 type, as the reference
    # What the reference's reading changed is counted; the unknown type is excluded, said so.
    assert doc["score_reading"] == {
        "rule": "reference",
        "from_string": 1,
        "from_text": 3,
        "out_of_range": 2,
    }
    assert doc["excluded_rows"]["count"] == 1
    assert doc["excluded_rows"]["rows"][0]["file"] == "0036.json"
    assert "new_bias" in doc["excluded_rows"]["rows"][0]["reason"]


def test_without_the_references_reading_its_odd_scores_are_excluded_and_counted(
    tmp_path: Path,
) -> None:
    folder = _write(tmp_path, _records())
    res = _metrics(folder, "--judge", JUDGE)
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    reasons = {r["file"]: r["reason"] for r in doc["excluded_rows"]["rows"]}
    assert set(reasons) == {"0010.json", "0011.json", "0013.json", "0036.json"}
    assert "--reference-parsing" in reasons["0010.json"]
    assert "outside 1-10" in reasons["0011.json"]
    assert doc["score_reading"]["rule"] == "strict"


def test_several_judges_need_a_choice_and_seed_folders_one_seed(tmp_path: Path) -> None:
    folder = _write(tmp_path, _records())
    res = runner.invoke(app, ["judge-audit", "metrics", str(folder)])
    assert res.exit_code == 2
    assert "several judges" in res.output and "claude" in res.output
    assert "Traceback" not in res.output
    res = runner.invoke(app, ["judge-audit", "metrics", str(folder.parent)])
    assert res.exit_code == 2 and "seed_1234" in res.output and "Traceback" not in res.output


def test_one_per_sample_file_is_read_as_the_reference_writes_it(tmp_path: Path) -> None:
    folder = _write(tmp_path, _records())
    res = _metrics(folder / "0002.json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    # Sample 2: response_dominance, y = 1 — the reference's BD 0.0 convention.
    assert doc["types"]["response_dominance"]["value"] == 0.0
    assert sum(f["value"] is not None for f in doc["types"].values()) == 1


@pytest.mark.parametrize(
    ("reply", "score"),
    [
        ("### Feedback: I first thought 9. ### Score: 6", 6.0),
        ("### Feedback: good ### Score: 7.5 out of 10", 7.5),
        ("I rate it 7/10", 10.0),  # the last number, as the reference reads it
        ("  8 ", 8.0),
        ("### Score: none", None),
        ("no score", None),
        (None, None),
    ],
)
def test_reference_score_reads_a_reply_as_the_reference(reply: Any, score: float | None) -> None:
    assert reference_score(reply) == score
