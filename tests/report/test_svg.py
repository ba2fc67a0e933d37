"""The report's chart geometry: points inside the plot, missing values said, labels escaped."""

from __future__ import annotations

import math
import re

from memearena.report.html import render_report
from memearena.report.svg import (
    LABEL_WIDTH,
    MAX_LABEL,
    WIDTH,
    Interval,
    estimate,
    interval_chart,
    matrix_chart,
)


def test_an_estimate_is_read_from_each_shape_the_document_uses() -> None:
    assert estimate("j", {"value": 0.5, "ci_low": 0.4, "ci_high": 0.6}) == Interval(
        "j", 0.5, 0.4, 0.6
    )
    assert estimate("m", (0.25, [0.1, 0.39]), 1) == Interval("m", 0.25, 0.1, 0.39, 1)
    assert estimate("x", 0.7) == Interval("x", 0.7)
    for odd in (None, True, float("nan"), "0.5", {"value": None}, (None, None)):
        assert estimate("o", odd).value is None, odd


def test_points_and_whiskers_lie_inside_the_plot() -> None:
    chart = interval_chart(
        [("P(first)", [Interval("a", 0.5, 0.45, 0.55), Interval("b", 0.9, 0.8, 1.0)])],
        title="t",
        domain=(0.0, 1.0),
        reference=0.5,
    )
    assert chart is not None
    xs = [v for p in chart["points"] for v in (p["x"], p["x_low"], p["x_high"])]
    assert all(LABEL_WIDTH <= v <= WIDTH for v in xs)
    a, b = chart["points"]
    assert a["x_low"] < a["x"] < a["x_high"] < b["x"]
    assert chart["reference"] == a["x"]  # 0.5 drawn where a's 0.5 is
    assert [g["label"] for g in chart["groups"]] == ["P(first)"]
    assert all(p["y"] < chart["height"] for p in chart["points"])


def test_a_missing_value_is_a_row_saying_so_and_no_values_is_no_chart() -> None:
    chart = interval_chart([("", [Interval("a", None), Interval("b", 0.2)])], title="t")
    assert chart is not None
    assert chart["points"][0]["x"] is None and chart["points"][0]["value"] == "—"
    assert interval_chart([("g", [Interval("a", None)])], title="t") is None
    assert interval_chart([], title="t") is None


def test_the_axis_grows_to_hold_an_interval_beyond_the_domain() -> None:
    chart = interval_chart(
        [("", [Interval("a", -0.2, -0.5, 0.1)])], title="t", domain=(0.0, 1.0), percent=True
    )
    assert chart is not None
    assert chart["points"][0]["x_low"] == LABEL_WIDTH  # the axis starts at the interval's end
    assert chart["ticks"][0]["label"] == "-50%"


def test_a_long_label_is_cut_and_kept_whole_in_the_tooltip() -> None:
    name = "Qwen/Qwen2.5-VL-72B-Instruct-AWQ on gpu-cluster-east-7"
    chart = interval_chart([("", [Interval(name, 0.5)])], title="t")
    assert chart is not None
    (p,) = chart["points"]
    assert len(p["label"]) == MAX_LABEL and p["label"].endswith("…")
    assert name in p["title"]


def test_a_win_rate_matrix_skips_the_diagonal_and_rejects_a_ragged_one() -> None:
    chart = matrix_chart(["a", "b"], [[None, 0.75], [0.25, None]], [[0, 8], [8, 0]], title="t")
    assert chart is not None
    assert [c["text"] for c in chart["cells"]] == ["75%", "25%"]
    assert "8 battles" in chart["cells"][0]["title"]
    assert len(chart["diagonal"]) == 2
    assert matrix_chart(["a", "b"], [[None, 0.5]], title="t") is None
    assert matrix_chart(["a"], [[None]], title="t") is None
    missing = matrix_chart(["a", "b"], [[None, math.nan], [None, None]], title="t")
    assert missing is not None and missing["cells"][0]["text"] == "—"


def test_chart_labels_reach_the_page_escaped() -> None:
    evil = '<script>alert(1)</script>"><img src=x onerror=alert(1)>'
    est = {"value": 0.6, "ci_low": 0.5, "ci_high": 0.7, "n": 10}
    doc = {
        "arena": {
            "overall": [{"model": evil, "rank": 1, "bt": 1000.0}, {"model": "b", "bt": 990.0}],
            "win_rates": {evil: est, "b": est},
            "pairwise": {"models": [evil, "b"], "win_rate": [[None, 0.6], [0.4, None]]},
            "judges": [{"judge": evil, "p_prefer_first": est, "self_preference": est}],
        }
    }
    page = render_report(doc)
    svgs = re.findall(r"<svg.*?</svg>", page, re.DOTALL)
    assert len(svgs) >= 5  # ratings, win rates, matrix, classic biases, self-preference
    assert "<script" not in page and "<img" not in page
    assert all("&lt;script&gt;" in s or evil[:8] not in s for s in svgs)
    assert sum("&lt;script&gt;alert(1)&lt;/script&gt;" in s for s in svgs) >= 4
