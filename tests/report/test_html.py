"""The HTML report: self-contained, escaped, tolerant of whatever a document lacks."""

from __future__ import annotations

import copy
import html
import os
import re
from pathlib import Path
from typing import Any

import pytest

import memearena.methods.adapt.view
import memearena.methods.arena.view
import memearena.methods.judge_audit.view  # noqa: F401  (each registers its section)
from memearena.report.html import SECTIONS, fmt_num, render_report, write_report

MODELS = ["sim-aurora", "sim-borealis", "sim-cirrus"]
JUDGES = ["sim-judge-falcon", "sim-judge-grove"]


def _rows(order: list[str], base: float = 1100.0) -> list[dict[str, Any]]:
    return [
        {
            "model": m,
            "rank": i + 1,
            "elo": base - 50 * i + 3.3,
            "bt": base - 50 * i,
            "ci_low": base - 50 * i - 6.2,
            "ci_high": base - 50 * i + 5.9,
            "win_rate": 0.65 - 0.15 * i,
            "battles": 5680,
        }
        for i, m in enumerate(order)
    ]


def _judges(ndcg: float) -> list[dict[str, Any]]:
    return [
        {
            "judge": j,
            "battles": 3520,
            "position_consistency": 0.68,
            "p_prefer_first": 0.505,
            "p_prefer_longer": 0.555,
            "parse_failures": 2,
            "ranking": MODELS,
            "ndcg": ndcg - 0.1 * k,
            "kendall_tau": 1.0,
        }
        for k, j in enumerate(JUDGES)
    ]


@pytest.fixture
def board() -> dict[str, Any]:
    """A document shaped like a demo run's leaderboard.json, with two settings."""
    judges = _judges(0.98)
    judges[0]["human_agreement"] = 0.0421  # a key added later still gets a column
    return {
        "arena": {
            "setting": "memearena",
            "battles": 14080,
            "overall": _rows(MODELS),
            "by_criterion": {"accuracy": _rows(MODELS), "redundancy": _rows(MODELS[::-1])},
            "by_judge": {j: _rows(MODELS) for j in JUDGES},
            "by_context": {"high": _rows(MODELS), "unrelated": _rows(MODELS)},
            "by_source": {"demo": _rows(MODELS)},
            "judges": judges,
            "answers": {
                "sim-aurora": {"answers": 72, "refusals": 0, "format_failures": 0},
                "sim-cirrus": {"answers": 72, "refusals": 4, "format_failures": 4},
            },
            "errors": {"answer": 4, "judge_parse": 2},
            "usage": {
                "sim-aurora": {
                    "calls": 72,
                    "cached": 0,
                    "errors": 0,
                    "refusals": 0,
                    "budget": 0,
                    "input_tokens": 27779,
                    "output_tokens": 8302,
                    "cost_usd": 0.01234,
                    "latency_s": 0.0059,
                },
                "sim-judge-falcon": {"calls": 1494, "cached": 2, "cost_usd": 1.5},
            },
            "settings": {
                "memearena": {"setting": "memearena", "overall": _rows(MODELS), "judges": judges},
                "no-guideline": {
                    "setting": "no-guideline",
                    "overall": _rows(MODELS[::-1]),
                    "judges": _judges(0.81),
                },
            },
        },
        "simulated": {
            "note": "targets are simulated; this checks the method, not real models",
            "true_ranking": MODELS,
            "kendall_tau": 0.9999999999999999,
            "spearman_rho": 1.0,
        },
    }


