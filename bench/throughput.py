"""Throughput of the model stack against the simulated server (run in its own process).

Compares a bare loop over the official ``openai`` AsyncOpenAI client with the full memearena
stack (``ModelPool`` with cache, limits and RunStore writes; every request distinct, so no cache
hits), first at zero server latency (calls/s), then at 50 ms latency (wall time vs the ideal
``calls x latency / concurrency``).

    python bench/throughput.py [--calls 2000] [--concurrency 64] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

import httpx2
import openai

from memearena.config import OpenAIModelConfig
from memearena.models import ModelPool, ResponseCache
from memearena.models.types import Message
from memearena.sim.server import BackgroundServer
from memearena.store import RunStore

PROMPT = "Explain the meme's message and who it targets. " * 4


async def bare(
    base_url: str, calls: int, concurrency: int, tag: str, fast: bool = False
) -> tuple[float, float]:
    """(wall s, client CPU s) for ``calls`` requests through a bare AsyncOpenAI loop: the plain
    ``chat.completions.create`` with SDK defaults, or (``fast``) the same request path the
    memearena backend uses (``client.post`` + the SDK's aiohttp transport, JSON read raw)."""
    kw = {"http_client": openai.DefaultAioHttpClient()} if fast else {}
    client = openai.AsyncOpenAI(api_key="EMPTY", base_url=base_url, max_retries=0, **kw)
    sem = asyncio.Semaphore(concurrency)
    headers = {"X-Memearena-Role": "target"}

    async def one(i: int) -> str:
        messages = [{"role": "user", "content": f"{tag} {i}: {PROMPT}"}]
        async with sem:
            if fast:
                body = {"model": "sim-a", "messages": messages}
                raw = await client.post(
                    "/chat/completions",
                    cast_to=httpx2.Response,
                    body=body,
                    options={"headers": headers},
                )
                return str(raw.json()["choices"][0]["message"]["content"])
            r = await client.chat.completions.create(
                model="sim-a", messages=messages, extra_headers=headers
            )
            return r.choices[0].message.content or ""

    await asyncio.gather(*(one(i) for i in range(min(50, calls))))  # warm connections
    t, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(one(i) for i in range(calls)))
    elapsed, cpu = time.perf_counter() - t, time.process_time() - cpu
    await client.close()
    return elapsed, cpu


async def stack(
    base_url: str, calls: int, concurrency: int, tag: str, tmp: Path
) -> tuple[float, float]:
    """(wall s, client CPU s) for ``calls`` distinct requests through ModelPool + cache + store."""
    cfg = OpenAIModelConfig(
        provider="openai", model="sim-a", base_url=base_url, max_concurrency=concurrency
    )
    store = RunStore(tmp / f"{tag}-run.db")
    cache = ResponseCache(tmp / f"{tag}-cache.db")
    pool = ModelPool({"sim-a": cfg}, store=store, cache=cache, max_cost=1e9)

    async def one(i: int, t: str) -> str:
        msgs = [Message.text("user", f"{t} {i}: {PROMPT}")]
        return (await pool.complete("sim-a", msgs, role="target")).text

    await asyncio.gather(*(one(i, "warm") for i in range(min(50, calls))))
    t, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(one(i, tag) for i in range(calls)))
    elapsed, cpu = time.perf_counter() - t, time.process_time() - cpu
    await pool.aclose()
    n_calls = len(store.calls())
    assert n_calls == calls + min(50, calls), n_calls
    assert store.usage_summary()["sim-a"]["cached"] == 0
    store.close()
    cache.close()
    return elapsed, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--latency-ms", type=float, default=50.0)
    ap.add_argument("--repeats", type=int, default=5, help="zero-latency rounds (median kept)")
    a = ap.parse_args()
    n, c = a.calls, a.concurrency

    with tempfile.TemporaryDirectory() as d, BackgroundServer(process=True) as srv:
        tmp = Path(d)
        runs: dict[str, list[tuple[float, float]]] = {"bare": [], "fast": [], "stack": []}
        for r in range(a.repeats):  # interleaved, so drift affects all alike
            runs["bare"].append(asyncio.run(bare(srv.base_url, n, c, f"bare{r}")))
            runs["fast"].append(asyncio.run(bare(srv.base_url, n, c, f"fast{r}", fast=True)))
            runs["stack"].append(asyncio.run(stack(srv.base_url, n, c, f"stack{r}", tmp)))
        rate = {k: n / statistics.median(w for w, _ in v) for k, v in runs.items()}
        cpu = {k: 1e6 * statistics.median(c for _, c in v) / n for k, v in runs.items()}
        labels = {
            "bare": "bare AsyncOpenAI (create, defaults)",
            "fast": "bare AsyncOpenAI (post + aiohttp)  ",
            "stack": "memearena stack                    ",
        }
        print(f"zero latency, {n} calls, concurrency {c}, median of {a.repeats} rounds:")
        for k, label in labels.items():
            walls = ", ".join(f"{n / w:.0f}" for w, _ in runs[k])
            print(
                f"  {label}: {rate[k]:7.1f} calls/s  client CPU {cpu[k]:6.0f} us/call"
                f"  (rounds: {walls})"
            )
        print(f"  ratio stack / bare create            : {rate['stack'] / rate['bare']:7.1%}")
        print(
            f"  ratio stack / bare same transport    : {rate['stack'] / rate['fast']:7.1%}"
            "   (targets: >= 80%, stack >= 300 calls/s)"
        )
        print(f"  stack overhead, client CPU per call  : {cpu['stack'] - cpu['fast']:+7.0f} us")
        # Rounds run back to back, so a ratio within one round shares its machine load.
        paired = statistics.median(
            f[0] / s[0] for f, s in zip(runs["fast"], runs["stack"], strict=True)
        )
        print(f"  paired ratio (median over rounds)    : {paired:7.1%}")

    with (
        tempfile.TemporaryDirectory() as d,
        BackgroundServer(process=True, latency_ms=a.latency_ms) as srv,
    ):
        tmp = Path(d)
        tb, _ = asyncio.run(bare(srv.base_url, n, c, "bare-lat"))
        tf, _ = asyncio.run(bare(srv.base_url, n, c, "fast-lat", fast=True))
        ts, _ = asyncio.run(stack(srv.base_url, n, c, "stack-lat", tmp))
        ideal = n * a.latency_ms / 1000 / c
        print(f"{a.latency_ms:g} ms latency, {n} calls, concurrency {c}:")
        print(f"  ideal (calls x latency / concurrency) : {ideal:6.2f} s")
        print(f"  bare AsyncOpenAI (create, defaults)   : {tb:6.2f} s")
        print(f"  bare AsyncOpenAI (post + aiohttp)     : {tf:6.2f} s")
        print(f"  memearena stack                       : {ts:6.2f} s")
        print(f"  server max in flight: {srv.stats()['max_in_flight']}")
        print(f"  (load average at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cpus)")


if __name__ == "__main__":
    main()
