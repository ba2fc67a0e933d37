import asyncio

import pytest

from memearena.engine.steps import bounded_map


def test_bounded_map_never_exceeds_its_window_and_yields_every_item() -> None:
    in_flight = 0
    peak = 0

    async def job(i: int) -> int:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.001 * (i % 3))
        in_flight -= 1
        return i * i

    async def go() -> list[tuple[int, int]]:
        return [x async for x in bounded_map(job, (i for i in range(100)), window=7)]

    got = asyncio.run(go())
    assert sorted(got) == [(i, i * i) for i in range(100)]
    assert peak == 7


def test_bounded_map_propagates_a_failure() -> None:
    async def job(i: int) -> int:
        if i == 5:
            raise RuntimeError("boom")
        await asyncio.sleep(0)
        return i

    async def go() -> None:
        async for _ in bounded_map(job, range(20), window=4):
            pass

    with pytest.raises(RuntimeError, match="boom"):
        asyncio.run(go())


def test_a_step_whose_lookup_was_skipped_returns_what_is_stored_first(tmp_path) -> None:
    # A stage looked its keys up in a batch, then called with lookup=False; meanwhile another
    # step stored (or queued) the same key: the first write wins and both get that value.
    from memearena.engine.steps import run_step
    from memearena.store import RunStore

    store = RunStore(tmp_path / "run.db")
    encode, answer = _encode, _answer

    async def go() -> list[dict[str, str] | None]:
        assert store.get_artifacts("k", ["a", "b"]) == {}  # the batched look-up: nothing
        store.put_artifact("k", "a", {"v": "committed first"})
        first = await run_step(store, "k", "b", answer("queued first"), encode, lookup=False)
        return [
            await run_step(store, "k", "a", answer("late"), encode, lookup=False),
            first,
            await run_step(store, "k", "b", answer("late"), encode, lookup=False),
        ]

    got = asyncio.run(go())
    assert got == [{"v": "committed first"}, {"v": "queued first"}, {"v": "queued first"}]
    assert store.get_artifacts("k", ["a", "b"]) == {
        "a": {"v": "committed first"},
        "b": {"v": "queued first"},
    }
    store.close()
    other = RunStore(tmp_path / "run.db")  # committed at close: what a re-run reads
    assert other.get_artifact("k", "b") == {"v": "queued first"}
    other.close()


def test_a_step_found_absent_is_looked_up_again_only_if_this_store_wrote_its_key(
    tmp_path,
) -> None:
    # ``run_step`` tells the store the key was absent before the call: a key this store never
    # queued or wrote is not looked up again, one it did (committed since) still is.
    from memearena.engine.steps import run_step
    from memearena.store import RunStore

    store = RunStore(tmp_path / "run.db")
    selects: list[str] = []
    store._db.set_trace_callback(
        lambda sql: selects.append(sql) if sql.startswith("SELECT value FROM artifacts") else None
    )

    encode, answer = _encode, _answer

    async def go() -> list[dict[str, str] | None]:
        fresh = [
            await run_step(store, "k", f"n{i}", answer(f"v{i}"), encode, lookup=False)
            for i in range(50)
        ]
        assert selects == []  # fresh keys: no look-up at all
        store.put_artifact("k", "p", {"v": "put first"})
        for _ in range(8):  # let the queued steps be committed (the queue is empty again)
            await asyncio.sleep(0)
        assert not store.pending_steps
        again = await run_step(store, "k", "n3", answer("late"), encode, lookup=False)
        put = await run_step(store, "k", "p", answer("late"), encode, lookup=False)
        return [fresh[3], again, put]

    got = asyncio.run(go())
    assert got == [{"v": "v3"}, {"v": "v3"}, {"v": "put first"}]
    assert len(selects) == 2  # n3 and p: keys this store wrote before
    store.close()


def test_the_key_filter_finds_every_key_added_and_few_others() -> None:
    from memearena.store.keyfilter import KeyFilter

    f = KeyFilter()
    added = [("k", f"key{i}") for i in range(20_000)]
    # Nearly none reported there before it was added (about 1e-6 of them at this load).
    assert sum(f.add(k) for k in added) <= 2
    assert all(k in f and f.add(k) for k in added)
    others = sum(("other", f"key{i}") in f for i in range(20_000))
    assert others < 20  # about 3e-5 of them at this load


def test_capped_map_lets_the_jobs_in_flight_finish_once_the_cap_stops_the_run() -> None:
    # A job that hits the spend cap starts no further job, but the jobs in flight run to their
    # end (cancelling one mid-call would lose a reply already paid); then the cap is raised.
    from memearena.engine.steps import capped_map
    from memearena.errors import BudgetExceeded

    started: list[int] = []
    finished: list[int] = []

    async def job(i: int) -> int:
        started.append(i)
        if i == 2:
            await asyncio.sleep(0)
            raise BudgetExceeded("spend cap reached")
        for _ in range(5):  # still in flight when job 2 stops the run
            await asyncio.sleep(0)
        finished.append(i)
        return i

    async def go() -> list[int]:
        got: list[int] = []
        with pytest.raises(BudgetExceeded, match="spend cap"):
            async for _, r in capped_map(job, range(100), window=4):
                got.append(r)
        return got

    got = asyncio.run(go())
    assert sorted(started) == [0, 1, 2, 3]  # nothing started after the stop
    assert sorted(finished) == [0, 1, 3] == sorted(got)  # none cancelled, all yielded


def _encode(value: str, res: object) -> dict[str, str]:
    return {"v": value}


def _answer(text: str):  # a step's call that parses to ``text``
    from memearena.prompts import AskResult

    async def call() -> AskResult[str]:
        return AskResult(value=text, raw=[text])

    return call


def test_fewer_collections_raises_the_young_threshold_and_restores_it_after_nesting() -> None:
    import gc

    from memearena.engine.steps import fewer_collections

    before = gc.get_threshold()
    try:
        gc.set_threshold(700, before[1], before[2])
        with fewer_collections(5000):
            assert gc.get_threshold()[0] == 5000
            with fewer_collections(9000):  # an inner block keeps the outer one's setting
                assert gc.get_threshold()[0] == 5000
            assert gc.get_threshold()[0] == 5000
        assert gc.get_threshold() == (700, before[1], before[2])
        with pytest.raises(RuntimeError), fewer_collections(5000):
            raise RuntimeError("stage failed")
        assert gc.get_threshold() == (700, before[1], before[2])
    finally:
        gc.set_threshold(*before)
