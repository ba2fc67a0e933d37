"""``memearena judge-audit metrics SCORES.jsonl``: the full BD/BC table from scored pairs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memearena.cli import app

runner = CliRunner()


def _write(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


ROWS = [
    {"id": "a", "bias_type": "text_dominance", "unbiased_score": 9, "biased_score": 1},  # 1.0
    {"id": "b", "bias_type": "text_dominance", "unbiased_score": 5, "biased_score": 5},  # 0.0
    {"id": "c", "bias_type": "text_dominance", "unbiased_score": 5, "biased_score": None},
    {"id": "a", "bias_type": "visual_transformation", "unbiased_score": 6, "biased_score": 6},
    {"id": "b", "bias_type": "visual_transformation", "unbiased_score": 10, "biased_score": 1},
]


def test_json_table(tmp_path: Path) -> None:
    path = _write(tmp_path / "s.jsonl", ROWS)
    res = runner.invoke(app, ["judge-audit", "metrics", str(path), "--json", "--bootstrap", "200"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert set(doc) == {
        "types",
        "categories",
        "overall",
        "reference_compat",
        "excluded_rows",
        "score_reading",
    }
    assert doc["score_reading"] == {
        "rule": "strict",
        "from_string": 0,
        "from_text": 0,
        "out_of_range": 0,
    }
    td = doc["types"]["text_dominance"]
    assert td["metric"] == "bd" and td["value"] == pytest.approx(0.5)
    assert td["pairs"] == 2 and td["excluded"] == 1  # the unparsed pair is counted, not scored
    assert td["ci_low"] <= td["value"] <= td["ci_high"]
    vt = doc["types"]["visual_transformation"]
    assert vt["metric"] == "bc" and vt["value"] == pytest.approx((1.0 + 0.0) / 2)
    assert doc["types"]["image_dominance"]["value"] is None  # no data, not 0
    assert doc["categories"]["congruity"]["value"] is None
    assert doc["overall"]["value"] == pytest.approx(0.5)


def test_table_output(tmp_path: Path) -> None:
    path = _write(tmp_path / "s.jsonl", ROWS)
    res = runner.invoke(app, ["judge-audit", "metrics", str(path), "--bootstrap", "50"])
    assert res.exit_code == 0, res.output
    assert "text_dominance" in res.output and "no data" in res.output


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"id": 1, "bias_type": "bogus", "unbiased_score": 5, "biased_score": 5}, "bogus"),
        ({"id": 1, "bias_type": "text_dominance", "unbiased_score": 11, "biased_score": 5}, "1-10"),
        ({"bias_type": "text_dominance", "unbiased_score": 5, "biased_score": 5}, "'id'"),
        ({"id": 1, "bias_type": "text_dominance", "unbiased_score": "7", "biased_score": 5}, "7"),
        ({"id": 1, "bias_type": "text_dominance", "unbiased_score": 5}, "missing"),
    ],
)
def test_a_bad_row_is_a_counted_exclusion_not_a_refusal(
    tmp_path: Path, row: dict[str, object], message: str
) -> None:
    path = _write(tmp_path / "s.jsonl", [ROWS[0], row])
    res = runner.invoke(app, ["judge-audit", "metrics", str(path), "--json", "--bootstrap", "20"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["excluded_rows"]["count"] == 1
    assert doc["excluded_rows"]["rows"][0]["line"] == 2
    assert message in doc["excluded_rows"]["rows"][0]["reason"]
    assert doc["types"]["text_dominance"]["value"] == pytest.approx(1.0)  # row 1 still scored
    res = runner.invoke(app, ["judge-audit", "metrics", str(path), "--bootstrap", "20"])
    assert res.exit_code == 0 and "1 rows excluded" in res.output and "s.jsonl:2" in res.output


def test_a_file_without_any_usable_row_is_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = {"id": 1, "bias_type": "text_dominance", "unbiased_score": 11, "biased_score": 5}
    path = _write(tmp_path / "s.jsonl", [bad])
    res = runner.invoke(app, ["judge-audit", "metrics", str(path)])
    assert res.exit_code == 2
    assert "no scored pairs" in res.output and "line 1" in res.output
    assert "Traceback" not in res.output


def test_several_judges_need_a_choice(tmp_path: Path) -> None:
    rows = [{**ROWS[0], "judge": "j1"}, {**ROWS[1], "judge": "j2"}]
    path = _write(tmp_path / "s.jsonl", rows)
    res = runner.invoke(app, ["judge-audit", "metrics", str(path)])
    assert res.exit_code == 2 and "--judge" in res.output
    res = runner.invoke(app, ["judge-audit", "metrics", str(path), "--judge", "j1", "--json"])
    assert res.exit_code == 0
    assert json.loads(res.output)["types"]["text_dominance"]["pairs"] == 1
