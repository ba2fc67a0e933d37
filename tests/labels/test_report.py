"""The report's human-labels section: shown when the board has one, escaped, planted values."""

from __future__ import annotations

from memearena.report.html import render_report


def _section(judge: str) -> dict:
    row = {
        "figure": "kappa",
        "queue": "battles",
        "judge": judge,
        "field": "all",
        "group": "",
        "value": 0.7,
        "ci_low": 0.6,
        "ci_high": 0.8,
        "n": 40,
        "clusters": 12,
    }
    return {
        "note": "human labels",
        "queues": {
            "battles": {
                "items": 50,
                "labelled": 40,
                "labels": 80,
                "orphan_labels": 1,
                "annotators": ["a", "b"],
            }
        },
        "figures": [row],
        "widest": None,
        "simulated": {"note": "simulated", "kappa": {judge: 0.72}, "alpha": {}},
    }


def test_the_section_shows_each_figure_with_its_interval_and_planted_value() -> None:
    page = render_report({"labels": _section("sim-judge-falcon")})
    assert "Human labels — agreement with the judges" in page
    assert "[0.600, 0.800]" in page and "0.720" in page and "SIMULATED annotators" in page


def test_names_from_labels_reach_the_page_escaped() -> None:
    page = render_report({"labels": _section("<script>alert(1)</script>")})
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)" in page


def test_no_section_without_labels() -> None:
    assert "Human labels — agreement" not in render_report({"labels": {"queues": {}}})