def _text(html: str) -> str:
    """The page's visible text, roughly: tags dropped, whitespace collapsed."""
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def test_report_shows_every_section_of_a_demo_document(board: dict[str, Any]) -> None:
    html = render_report(board, title="demo run")
    text = _text(html)
    assert html.startswith("<!DOCTYPE html>")
    assert "<title>demo run — memearena</title>" in html
    assert "SIMULATED models — this checks the method, not real models" in text
    assert "Kendall τ = 1.000" in text
    assert "True order: sim-aurora &gt; sim-borealis &gt; sim-cirrus" in text
    assert "14,080 battles" in text
    for heading in (
        "Overall leaderboard",
        "By criterion",
        "By context",
        "By source",
        "By judge",
        "Judge bias",
        "Settings comparison",
        "Answer outcomes",
        "Usage and cost",
        "Errors",
    ):
        assert heading in text, heading
    assert html.count("<details") >= 4
    # three charts: BT ratings with CI whiskers, NDCG bars, the judges' P(first) and P(longer)
    assert html.count("<svg") == 3
    assert html.count('class="whisker"') == 3 * len(MODELS)
    assert html.count('class="bar"') == len(JUDGES)
    # numbers are formatted, not dumped
    assert "1100.0" in text and "1093.8 – 1105.9" in text and "65.0%" in text
    assert "0.9999999" not in html
    assert "human agreement" in text and "0.042" in text
    assert "no-guideline" in text and "0.810" in text
    assert "$0.0123" in text and "$1.51" in text  # per model and the total
    assert "judge_parse" in text


def test_hostile_strings_come_out_escaped(board: dict[str, Any]) -> None:
    evil = "<script>alert(1)</script>"
    doc = copy.deepcopy(board)
    arena = doc["arena"]
    arena["setting"] = evil
    arena["overall"][0]["model"] = evil
    arena["by_criterion"][evil] = _rows([evil, '"><img src=x onerror=alert(1)>'])
    arena["judges"][0]["judge"] = evil
    arena["judges"][0]["ranking"] = [evil]
    arena["judges"][0]["note_" + evil] = evil
    arena["answers"][evil] = {"answers": 1, "refusals": 0, "format_failures": 0}
    arena["usage"][evil] = {"calls": 1}
    arena["errors"][evil] = 1
    arena["settings"][evil] = {"overall": _rows([evil]), "judges": [{"judge": evil, "ndcg": 1}]}
    doc["simulated"]["note"] = evil
    doc["simulated"]["true_ranking"] = [evil]

    html = render_report(doc, title=evil)

    assert "<script" not in html.lower()
    assert "<img" not in html.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_a_minimal_document_renders() -> None:
    html = render_report({"arena": {"overall": []}})
    text = _text(html)
    assert "Overall leaderboard" in text and "no battles" in text
    assert "SIMULATED" not in text
    assert "<svg" not in html


@pytest.mark.parametrize(
    "doc",
    [
        {},
        {"arena": {}},
        {"arena": {"overall": [{"model": "m"}], "judges": [{"judge": "j"}], "usage": {"m": {}}}},
        {"arena": {"overall": None, "by_judge": [], "errors": {}, "settings": {"s": {}}}},
        {"arena": {"overall": [{"model": "m", "bt": float("nan")}]}, "simulated": {}},
    ],
)
def test_missing_or_odd_keys_are_tolerated(doc: dict[str, Any]) -> None:
    assert "</html>" in render_report(doc)


def test_the_report_loads_nothing_from_outside(board: dict[str, Any]) -> None:
    html = render_report(board)
    assert "http://" not in html and "https://" not in html
    assert "<script" not in html
    assert "<link" not in html
    assert "@import" not in html and "url(" not in html
    assert not re.search(r"\ssrc\s*=", html)
    # and says so to the browser: nothing may load or run, whatever the page holds
    assert (
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; img-src data:;'
        in html
    )


def test_write_report_replaces_the_file_atomically(
    board: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "report.html").write_text("old", encoding="utf-8")
    path = write_report(tmp_path, board)
    assert path == tmp_path / "report.html"
    assert path.read_text(encoding="utf-8") == render_report(board)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]  # no temp file left

    # A failed replace leaves the old report whole and no temp file behind.
    path.write_text("old", encoding="utf-8")

    def fail(src: object, dst: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        write_report(tmp_path, board)
    assert path.read_text(encoding="utf-8") == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]


