"""The batch path as a ledger that never forgets: a submitted request belongs to its batch until
the batch's terminal state is read, so 500s on an upload, a batch creation (after the provider
created it), a poll or an output read never pay a request twice, and the run completes; calls
that queue while a batch is being uploaded are submitted too (no batched run hangs)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from memearena.config import load_config
from memearena.engine.lifecycle import run_method
from memearena.models.batch import BatchBackend, BatchLedger
from memearena.models.types import GenParams, Message, TextPart
from memearena.sim.catalogue import DEMO_JUDGES, DEMO_TARGETS
from memearena.sim.serve import demo_world
from memearena.sim.server import BackgroundServer
from memearena.store import RunStore

TARGETS = ["sim-aurora", "sim-cirrus", "sim-ember"]
JUDGES = ["sim-judge-falcon", "sim-judge-grove"]
EVERY_STEP = {"file_create": 1, "batch_create": 1, "poll": 2, "output_read": 1, "list": 1}


def batch_stats(srv: BackgroundServer) -> dict[str, Any]:
    with urllib.request.urlopen(f"{srv.base_url}/batch_stats", timeout=10) as r:
        data: dict[str, Any] = json.loads(r.read())
    return data


def write_config(path: Path, base_url: str, *, limit: int = 2) -> Path:
    catalogue = {**DEMO_TARGETS, **DEMO_JUDGES}
    models = {
        name: {
            "provider": "openai",
            "base_url": base_url,
            "model": name,
            "family": catalogue[name].family,
            "max_concurrency": 64,
            "price": {"input": 2.0, "output": 8.0},
            "batch": True,
            "batch_poll_s": 0.05,
        }
        for name in TARGETS + JUDGES
    }
    cfg = {
        "run": "batch",
        "seed": 0,
        "models": models,
        "data": [{"format": "demo", "limit": limit}],
        "arena": {
            "targets": TARGETS,
            "judges": JUDGES,
            "context_model": JUDGES[0],
            "fusion_rounds": 2,
            "bootstrap": 10,
        },
    }
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.fixture(scope="module")
def faulty() -> Iterator[BackgroundServer]:
    with BackgroundServer(
        demo_world(seed=0), process=True, batch_delay_s=0.1, batch_faults=EVERY_STEP
    ) as srv:
        yield srv


def test_500s_at_every_batch_step_pay_no_request_twice_and_the_run_completes(
    faulty: BackgroundServer, tmp_path: Path
) -> None:
    cfg = load_config(write_config(tmp_path / "b.yaml", faulty.base_url, limit=1))
    out = run_method("arena", cfg, tmp_path / "out", show_progress=False)
    stats = batch_stats(faulty)
    assert out.stopped is None
    assert out.leaderboard["arena"]["overall"], "the run produced no leaderboard"
    # Every step answered 500 at least once, and nothing was billed twice.
    assert set(stats["faults"]) == set(EVERY_STEP), stats["faults"]
    assert stats["billed_twice"] == []
    assert stats["billed_requests"] == stats["distinct_requests"] > 0
    # Each batch was created from its own upload: a 500 on creation found the created batch.
    assert stats["batches"] == stats["completed_batches"]
    store = RunStore(tmp_path / "out" / "run.db")
    try:
        ok = [c for c in store.calls() if c.status in ("ok", "refusal")]
        unsettled = [c for c in store.calls() if c.status == "sent"]
    finally:
        store.close()
    assert unsettled == []
    assert len({c.request_hash for c in ok}) == stats["distinct_requests"]


class _SlowUploads:
    """A Batch API client whose uploads wait for `release`; batches complete at once."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.uploads: list[list[str]] = []
        self.contents: dict[str, bytes] = {}
        self.files = SimpleNamespace(create=self._upload, content=self._content)
        self.batches = SimpleNamespace(
            create=self._create, retrieve=self._retrieve, list=self._list
        )

    async def _upload(self, *, file: tuple[str, bytes, str], purpose: str) -> Any:
        await self.release.wait()
        ids = [json.loads(line)["custom_id"] for line in file[1].splitlines()]
        self.uploads.append(ids)
        fid = f"file-{len(self.uploads)}"
        self.contents[fid] = file[1]
        return SimpleNamespace(id=fid)

    async def _create(self, *, input_file_id: str, **_: Any) -> Any:
        return SimpleNamespace(id=f"batch-{input_file_id}")

    def _list(self, **_: Any) -> Any:
        async def none() -> Any:
            for _ in ():
                yield _

        return none()

    async def _retrieve(self, batch_id: str) -> Any:
        fid = batch_id.removeprefix("batch-")
        return SimpleNamespace(status="completed", output_file_id=f"out-{fid}", error_file_id=None)

    async def _content(self, file_id: str) -> Any:
        lines = []
        for raw in self.contents[file_id.removeprefix("out-")].splitlines():
            cid = json.loads(raw)["custom_id"]
            body = {
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": f"reply to {cid}"},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
            line = {"custom_id": cid, "response": {"status_code": 200, "body": body}}
            lines.append(json.dumps(line).encode())
        return SimpleNamespace(content=b"\n".join(lines))


def test_a_call_queued_while_a_batch_uploads_is_submitted_too(tmp_path: Path) -> None:
    # The hang: the flusher swapped its queue out and awaited the upload; a call queued during
    # that await saw a live flusher and was never submitted (its caller waited forever).
    cfg = load_config(write_config(tmp_path / "b.yaml", "http://127.0.0.1:9/v1"))
    model_cfg = cfg.models["sim-aurora"]
    ledger = BatchLedger(None)
    backend = BatchBackend("sim-aurora", model_cfg, ledger, gather_s=0.01)  # type: ignore[arg-type]
    client = _SlowUploads()
    backend._client = client  # type: ignore[assignment]

    def ask(k: int) -> Any:
        msgs = [Message("user", (TextPart(f"question {k}"),))]
        return backend.chat(msgs, GenParams(max_tokens=8), "arena.answer")

    async def go() -> list[Any]:
        first = asyncio.ensure_future(ask(1))
        while not client.uploads and backend._flusher is None:
            await asyncio.sleep(0)
        await asyncio.sleep(0.05)  # past the gathering: the flusher now waits in its upload
        second = asyncio.ensure_future(ask(2))
        await asyncio.sleep(0.05)
        client.release.set()
        try:
            return await asyncio.wait_for(asyncio.gather(first, second), 10)
        finally:
            await backend.aclose()

    replies = asyncio.run(go())
    assert [r.text for r in replies] == [
        f"reply to {cid}" for cid in (client.uploads[0][0], client.uploads[1][0])
    ]
    assert len(client.uploads) == 2  # the second call went into a batch of its own


def _runs_within(cfgs: list[tuple[Any, Path]], seconds: float) -> list[Any]:
    """Each Arena run's result, run side by side (one thread each), or None for a run that
    has not ended within `seconds` (a hang)."""
    results: list[list[Any]] = [[] for _ in cfgs]
    threads = [
        threading.Thread(
            target=lambda out=out, cfg=cfg, run_dir=run_dir: out.append(
                run_method("arena", cfg, run_dir, show_progress=False)
            ),
            daemon=True,  # a hung run must not keep the test process alive
        )
        for out, (cfg, run_dir) in zip(results, cfgs, strict=True)
    ]
    for t in threads:
        t.start()
    deadline = time.monotonic() + seconds
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    return [out[0] if out else None for out in results]


def test_three_batched_runs_side_by_side_all_end_and_each_pays_once(tmp_path: Path) -> None:
    # A few runs sharing one server at once (their batches interleave in its queue); the
    # 30-run loop that looks for rarer hangs is `bench/batch_faults.py --runs 30`.
    runs = 3
    with BackgroundServer(demo_world(seed=0), process=True, batch_delay_s=0.05) as srv:
        group = [
            (
                load_config(write_config(tmp_path / f"{k}.yaml", srv.base_url, limit=1)),
                tmp_path / f"out{k}",
            )
            for k in range(runs)
        ]
        for k, out in enumerate(_runs_within(group, 90)):
            assert out is not None, f"batched run {k + 1} of {runs} hung"
            assert out.stopped is None and out.leaderboard["arena"]["overall"]
        stats = batch_stats(srv)
    # Each run (its own directory, ledger and cache) asks the same requests: each paid once a run.
    assert stats["billed_requests"] == runs * stats["distinct_requests"] > 0
