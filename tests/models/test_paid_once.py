"""A reply is paid for once: a reply on record for a request key is reused, whatever stopped the
run that paid for it (a kill, the spend cap, an error elsewhere), and identical requests in
flight at the same moment share one call (single flight). Counted at the server."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from models_helpers import FakeBackend, openai_cfg, run, user

from memearena.engine.steps import run_step
from memearena.errors import BudgetExceeded, ParseError
from memearena.models import GenParams, Message, ModelPool, ResponseCache
from memearena.prompts import ask
from memearena.sim.server import BackgroundServer
from memearena.store import RunStore


def parse_number(text: str) -> int:
    if not text.strip().isdigit():
        raise ParseError("not a number")
    return int(text)


class ReaskResponder:
    """Answers a first ask with prose (unparseable) and its re-ask with a number; counts the
    requests it answers by the number of messages (1: the first ask, 3: the re-ask)."""

    def __init__(self) -> None:
        self.by_length: dict[int, int] = {}

    def respond(self, model: str, role: str, messages: Sequence[Message], params: Any) -> str:
        self.by_length[len(messages)] = self.by_length.get(len(messages), 0) + 1
        return "I would rather explain in prose." if len(messages) == 1 else "7"


@pytest.fixture
def reasking() -> Iterator[tuple[BackgroundServer, ReaskResponder]]:
    responder = ReaskResponder()
    with BackgroundServer(responder) as srv:
        yield srv, responder


CHILD = textwrap.dedent(
    """
    import asyncio, os, sys
    from pathlib import Path
    from memearena.config import OpenAIModelConfig
    from memearena.engine.steps import run_step
    from memearena.errors import ParseError
    from memearena.models import Message, ModelPool, ResponseCache
    from memearena.prompts import ask
    from memearena.store import RunStore

    def parse(text):
        if not text.strip().isdigit():
            raise ParseError("not a number")
        return int(text)

    async def main(url, run_dir, cache_on, kill):
        store = RunStore(run_dir / "run.db")
        cache = ResponseCache(run_dir / "cache.sqlite") if cache_on else None
        cfg = OpenAIModelConfig(provider="openai", base_url=url, model="m", max_retries=0)
        pool = ModelPool({"m": cfg}, store=store, cache=cache)
        msgs = [Message.text("user", "How harmful is it, 1 to 10?")]
        key = pool.request_key("m", msgs)
        got = await run_step(
            store, "score", key, lambda: ask(pool, "m", "score", msgs, parse),
            lambda v, res: {"score": v},
        )
        if kill:  # SIGKILL right after the step returned: its outcome is not committed yet
            os.kill(os.getpid(), 9)
        await pool.aclose()
        store.close()
        if cache is not None:
            cache.close()
        print(got)

    url, run_dir, cache_on, kill = sys.argv[1], Path(sys.argv[2]), sys.argv[3], sys.argv[4]
    asyncio.run(main(url, run_dir, cache_on == "1", kill == "1"))
    """
)


@pytest.mark.parametrize("cache_on", [True, False], ids=["cache", "no-cache"])
def test_a_killed_step_resumes_without_paying_its_recorded_reply_again(
    reasking: tuple[BackgroundServer, ReaskResponder], tmp_path: Path, cache_on: bool
) -> None:
    srv, responder = reasking
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    args = [sys.executable, str(script), srv.base_url, str(tmp_path), str(int(cache_on))]
    killed = subprocess.run([*args, "1"], env=env, capture_output=True, timeout=60)
    assert killed.returncode == -9, killed.stderr.decode()
    assert responder.by_length == {1: 1, 3: 1}
    # The first reply (unparseable, then re-asked) was committed before the re-ask was sent.
    done = subprocess.run([*args, "0"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "{'score': 7}" in done.stdout
    # The first request is not paid again; the re-ask, in flight at the kill (its reply never
    # reached the record), is the only one the resume pays for.
    assert responder.by_length == {1: 1, 3: 2}
    assert srv.stats()["paid_twice"] == 1


def _priced() -> dict[str, Any]:
    # $10 per 1M output tokens: a call of max_tokens 100 reserves $0.001, costs $0.0005.
    return {"price": {"input": 0.0, "output": 10.0}, "max_retries": 0}


def test_a_reply_paid_while_the_cap_stops_the_run_is_reused_by_the_resume(tmp_path: Path) -> None:
    backend = FakeBackend(lambda n, msgs, role: "prose" if len(msgs) == 1 else "7")
    store = RunStore(tmp_path / "run.db")
    cache = ResponseCache(tmp_path / "cache.sqlite")
    params = GenParams(max_tokens=100)
    msgs = user("How harmful is it, 1 to 10?")
    models = {"m": openai_cfg("http://127.0.0.1:9/v1", model="m", **_priced())}

    async def step(max_cost: float | None) -> Any:
        pool = ModelPool(
            models, store=store, cache=cache, max_cost=max_cost, backends={"m": backend}
        )
        try:
            key = pool.request_key("m", msgs, params)
            return await run_step(
                store,
                "score",
                key,
                lambda: ask(pool, "m", "score", msgs, parse_number, params=params),
                lambda v, res: {"score": v},
            )
        finally:
            await pool.aclose()

    with pytest.raises(BudgetExceeded):  # the first call fits the cap, its re-ask does not
        run(step(0.0012))
    assert backend.calls == 1
    assert run(step(None)) == {"score": 7}
    assert backend.calls == 2  # the re-ask only: the first reply was on record
    paid = [c.request_hash for c in store.calls() if c.status in ("ok", "refusal")]
    assert len(paid) == len(set(paid)) == 2
    store.close()
    cache.close()


def test_a_required_step_that_stayed_unparseable_is_asked_afresh(tmp_path: Path) -> None:
    backend = FakeBackend(lambda n, msgs, role: "prose")
    store = RunStore(tmp_path / "run.db")
    cache = ResponseCache(tmp_path / "cache.sqlite")
    models = {"m": openai_cfg("http://127.0.0.1:9/v1", model="m")}

    async def once() -> Any:
        async with ModelPool(models, store=store, cache=cache, backends={"m": backend}) as pool:
            return await ask(pool, "m", "ctx", user("q"), parse_number, max_reasks=1)

    assert run(once()).error.startswith("unparseable")
    assert backend.calls == 2
    assert run(once()).error.startswith("unparseable")
    assert backend.calls == 4  # nothing replayed: every reply of a failed ask was dropped
    store.close()
    cache.close()


def test_identical_requests_in_flight_share_one_call(tmp_path: Path) -> None:
    backends = {"a": FakeBackend(delay=0.05), "b": FakeBackend(delay=0.05)}
    store = RunStore(tmp_path / "run.db")
    # One model under two names: the same endpoint and model id, so the same request.
    models = {n: openai_cfg("http://127.0.0.1:9/v1", model="x") for n in ("a", "b")}

    async def go() -> list[Any]:
        async with ModelPool(models, store=store, backends=backends) as pool:
            return await asyncio.gather(
                pool.complete("a", user("q"), role="judge"),
                pool.complete("b", user("q"), role="judge"),
                pool.complete("a", user("q"), role="judge"),
            )

    got = run(go())
    assert backends["a"].calls + backends["b"].calls == 1
    assert len({c.text for c in got}) == 1
    assert [c.model for c in got] == ["a", "b", "a"]
    assert sum(not c.cached for c in got) == 1
    statuses = sorted(c.status for c in store.calls())
    assert statuses == ["cached", "cached", "ok"]
    store.close()


def test_a_waiter_sends_the_request_itself_when_the_call_it_joined_fails(tmp_path: Path) -> None:
    def script(n: int, msgs: Any, role: str) -> str:
        if n == 0:
            from memearena.errors import ModelError

            raise ModelError("bad request", kind="bad_request")
        return "fine"

    backend = FakeBackend(script, delay=0.05)
    models = {"a": openai_cfg("http://127.0.0.1:9/v1", model="x", max_retries=0)}

    async def go() -> list[Any]:
        async with ModelPool(models, backends={"a": backend}) as pool:
            return await asyncio.gather(
                pool.complete("a", user("q"), role="judge"),
                pool.complete("a", user("q"), role="judge"),
                return_exceptions=True,
            )

    first, second = run(go())
    assert isinstance(first, Exception) and "bad request" in str(first)
    assert second.text == "fine" and backend.calls == 2


def test_an_arena_with_one_model_under_two_names_pays_each_request_once(tmp_path: Path) -> None:
    from memearena.config import parse_config
    from memearena.engine.lifecycle import run_method
    from memearena.sim.catalogue import DEMO_JUDGES, DEMO_TARGETS
    from memearena.sim.serve import demo_world

    catalogue = {**DEMO_TARGETS, **DEMO_JUDGES}
    with BackgroundServer(demo_world(seed=0), latency_ms=20) as srv:

        def model(name: str) -> dict[str, Any]:
            return {
                "provider": "openai",
                "base_url": srv.base_url,
                "model": name,
                "family": catalogue[name].family,
                "max_concurrency": 8,
            }

        raw = {
            "run": "aliases",
            "seed": 0,
            "models": {
                "sim-aurora": model("sim-aurora"),
                "aurora-again": model("sim-aurora"),  # the same model under a second name
                "sim-ember": model("sim-ember"),
                "sim-judge-falcon": model("sim-judge-falcon"),
                "sim-judge-grove": model("sim-judge-grove"),
            },
            "data": [{"format": "demo", "limit": 1}],
            "arena": {
                "targets": ["sim-aurora", "aurora-again", "sim-ember"],
                "judges": ["sim-judge-falcon", "sim-judge-grove"],
                "context_model": "sim-judge-falcon",
                "fusion_rounds": 2,
                "bootstrap": 10,
            },
        }
        result = run_method("arena", parse_config(raw), tmp_path / "run", show_progress=False)
        stats = srv.stats()
    assert result.stopped is None
    # Equal answers (one model, two names) judged in both orders are one request too.
    assert stats["answered_bodies"] > 0
    assert stats["paid_twice"] == 0, stats
