"""The Adapt summary on an 80-column console: every column shown whole, long names folded,
nothing printed as a Python repr."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from memearena.methods.adapt.view import print_adapt_summary

HEADERS = ("model", "avg score", "failure %", "loop +", "control +", "refused")
LOOP_HEADERS = ("loop/step", "ctrl/step", "loop/min", "ctrl/min", "draws")


def _quantity(increase: float, draws: float | None = None) -> dict[str, Any]:
    q: dict[str, Any] = {"increase": increase, "increase_ci": [increase - 0.2, increase + 0.21]}
    if draws is not None:
        q["draws_per_chain"] = draws
    return q


def _model(name: str, refused: int) -> dict[str, Any]:
    # The widest values the demo prints: negative increases with two-digit bounds.
    return {
        "model": name,
        "avg_score": 5.8,
        "avg_score_ci": [5.0, 6.7],
        "failure_rate": 0.28,
        "failure_rate_ci": [0.12, 0.51],
        "refined_increase": 0.33,
        "refined_increase_ci": [0.23, 0.45],
        # Per step: the main table sets the loop's chain minimum beside the control's, never
        # beside this.
        "control_increase": -0.07,
        "control_increase_ci": [-0.20, 0.05],
        "refused": refused,
        "loop_vs_control": {
            "per_step": {"loop": _quantity(-0.15), "control": _quantity(-0.15)},
            "per_chain_min": {
                "loop": {"increase": 0.33, "increase_ci": [0.23, 0.45], "draws_per_chain": 1.3},
                "control": {
                    "increase": -0.15,
                    "increase_ci": [-0.30, -0.02],
                    "draws_per_chain": 2.9,
                },
            },
        },
    }


def _section(names: list[str]) -> dict[str, Any]:
    return {
        "failure_threshold": 4,
        "repeats": 3,
        "models": [_model(n, refused=i) for i, n in enumerate(names)],
        "refine_image": {
            "note": "rewrites shown on the meme's text-erased image",
            "sources": {"dataset": 18, "eraser": 1200},
            "mask_area": None,
        },
        "taxonomy": [{"name": "Disability", "origin": "seed"}],
        "taxonomy_version": "5fbf81b5b4414213",
        "weaknesses": [],
        "pending": 0,
    }


def _printed(section: dict[str, Any]) -> str:
    out = io.StringIO()
    print_adapt_summary(Console(file=out, width=80), section)
    return out.getvalue()


def test_the_summary_fits_80_columns_with_every_header_whole() -> None:
    text = _printed(_section(["sim-aurora", "sim-borealis", "sim-cirrus", "sim-drizzle"]))
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= 80
    header = next(line for line in text.splitlines() if line.startswith("model"))
    assert header.split() == " ".join(HEADERS).split()
    loop_header = next(line for line in text.splitlines() if "loop/step" in line)
    assert loop_header.split()[1:] == list(LOOP_HEADERS)
    assert "-15 (-30,-2)" in text
    assert (
        "-7 (-20,5)" not in text
    )  # the control's per-step change is not paired with the loop's min


def test_a_long_model_name_folds_and_no_number_is_cut() -> None:
    long = "Qwen/Qwen2.5-VL-72B-Instruct-AWQ"
    text = _printed(_section([long, "sim-borealis"]))
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= 80
    rows = [line for line in text.splitlines() if line.startswith("Qwen/")]
    assert len(rows) == 2  # the row in each table
    for row in rows:
        assert long not in row  # folded over lines, not cut
    assert text.count("5.8 (5.0,6.7)") == 2
    assert text.count("-15 (-30,-2)") == 2 * 2  # control + and ctrl/min: the same chain minimum
    assert text.count("33 (23,45)") == 2 * 2  # loop + and loop/min
    assert text.count("-15 (-35,6)") == 2 * 2  # loop/step and ctrl/step


def test_image_sources_are_listed_by_name_not_as_a_dict() -> None:
    text = " ".join(_printed(_section(["sim-aurora", "sim-borealis"])).split())
    assert "images by source: dataset 18, eraser 1,200" in text
    assert "{" not in text and "'dataset'" not in text
