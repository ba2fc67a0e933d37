"""The content-addressed cache key and the response cache file."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
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
from memearena.models.cache import (
    _canonical_payload,
    _value_json,
    endpoint_id,
    key_for_endpoint,
    key_from_parts,
    key_prefix,
    params_json,
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


_KEY_MSGS = [
    Message.text("system", 'Be "terse"\n\t\\ ok'),
    Message(
        "user",
        (TextPart("héllo ✓ \u2028 \x00"), ImagePart("data:image/png;base64,AAAA", "ab" * 32)),
    ),
    Message.text("assistant", ""),
]


def test_key_values_are_pinned_so_existing_caches_stay_valid():
    # Computed by the original json.dumps-of-the-whole-payload implementation.
    cfg = openai_cfg(["http://b/v1", "http://a/v1"], model="gpt-x")
    p = GenParams(temperature=0.7, top_p=1.0, max_tokens=256, seed=3, reasoning_effort="low")
    assert (
        request_key(cfg, "m", _KEY_MSGS, p)
        == "43e82c266441998f505286c0189c17162b980f0000ef84159d7dd778e129a0c2"
    )
    assert (
        request_key(sim_cfg(skill=0.5), "s", _KEY_MSGS, GenParams())
        == "c1d29b293f3168c203e566e65d25e94491b1be3e95d13a434942079cfa6bdb98"
    )


@pytest.mark.parametrize(
    "params",
    [
        GenParams(),
        GenParams(temperature=0.0, seed=0),
        GenParams(temperature=1, top_p=0.95, max_tokens=1),
        GenParams(temperature=float("nan"), reasoning_effort='"hi"\u00e9'),
    ],
)
def test_fast_key_matches_the_canonical_payload_byte_for_byte(params):
    endpoint = endpoint_id(openai_cfg("http://h/v1"), "m")
    texts = ["", "plain", 'quote " backslash \\ slash /', "\u2028\u2029\x1f\x7f", "😀 ñ 中文"]
    for i, t in enumerate(texts):
        msgs = [*_KEY_MSGS[: i % 4], Message("user", (TextPart(t), ImagePart("u", t or "h")))]
        want = hashlib.sha256(_canonical_payload(endpoint, msgs, params).encode()).hexdigest()
        assert key_for_endpoint(endpoint, msgs, params) == want
        prefix, part = key_prefix(endpoint), params_json(params)
        assert key_from_parts(prefix, endpoint, msgs, params, part) == want


def test_key_falls_back_to_the_generic_encoder_for_odd_values():
    endpoint = endpoint_id(openai_cfg("http://h/v1"), "m")
    odd = [Message("user", (TextPart(42),))]  # type: ignore[arg-type]
    want = hashlib.sha256(_canonical_payload(endpoint, odd, GenParams()).encode()).hexdigest()
    assert key_for_endpoint(endpoint, odd, GenParams()) == want


def test_put_many_writes_all_in_one_go_and_keeps_existing_entries(tmp_path: Path):
    cache = ResponseCache(tmp_path / "c.db")
    cache.put("a", Completion("first", "m", Usage(1, 1), 0.0, "stop"))
    cache.put_many(
        [
            ("b", Completion("bee", "m", Usage(2, 3), 0.0, "length")),
            ("a", Completion("second", "m", Usage(1, 1), 0.0, "stop")),
            ("c", Completion("sea", "m", Usage(4, 5), 0.0, None)),
        ]
    )
    cache.put_many([])
    assert len(cache) == 3
    a, b, c = cache.get("a"), cache.get("b"), cache.get("c")
    assert a is not None and a.text == "first"  # first write wins
    assert b is not None and (b.text, b.usage, b.finish_reason) == ("bee", Usage(2, 3), "length")
    assert c is not None and c.finish_reason is None
    cache.close()


def test_params_part_is_what_json_dumps_writes():
    values = [None, 0, -3, 0.0, -0.0, 0.7, 1e-300, 1e300, float("nan"), float("inf"), True, "é\n"]
    for i, v in enumerate(values):
        w = values[(i * 7 + 3) % len(values)]
        p = GenParams(temperature=v, top_p=w, max_tokens=v, seed=w, reasoning_effort=v)
        fields = [p.temperature, p.top_p, p.max_tokens, p.seed, p.reasoning_effort]
        assert params_json(p) == json.dumps(fields, ensure_ascii=False, separators=(",", ":"))


@pytest.mark.parametrize(
    "completion",
    [
        Completion('héllo "x" \n ✓ \u2028', "m/ü", Usage(3, 4), 0.0, "stop"),
        Completion("", "m", Usage(0, 0), 0.0, None),
        Completion("t", "m", Usage(1.5, 2), 0.0, "length"),  # type: ignore[arg-type]
        Completion("t", "m", Usage(True, 2), 0.0, "length"),
    ],
)
def test_stored_value_is_what_json_dumps_writes(completion):
    c = completion
    want = json.dumps(
        {
            "text": c.text,
            "model": c.model,
            "input_tokens": c.usage.input_tokens,
            "output_tokens": c.usage.output_tokens,
            "finish_reason": c.finish_reason,
        },
        ensure_ascii=False,
    )
    assert _value_json(c) == want


def test_a_cache_in_the_earlier_layout_is_read_and_written_as_before(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    old = sqlite3.connect(path)
    old.execute(
        "CREATE TABLE responses (key TEXT PRIMARY KEY, value TEXT NOT NULL,"
        " created_at REAL NOT NULL) WITHOUT ROWID"
    )
    value = json.dumps(
        {
            "text": "kept",
            "model": "m",
            "input_tokens": 1,
            "output_tokens": 2,
            "finish_reason": "stop",
        }
    )
    old.execute("INSERT INTO responses VALUES ('k1', ?, 0)", (value,))
    old.commit()
    old.close()
    cache = ResponseCache(path)
    got = cache.get("k1")
    assert got is not None and got.text == "kept" and got.cached
    cache.put_many([("k1", Completion("other", "m")), ("k2", Completion("new", "m"))])
    second = cache.get("k2")
    assert cache.get("k1").text == "kept"  # an existing entry is kept
    assert second is not None and second.text == "new" and len(cache) == 2
    cache.close()


def test_a_new_cache_keeps_replies_apart_from_the_key_index(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "new.sqlite")
    cache.put_many([(f"k{i}", Completion(f"reply {i}", "m")) for i in range(3)])
    cache.put_many([("k1", Completion("again", "m"))])
    plan = " ".join(
        str(row[-1])
        for row in cache._db.execute(
            "EXPLAIN QUERY PLAN SELECT value FROM responses WHERE key=?", ("k1",)
        )
    )
    assert "USING INDEX" in plan  # a miss is answered by the index alone
    assert [cache.get(f"k{i}").text for i in range(3)] == ["reply 0", "reply 1", "reply 2"]
    assert len(cache) == 3
    cache.close()


def test_a_message_keyed_again_gives_the_key_of_a_fresh_copy():
    # A message's encoding is memoised on it: a second use (the step's fingerprint, then the
    # call; one prompt for every judge) must hash exactly what a first use does.
    endpoint = endpoint_id(openai_cfg("http://h/v1"), "m")
    msgs = [*_KEY_MSGS, Message("user", (TextPart("again"), ImagePart("u", "h")))]
    first = key_for_endpoint(endpoint, msgs, GenParams())
    again = key_for_endpoint(endpoint, msgs, GenParams())
    fresh = key_for_endpoint(endpoint, [Message(m.role, m.content) for m in msgs], GenParams())
    want = hashlib.sha256(_canonical_payload(endpoint, msgs, GenParams()).encode()).hexdigest()
    assert first == again == fresh == want
    assert msgs[-1] == Message("user", (TextPart("again"), ImagePart("u", "h")))
