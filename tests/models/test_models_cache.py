"""The content-addressed cache key and the response cache file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from models_helpers import openai_cfg, sim_cfg, user

from memearena.models import (
    Completion,
    GenParams,
    ImagePart,
    Message,
    ResponseCache,
    TextPart,
    Usage,
    request_key,
)


def _img(sha: str, data_url: str) -> list[Message]:
    return [Message("user", (TextPart("meme"), ImagePart(data_url, sha)))]


def test_key_uses_image_hash_never_its_base64():
    cfg = openai_cfg("http://h/v1")
    a = request_key(cfg, "m", _img("abc", "data:image/png;base64,AAAA"), GenParams())
    b = request_key(cfg, "m", _img("abc", "data:image/jpeg;base64,BBBBBBBB"), GenParams())
    c = request_key(cfg, "m", _img("abd", "data:image/png;base64,AAAA"), GenParams())
    assert a == b != c


def test_key_changes_with_params_model_and_text_not_with_replica_order():
    msgs = user("q")
    base = request_key(openai_cfg(["http://a/v1", "http://b/v1"]), "m", msgs, GenParams())
    assert base == request_key(openai_cfg(["http://b/v1", "http://a/v1"]), "x", msgs, GenParams())
    variants = [
        request_key(openai_cfg(["http://a/v1", "http://b/v1"]), "m", msgs, GenParams(seed=1)),
        request_key(openai_cfg(["http://a/v1", "http://b/v1"], model="o"), "m", msgs, GenParams()),
        request_key(openai_cfg(["http://a/v1"]), "m", msgs, GenParams()),
        request_key(openai_cfg(["http://a/v1", "http://b/v1"]), "m", user("q2"), GenParams()),
    ]
    assert len({base, *variants}) == 5


def test_sim_key_depends_on_behaviour_not_on_limits():
    msgs = user("q")
    k = request_key(sim_cfg(skill=0.5), "s", msgs, GenParams())
    assert k == request_key(
        sim_cfg(skill=0.5, max_concurrency=2, latency_ms=9), "s", msgs, GenParams()
    )
    assert k != request_key(sim_cfg(skill=0.6), "s", msgs, GenParams())
    assert k != request_key(sim_cfg(skill=0.5), "t", msgs, GenParams())


def test_key_is_the_same_in_another_process():
    code = (
        "from memearena.config import OpenAIModelConfig as C;"
        "from memearena.models import GenParams, Message, request_key;"
        "print(request_key(C(provider='openai', model='sim-a', base_url='http://h/v1'), 'm',"
        " [Message.text('user', 'héllo')], GenParams(temperature=0.0)))"
    )
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    here = request_key(openai_cfg("http://h/v1"), "m", user("héllo"), GenParams(temperature=0.0))
    assert other.stdout.strip() == here


def test_cache_round_trip_and_persistence(tmp_path: Path):
    cache = ResponseCache(tmp_path / "c.db")
    assert cache.get("k") is None
    cache.put("k", Completion("answer", "m", Usage(3, 4), 1.5, "stop", cost_usd=0.2))
    cache.close()
    again = ResponseCache(tmp_path / "c.db")
    hit = again.get("k")
    assert hit is not None
    assert (hit.text, hit.usage, hit.finish_reason) == ("answer", Usage(3, 4), "stop")
    assert hit.cached and hit.cost_usd == 0.0
