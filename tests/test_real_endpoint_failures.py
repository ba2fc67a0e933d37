"""The real-endpoint path, failure by failure, against the simulated server on loopback: spend
caps that resume, failures that are loud (exit codes, named models), endpoints that fail fast,
and ``sim-serve`` behaving like OpenAI for a model it does not serve."""

from __future__ import annotations

import asyncio
import json
import socket
import sqlite3
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from memearena.cli import app
from memearena.config import OpenAIModelConfig
from memearena.errors import EndpointError
from memearena.models import Message, ModelPool
from memearena.sim.catalogue import demo_models
from memearena.sim.serve import demo_world
from memearena.sim.server import BackgroundServer

runner = CliRunner()

TARGETS = ["sim-aurora", "sim-cirrus"]
JUDGE = "sim-judge-falcon"
PRICE = {"input": 100.0, "output": 100.0}  # $100 per 1M tokens: a call costs a few cents


@pytest.fixture(scope="module")
def server() -> Iterator[BackgroundServer]:
    """The demo world served like ``sim-serve``: only its own models (others get a 404)."""
    with BackgroundServer(demo_world(seed=0), models=list(demo_models())) as srv:
        yield srv


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _model(base_url: str, name: str, **kw: Any) -> dict[str, Any]:
    return {
        "provider": "openai",
        "base_url": base_url,
        "model": name,
        "price": PRICE,
        "max_concurrency": 2,
        "timeout": 5,
        **kw,
    }


def _config(tmp_path: Path, base_url: str, **overrides: dict[str, Any]) -> Path:
    models = {n: _model(base_url, n) for n in [*TARGETS, JUDGE]}
    for name, extra in overrides.items():
        models[name] = {**models[name], **extra}
    cfg = {
        "run": "real",
        "seed": 0,
        "models": models,
        "data": [{"format": "demo", "limit": 2}],
        "arena": {
            "targets": TARGETS,
            "judges": [JUDGE],
            "context_model": JUDGE,
            "contexts": 1,
            "fusion_rounds": 1,
            "bootstrap": 10,
        },
    }
    path = tmp_path / "real.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return path


def _arena(config: Path, out: Path, *extra: str) -> Any:
    return runner.invoke(
        app,
        ["arena", str(config), "--out", str(out), "--no-progress", *extra],
        catch_exceptions=False,
    )


def _rows(db: Path) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(db)
    try:
        return con.execute(
            "SELECT request_hash, model, status, cost_usd, error, error_kind FROM calls"
        ).fetchall()
    finally:
        con.close()


def _no_traceback(output: str) -> None:
    assert "Traceback" not in output
    assert "client has been closed" not in output
    assert "unhandled exception" not in output


def test_a_capped_run_stops_with_exit_3_and_a_higher_cap_finishes_paying_nothing_twice(
    server: BackgroundServer, tmp_path: Path
) -> None:
    config = _config(tmp_path, server.base_url)
    out = tmp_path / "runs"
    db = out / "real" / "run.db"

    first = _arena(config, out, "--max-cost", "0.3")
    _no_traceback(first.output)
    assert first.exit_code == 3, first.output
    stop_lines = [ln for ln in first.output.splitlines() if "spend cap reached" in ln]
    assert len(stop_lines) == 1 and "higher --max-cost" in stop_lines[0]
    rows = _rows(db)
    paid_first = [r for r in rows if r[2] in ("ok", "refusal")]
    assert paid_first, "the capped run made progress"
    assert sum(r[3] for r in rows) <= 0.3
    # Calls never sent leave no row: no errors, no budget rows, nothing left unsettled.
    assert Counter(r[2] for r in rows) - Counter({"ok": 10**6, "refusal": 10**6}) == Counter()

    # The same cap again: the cap is on the run's total, so this only goes up to it.
    again = _arena(config, out, "--max-cost", "0.3")
    _no_traceback(again.output)
    assert again.exit_code == 3
    rows = _rows(db)
    assert sum(r[3] for r in rows) <= 0.3
    paid_first = [r for r in rows if r[2] in ("ok", "refusal")]

    requests_before = server.stats()["completed"]
    final = _arena(config, out, "--max-cost", "100")
    _no_traceback(final.output)
    assert final.exit_code == 0, final.output
    rows = _rows(db)
    paid = [r for r in rows if r[2] in ("ok", "refusal")]
    # Nothing paid twice: every paid request is distinct, and those of the first run were reused.
    assert len({r[0] for r in paid}) == len(paid)
    assert {r[0] for r in paid_first} <= {r[0] for r in paid}
    assert server.stats()["completed"] - requests_before == len(paid) - len(paid_first)
    board = json.loads((out / "real" / "leaderboard.json").read_text())
    status = board["status"]
    assert status["complete"] is True and status["problems"] == []
    assert status["max_cost"] == 100
    assert status["spent_usd"] == pytest.approx(sum(r[3] for r in rows), rel=1e-6)
    assert status["spent_upper_bound_usd"] >= status["spent_usd"]
    assert "complete:" in final.output