def test_numbers_are_formatted_for_reading() -> None:
    assert fmt_num(14080) == "14,080"
    assert fmt_num(1101.127599027666) == "1101.1"
    assert fmt_num(0.9999999999999999) == "1.000"
    assert fmt_num(None) == "—"
    assert fmt_num(float("nan")) == "—"
    assert fmt_num(True) == "yes"


# --- run facts, banners, agreement, sections ---------------------------------------------------


def test_run_facts_are_shown_with_config_and_prompt_hashes(board: dict[str, Any]) -> None:
    board["run"] = {
        "name": "fhm-dev-arena",
        "date": "2026-11-30T08:00:00+00:00",
        "seed": 7,
        "version": "0.1.0",
        "config_sha256": "ab" * 32,
        "config": {
            "run": "fhm-dev-arena",
            "models": {"m": {"base_url": "https://user:s3cret@gpu-1:8000/v1"}},
        },
        "prompt_hashes": {"arena/judge_pairwise.j2": "cd" * 32},
    }
    html = render_report(board, title="report")
    text = _text(html)
    assert "<title>report — fhm-dev-arena</title>" in html
    for needle in ("fhm-dev-arena", "2026-11-30T08:00:00+00:00", "seed 7", "0.1.0", "ab" * 32):
        assert needle in text
    assert "arena/judge_pairwise.j2" in text and "cd" * 32 in text
    assert "gpu-1:8000" in html and "s3cret" not in html  # credentials in a URL never shown


def test_krippendorff_alpha_and_cohen_kappa_are_shown(board: dict[str, Any]) -> None:
    board["arena"]["panel"] = {
        "krippendorff_alpha": {"value": 0.4054, "ci_low": 0.3867, "ci_high": 0.4252, "n": 7040},
        "cohen_kappa": {
            "sim-judge-falcon vs sim-judge-grove": {
                "value": 0.4512,
                "ci_low": 0.4291,
                "ci_high": 0.4758,
                "n": 7040,
            }
        },
    }
    text = html.unescape(_text(render_report(board)))
    assert "Krippendorff's α (whole panel) 0.405 [0.387, 0.425] 7,040" in text
    assert "Cohen's κ — sim-judge-falcon vs sim-judge-grove 0.451 [0.429, 0.476]" in text
    assert 'href="#agreement"' in render_report(board)


def test_failure_banner_from_an_incomplete_status(board: dict[str, Any]) -> None:
    board["status"] = {
        "complete": False,
        "problems": ["target gpt-4o: 0 of 72 answers (auth: 401 <b>bad key</b>)"],
        "spent_usd": 1.25,
        "spent_upper_bound_usd": 1.5,
        "max_cost": 2.0,
    }
    html = render_report(board)
    assert 'id="run-failed"' in html
    text = _text(html)
    assert "This run is INCOMPLETE" in text and "0 of 72 answers" in text
    assert "spent $1.25 · at most $1.50 · cap $2.00" in text
    assert "<b>bad key</b>" not in html and "&lt;b&gt;bad key&lt;/b&gt;" in html
    board["status"]["complete"] = True
    assert 'id="run-failed"' not in render_report(board)
    del board["status"]
    assert 'id="run-failed"' not in render_report(board)


def test_a_run_without_battles_or_results_says_so() -> None:
    html = render_report({"arena": {"overall": [], "battles": 0, "errors": {"judge": 24}}})
    assert 'id="no-battles"' in html and "This run produced no battles" in _text(html)
    empty = render_report({})
    assert 'id="no-results"' in empty and 'id="no-battles"' not in empty


def test_every_table_sits_in_a_sideways_scroll_box(board: dict[str, Any]) -> None:
    html = render_report(board)
    tables = html.count("<table")
    assert tables > 10 and html.count('<div class="scroll">') == tables
    assert html.count('class="text name"') >= len(JUDGES) + len(MODELS)


