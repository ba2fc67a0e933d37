"""The batch path sized like the providers': ``sim-serve`` accepts uploads the providers accept
(200 MB, a 413 past its limit), the client cuts its input files to its limit (bytes and
requests), answers a 413 by splitting, and keys its ledger by endpoint, model and body."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import urllib.request
from pathlib import Path
from typing import Any

import openai
import pytest
import yaml

from memearena.config import load_config, parse_config
from memearena.engine.lifecycle import run_method
from memearena.errors import ModelError
from memearena.models import ModelPool
from memearena.models.types import GenParams, Message, TextPart
from memearena.sim.catalogue import DEMO_JUDGES, DEMO_TARGETS
from memearena.sim.serve import demo_world
from memearena.sim.server import BackgroundServer, EchoResponder
from memearena.store import RunStore

MIB = 1024 * 1024


def batch_stats(srv: BackgroundServer) -> dict[str, Any]:
    with urllib.request.urlopen(f"{srv.base_url}/batch_stats", timeout=10) as r:
        data: dict[str, Any] = json.loads(r.read())
    return data


def _model(base_url: str, **kw: Any) -> dict[str, Any]:
    return {
        "provider": "openai",
        "base_url": base_url,
        "model": "sim-aurora",
        "max_concurrency": 64,
        "price": {"input": 2.0, "output": 8.0},
        "batch": True,
        "batch_poll_s": 0.05,
        **kw,
    }


def _pool_config(models: dict[str, dict[str, Any]]) -> Any:
    return parse_config(
        {"run": "b", "seed": 0, "models": models, "data": [{"format": "demo", "limit": 1}]}
    )


def _ask(pool: ModelPool, model: str, texts: list[str]) -> Any:
    return asyncio.gather(
        *(
            pool.complete(
                model,
                [Message("user", (TextPart(t),))],
                role="arena.answer",
                params=GenParams(max_tokens=16),
            )
            for t in texts
        ),
        return_exceptions=True,
    )


def _big_questions(n: int, size: int) -> list[str]:
    return [f"question {k}: " + "x" * size for k in range(n)]


def test_sim_serve_accepts_a_batch_file_past_one_mebibyte() -> None:
    data = b"".join(
        json.dumps({"custom_id": f"a|{k}", "body": {"pad": "y" * 10_000}}).encode() + b"\n"
        for k in range(250)
    )
    assert len(data) > 2 * MIB
    with BackgroundServer(EchoResponder()) as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="x", max_retries=0)
        uploaded = client.files.create(file=("big.jsonl", data), purpose="batch")
        client.close()
        assert uploaded.bytes == len(data)
        assert batch_stats(srv)["largest_upload"] == len(data)


def test_an_upload_past_the_servers_file_limit_gets_413() -> None:
    with BackgroundServer(EchoResponder(), batch_file_limit=64 * 1024) as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="x", max_retries=0)
        with pytest.raises(openai.APIStatusError) as info:
            client.files.create(file=("big.jsonl", b"z" * 100_000), purpose="batch")
        client.close()
        assert info.value.status_code == 413
        assert batch_stats(srv)["too_large"] == 1


def test_a_413_is_answered_by_splitting_and_every_request_is_paid_once(tmp_path: Path) -> None:
    texts = _big_questions(60, 40_000)  # about 2.5 MB of requests gathering into one batch
    with BackgroundServer(EchoResponder(), batch_delay_s=0.05, batch_file_limit=MIB) as srv:
        cfg = _pool_config({"a": _model(srv.base_url)})  # the client's limit: 200 MB
        store = RunStore(tmp_path / "run.db")

        async def go() -> list[Any]:
            async with ModelPool(cfg.models, store=store) as pool:
                return list(await _ask(pool, "a", texts))

        got = asyncio.run(go())
        stats = batch_stats(srv)
        store.close()
    assert not [g for g in got if isinstance(g, BaseException)]
    assert stats["too_large"] >= 1  # refused at first ...
    assert stats["largest_upload"] <= MIB and stats["batches"] >= 3  # ... then split
    assert stats["billed_requests"] == stats["distinct_requests"] == 60
    assert stats["billed_twice"] == []


def test_the_clients_file_limit_cuts_files_before_any_upload(tmp_path: Path) -> None:
    texts = _big_questions(30, 20_000)
    with BackgroundServer(EchoResponder(), batch_delay_s=0.05) as srv:
        models = {"a": _model(srv.base_url, batch_max_bytes=128 * 1024, batch_max_requests=4)}
        store = RunStore(tmp_path / "run.db")

        async def go() -> list[Any]:
            async with ModelPool(_pool_config(models).models, store=store) as pool:
                return list(await _ask(pool, "a", texts))

        got = asyncio.run(go())
        stats = batch_stats(srv)
        store.close()
    assert not [g for g in got if isinstance(g, BaseException)]
    assert stats["too_large"] == 0 and stats["largest_upload"] <= 128 * 1024
    assert stats["batches"] >= 30 // 4  # at most 4 requests a file
    assert stats["billed_requests"] == 30 and stats["billed_twice"] == []


def test_a_request_larger_than_the_file_limit_fails_alone_naming_the_limit(
    tmp_path: Path,
) -> None:
    texts = ["small one", "x" * 20_000, "small two"]
    with BackgroundServer(EchoResponder(), batch_delay_s=0.05) as srv:
        models = {"a": _model(srv.base_url, batch_max_bytes=8192, max_retries=0)}

        async def go() -> list[Any]:
            async with ModelPool(_pool_config(models).models) as pool:
                return list(await _ask(pool, "a", texts))

        got = asyncio.run(go())
    assert not isinstance(got[0], BaseException) and not isinstance(got[2], BaseException)
    assert isinstance(got[1], ModelError)
    assert "batch file limit of 8,192 bytes (batch_max_bytes)" in str(got[1])


def test_one_model_id_batched_on_two_endpoints_keeps_a_ledger_row_per_request(
    tmp_path: Path,
) -> None:
    texts = ["q1", "q2", "q3"]
    with (
        BackgroundServer(EchoResponder(), batch_delay_s=0.05) as one,
        BackgroundServer(EchoResponder(), batch_delay_s=0.05) as two,
    ):
        cfg = _pool_config({"a": _model(one.base_url), "b": _model(two.base_url)})
        store = RunStore(tmp_path / "run.db")

        async def go() -> list[Any]:
            async with ModelPool(cfg.models, store=store) as pool:
                return list(await asyncio.gather(_ask(pool, "a", texts), _ask(pool, "b", texts)))

        asyncio.run(go())
        billed = [batch_stats(s)["billed_requests"] for s in (one, two)]
        store.close()
    rows = sqlite3.connect(tmp_path / "run.db").execute("SELECT custom_id FROM batch_requests")
    assert len(set(rows.fetchall())) == 6
    assert billed == [3, 3]


def test_a_batched_arena_against_a_server_with_a_small_file_limit_completes(
    tmp_path: Path,
) -> None:
    catalogue = {**DEMO_TARGETS, **DEMO_JUDGES}
    targets, judges = ["sim-aurora", "sim-cirrus", "sim-ember"], ["sim-judge-falcon"]
    limit = 96 * 1024  # below the judge stage's gathered uploads (a 1 MiB limit needs ~20 memes)
    with BackgroundServer(
        demo_world(seed=0), process=True, batch_delay_s=0.1, batch_file_limit=limit
    ) as srv:
        models = {
            n: _model(srv.base_url, model=n, family=catalogue[n].family) for n in targets + judges
        }
        raw = {
            "run": "batched",
            "seed": 0,
            "models": models,
            "data": [{"format": "demo", "limit": 2}],
            "arena": {
                "targets": targets,
                "judges": judges,
                "context_model": judges[0],
                "fusion_rounds": 1,
                "bootstrap": 10,
            },
        }
        (tmp_path / "c.yaml").write_text(yaml.safe_dump(raw))
        result = run_method(
            "arena", load_config(tmp_path / "c.yaml"), tmp_path / "run", show_progress=False
        )
        stats = batch_stats(srv)
    assert result.stopped is None and result.exit_code == 0
    assert result.leaderboard["arena"]["overall"]
    assert stats["too_large"] >= 1 and stats["largest_upload"] <= limit
    assert stats["billed_requests"] == stats["distinct_requests"] and stats["billed_twice"] == []