def test_a_missing_key_is_found_before_any_call_and_the_run_exits_2(
    server: BackgroundServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MEMEARENA_TEST_NO_SUCH_KEY", raising=False)
    config = _config(
        tmp_path, server.base_url, **{"sim-cirrus": {"api_key_env": "MEMEARENA_TEST_NO_SUCH_KEY"}}
    )
    dry = runner.invoke(app, ["arena", str(config), "--dry-run"])
    assert dry.exit_code == 0
    assert "MEMEARENA_TEST_NO_SUCH_KEY" in dry.output and "sim-cirrus" in dry.output

    before = server.stats()["completed"]
    result = _arena(config, tmp_path / "runs")
    _no_traceback(result.output)
    assert result.exit_code == 2, result.output
    line = result.output.strip()
    assert "\n" not in line and "sim-cirrus" in line and "MEMEARENA_TEST_NO_SUCH_KEY" in line
    # Checked before any call: no other model was paid for a run that could not be complete.
    assert server.stats()["completed"] == before
    # Refused before any call: the run folder it made is gone, no half-made run left behind.
    assert not (tmp_path / "runs" / "real").exists()

    check = runner.invoke(app, ["models", "check", str(config)])
    assert check.exit_code == 1
    assert "MEMEARENA_TEST_NO_SUCH_KEY" in check.output


def test_a_dead_judge_endpoint_fails_fast_names_the_model_and_exits_1(
    server: BackgroundServer, tmp_path: Path
) -> None:
    dead = f"http://127.0.0.1:{_closed_port()}/v1"
    config = _config(tmp_path, server.base_url, **{JUDGE: {"base_url": dead, "max_retries": 6}})
    t0 = time.monotonic()
    result = _arena(config, tmp_path / "runs")
    elapsed = time.monotonic() - t0
    _no_traceback(result.output)
    assert result.exit_code == 1, result.output
    assert JUDGE in result.output and "connection refused" in result.output
    assert elapsed < 20  # no backoff: the closed port is not retried
    rows = _rows(tmp_path / "runs" / "real" / "run.db")
    # Only the calls already in flight (max_concurrency 2) were sent; nothing after the first
    # refusal is sent to a dead endpoint.
    assert 1 <= len(rows) <= 2
    assert {(r[1], r[5]) for r in rows} == {(JUDGE, "connection_refused")}
    # The context model is the dead judge: no tasks, so no battles: the run says so.
    assert "no contexts" in result.output and "no battles" in result.output
    print(result.output)


def test_a_closed_port_fails_in_under_2_seconds_naming_endpoint_and_model() -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    cfg = OpenAIModelConfig(provider="openai", model="gpt-x", base_url=url, max_retries=6)
    pool = ModelPool({"m": cfg})

    async def go() -> None:
        try:
            await pool.complete("m", [Message.text("user", "hi")], role="t")
        finally:
            await pool.aclose()

    t0 = time.monotonic()
    with pytest.raises(EndpointError) as e:
        asyncio.run(go())
    assert time.monotonic() - t0 < 2.0
    assert "connection refused" in str(e.value) and url in str(e.value) and "gpt-x" in str(e.value)
    assert e.value.kind == "connection_refused"


def test_sim_serve_answers_404_for_a_model_it_does_not_serve(
    server: BackgroundServer, tmp_path: Path
) -> None:
    req = urllib.request.Request(
        f"{server.base_url}/chat/completions",
        data=json.dumps(
            {"model": "sim-auroar", "messages": [{"role": "user", "content": "hi"}]}
        ).encode(),
        headers={"Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=5)
    assert e.value.code == 404
    body = json.loads(e.value.read())
    assert body["error"]["code"] == "model_not_found" and "sim-auroar" in body["error"]["message"]
    listed = json.loads(urllib.request.urlopen(f"{server.base_url}/models", timeout=5).read())
    assert "sim-auroar" not in [m["id"] for m in listed["data"]]

    config = _config(tmp_path, server.base_url, **{"sim-cirrus": {"model": "sim-cirus"}})
    requests_before = server.stats()["requests"]
    check = runner.invoke(app, ["models", "check", str(config)])
    assert check.exit_code == 1
    assert "HTTP 404" in check.output and "sim-cirus" in check.output
    assert server.stats()["requests"] - requests_before == 3  # the 404 is not retried


def test_sim_serve_bad_fail_rate_and_port_in_use_are_one_line_errors() -> None:
    bad = runner.invoke(app, ["sim-serve", "--fail-rate", "2"])
    assert bad.exit_code == 2
    assert "--fail-rate" in bad.output and len(bad.output.strip().splitlines()) == 1
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        busy = runner.invoke(app, ["sim-serve", "--port", str(port)])
    assert busy.exit_code == 2
    assert f"127.0.0.1:{port}" in busy.output and len(busy.output.strip().splitlines()) == 1
