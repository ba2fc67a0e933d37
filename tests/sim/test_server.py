"""The simulated OpenAI-compatible server: wire format, official client, faults, counters."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

import openai
import pytest

from memearena.models import GenParams, ImagePart, Message
from memearena.sim.faults import FAULTS, FaultPlan, garble
from memearena.sim.server import STATS_KEY, BackgroundServer, EchoResponder, make_app

PNG = b"\x89PNG\r\n\x1a\n not really an image"


class Recorder:
    """Remembers what it was asked; answers like EchoResponder."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, list[Message], GenParams]] = []

    def respond(self, model: str, role: str, messages: Sequence[Message], params: GenParams) -> str:
        self.seen.append((model, role, list(messages), params))
        return EchoResponder().respond(model, role, messages, params)


def _post(url: str, body: Any, headers: dict[str, str] | None = None) -> tuple[int, dict, Any]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(
        url + "/chat/completions",
        data=data,
        headers={"Content-Type": "application/json", **(headers or {})},
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, dict(r.headers), json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), json.loads(e.read())


def _data_url(raw: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(raw).decode()


def test_official_client_lists_models_and_completes_with_an_image():
    rec = Recorder()
    with BackgroundServer(rec, models=("sim-a", "sim-b")) as srv:

        async def go():
            client = openai.AsyncOpenAI(api_key="EMPTY", base_url=srv.base_url, max_retries=0)
            models = await client.models.list()
            resp = await client.chat.completions.create(
                model="sim-a",
                messages=[
                    {"role": "system", "content": "You analyse memes."},
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "Is this meme harmful?"},
                            {"type": "image_url", "image_url": {"url": _data_url(PNG)}},
                        ],
                    },
                ],
                temperature=0.0,
                max_tokens=64,
                seed=7,
                extra_headers={"X-Memearena-Role": "judge"},
            )
            await client.close()
            return models, resp

        models, resp = asyncio.run(go())
    assert [m.id for m in models.data] == ["sim-a", "sim-b"]
    assert resp.object == "chat.completion" and resp.model == "sim-a" and resp.id
    assert resp.choices[0].finish_reason == "stop"
    assert resp.choices[0].message.role == "assistant"
    assert resp.choices[0].message.content == "[judge] sim-a: Is this meme harmful? (+1 image)"
    u = resp.usage
    assert u is not None and u.total_tokens == u.prompt_tokens + u.completion_tokens
    model, role, messages, params = rec.seen[0]
    assert (model, role) == ("sim-a", "judge")
    assert [m.role for m in messages] == ["system", "user"]
    image = messages[1].content[1]
    assert isinstance(image, ImagePart)
    assert image.sha256 == hashlib.sha256(PNG).hexdigest()
    assert params == GenParams(temperature=0.0, max_tokens=64, seed=7)


def test_role_defaults_to_chat():
    rec = Recorder()
    with BackgroundServer(rec) as srv:
        status, _, body = _post(
            srv.base_url, {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        )
        assert srv.stats()["roles"] == {"chat": 1}
    assert status == 200 and rec.seen[0][1] == "chat"
    assert body["choices"][0]["message"]["content"] == "[chat] m: hi"


@pytest.mark.parametrize(
    "body",
    [
        {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True},
        {"model": "m", "messages": []},
        {"messages": [{"role": "user", "content": "hi"}]},
        {"model": "m", "messages": [{"role": "tool", "content": "x"}]},
        {"model": "m", "messages": [{"role": "user", "content": [{"type": "audio"}]}]},
        {
            "model": "m",
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "image_url", "image_url": {"url": "data:x;base64,@@"}}],
                }
            ],
        },
        b"{not json",
        [1, 2, 3],
    ],
    ids=[
        "stream",
        "no-messages",
        "no-model",
        "bad-role",
        "bad-part",
        "bad-b64",
        "not-json",
        "list",
    ],
)
def test_bad_requests_get_an_openai_style_400(body):
    with BackgroundServer() as srv:
        status, _, err = _post(srv.base_url, body)
        stats = srv.stats()
    assert status == 400
    assert err["error"]["type"] == "invalid_request_error" and err["error"]["message"]
    assert stats["bad_requests"] == 1 and stats["completed"] == 0


def test_rate_limit_fault_sends_retry_after():
    with BackgroundServer(fail_rate=1.0, faults=("429",), retry_after_s=0.25) as srv:
        status, headers, err = _post(
            srv.base_url, {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        )
    assert status == 429 and float(headers["Retry-After"]) == 0.25
    assert err["error"]["type"] == "rate_limit_error"


def test_fault_draw_is_deterministic_in_seed_and_sequence():
    plan = FaultPlan.of(0.4, 11, FAULTS)
    draws = [plan.draw(i) for i in range(400)]
    assert draws == [FaultPlan.of(0.4, 11, FAULTS).draw(i) for i in range(400)]
    assert draws != [FaultPlan.of(0.4, 12, FAULTS).draw(i) for i in range(400)]
    rate = sum(d is not None for d in draws) / len(draws)
    assert 0.3 < rate < 0.5
    assert {d for d in draws if d} == set(FAULTS)
    assert all(FaultPlan.of(0.0, 1, FAULTS).draw(i) is None for i in range(100))
    with pytest.raises(ValueError):
        FaultPlan.of(0.1, 0, ("teapot",))


def test_server_faults_follow_the_plan():
    plan = FaultPlan.of(0.5, 5, ("429", "500", "malformed"))
    expected = [{"429": 429, "500": 500}.get(plan.draw(i) or "", 200) for i in range(30)]
    with BackgroundServer(fail_rate=0.5, seed=5, faults=("429", "500", "malformed")) as srv:
        got = [
            _post(srv.base_url, {"model": "m", "messages": [{"role": "user", "content": "q"}]})[0]
            for _ in range(30)
        ]
        stats = srv.stats()
    assert got == expected
    assert stats["requests"] == 30
    assert stats["completed"] + sum(stats["faults"].values()) == 30


def test_garble_truncates_and_adds_noise():
    text = "[Background Knowledge] facts. [Reasoning] because." * 3
    bad = garble(text, 3)
    assert bad != text and len(bad) < len(text) + 20 and not bad.endswith("because.")


def test_stats_count_in_flight_and_are_on_the_app():
    app = make_app(EchoResponder(), latency_ms=5)
    assert app[STATS_KEY].requests == 0
    with BackgroundServer(latency_ms=50) as srv:

        async def go():
            client = openai.AsyncOpenAI(api_key="EMPTY", base_url=srv.base_url, max_retries=0)
            await asyncio.gather(
                *(
                    client.chat.completions.create(
                        model="m", messages=[{"role": "user", "content": f"q{i}"}]
                    )
                    for i in range(8)
                )
            )
            await client.close()

        asyncio.run(go())
        stats = srv.stats()
    assert stats["requests"] == stats["completed"] == 8
    assert stats["in_flight"] == 0 and stats["max_in_flight"] >= 2


def test_server_in_its_own_process_answers_and_reports_stats():
    with BackgroundServer(process=True, latency_ms=1) as srv:
        status, _, body = _post(
            srv.base_url,
            {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
            {"X-Memearena-Role": "context"},
        )
        stats = srv.stats()
    assert status == 200 and body["choices"][0]["message"]["content"] == "[context] m: hi"
    assert stats["completed"] == 1 and stats["roles"] == {"context": 1}
