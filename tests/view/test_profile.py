"""One profile per model across the demo's methods, in the console (``memearena profile``),
the notebook (``RunResults.profile()``), the viewer (``/r/N/profile``) and the report: every
model appears under every method it took part in, as that method's leaderboard names it, and
the methods' agreement comes with an interval over the unit both sampled."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from aiohttp.test_utils import TestClient, TestServer
from typer.testing import CliRunner

from memearena.engine.profile import build_profile
from memearena.view import make_app


def _taking_part(board: dict[str, Any]) -> set[tuple[str, str]]:
    """(model, method title) for every model each method's section names."""
    got = {(r["model"], "Arena") for r in board["arena"]["overall"]}
    got |= {(r["judge"], "Arena (as judge)") for r in board["arena"]["judges"]}
    got |= {(r["model"], "Adapt") for r in board["adapt"]["models"]}
    got |= {(r["judge"], "Judge audit") for r in board["judge_audit"]["leaderboard"]}
    return got


@pytest.fixture(scope="module")
def profile(demo_run: Path) -> dict[str, Any]:
    return build_profile(demo_run, bootstrap=300)


def test_profile_command_shows_every_model_in_every_method_and_the_agreement(
    demo_run: Path,
) -> None:
    from memearena.cli.main import app

    result = CliRunner().invoke(app, ["profile", str(demo_run), "--json", "--bootstrap", "300"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    board = json.loads((demo_run / "leaderboard.json").read_text(encoding="utf-8"))
    shown = {(m["model"], p["title"]) for m in data["models"] for p in m["parts"]}
    assert shown == _taking_part(board)
    arena_adapt = next(r for r in data["agreement"] if (r["a"], r["b"]) == ("arena", "adapt"))
    rho = arena_adapt["spearman"]
    assert rho["ci_low"] <= rho["value"] <= rho["ci_high"]
    assert arena_adapt["unit"] == "meme" and arena_adapt["units"] >= 5
    shared = {r["model"] for r in board["adapt"]["models"]}
    assert set(arena_adapt["models"]) == shared & {r["model"] for r in board["arena"]["overall"]}
    judges = next(r for r in data["agreement"] if r["role"] == "judge")
    assert judges["unit"] == "model" and judges["spearman"] is not None

    tables = CliRunner().invoke(app, ["profile", str(demo_run), "--bootstrap", "300"])
    assert tables.exit_code == 0, tables.output
    for model, _ in _taking_part(board):
        assert model in tables.output
    assert "Agreement between the methods" in tables.output
    assert "weakest category" in tables.output and "flagged" in tables.output


def test_a_directory_without_results_is_one_line(tmp_path: Path) -> None:
    from memearena.cli.main import app

    result = CliRunner().invoke(app, ["profile", str(tmp_path)])
    assert result.exit_code == 2 and "no results" in result.output
    assert "Traceback" not in result.output


def test_each_figure_carries_an_interval_and_adapts_weakest_category(
    profile: dict[str, Any], demo_run: Path
) -> None:
    board = json.loads((demo_run / "leaderboard.json").read_text(encoding="utf-8"))
    for entry in profile["models"]:
        for part in entry["parts"]:
            for f in part["figures"]:
                assert f["ci_low"] is not None and f["ci_high"] is not None, (entry, f)
    for row in board["adapt"]["models"]:
        part = next(
            p
            for m in profile["models"]
            if m["model"] == row["model"]
            for p in m["parts"]
            if p["method"] == "adapt"
        )
        rates = {
            cat: r["failure_rate"]
            for cat, rows in board["adapt"]["by_category"].items()
            for r in rows
            if r["model"] == row["model"]
        }
        worst = max(rates.values())
        if worst > 0:
            named = [n for n in part["notes"] if n.startswith("weakest category: ")]
            assert len(named) == 1
            assert rates[named[0].split(": ")[1].split(",")[0]] == worst


def test_the_scores_recomputed_on_every_meme_are_the_published_ones(demo_run: Path) -> None:
    from memearena.methods.adapt.result import AdaptResult
    from memearena.methods.arena.result import ArenaResult

    for result in (ArenaResult(demo_run), AdaptResult(demo_run)):
        (source,) = [s for s in result.score_sources() if s.role == "target"]
        assert source.resample is not None
        again = source.resample(source.units, np.ones((1, len(source.units))))
        names = list(source.values)
        published = [source.values[m] for m in names]
        recomputed = [float(again[m][0]) for m in names]
        if result.method == "adapt":
            assert recomputed == pytest.approx(published)
        else:  # another scale, the same order
            assert np.argsort(recomputed).tolist() == np.argsort(published).tolist()


def test_the_notebook_gives_the_same_profile(demo_run: Path, profile: dict[str, Any]) -> None:
    from memearena.api import RunResults, open_run

    results = open_run(demo_run)
    assert isinstance(results, RunResults)
    assert results.profile(bootstrap=300) == profile


def test_the_viewer_page_and_the_report_show_the_profiles(
    demo_run: Path, profile: dict[str, Any]
) -> None:
    async def go() -> tuple[int, str, str]:
        async with TestClient(TestServer(make_app(demo_run))) as client:
            page = await client.get("/r/0/profile")
            overview = await client.get("/r/0/")
            return page.status, await page.text(), await overview.text()

    status, body, overview = asyncio.run(go())
    assert status == 200, body[:500]
    assert 'href="/r/0/profile"' in overview  # the navigation of a run of several methods
    for entry in profile["models"]:
        assert f"<h3>{entry['model']}</h3>" in body
    assert 'id="agreement-table"' in body and "memes" in body
    report = (demo_run / "report.html").read_text(encoding="utf-8")
    assert 'id="profile-agreement"' in report
    assert all(entry["model"] in report for entry in profile["models"])


def test_hostile_model_names_reach_the_profile_inert(demo_run: Path, tmp_path: Path) -> None:
    from memearena.cli.main import app

    from .conftest import HOSTILE_MODEL, make_hostile

    run = make_hostile(demo_run, tmp_path / "hostile", "http://127.0.0.1:9")
    model = HOSTILE_MODEL.replace("__BEACON__", "http://127.0.0.1:9")

    async def go() -> str:
        async with TestClient(TestServer(make_app(run))) as client:
            resp = await client.get("/r/0/profile")
            assert resp.status == 200
            return await resp.text()

    body = asyncio.run(go())
    assert "<script" not in body.lower()
    assert "sim-aurora&lt;script&gt;" in body  # shown, as text
    tables = CliRunner().invoke(app, ["profile", str(run), "--bootstrap", "50"])
    assert tables.exit_code == 0, tables.output
    assert "sim-aurora<script>" in tables.output.replace("\n", "")  # literal, not markup
    data = json.loads(
        CliRunner().invoke(app, ["profile", str(run), "--json", "--bootstrap", "50"]).output
    )
    assert model in {m["model"] for m in data["models"]}
