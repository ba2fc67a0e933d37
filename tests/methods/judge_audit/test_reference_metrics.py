"""``memearena judge-audit metrics`` equals MM-JudgeBias's ``compute_report``.

The reference is reimplemented here from its published formulas and aggregation
(naver-ai/MM-JudgeBias, ``metrics.py`` and ``evaluate.py``): per type, rows with both scores;
BD = mean over y > 1 of max(0, y − ŷ)/(y − 1), 0.0 when no row has y > 1; BC = mean of
1 − |y − ŷ|/max(y − 1, S − y); a type with no row is None and left out; a category is the mean
of its types' values, the overall figure the mean of all types' values.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memearena.cli import app
from memearena.stats.judge_bias import BIAS_TYPES, BiasPair, bias_table

runner = CliRunner()
S = 10


def reference_report(rows: list[dict[str, Any]]) -> dict[str, Any]:
    grouped: dict[str, tuple[list[float], list[float]]] = {}
    for r in rows:
        y, h = r["unbiased_score"], r["biased_score"]
        if y is None or h is None:
            continue
        ys, hs = grouped.setdefault(r["bias_type"], ([], []))
        ys.append(float(y))
        hs.append(float(h))
    per_bias: dict[str, float | None] = {}
    per_cat: dict[str, list[float]] = {}
    for t, (cat, metric) in BIAS_TYPES.items():
        ys, hs = grouped.get(t, ([], []))
        if not ys:
            per_bias[t] = None
            continue
        if metric == "bd":
            vals = [max(0.0, y - h) / (y - 1) for y, h in zip(ys, hs, strict=True) if y > 1]
        else:
            vals = []
            for y, h in zip(ys, hs, strict=True):
                d = max(y - 1, S - y)
                vals.append(1.0 - abs(y - h) / d if d > 0 else 1.0)
        value = sum(vals) / len(vals) if vals else 0.0
        per_bias[t] = value
        per_cat.setdefault(cat, []).append(value)
    cats = {
        c: (sum(v) / len(v) if v else None)
        for c in ("integrality", "congruity", "robustness")
        for v in [per_cat.get(c, [])]
    }
    overall = [v for v in per_bias.values() if v is not None]
    return {
        "per_bias": per_bias,
        "category_avg": cats,
        "overall_avg": sum(overall) / len(overall) if overall else None,
    }


def _ours(rows: list[dict[str, Any]]) -> dict[str, Any]:
    t = bias_table(
        (
            BiasPair(str(r["id"]), r["bias_type"], r["unbiased_score"], r["biased_score"])
            for r in rows
        ),
        n_boot=0,
    )
    return {
        "per_bias": {k: v.value for k, v in t.types.items()},
        "category_avg": {k: v.value for k, v in t.categories.items()},
        "overall_avg": t.overall.value,
    }


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    def eq(x: float | None, y: float | None) -> bool:
        return (x is None and y is None) or (x is not None and y is not None and abs(x - y) < 1e-9)

    return (
        all(eq(a["per_bias"][t], b["per_bias"][t]) for t in BIAS_TYPES)
        and all(eq(a["category_avg"][c], b["category_avg"][c]) for c in a["category_avg"])
        and eq(a["overall_avg"], b["overall_avg"])
    )


def _row(i: int, t: str, y: float | None, h: float | None) -> dict[str, Any]:
    return {"id": f"i{i}", "bias_type": t, "unbiased_score": y, "biased_score": h}


# The vector of the issue: text_dominance's every unbiased score is 1 (reference BD 0.0).
HAND = [
    _row(0, "text_dominance", 1, 1),
    _row(1, "text_dominance", 1, 4),
    _row(2, "image_dominance", 8, 2),
    _row(3, "image_dominance", 6, 6),
    _row(4, "instruction_misalignment", 9, 1),
    _row(5, "texture_insertion", 7, 7),
    _row(6, "texture_insertion", 10, 4),
    _row(7, "unnecessary_image", 5, None),
]


def test_all_one_bd_is_zero_and_averaged_in_as_the_reference() -> None:
    ref = reference_report(HAND)
    assert ref["per_bias"]["text_dominance"] == 0.0
    ours = _ours(HAND)
    assert _same(ours, ref)
    assert ours["category_avg"]["integrality"] == pytest.approx((0.0 + (6 / 7 + 0.0) / 2) / 2)


def test_two_thousand_random_score_sets_agree_with_the_reference() -> None:
    rng = random.Random(17)
    agree = 0
    all_one_cases = 0
    for k in range(2000):
        rows = []
        types = rng.sample(list(BIAS_TYPES), rng.randint(1, len(BIAS_TYPES)))
        for t in types:
            all_one = rng.random() < 0.15
            all_one_cases += all_one
            for _ in range(rng.randint(1, 6)):
                y = 1 if all_one else rng.randint(1, 10)
                h = rng.randint(1, 10)
                if rng.random() < 0.1:
                    y = None  # unparsed
                rows.append(_row(rng.randrange(8), t, y, h))
        agree += _same(_ours(rows), reference_report(rows))
        assert agree == k + 1, rows
    assert agree == 2000 and all_one_cases > 100


def test_cli_metrics_equals_the_reference_on_the_hand_vector(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in HAND))
    res = runner.invoke(app, ["judge-audit", "metrics", str(path), "--json", "--bootstrap", "50"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    ref = reference_report(HAND)
    for t in BIAS_TYPES:
        got = doc["types"][t]["value"]
        assert (got is None and ref["per_bias"][t] is None) or got == pytest.approx(
            ref["per_bias"][t]
        )
    for c, v in ref["category_avg"].items():
        assert doc["categories"][c]["value"] == (pytest.approx(v) if v is not None else None)
    assert doc["overall"]["value"] == pytest.approx(ref["overall_avg"])
    assert doc["types"]["text_dominance"]["note"].startswith("BD 0.0 by the reference")


def test_no_reference_compat_gives_labelled_no_data(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in HAND))
    res = runner.invoke(
        app, ["judge-audit", "metrics", str(path), "--json", "--no-reference-compat"]
    )
    assert res.exit_code == 0, res.output
    td = json.loads(res.output)["types"]["text_dominance"]
    assert td["value"] is None and "no pair with y > 1" in td["note"]
    res = runner.invoke(app, ["judge-audit", "metrics", str(path), "--no-reference-compat"])
    assert "no data (no pair with y > 1)" in res.output
    assert "not reference-compatible" in res.output
