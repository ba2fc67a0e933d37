"""A ``base_url`` is parsed once: credentials in it (``user:pass@``, a key in the query) are
refused in one line that points to ``api_key_env`` and never echoes them, and a query string
(e.g. ``api-version``) is kept when the endpoint's path is appended, on both request paths."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from models_helpers import openai_cfg, user
from test_lean_wire import RawServer, completion

from memearena.config import parse_config
from memearena.config.urls import endpoint_url
from memearena.errors import ConfigError
from memearena.models import GenParams, OpenAIBackend
from memearena.models.lean import LeanBackend


def _config(base_url: Any) -> dict[str, Any]:
    return {
        "run": "r",
        "models": {"m": {"provider": "openai", "model": "x", "base_url": base_url}},
        "data": [{"format": "demo", "limit": 1}],
    }


@pytest.mark.parametrize(
    "url",
    [
        "http://alice:hunter2secret@127.0.0.1:8000/v1",
        "https://hunter2secret@api.example.com/v1",
        ["http://127.0.0.1:8000/v1", "http://bob:hunter2secret@127.0.0.1:8001/v1"],
    ],
)
def test_credentials_in_a_base_url_are_refused_in_one_line(url: Any) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(_config(url))
    message = str(info.value)
    assert "\n" not in message and "base_url" in message and "api_key_env" in message
    assert "hunter2secret" not in message


@pytest.mark.parametrize(
    "query",
    [
        "key=AIzaSyD-hunter2secret0123456789",
        "api_key=hunter2secret",
        "api-version=2024-02-01&access_token=hunter2secret",
        "sig=hunter2secret",
        "x=sk-proj-hunter2secret0123456789abcdef",
    ],
)
def test_a_secret_in_a_base_urls_query_is_refused_without_echoing_it(query: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(_config(f"https://gw.example.com/v1?{query}"))
    message = str(info.value)
    assert "\n" not in message and "api_key_env" in message
    assert "hunter2secret" not in message


def test_a_query_that_holds_no_secret_is_accepted() -> None:
    cfg = parse_config(_config("https://gw.example.com/openai/v1?api-version=2024-02-01"))
    assert cfg.models["m"].urls() == ["https://gw.example.com/openai/v1?api-version=2024-02-01"]


def test_the_endpoint_path_goes_before_the_query() -> None:
    base = "https://gw.example.com/openai/v1/?api-version=2024-02-01"
    assert endpoint_url(base, "/chat/completions") == (
        "https://gw.example.com/openai/v1/chat/completions?api-version=2024-02-01"
    )
    assert endpoint_url("http://h:1/v1", "/embeddings") == "http://h:1/v1/embeddings"


@pytest.mark.parametrize("client", ["lean", "sdk"])
def test_a_base_url_with_a_query_reaches_the_endpoint_with_it(client: str) -> None:
    async def reply(n: int, writer: asyncio.StreamWriter) -> None:
        writer.write(completion("hello back"))
        await writer.drain()

    with RawServer(reply) as srv:
        cfg = openai_cfg(f"{srv.base_url}?api-version=2024-02-01", client=client)
        backend = LeanBackend("m", cfg) if client == "lean" else OpenAIBackend("m", cfg)

        async def go() -> str:
            try:
                raw = await backend.chat(user("hello"), GenParams(max_tokens=8), "t")
                return raw.text
            finally:
                await backend.aclose()

        text = asyncio.run(go())
        seen = list(srv.requests)
    assert text == "hello back"
    assert seen == [("POST", "/v1/chat/completions?api-version=2024-02-01")]