def test_a_method_adds_its_section_as_a_partial(
    board: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from jinja2 import ChoiceLoader, DictLoader

    from memearena.report import html as report_html

    env = report_html._environment()
    partial = '<section id="adapt"><h2>{{ section.title }}</h2><p>{{ section.n }}</p></section>'
    monkeypatch.setattr(
        env, "loader", ChoiceLoader([env.loader, DictLoader({"_x.html.j2": partial})])
    )
    section = report_html.Section(
        "adapt",
        "Adapt",
        "_x.html.j2",
        lambda sec, doc: {"n": len(sec), "nav": [("adapt", "Adapt")]},
    )
    monkeypatch.setattr(report_html, "SECTIONS", [*report_html.SECTIONS, section])
    board["adapt"] = {"a": 1, "b": 2}
    html = render_report(board)
    assert '<section id="adapt"><h2>Adapt</h2><p>2</p></section>' in html
    assert html.index('id="overall"') < html.index('id="adapt"')
    assert '<a href="#adapt">Adapt</a>' in html


def test_every_partial_boxes_its_tables_for_sideways_scrolling() -> None:
    """A method's partial keeps every table in a scroll box: the last resort for a table with
    more columns than a screen holds, so the page itself never scrolls sideways (the browser
    test measures that no box needs to on the demo)."""
    from importlib.resources import files

    templates = files("memearena.report") / "templates"
    paths = [t for t in templates.iterdir() if t.name.endswith(".html.j2")]
    # Each method's partial is a file of its own package.
    partials = [s.folder / s.template for s in SECTIONS if s.folder is not None]
    assert {"arena", "adapt", "judge_audit"} <= {s.key for s in SECTIONS if s.folder}
    assert all(p.is_file() and "report" not in p.parent.parent.name for p in partials)
    assert "report.html.j2" in {p.name for p in paths}
    for path in [*paths, *partials]:
        name = str(path)
        text = path.read_text(encoding="utf-8")
        boxed = re.findall(r'<div class="scroll">\s*<table', text)
        assert len(boxed) == text.count("<table"), f"{name}: a table outside a scroll box"


# --- every method alike: banner, usage, errors, run facts; no repr; cut lists say so --------


def _est(v: float) -> list[Any]:
    return [v, [v - 0.1, v + 0.1]]


def _adapt(models: list[str], chains: int = 2, weaknesses: int = 25) -> dict[str, Any]:
    """An ``adapt`` section shaped as the analysis writes it (few rows, every key a view reads)."""

    def model(m: str) -> dict[str, Any]:
        row: dict[str, Any] = {"model": m, "answers": 54, "scored": 51, "refused": 3}
        for key in ("avg_score", "failure_rate", "refined_failure_rate", "refined_increase"):
            row[key], row[key + "_ci"] = _est(0.3)
        for key in ("control_failure_rate", "control_increase"):
            row[key], row[key + "_ci"] = _est(0.1)
        return {**row, "unparsed": 2, "scored_by_itself": [m] if m == models[0] else []}

    step = {
        "step": 1,
        "meme": "demo:m02",
        "parent_text": "COPPER EYES",
        "misbelief": "a false belief",
        "text": "those folks EYES",
        "score_before": 10.0,
        "score_after": 1.0,
        "checks": [{"outcome": "accepted", "reason": "still recognisable"}],
    }
    return {
        "failure_threshold": 4.0,
        "repeats": 3,
        "models": [model(m) for m in models],
        "by_category": {
            "Race": [
                {
                    "model": m,
                    **dict(zip(("failure_rate", "failure_rate_ci"), _est(0.2), strict=True)),
                }
                for m in models
            ]
        },
        "chains": [
            {
                "target": models[0],
                "category": "Race",
                "mode": "conditional",
                "repeat": i,
                "seed": f"demo:m{i:02d}",
                "stop": "no similar sample left",
                "steps": [step],
            }
            for i in range(chains)
        ],
        "chains_total": 288,
        "weaknesses": [
            {
                "model": models[0],
                "category": "Race",
                "misbelief": f"belief {i}",
                "steps": 1,
                "score_drop": 9.0 - i / 10,
                "meme": f"demo:m{i:02d}",
                "repeat": i % 3,
            }
            for i in range(weaknesses)
        ],
        "taxonomy": [{"name": "Race", "origin": "seed", "description": "d"}],
        "taxonomy_version": "v1",
    }


def _judge_audit() -> dict[str, Any]:
    fig = {"metric": "bd", "value": 0.5, "ci_low": 0.4, "ci_high": 0.6, "pairs": 3}
    return {
        "items": 24,
        "prompt": "plain",
        "leaderboard": [
            {
                "rank": 1,
                "judge": "sim-judge-first",
                "overall": fig,
                "categories": {"integrality": fig},
                "types": {"text_dominance": fig},
                "p_prefer_first": {"value": 0.74, "ci_low": 0.65, "ci_high": 0.82},
                "flags": ["position"],
            }
        ],
    }


def test_a_printed_method_fails_the_render_instead_of_showing_its_repr() -> None:
    from memearena.report import html as report_html

    env = report_html._environment()
    with pytest.raises(TypeError, match="printed a callable"):
        env.from_string("{{ d.items }}").render(d={"items": 3})
    page = render_report({"judge_audit": _judge_audit()})
    assert "24 items; prompt" in _text(page)
    assert "built-in method" not in page and "object at 0x" not in page


def test_every_method_section_gets_its_usage_errors_and_run_facts() -> None:
    usage = {"sim-aurora": {"calls": 3, "cost_usd": 0.25, "unsettled": 1, "unsettled_usd": 0.01}}
    run = {"name": "adapt-run", "date": "2026-12-01", "seed": 3, "config_sha256": "ef" * 32}
    adapt = {**_adapt(["sim-aurora"]), "usage": usage, "errors": {"adapt.answer: refusal": 5}}
    ja = {**_judge_audit(), "usage": usage, "errors": {}, "run": {**run, "name": "audit-run"}}
    page = render_report({"adapt": {**adapt, "run": run}, "judge_audit": ja})
    text = _text(page)
    for anchor in ("adapt-usage", "adapt-errors", "judge-audit-usage", "judge-audit-errors"):
        assert f'id="{anchor}"' in page and f'href="#{anchor}"' in page, anchor
    assert "Usage and cost — Adapt" in text and "Usage and cost — Judge audit" in text
    assert "adapt.answer: refusal 5" in text and "No errors recorded." in text
    assert "1 (≤ $0.0100)" in text  # an unsettled call shows the most it can have cost
    # The page's facts are the first section's; another method's own facts are shown with it.
    assert "<title>memearena report — adapt-run</title>" in page
    assert "ef" * 32 in text and 'id="judge-audit-run"' in page and "audit-run" in text
    assert 'id="adapt-run"' not in page  # the same facts as the page's: said once


def test_a_capped_or_stopped_method_section_shows_a_banner() -> None:
    capped = {
        "complete": False,
        "state": "capped",
        "problems": ["spend cap reached"],
        "spent_usd": 0.5,
        "max_cost": 0.5,
    }
    page = render_report(
        {"adapt": {**_adapt(["m"]), "status": capped}, "judge_audit": _judge_audit()}
    )
    text = _text(page)
    assert 'id="adapt-incomplete"' in page and 'id="judge-audit-incomplete"' not in page
    assert "Adapt is CAPPED — the results below are partial" in text
    assert "spent $0.5000 · cap $0.5000" in text
    # Adapt's own ``stopped`` (written by a budget stop) is a banner too, status or not.
    stopped = render_report({"adapt": {**_adapt(["m"]), "stopped": "over budget <b>x</b>"}})
    assert 'id="adapt-incomplete"' in stopped and "&lt;b&gt;x&lt;/b&gt;" in stopped
    ja = render_report({"judge_audit": {**_judge_audit(), "status": {**capped, "state": "x"}}})
    assert 'id="judge-audit-incomplete"' in ja and "Judge audit is CAPPED" in _text(ja)
    done = {**capped, "complete": True, "state": "complete"}
    assert "-incomplete" not in render_report({"judge_audit": {**_judge_audit(), "status": done}})


def test_adapt_says_how_much_of_each_list_it_shows_with_meme_and_repeat() -> None:
    page = render_report({"adapt": _adapt(["sim-aurora", "sim-cirrus"], chains=2)})
    text = _text(page)
    assert "Chains showing 2 of 288, largest score drops first" in text
    assert "Weakness steps showing 20 of 25" in text
    assert "meme demo:m01 · repeat 1" in text  # a chain names its meme and repeat
    rows = re.findall(
        r"<tr><td class=\"text name\">sim-aurora</td><td class=\"text\">Race</td>"
        r"<td class=\"text\">(demo:m\d+)</td><td>(\d)</td>",
        page,
    )
    assert len(rows) == 20 and len(set(rows)) == 20  # no row looks like another
    everything = render_report({"adapt": {**_adapt(["m"], weaknesses=3), "chains_total": 2}})
    assert "Chains all 2" in _text(everything) and "Weakness steps all 3" in _text(everything)


def test_the_win_rate_matrix_is_drawn_in_leaderboard_order(board: dict[str, Any]) -> None:
    names = ["sim-cirrus", "sim-aurora", "sim-borealis"]  # the order the analysis wrote
    rate = {"sim-cirrus": 0.3, "sim-aurora": 0.7, "sim-borealis": 0.5}
    board["arena"]["pairwise"] = {
        "models": names,
        "win_rate": [[None if a == b else 0.5 + (rate[a] - rate[b]) for b in names] for a in names],
        "battles": [[0 if a == b else 10 for b in names] for a in names],
    }
    board["arena"]["win_rates"] = {
        m: {"value": v, "ci_low": v - 0.05, "ci_high": v + 0.05} for m, v in rate.items()
    }
    page = render_report(board)
    assert 'href="#win-rates"' in page
    (matrix,) = [s for s in re.findall(r"<svg.*?</svg>", page, re.DOTALL) if "Pairwise" in s]
    titles = re.findall(r"<title>([^<]*) vs ([^<]*):", matrix)
    assert titles[0] == ("sim-aurora", "sim-borealis")  # best first, as in the leaderboard
    assert "sim-aurora vs sim-cirrus: 90.0% won (10 battles)" in matrix


def test_the_audit_examples_say_they_are_a_sample_and_where_the_rest_is() -> None:
    ex = {"item": "demo:1", "unbiased": {"query": "q"}, "biased": {"query": "q2"}, "scores": {}}
    section = {
        **_judge_audit(),
        "examples": {"texture_insertion": [ex, ex], "text_dominance": [ex]},
    }
    text = _text(render_report({"judge_audit": section}))
    assert "3 example(s) of 2 bias type(s), at most 2 per type" in text
    assert "judge_audit_scores.jsonl" in text


def test_the_overall_leaderboard_shows_each_win_rate_with_its_interval(
    board: dict[str, Any],
) -> None:
    import io

    from rich.console import Console

    from memearena.methods.arena.view import print_arena_summary

    rows = board["arena"]["overall"]
    board["arena"]["win_rates"] = {
        r["model"]: {"value": r["win_rate"], "ci_low": r["win_rate"] - 0.038, "ci_high": 0.6875}
        for r in rows
    }
    text = _text(render_report(board))
    first = rows[0]
    assert first["win_rate"] == 0.65
    assert "65.0% (61.2–68.8)" in text
    assert "online Elo, one pass in battle order, for comparison only" in text
    out = io.StringIO()
    print_arena_summary(Console(file=out, width=80), board)
    printed = out.getvalue()
    assert "65.0 (61–69)" in printed
    assert "…" not in printed.split("\n\n")[0]
    # A board without the intervals (an older run) shows the bare rate, as before.
    del board["arena"]["win_rates"]
    assert f"{100 * first['win_rate']:.1f}% (" not in _text(render_report(board))


def test_adapt_shows_the_original_image_figure_the_refusal_rate_and_which_image_each_used() -> None:
    sec = _adapt(["sim-aurora", "sim-cirrus"])
    sec["models"][0].update(
        refusal_rate=0.05,
        refusal_rate_ci=[0.01, 0.15],
        original_image={
            "image": "original image",
            "scored": 54,
            "refused": 1,
            "avg_score": 7.5,
            "avg_score_ci": [7.0, 8.0],
            "failure_rate": 0.1,
            "failure_rate_ci": [0.02, 0.3],
            "score_gap": -0.25,
            "score_gap_ci": [-0.5, 0.1],
        },
    )
    sec["images"] = {"scores": "erased <b>image</b>", "original_image": "own <i>image</i>"}
    sec["refusals_note"] = "refusals <script>x</script> scored"
    page = render_report({"adapt": sec})
    text = _text(page)
    assert "<b>image" not in page and "<i>image" not in page and "<script>x" not in page
    assert "Image: erased &lt;b&gt;image&lt;/b&gt;." in text
    assert "Refusals: refusals &lt;script&gt;x&lt;/script&gt; scored." in text
    assert "own &lt;i&gt;image&lt;/i&gt;." in text
    assert "30% [20%, 40%] 5% [1%, 15%]" in text  # the refusal rate beside the failure rate
    assert (
        "sim-aurora original image 54 1 7.50 [7.00, 8.00] 10% [2%, 30%] -0.25 [-0.50, 0.10]" in text
    )
    assert 'id="adapt-original"' in page and "sim-cirrus original image" not in text
    # Not measured: no "original image" table, and no refusal rate made up.
    plain = render_report({"adapt": _adapt(["m"])})
    assert 'id="adapt-original"' not in plain
    assert "30% [20%, 40%] — m" in _text(plain)


def test_the_audit_leads_with_the_figure_it_is_ordered_by_and_shows_adjusted_p() -> None:
    section = _judge_audit()
    row = section["leaderboard"][0]
    row["flag_p_adjusted"] = {"position": 0.00123}
    row["p_prefer_padded"] = {"value": 0.9, "ci_low": 0.8, "ci_high": 0.95}
    row["p_prefer_concise"] = {"value": 0.05, "ci_low": 0.01, "ci_high": 0.1}
    section["order_by"] = "overall"
    section["flagging"] = {"method": "Holm <i>x</i>", "family_wise_alpha": 0.05, "min_pairs": 10}
    page = render_report({"judge_audit": section})
    head = page[page.index('id="judge-audit-leaderboard"') :]
    assert "<th>Trust</th>" not in head.split("</thead>")[0]  # no composite: no column
    assert "shortfalls" not in page.split('id="judge-audit-leaderboard"')[0]
    assert "Ordered by <strong>Overall</strong>" in page
    assert "position (adjusted p 0.00123)" in page
    assert "family-wise error rate of 0.05 per judge (Holm &lt;i&gt;x&lt;/i&gt;)" in page
    assert "fewer than 10 pairs per type never flags" in page
    assert "<th>P(padded)</th><th>P(concise)</th>" in page
    assert '<td data-label="P(concise)">0.05 [0.01, 0.10]</td>' in page
    # Ordered by the composite: its column comes first and carries its shortfalls.
    section["order_by"] = "composite"
    row["trust"] = {"value": 0.7, "ci_low": 0.6, "ci_high": 0.8, "components": {"bd_bc": 0.2}}
    page = render_report({"judge_audit": section})
    assert "<th>Trust</th><th>Overall</th>" in page and "bd/bc 0.20" in page
