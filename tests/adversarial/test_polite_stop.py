"""A polite stop (SIGINT, SIGTERM): no call starts after the signal, none is retried, the calls
in flight finish within a grace period and are recorded, so the resumed run pays nothing twice
(counted at the server); past the grace period they are abandoned and left ``sent``."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from memearena.config import OpenAIModelConfig, load_config
from memearena.engine.lifecycle import run_method
from memearena.errors import BudgetExceeded
from memearena.models import Message, ModelPool
from memearena.models.types import RawReply, Usage
from memearena.sim.catalogue import DEMO_JUDGES, DEMO_TARGETS
from memearena.sim.serve import demo_world
from memearena.sim.server import BackgroundServer
from memearena.store import RunStore


class Slow:
    """A backend whose replies take ``delay`` seconds; counts the requests it was sent."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.sent = 0

    async def chat(self, messages: Any, params: Any, role: str) -> RawReply:
        self.sent += 1
        await asyncio.sleep(self.delay)
        return RawReply(f"reply to {messages[-1].plain_text()}", Usage(10, 5), "stop")


def _pool(tmp: Path, backend: Slow) -> tuple[ModelPool, RunStore]:
    store = RunStore(tmp / "run.db")
    cfg = OpenAIModelConfig(provider="openai", model="m", base_url="http://127.0.0.1:9/v1")
    return ModelPool({"m": cfg}, store=store, backends={"m": backend}), store


def _ask(pool: ModelPool, text: str) -> Any:
    return pool.complete("m", [Message.text("user", text)], role="r")


@pytest.mark.parametrize("grace", [5.0, 0.05])
def test_calls_in_flight_finish_within_the_grace_and_no_call_starts(
    tmp_path: Path, grace: float
) -> None:
    backend = Slow(0.3)
    pool, store = _pool(tmp_path, backend)

    async def go() -> list[Any]:
        first = [asyncio.ensure_future(_ask(pool, f"q{k}")) for k in range(3)]
        while backend.sent < 3:
            await asyncio.sleep(0.01)
        assert pool.interrupt("interrupted by SIGTERM", grace) == 3
        late = asyncio.ensure_future(_ask(pool, "after the signal"))
        out = await asyncio.gather(*first, late, return_exceptions=True)
        await pool.aclose()
        return out

    try:
        *first, late = asyncio.run(go())
        calls = store.calls()
    finally:
        store.close()
    assert isinstance(late, BudgetExceeded) and backend.sent == 3
    if grace > 0.3:  # the replies came within the grace: each recorded
        assert [c.text for c in first] == ["reply to q0", "reply to q1", "reply to q2"]
        assert sorted(c.status for c in calls) == ["ok"] * 3
    else:  # abandoned: left ``sent``, their spend an upper bound; the next run asks again
        assert all(isinstance(c, BudgetExceeded) for c in first)
        assert sorted(c.status for c in calls) == ["sent"] * 3


def _config(path: Path, base_url: str) -> Path:
    catalogue = {**DEMO_TARGETS, **DEMO_JUDGES}
    names = ["sim-aurora", "sim-cirrus", "sim-ember", "sim-judge-falcon", "sim-judge-grove"]
    models = {
        n: {
            "provider": "openai",
            "base_url": base_url,
            "model": n,
            "family": catalogue[n].family,
            "price": {"input": 2.0, "output": 8.0},
        }
        for n in names
    }
    raw = {
        "run": "stop",
        "seed": 0,
        "models": models,
        "data": [{"format": "demo", "limit": 1}],
        "arena": {
            "targets": names[:3],
            "judges": names[3:],
            "context_model": names[3],
            "fusion_rounds": 2,
            "bootstrap": 10,
        },
    }
    path.write_text(yaml.safe_dump(raw))
    return path


def test_sigterm_stops_an_arena_run_that_then_resumes_paying_nothing_twice(tmp_path: Path) -> None:
    with BackgroundServer(demo_world(seed=0), process=True, latency_ms=300) as srv:
        cfg = _config(tmp_path / "c.yaml", srv.base_url)
        cmd = [sys.executable, "-m", "memearena", "run", "arena", str(cfg), "--out", str(tmp_path)]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        proc = subprocess.Popen([*cmd, "--no-progress"], env=env, stdout=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while srv.stats()["requests"] < 4 and proc.poll() is None:
                assert time.monotonic() < deadline, "the run sent nothing"
                time.sleep(0.02)
            in_flight = srv.stats()["in_flight"]
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        stopped = srv.stats()
        store = RunStore(tmp_path / "stop" / "run.db")
        try:
            left = [c for c in store.calls() if c.status == "sent"]
        finally:
            store.close()
        out = run_method("arena", load_config(cfg), tmp_path / "stop", show_progress=False)
        stats = srv.stats()
    assert in_flight > 0 and code == 128 + signal.SIGTERM
    assert left == []  # every call in flight at the signal was finished and recorded
    assert stopped["requests"] < stats["requests"]  # the resumed run had work left
    assert out.stopped is None and out.leaderboard["arena"]["overall"]
    assert stats["paid_twice"] == 0
