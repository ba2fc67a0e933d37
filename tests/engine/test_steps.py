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
    from memearena.prompts import AskResult
    from memearena.store import RunStore

    store = RunStore(tmp_path / "run.db")

    def encode(value: str, res: AskResult[str]) -> dict[str, str]:
        return {"v": value}

    def answer(text: str):
        async def call() -> AskResult[str]:
            return AskResult(value=text, raw=[text])

        return call

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
