"""A fourth method is its package plus one registry line: ``echo_method/`` (beside this file:
config section, prompt templates, one stage calling a simulated model, an analysis, a part of
the simulated world, a report partial, a viewer page, an export table and a label queue, each a
file of its own package) is registered by the single ``register_method`` call below, and then
runs, resumes, dry-runs, reports, shows in the viewer with a page of its own, opens with
``open_run``, has its CLI command and notebook twins, exports its table and offers its queue to
label (with its agreement figure), with no other file changed."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memearena.config import parse_config
from memearena.engine.lifecycle import plan_method, run_method
from memearena.engine.registry import method_names, register_method, unregister_method
from memearena.errors import ConfigError

MEMES = 4


@pytest.fixture
def echo() -> Iterator[None]:
    register_method("echo", "echo_method", "Echo", "EchoConfig")  # the one registry line
    try:
        yield
    finally:
        unregister_method("echo")


def _raw() -> dict[str, Any]:
    return {
        "run": "echo-run",
        "models": {"sim-parrot": {"provider": "sim", "skill": 0.9}},
        "data": [{"format": "demo", "limit": MEMES}],
        "echo": {"model": "sim-parrot"},
    }


def test_its_config_section_is_validated_by_its_own_model(echo: None) -> None:
    cfg = parse_config(_raw())
    assert cfg.echo.model == "sim-parrot" and "echo" in method_names()
    bad = _raw() | {"echo": {"model": "nobody"}}
    with pytest.raises(ConfigError, match=r"echo\.model: model 'nobody' is not defined"):
        parse_config(bad)
    with pytest.raises(ConfigError, match=r"echo\.modle \(did you mean 'model'\?\)"):
        parse_config(_raw() | {"echo": {"modle": "sim-parrot"}})
    from memearena.config.doc import render_config_doc

    doc = render_config_doc()
    assert "## EchoConfig" in doc and "| `echo` | [EchoConfig](#echoconfig)" in doc


def test_it_runs_resumes_dry_runs_reports_and_opens(echo: None, tmp_path: Path) -> None:
    pytest.importorskip("pandas")
    import memearena

    cfg = parse_config(_raw())
    planned = plan_method("echo", cfg)
    assert planned.calls == MEMES  # the dry run counts exactly what a run calls

    first = run_method("echo", cfg, tmp_path / "run", show_progress=False)
    assert first.exit_code == 0 and first.new_calls == MEMES
    assert first.stages["echo.restate"].new == MEMES
    section = first.leaderboard["echo"]
    row = section["leaderboard"][0]
    assert row["value"] == 1.0 and 0 < row["ci_low"] < 1 and row["ci_high"] == pytest.approx(1)
    # Its report partial is a file of its own package, rendered into the run's report.
    from memearena.report.html import SECTIONS

    (own,) = [sec for sec in SECTIONS if sec.key == "echo"]
    assert own.folder is not None and (own.folder / own.template).is_file()
    assert own.folder.parent == Path(__file__).parent / "echo_method"
    snap = (tmp_path / "run" / "report.html").read_text(encoding="utf-8")
    assert '<section id="echo"><h2>Echo</h2>\n<div class="scroll"><table>' in snap
    assert re.search(r"<td>sim-parrot</td><td>100% \[\d+%, 100%\]</td>", snap)

    again = run_method("echo", cfg, tmp_path / "run", show_progress=False)
    assert again.exit_code == 0 and again.new_calls == 0
    assert again.stages["echo.restate"].reused == MEMES

    opened = memearena.open_run(tmp_path / "run")
    assert opened.name == "echo" and type(opened).__name__ == "MethodResult"
    board = opened.leaderboard()
    assert list(board["model"]) == ["sim-parrot"]
    assert (board["value"].iloc[0], board["figure"].iloc[0]) == (1.0, "quoted")
    calls = opened.calls()
    assert len(calls) == MEMES and set(calls["role"]) == {"echo.restate"}
    replies = opened.replies()
    assert replies["response"].str.startswith("The meme says:").all()
    requests = opened.requests()
    assert set(requests["key"]) == set(calls["request_hash"])
    assert any("Restate the text of this meme" in str(m) for m in requests["messages"])

    # Its notebook twins come from the registry too.
    again_api = memearena.api.run_echo(cfg, tmp_path / "run", show_progress=False)
    assert again_api.new_calls == 0 and again_api.name == "echo"
    assert memearena.api.plan_echo(cfg).calls == MEMES


def test_its_prompt_hashes_cover_its_own_templates(echo: None) -> None:
    from memearena.prompts import template_hashes

    assert "echo/restate.j2" in template_hashes()


def test_its_cli_command_runs_and_dry_runs(echo: None, tmp_path: Path) -> None:
    import yaml

    from memearena.cli import app

    config = tmp_path / "echo.yaml"
    config.write_text(yaml.safe_dump(_raw()), encoding="utf-8")
    runner = CliRunner()
    plan = runner.invoke(app, ["run", "echo", str(config), "--dry-run"])
    assert plan.exit_code == 0, plan.output
    assert "sim-parrot" in plan.output
    done = runner.invoke(app, ["run", "echo", str(config), "--out", str(tmp_path / "runs")])
    assert done.exit_code == 0, done.output
    assert "quoted 100% of 4 memes" in done.output
    unknown = runner.invoke(app, ["run", "nosuch", str(config)])
    assert unknown.exit_code == 2 and "unknown method 'nosuch'" in unknown.output


def test_it_shows_in_the_viewer_with_a_page_of_its_own(echo: None, tmp_path: Path) -> None:
    from aiohttp.test_utils import TestClient, TestServer

    from memearena.view import make_app

    cfg = parse_config(_raw())
    run_method("echo", cfg, tmp_path / "run", show_progress=False)

    async def go() -> tuple[str, str, str, str]:
        async with TestClient(TestServer(make_app(tmp_path / "run", warm=False))) as client:
            overview = await (await client.get("/r/0/")).text()
            own = await client.get("/r/0/echo")
            assert own.status == 200
            page = await own.text()
            calls = await (await client.get("/r/0/calls")).text()
            first = re.search(r'class="echo-call" href="(/r/0/call/[^"]+)"', page)
            assert first is not None, page[:2000]
            call = await client.get(first.group(1))
            assert call.status == 200
            return overview, page, calls, await call.text()

    overview, page, calls, call = asyncio.run(go())
    # The overview and the navigation link its page, which its package's template renders.
    assert '<a href="/r/0/echo">echo</a>' in overview and '<a href="/r/0/echo">Echo</a>' in page
    assert re.search(r'<td class="name">sim-parrot</td><td class="num">100% \[\d+%, 100%\]', page)
    assert page.count('class="echo-call"') == MEMES and "The meme says:" in page
    assert calls.count("echo.restate") >= MEMES
    # A call of its role links back to its page.
    assert '<a class="back" href="/r/0/echo#restated">its restatement</a>' in call


def test_it_exports_its_own_table_and_offers_its_own_label_queue(
    echo: None, tmp_path: Path
) -> None:
    from memearena.cli import app
    from memearena.export import export_table, exports_doc, table_rows, tables
    from memearena.labels import agreement, available_queues, queue_items, queue_names
    from memearena.labels.simulated import simulate_labels
    from memearena.sim.annotators import demo_annotators

    run = tmp_path / "run"
    run_method("echo", parse_config(_raw()), run, show_progress=False)

    # Its table: after every built-in one, documented, rows joining to the calls that made them.
    assert list(tables())[-1] == "restatements" and "## `restatements`" in exports_doc()
    cols, rows = table_rows(run, "restatements")
    got = list(rows)
    sent = {r["request_hash"] for r in table_rows(run, "calls")[1]}
    assert cols == ["meme", "text", "request_hash"] and len(got) == MEMES
    assert {r["request_hash"] for r in got} <= sent and len({r["meme"] for r in got}) == MEMES
    assert all(str(r["text"]).startswith("The meme says:") for r in got)
    n, written = export_table(run, "restatements", "csv", tmp_path / "r.csv")
    assert n == MEMES and written is not None
    assert written.read_text(encoding="utf-8").startswith("meme,text,request_hash\n")
    shown = CliRunner().invoke(app, ["export", str(run), "--table", "restatements", "--to", "-"])
    assert shown.exit_code == 0 and shown.output.count('"request_hash"') == MEMES, shown.output

    # Its queue: listed after the built-in ones, labelled by the simulated annotators, with its
    # own agreement figure (an interval over memes).
    assert queue_names()[-1] == "restatements" and "restatements" in available_queues(run)
    items = queue_items(run, "restatements")
    assert len(items) == MEMES and all("meme" not in it.texts for it in items)
    planted = simulate_labels(run, demo_annotators(3), seed=0)
    assert planted.labels == 3 * MEMES and "restatements.faithful" in planted.alpha
    (share,) = agreement(run, n_boot=200).figure("faithful_share", queue="restatements")
    assert share["n"] == MEMES and share["clusters"] == MEMES
    assert share["ci_low"] <= share["value"] <= share["ci_high"]

    # The viewer's labelling pages offer it under its own title, and head its figure with its
    # own words.
    from aiohttp.test_utils import TestClient, TestServer

    from memearena.view import make_app

    async def pages() -> tuple[str, str]:
        app = make_app(run, warm=False, label=True)
        async with TestClient(TestServer(app)) as client:
            home = await (await client.get("/r/0/label")).text()
            figures = await (await client.get("/r/0/label/agreement")).text()
            return home, figures

    home, figures = asyncio.run(pages())
    assert "Echo restatements" in home and "Does the restatement say what the meme says?" in home
    assert "Share of restatements the annotators call faithful" in figures

    # Unregistered, it leaves neither.
    unregister_method("echo")
    assert "restatements" not in tables() and "restatements" not in queue_names()


def test_a_queue_or_table_two_methods_declare_is_refused(echo: None) -> None:
    from memearena.errors import MemearenaError
    from memearena.export import tables
    from memearena.labels import LabelError, queue_names

    register_method("echo_again", "echo_method", "Echo", "EchoConfig")
    try:
        with pytest.raises(LabelError, match="'restatements' is declared by both echo and"):
            queue_names()
        with pytest.raises(MemearenaError, match="'restatements' of echo_again is declared twice"):
            tables()
    finally:
        unregister_method("echo_again")
    assert queue_names()[-1] == "restatements"
