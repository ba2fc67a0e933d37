"""Group commits in the writer's thread: the event loop only hands them over, and nothing they
carry is unreadable meanwhile or written out of order."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

import pytest
from models_helpers import FakeBackend, run, sim_cfg, user

import memearena.models.pool as pool_module
from memearena.config import Price
from memearena.models import ModelPool, ResponseCache
from memearena.models.pool import GROUP_TURNS
from memearena.store import RunStore


def _on_disk(path: Path, table: str) -> int:
    other = sqlite3.connect(path)
    try:
        return int(other.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
    finally:
        other.close()


@pytest.mark.parametrize("in_thread", [True, False])
def test_group_commits_run_off_the_event_loops_thread_and_keep_every_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, in_thread: bool
) -> None:
    # ``commit_in_thread = False``: the same rows, committed on the event loop's thread.
    monkeypatch.setattr(ModelPool, "commit_in_thread", in_thread)
    store = RunStore(tmp_path / "run.db")
    cache = ResponseCache(tmp_path / "cache.db")
    threads: list[threading.Thread] = []
    write, put = store.write_group, cache.put_many

    def write_group(*a):  # type: ignore[no-untyped-def]
        threads.append(threading.current_thread())
        write(*a)

    def put_many(*a):  # type: ignore[no-untyped-def]
        threads.append(threading.current_thread())
        put(*a)

    store.write_group = write_group  # type: ignore[method-assign]
    cache.put_many = put_many  # type: ignore[method-assign]
    cfg = sim_cfg(price=Price(input=1.0, output=1.0))  # tracked: each call waits for its "sent"
    pool = ModelPool({"m": cfg}, store=store, cache=cache, backends={"m": FakeBackend()})

    async def go() -> None:
        await asyncio.gather(*(pool.complete("m", user(f"q{i}"), role="t") for i in range(30)))
        await pool.aclose()

    run(go())
    if in_thread:
        assert threads and threading.main_thread() not in threads
    else:  # the inline path writes through the store's own write_call_rows
        assert set(threads) == {threading.main_thread()}
    assert sorted({c.status for c in store.calls()}) == ["ok"] and len(store.calls()) == 30
    assert len(cache) == 30
    assert len(list(store.iter_requests())) == 30  # compressed in that thread, readable here
    store.close()
    cache.close()


def test_what_a_running_commit_carries_is_served_until_it_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A commit held in the writer's thread: its reply, cache entry and step outcome are not
    # readable from the files yet, and are served from memory; the store's own write (a
    # member view) waits for that commit, so it is never on record before the steps it names.
    monkeypatch.setattr(ModelPool, "commit_in_thread", True)
    monkeypatch.setattr(pool_module, "FREE_GROUP_S", 0.0)  # handed over within a few turns
    store = RunStore(tmp_path / "run.db")
    cache = ResponseCache(tmp_path / "cache.db")
    backend = FakeBackend()
    pool = ModelPool({"m": sim_cfg()}, store=store, cache=cache, backends={"m": backend})
    gate = threading.Event()
    write, put = store.write_group, cache.put_many

    def held_write(*a):  # type: ignore[no-untyped-def]
        gate.wait(10)
        write(*a)

    def held_put(*a):  # type: ignore[no-untyped-def]
        gate.wait(10)
        put(*a)

    store.write_group = held_write  # type: ignore[method-assign]
    cache.put_many = held_put  # type: ignore[method-assign]

    async def go() -> tuple[object, ...]:
        first = await pool.complete("m", user("hi"), role="t")
        await store.commit_step("kind", "k1", {"v": 1}, absent=True)
        for _ in range(GROUP_TURNS + 2):  # the commit is handed over, and held there
            await asyncio.sleep(0)
        held_back = _on_disk(store.path, "artifacts") + _on_disk(cache.path, "responses")
        again = await pool.complete("m", user("hi"), role="t")  # served, not sent again
        seen = (store.get_artifact("kind", "k1"), store.get_artifacts("kind", ["k1"]))
        stored = await store.commit_step("kind", "k1", {"v": 2}, absent=True)  # first wins
        gate.set()
        store.add_members("view", "item", [("c", 1, "k1", None, None)])
        return first, again, seen, stored, held_back

    first, again, seen, stored, held_back = run(go())
    assert held_back == 0  # the commit was running, not ended, while they were served
    assert backend.calls == 1 and again.cached and again.text == first.text  # type: ignore[attr-defined]
    assert seen == ({"v": 1}, {"k1": {"v": 1}})
    assert stored == {"v": 1}
    assert store.get_artifact("kind", "k1") == {"v": 1}
    assert [m[0] for m in store.iter_members("view")] == ["c"]
    store.close()
    cache.close()
