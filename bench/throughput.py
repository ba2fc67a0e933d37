"""Throughput of the model stack against the simulated server (run in its own process).

Five clients send the same requests (a text part and an image part, every request distinct,
so no cache hits) to one simulated server in its own process, and each is timed for wall time
and its own process CPU:

- ``lean``: the memearena stack (``ModelPool`` with cache, limits and RunStore writes) over its
  default lean request path (aiohttp + msgspec);
- ``sdk``: the same stack with ``client: sdk`` (the official ``openai`` SDK backend);
- ``raw``: a bare aiohttp loop (``session.post(json=...)`` and ``resp.json()``), the floor of
  what any client on this transport can do;
- ``create``: the bare SDK ``chat.completions.create`` with its defaults;
- ``post``: the bare SDK ``client.post`` on its aiohttp transport (what the SDK backend sends).

Rounds are interleaved (the order rotates each round) so that drift in the machine's load hits
every client alike; medians over rounds are reported, and the per-round ratio's median, since
clients of one round share its load. Then the same at 50 ms server latency (wall time against
the ideal ``calls x latency / concurrency``).

    python bench/throughput.py [--calls 2000] [--concurrency 64] [--repeats 5] [--profile lean]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import cProfile
import hashlib
import io
import os
import pstats
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import aiohttp
import httpx2
import openai

from memearena.config import OpenAIModelConfig
from memearena.models import ImagePart, Message, ModelPool, ResponseCache, TextPart
from memearena.sim.server import BackgroundServer
from memearena.store import RunStore

PROMPT = "Explain the meme's message and who it targets. " * 4
HEADERS = {"X-Memearena-Role": "target"}
Result = tuple[float, float]  # (wall s, client CPU s)


def _image(size: int) -> tuple[str, str]:
    """A data URL of ``size`` random bytes (the server checks base64, not pixels) and its hash."""
    payload = random.Random(0).randbytes(size)
    return "data:image/png;base64," + base64.b64encode(payload).decode(), hashlib.sha256(
        payload
    ).hexdigest()


def _wire(text: str, url: str | None) -> list[dict[str, Any]]:
    if url is None:
        return [{"role": "user", "content": text}]
    parts = [{"type": "text", "text": text}, {"type": "image_url", "image_url": {"url": url}}]
    return [{"role": "user", "content": parts}]


async def _timed(one: Callable[[int], Coroutine[Any, Any, str]], calls: int) -> Result:
    await asyncio.gather(*(one(-1 - i) for i in range(min(50, calls))))  # warm connections
    t, cpu = time.perf_counter(), time.process_time()
    out = await asyncio.gather(*(one(i) for i in range(calls)))
    elapsed, cpu = time.perf_counter() - t, time.process_time() - cpu
    assert all(out), "an empty reply"
    return elapsed, cpu


async def raw(base_url: str, calls: int, conc: int, tag: str, image: str | None) -> Result:
    """A bare aiohttp loop: JSON body out, JSON body back, nothing validated or recorded."""
    sem = asyncio.Semaphore(conc)
    url = f"{base_url}/chat/completions"
    async with aiohttp.ClientSession(headers={"Authorization": "Bearer EMPTY"}) as session:

        async def one(i: int) -> str:
            body = {"model": "sim-a", "messages": _wire(f"{tag} {i}: {PROMPT}", image)}
            async with sem, session.post(url, json=body, headers=HEADERS) as resp:
                data = await resp.json()
                return str(data["choices"][0]["message"]["content"])

        return await _timed(one, calls)


async def bare(
    base_url: str, calls: int, conc: int, tag: str, image: str | None, fast: bool = False
) -> Result:
    """A bare AsyncOpenAI loop: the plain ``chat.completions.create`` with SDK defaults, or
    (``fast``) the SDK backend's request path (``client.post`` + the SDK's aiohttp transport)."""
    kw = {"http_client": openai.DefaultAioHttpClient()} if fast else {}
    client = openai.AsyncOpenAI(api_key="EMPTY", base_url=base_url, max_retries=0, **kw)
    sem = asyncio.Semaphore(conc)

    async def one(i: int) -> str:
        messages: Any = _wire(f"{tag} {i}: {PROMPT}", image)
        async with sem:
            if fast:
                resp = await client.post(
                    "/chat/completions",
                    cast_to=httpx2.Response,
                    body={"model": "sim-a", "messages": messages},
                    options={"headers": HEADERS},
                )
                return str(resp.json()["choices"][0]["message"]["content"])
            r = await client.chat.completions.create(
                model="sim-a", messages=messages, extra_headers=HEADERS
            )
            return r.choices[0].message.content or ""

    try:
        return await _timed(one, calls)
    finally:
        await client.close()


async def stack(
    base_url: str,
    calls: int,
    conc: int,
    tag: str,
    image: tuple[str, str] | None,
    tmp: Path,
    client: str,
    parts: str = "store,cache",
) -> Result:
    """``calls`` distinct requests through ModelPool + cache + store over the ``client`` path
    (``parts`` names which of the store and the cache the pool gets)."""
    cfg = OpenAIModelConfig(
        provider="openai",
        model="sim-a",
        base_url=base_url,
        max_concurrency=conc,
        client=client,  # type: ignore[arg-type]
    )
    store = RunStore(tmp / f"{tag}-run.db") if "store" in parts else None
    cache = ResponseCache(tmp / f"{tag}-cache.db") if "cache" in parts else None
    pool = ModelPool({"sim-a": cfg}, store=store, cache=cache, max_cost=1e9)
    extra = () if image is None else (ImagePart(*image),)

    async def one(i: int) -> str:
        msgs = [Message("user", (TextPart(f"{tag} {i}: {PROMPT}"), *extra))]
        return (await pool.complete("sim-a", msgs, role="target")).text

    try:
        result = await _timed(one, calls)
    finally:
        await pool.aclose()
    if store is not None:
        n_calls = len(store.calls())
        assert n_calls == calls + min(50, calls), n_calls
        assert store.usage_summary()["sim-a"]["cached"] == 0
        store.close()
    if cache is not None:
        cache.close()
    return result


async def backend_only(
    base_url: str, calls: int, conc: int, tag: str, image: tuple[str, str] | None
) -> Result:
    """The lean backend alone (no pool: no cache, store, limits, accounting)."""
    from memearena.models import GenParams, LeanBackend

    cfg = OpenAIModelConfig(provider="openai", model="sim-a", base_url=base_url)
    backend = LeanBackend("sim-a", cfg)
    sem = asyncio.Semaphore(conc)
    extra = () if image is None else (ImagePart(*image),)

    async def one(i: int) -> str:
        msgs = [Message("user", (TextPart(f"{tag} {i}: {PROMPT}"), *extra))]
        async with sem:
            return (await backend.chat(msgs, GenParams(), "target")).text

    try:
        return await _timed(one, calls)
    finally:
        await backend.aclose()


LABELS = {
    "lean": "memearena stack, lean path (default)",
    "sdk": "memearena stack, SDK path (client: sdk)",
    "raw": "raw aiohttp (post json, resp.json)",
    "create": "bare SDK create (defaults)",
    "post": "bare SDK post + aiohttp transport",
}
BREAKDOWN = {  # not run unless named in --clients: where the stack's time goes
    "lean-store": "lean stack, store but no cache",
    "lean-pool": "lean stack, neither store nor cache",
    "backend": "lean backend alone (no pool)",
}


def _runner(
    kind: str, url: str, n: int, c: int, tag: str, image: tuple[str, str] | None, tmp: Path
) -> Result:
    data_url = None if image is None else image[0]
    if kind in ("lean", "sdk"):
        return asyncio.run(stack(url, n, c, tag, image, tmp, kind))
    if kind in ("lean-store", "lean-pool"):
        parts = "store" if kind == "lean-store" else ""
        return asyncio.run(stack(url, n, c, tag, image, tmp, "lean", parts))
    if kind == "backend":
        return asyncio.run(backend_only(url, n, c, tag, image))
    if kind == "raw":
        return asyncio.run(raw(url, n, c, tag, data_url))
    return asyncio.run(bare(url, n, c, tag, data_url, fast=kind == "post"))


def _profile(kind: str, url: str, n: int, c: int, image: Any, tmp: Path) -> None:
    prof = cProfile.Profile()
    prof.enable()
    _runner(kind, url, n, c, f"prof-{kind}", image, tmp)
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(25)
    print(f"profile of {kind} ({n} calls), by own time:")
    print(out.getvalue())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--latency-ms", type=float, default=50.0)
    ap.add_argument("--repeats", type=int, default=5, help="zero-latency rounds (median kept)")
    ap.add_argument("--image-bytes", type=int, default=4096, help="0: text-only requests")
    ap.add_argument(
        "--clients",
        default=",".join(LABELS),
        help=f"comma-separated, of {', '.join([*LABELS, *BREAKDOWN])}",
    )
    ap.add_argument("--profile", choices=sorted(LABELS), help="cProfile one client afterwards")
    ap.add_argument("--no-latency", action="store_true", help="skip the 50 ms section")
    a = ap.parse_args()
    n, c = a.calls, a.concurrency
    LABELS.update(BREAKDOWN)
    kinds = [k for k in LABELS if k in a.clients.split(",")]
    image = _image(a.image_bytes) if a.image_bytes > 0 else None

    with tempfile.TemporaryDirectory() as d, BackgroundServer(process=True) as srv:
        tmp = Path(d)
        runs: dict[str, list[Result]] = {k: [] for k in kinds}
        load = [os.getloadavg()[0]]
        for r in range(a.repeats):  # interleaved, the order rotated each round
            order = kinds[r % len(kinds) :] + kinds[: r % len(kinds)]
            for k in order:
                runs[k].append(_runner(k, srv.base_url, n, c, f"{k}{r}", image, tmp))
            load.append(os.getloadavg()[0])
        rate = {k: n / statistics.median(w for w, _ in v) for k, v in runs.items()}
        cpu = {k: 1e6 * statistics.median(cp for _, cp in v) / n for k, v in runs.items()}
        what = "text + image" if image else "text"
        print(
            f"zero latency, {n} {what} calls per round, concurrency {c}, "
            f"median of {a.repeats} interleaved rounds:"
        )
        for k in kinds:
            rounds = ", ".join(f"{n / w:.0f}" for w, _ in runs[k])
            print(
                f"  {LABELS[k]:<40}: {rate[k]:7.1f} calls/s  client CPU {cpu[k]:6.0f} us/call"
                f"  (rounds: {rounds})"
            )

        def ratio(x: str, y: str, target: float | None = None) -> None:
            if x not in runs or y not in runs:
                return
            paired = statistics.median(
                wy / wx for (wx, _), (wy, _) in zip(runs[x], runs[y], strict=True)
            )
            goal = f"   target >= {target:g}x" if target else ""
            print(
                f"  {x:>4} / {y:<6}: calls/s {rate[x] / rate[y]:5.2f}x (paired {paired:5.2f}x),"
                f" CPU per call {cpu[x] / cpu[y]:5.2f}x{goal}"
            )

        ratio("lean", "raw", 0.8)
        ratio("lean", "sdk", 1.5)
        ratio("lean", "create")
        ratio("lean", "post")
        ratio("sdk", "raw")
        ratio("sdk", "post")
        for k in ("lean-store", "lean-pool", "backend"):
            if k in cpu and "raw" in cpu:
                print(f"  {k} CPU per call over raw: {cpu[k] - cpu['raw']:+.0f} us")
        if "lean" in cpu and "raw" in cpu:
            print(
                f"  lean stack overhead over raw, CPU per call: {cpu['lean'] - cpu['raw']:+.0f} us"
            )
        print(
            f"  load average during the rounds: {min(load):.2f}-{max(load):.2f} "
            f"on {os.cpu_count()} cpus"
        )
        if a.profile:
            _profile(a.profile, srv.base_url, n, c, image, tmp)

    if a.no_latency:
        return
    with (
        tempfile.TemporaryDirectory() as d,
        BackgroundServer(process=True, latency_ms=a.latency_ms) as srv,
    ):
        tmp = Path(d)
        ideal = n * a.latency_ms / 1000 / c
        print(f"{a.latency_ms:g} ms latency, {n} calls, concurrency {c}:")
        print(f"  ideal (calls x latency / concurrency)   : {ideal:6.2f} s")
        for k in kinds:
            wall, cp = _runner(k, srv.base_url, n, c, f"{k}-lat", image, tmp)
            print(f"  {LABELS[k]:<40}: {wall:6.2f} s  client CPU {1e6 * cp / n:6.0f} us/call")
        print(f"  server max in flight: {srv.stats()['max_in_flight']}")
        print(f"  (load average at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cpus)")


if __name__ == "__main__":
    main()
