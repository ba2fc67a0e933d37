"""The overview's usage by model (calls, tokens, cost, latency, failures) and the calls filters'
values are read from the record the Arena stores with its section when that record was summed
from the calls on record now; a run written to since (a stale record), a damaged record and a
run written before such records scan the calls instead, and every page shows the same either
way."""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

import memearena.view.queries as queries
from memearena.config import DatasetConfig, RunConfig, SimModelConfig
from memearena.engine.lifecycle import run_method
from memearena.methods.arena.config import ArenaConfig
from memearena.view import RunReader
from memearena.view.app import make_app
from memearena.view.usage import USAGE_KEY, usage_record

PAGES = ("/", "/r/0/", "/r/0/calls", "/r/0/calls?role=arena.judge", "/r/0/battles", "/r/0/memes")


def _config() -> RunConfig:
    sim = {
        "t-a": SimModelConfig(provider="sim", skill=0.9, family="a"),
        "t-b": SimModelConfig(provider="sim", skill=0.4, family="b", refusal_rate=0.3),
        "j-one": SimModelConfig(provider="sim", skill=0.85, family="one", format_error_rate=0.2),
        "j-two": SimModelConfig(provider="sim", skill=0.8, family="two"),
    }
    return RunConfig(
        run="r",
        seed=0,
        models=sim,
        data=[DatasetConfig(format="demo", limit=2)],
        arena=ArenaConfig(
            targets=["t-a", "t-b"],
            judges=["j-one", "j-two"],
            context_model="j-one",
            fusion_rounds=2,
            bootstrap=10,
        ),
    )


@pytest.fixture(scope="module")
def arena_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An Arena-only run of 2 memes (its record matches its calls)."""
    run = tmp_path_factory.mktemp("stored-usage") / "a" / "run"
    run_method("arena", _config(), run, show_progress=False)
    return run


def _copy(run: Path, tmp_path: Path, name: str) -> Path:
    dst = tmp_path / name / "run"  # the same run name: pages carry it
    shutil.copytree(run, dst, ignore=shutil.ignore_patterns("run.lock", "cache.sqlite*"))
    return dst


def _board(run: Path) -> dict[str, Any]:
    return dict(json.loads((run / "leaderboard.json").read_text(encoding="utf-8")))


def _write_board(run: Path, board: dict[str, Any]) -> None:
    (run / "leaderboard.json").write_text(json.dumps(board, indent=2), encoding="utf-8")


def _add_calls(run: Path) -> None:
    """Two calls written after the Arena finished: a failed one of a new model and role."""
    db = sqlite3.connect(run / "run.db")
    cols = [r[1] for r in db.execute("PRAGMA table_info(calls)") if r[1] != "id"]
    for model, status, kind in (("late-model", "error", "timeout"), ("late-model", "ok", None)):
        db.execute(
            f"INSERT INTO calls ({', '.join(cols)}) SELECT {', '.join(cols)} FROM calls"
            " ORDER BY id LIMIT 1"
        )
        db.execute(
            "UPDATE calls SET model=?, role='late.role', status=?, error_kind=?, cost_usd=0.125"
            " WHERE id=(SELECT MAX(id) FROM calls)",
            (model, status, kind),
        )
    db.commit()
    db.close()


def _scanned(run: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, Any], Any]:
    """The overview and filter values as a scan of the calls gives them."""
    with monkeypatch.context() as m:
        m.setattr(RunReader, "stored_usage", lambda self: None)
        r = RunReader(run)
        try:
            return r.overview(), r.filter_values()
        finally:
            r.close()


def _read(run: Path) -> tuple[dict[str, Any] | None, dict[str, Any], Any]:
    r = RunReader(run)
    try:
        return r.stored_usage(), r.overview(), r.filter_values()
    finally:
        r.close()


def _pages(run: Path, urls: tuple[str, ...] = PAGES) -> dict[str, str]:
    async def go() -> dict[str, str]:
        out = {}
        async with TestClient(TestServer(make_app(run.parent, warm=False))) as client:
            for url in urls:
                resp = await client.get(url)
                assert resp.status == 200, url
                out[url] = await resp.text()
        return out

    return asyncio.run(go())


def _no_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: Any) -> Any:
        raise AssertionError("the calls were scanned")

    monkeypatch.setattr(queries, "usage", refuse)
    monkeypatch.setattr(queries, "call_values", refuse)


def test_an_arena_run_stores_its_calls_usage_and_the_viewer_reads_it_without_a_scan(
    arena_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rec = _board(arena_run)["arena"][USAGE_KEY]
    db = sqlite3.connect(f"file:{arena_run / 'run.db'}?mode=ro", uri=True)
    count, last = db.execute("SELECT COUNT(*), MAX(id) FROM calls").fetchone()
    roles = [r for (r,) in db.execute("SELECT DISTINCT role FROM calls ORDER BY 1")]
    (tokens,) = db.execute("SELECT SUM(input_tokens) FROM calls").fetchone()
    db.close()
    assert rec["calls"] == [count, last] and count > 20
    assert sum(m["calls"] for m in rec["models"]) == count
    assert rec["roles"] == roles and "arena.judge" in roles
    assert (
        [m["model"] for m in rec["models"]]
        == rec["call_models"]
        == ["j-one", "j-two", "t-a", "t-b"]
    )
    assert sum(m["input_tokens"] for m in rec["models"]) == tokens > 0
    scanned = _scanned(arena_run, monkeypatch)
    _no_scan(monkeypatch)
    stored, overview, filters = _read(arena_run)
    assert stored == rec
    assert (overview, filters) == scanned
    assert overview["totals"]["calls"] == count


def test_a_stale_record_is_not_used_the_calls_are_scanned(
    arena_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _copy(arena_run, tmp_path, "stale")
    _add_calls(run)  # written after the record: its stamp no longer matches
    stored, overview, filters = _read(run)
    assert stored is None
    late = [m for m in overview["models"] if m["model"] == "late-model"]
    assert late and late[0]["calls"] == 2 and late[0]["errors"] == 1
    assert overview["call_errors"] == [{"kind": "timeout", "count": 1}]
    assert "late.role" in filters["roles"] and "late-model" in filters["call_models"]
    assert (overview, filters) == _scanned(run, monkeypatch)
    # A record of these calls is read; a call removed since (one row fewer, the same newest
    # id) makes it stale again.
    board = _board(run)
    r = RunReader(run)
    try:
        board["arena"][USAGE_KEY] = usage_record(r.q)
    finally:
        r.close()
    _write_board(run, board)
    assert _read(run)[0] is not None
    db = sqlite3.connect(run / "run.db")
    db.execute("DELETE FROM calls WHERE id=(SELECT MIN(id) FROM calls)")
    db.commit()
    db.close()
    assert _read(run)[0] is None
    assert _read(run)[1] == _scanned(run, monkeypatch)[0]


def test_a_record_summed_from_these_calls_shows_what_a_scan_shows(
    arena_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Failed calls by kind included: the record made as the Arena makes it, over calls that
    hold failures, gives the scan's overview and pages."""
    run = _copy(arena_run, tmp_path, "errors")
    _add_calls(run)
    scanned_pages = _pages(run)
    scanned = _scanned(run, monkeypatch)
    board = _board(run)
    r = RunReader(run)
    try:
        board["arena"][USAGE_KEY] = usage_record(r.q)
    finally:
        r.close()
    _write_board(run, board)
    with monkeypatch.context() as m:
        _no_scan(m)
        stored, overview, filters = _read(run)
        assert stored is not None and stored["call_errors"] == [{"kind": "timeout", "count": 1}]
        assert (overview, filters) == scanned
        assert _pages(run) == scanned_pages


