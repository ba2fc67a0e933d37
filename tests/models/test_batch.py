"""Provider batch APIs: `batch: true` models go through /v1/files + /v1/batches of the simulated
server, replies are ingested as live ones, a kill while batches are pending resumes them, and no
request is paid twice."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from memearena.config import load_config
from memearena.engine.lifecycle import plan_method, run_method
from memearena.models import ModelPool
from memearena.models.types import GenParams, Message, TextPart
from memearena.sim.catalogue import DEMO_JUDGES, DEMO_TARGETS
from memearena.sim.serve import demo_world
from memearena.sim.server import BackgroundServer, EchoResponder
from memearena.store import RunStore

TARGETS = ["sim-aurora", "sim-cirrus", "sim-ember"]
JUDGES = ["sim-judge-falcon", "sim-judge-grove"]


@pytest.fixture(scope="module")
def server() -> Iterator[BackgroundServer]:
    with BackgroundServer(demo_world(seed=0), process=True, batch_delay_s=1.0) as srv:
        yield srv


def batch_stats(srv: BackgroundServer) -> dict[str, Any]:
    with urllib.request.urlopen(f"{srv.base_url}/batch_stats", timeout=10) as r:
        data: dict[str, Any] = json.loads(r.read())
    return data


def write_config(path: Path, base_url: str, *, batch: bool) -> Path:
    catalogue = {**DEMO_TARGETS, **DEMO_JUDGES}
    models = {
        name: {
            "provider": "openai",
            "base_url": base_url,
            "model": name,
            "family": catalogue[name].family,
            "max_concurrency": 64,
            "price": {"input": 2.0, "output": 8.0},
            "batch": batch,
            "batch_poll_s": 0.1,
        }
        for name in TARGETS + JUDGES
    }
    cfg = {
        "run": "batch",
        "seed": 0,
        "models": models,
        "data": [{"format": "demo", "limit": 2}],
        "arena": {
            "targets": TARGETS,
            "judges": JUDGES,
            "context_model": JUDGES[0],
            "fusion_rounds": 2,
            "bootstrap": 20,
        },
    }
    path.write_text(yaml.safe_dump(cfg))
    return path


def _submitted(db: Path) -> int:
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
        try:
            row = con.execute(
                "SELECT count(*) FROM batch_requests WHERE batch_id IS NOT NULL"
            ).fetchone()
            return int(row[0])
        finally:
            con.close()
    except sqlite3.Error:
        return 0


def test_batched_arena_killed_while_batches_pend_resumes_to_the_live_leaderboard(
    server: BackgroundServer, tmp_path: Path
) -> None:
    live_cfg = load_config(write_config(tmp_path / "live.yaml", server.base_url, batch=False))
    live = run_method("arena", live_cfg, tmp_path / "live", show_progress=False)
    assert live.stopped is None
    assert batch_stats(server)["batches"] == 0  # the live run sent no batch

    config = write_config(tmp_path / "batch.yaml", server.base_url, batch=True)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "memearena", "arena", str(config), "--out", str(out)]
    cmd.append("--no-progress")
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    db = out / "batch" / "run.db"
    deadline = time.monotonic() + 120
    while _submitted(db) == 0 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proc.poll() is None, "the run finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)  # a batch is pending: the server answers it in 1 s
    proc.wait()
    pending = batch_stats(server)
    assert pending["batches"] >= 1 and not (out / "batch" / "leaderboard.json").exists()

    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    resumed = json.loads((out / "batch" / "leaderboard.json").read_text())
    assert resumed["arena"]["overall"] == live.leaderboard["arena"]["overall"]

    stats = batch_stats(server)
    assert stats["billed_twice"] == []  # every request paid once, across the kill
    assert stats["billed_requests"] == stats["distinct_requests"] > 0
    store = RunStore(db)
    ok_calls = [c for c in store.calls() if c.status in ("ok", "refusal")]
    store.close()
    assert len({c.request_hash for c in ok_calls}) == stats["distinct_requests"]


def test_batched_calls_are_priced_at_the_discount_and_planned_so(
    server: BackgroundServer, tmp_path: Path
) -> None:
    live = plan_method(
        "arena", load_config(write_config(tmp_path / "l.yaml", server.base_url, batch=False))
    )
    batch = plan_method(
        "arena", load_config(write_config(tmp_path / "b.yaml", server.base_url, batch=True))
    )
    assert live.calls == batch.calls
    for name, row in live.per_model.items():
        assert batch.per_model[name]["cost_usd"] == pytest.approx(0.5 * row["cost_usd"])


def test_a_pool_sends_a_batch_and_records_it(tmp_path: Path) -> None:
    with BackgroundServer(EchoResponder(), batch_delay_s=0.05) as srv:
        cfg = load_config(write_config(tmp_path / "b.yaml", srv.base_url, batch=True))
        store = RunStore(tmp_path / "run.db")

        async def go() -> list[str]:
            async with ModelPool(cfg.models, store=store) as pool:
                asks = [
                    pool.complete(
                        "sim-aurora",
                        [Message("user", (TextPart(f"question {k}"),))],
                        role="arena.answer",
                        params=GenParams(max_tokens=16),
                    )
                    for k in range(5)
                ]
                return [c.text for c in await asyncio.gather(*asks)]

        texts = asyncio.run(go())
        stats = batch_stats(srv)
        calls = store.calls()
        store.close()
    assert len(texts) == 5 and all(texts)
    assert stats["batches"] == 1 and stats["billed_requests"] == 5
    assert {c.status for c in calls} == {"ok"} and len(calls) == 5
    assert all(c.cost_usd > 0 for c in calls)
