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