def test_a_run_written_before_the_record_or_a_damaged_one_is_scanned(
    arena_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pages = _pages(arena_run)
    older = _copy(arena_run, tmp_path, "older")
    board = _board(older)
    rec = board["arena"].pop(USAGE_KEY)
    _write_board(older, board)
    assert _read(older)[0] is None
    assert _pages(older) == pages  # the same pages, from a scan
    with monkeypatch.context() as m:  # the Arena's lists offer its own values: no scan
        _no_scan(m)
        lists = ("/r/0/battles?model=t-a", "/r/0/memes?q=a")
        assert _pages(older, lists) == _pages(arena_run, lists)
    damaged: list[dict[str, Any]] = [
        {**rec, "calls": [str(rec["calls"][0]), rec["calls"][1]]},
        {**rec, "calls": [float(x) for x in rec["calls"]]},
        {**rec, "models": [{**rec["models"][0], "calls": "many"}, *rec["models"][1:]]},
        {**rec, "models": [{k: v for k, v in rec["models"][0].items() if k != "cost_usd"}]},
        {**rec, "models": [{**rec["models"][0], "model": ["<b>not a name</b>"]}]},
        {**rec, "models": [{**rec["models"][0], "latency_s": None}]},
        {**rec, "call_errors": [{"kind": "timeout", "count": True}]},
        {**rec, "roles": "arena.judge"},
        {k: v for k, v in rec.items() if k != "call_models"},
    ]
    for bad in damaged:
        board["arena"][USAGE_KEY] = bad
        _write_board(older, board)
        stored, overview, filters = _read(older)
        assert stored is None, bad
        assert (overview, filters) == _scanned(older, monkeypatch)
