"""Every call's request is on record: messages as sent (images by content hash, never their
base64), parameters and endpoint, compressed, once per request key, named by the call row."""

from __future__ import annotations

import hashlib
import io
import json
import sqlite3
from pathlib import Path

import pytest
from models_helpers import FakeBackend, run, sim_cfg, user

from memearena.models import GenParams, ModelPool, ResponseCache
from memearena.models.types import ImagePart, Message, TextPart
from memearena.store import RunStore


@pytest.fixture
def store(tmp_path: Path) -> RunStore:
    s = RunStore(tmp_path / "run.db")
    yield s
    s.close()


def _image_message(text: str) -> list[Message]:
    b64 = "data:image/png;base64," + "QUJD" * 500
    return [
        Message.text("system", "You are a careful judge."),
        Message("user", (TextPart(text), ImagePart(b64, "ab" * 32))),
    ]


def test_request_as_sent_is_on_record_with_the_image_by_hash(store: RunStore) -> None:
    pool = ModelPool({"m": sim_cfg()}, store=store, backends={"m": FakeBackend()})
    msgs = _image_message("Is this meme harmful? <script>x</script>")
    run(pool.complete("m", msgs, role="arena.judge", params=GenParams(max_tokens=77)))
    call = store.calls()[0]
    req = store.request(call.request_hash)
    assert req is not None
    assert req["messages"] == [
        {"role": "system", "content": [{"type": "text", "text": "You are a careful judge."}]},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Is this meme harmful? <script>x</script>"},
                {"type": "image", "sha256": "ab" * 32},
            ],
        },
    ]
    assert req["params"]["max_tokens"] == 77
    assert req["endpoint"][0] == "sim"
    raw = sqlite3.connect(store.path).execute("SELECT body FROM requests").fetchone()[0]
    assert b"QUJD" not in raw and len(raw) < 400


def test_stored_request_hashes_to_the_key_the_call_row_names(store: RunStore) -> None:
    pool = ModelPool({"m": sim_cfg()}, store=store, backends={"m": FakeBackend()})
    run(pool.complete("m", user("q1"), role="target"))
    key = store.calls()[0].request_hash
    db = sqlite3.connect(store.path)
    body, zdict = db.execute(
        "SELECT r.body, d.body FROM requests r JOIN request_dicts d ON d.id=r.dict"
    ).fetchone()
    from memearena.store.requests import unpack

    assert hashlib.sha256(unpack(body, zdict).encode()).hexdigest() == key
    assert key == pool.request_key("m", user("q1"))


def test_a_request_is_kept_once_however_often_it_is_called(tmp_path: Path, store) -> None:
    cache = ResponseCache(tmp_path / "cache.db")
    pool = ModelPool({"m": sim_cfg()}, store=store, cache=cache, backends={"m": FakeBackend()})

    async def go() -> None:
        for _ in range(3):
            await pool.complete("m", user("same"), role="target")
        await pool.complete("m", user("other"), role="target")
        await pool.aclose()

    run(go())
    cache.close()
    assert [c.status for c in store.calls()] == ["ok", "cached", "cached", "ok"]
    n = sqlite3.connect(store.path).execute("SELECT COUNT(*) FROM requests").fetchone()[0]
    assert n == 2
    assert all(store.request(c.request_hash) is not None for c in store.calls())


def test_failed_call_keeps_its_request(store: RunStore) -> None:
    from memearena.errors import ModelError

    def boom(n: int, m: object, r: object) -> str:
        raise ModelError("bad key", kind="auth")

    pool = ModelPool({"m": sim_cfg()}, store=store, backends={"m": FakeBackend(boom)})
    with pytest.raises(ModelError):
        run(pool.complete("m", user("q"), role="target"))
    call = store.calls()[0]
    assert call.status == "error"
    req = store.request(call.request_hash)
    assert req is not None and req["messages"][0]["content"][0]["text"] == "q"


def test_export_requests_table(store: RunStore) -> None:
    pool = ModelPool({"m": sim_cfg()}, store=store, backends={"m": FakeBackend()})

    async def go() -> None:
        await pool.complete("m", user("first"), role="a")
        await pool.complete("m", user("second"), role="b")

    run(go())
    out = io.StringIO()
    assert store.write_export("requests", out, "jsonl") == 2
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    texts = {r["messages"][0]["content"][0]["text"] for r in rows}
    assert texts == {"first", "second"}
    assert {r["key"] for r in rows} == {c.request_hash for c in store.calls()}
    csv_out = io.StringIO()
    assert store.write_export("requests", csv_out, "csv") == 2
    assert csv_out.getvalue().splitlines()[0] == "key,key_version,endpoint,messages,params"


def test_request_of_a_call_recorded_before_requests_were_kept_is_none(store: RunStore) -> None:
    assert store.request("0" * 64) is None


def test_api_reads_requests(tmp_path: Path) -> None:
    pytest.importorskip("pandas")
    import memearena

    store = RunStore(tmp_path / "run.db")
    pool = ModelPool({"m": sim_cfg()}, store=store, backends={"m": FakeBackend()})
    run(pool.complete("m", user("hello"), role="arena.answer"))  # an Arena call
    key = store.calls()[0].request_hash
    store.close()
    (tmp_path / "leaderboard.json").write_text('{"arena": {"overall": []}}', encoding="utf-8")
    result = memearena.open_run(tmp_path)
    assert isinstance(result, memearena.ArenaResult)
    assert result.request(key)["messages"][0]["content"][0]["text"] == "hello"
    assert list(result.requests()["key"]) == [key]


def test_a_key_value_in_a_prompt_never_reaches_the_stored_request(
    store: RunStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from models_helpers import openai_cfg

    secret = "sk-test-0123456789abcdef"
    monkeypatch.setenv("MY_KEY", secret)
    cfg = openai_cfg("http://127.0.0.1:9/v1", api_key_env="MY_KEY")
    pool = ModelPool({"m": cfg}, store=store, backends={"m": FakeBackend()})
    run(pool.complete("m", user(f"my key is {secret}"), role="target"))
    req = store.request(store.calls()[0].request_hash)
    assert req is not None
    assert secret not in json.dumps(req) and "***" in req["messages"][0]["content"][0]["text"]


def test_a_run_database_with_the_first_requests_layout_stays_readable_and_writable(
    tmp_path: Path,
) -> None:
    # Run directories written before the requests table moved to rowid order keep their table
    # (keyed by the hash itself, WITHOUT ROWID): the same statements read and extend it.
    path = tmp_path / "run.db"
    with RunStore(path) as s:
        pool = ModelPool({"m": sim_cfg()}, store=s, backends={"m": FakeBackend()})
        run(pool.complete("m", user("before"), role="target"))
        db = sqlite3.connect(path)
        rows = db.execute("SELECT key, dict, body FROM requests").fetchall()
        db.executescript(
            "DROP TABLE requests; CREATE TABLE requests (key TEXT PRIMARY KEY,"
            " dict INTEGER NOT NULL, body BLOB NOT NULL) WITHOUT ROWID;"
        )
        db.executemany("INSERT INTO requests VALUES (?, ?, ?)", rows)
        db.commit()
        db.close()
    with RunStore(path) as s:
        pool = ModelPool({"m": sim_cfg()}, store=s, backends={"m": FakeBackend()})
        run(pool.complete("m", user("after"), role="target"))
        run(pool.complete("m", user("before"), role="target"))  # kept once: already on record
        texts = [s.request(c.request_hash)["messages"][0]["content"][0]["text"] for c in s.calls()]
        assert texts == ["before", "after", "before"]
        out = io.StringIO()
        assert s.write_export("requests", out, "jsonl") == 2
    db = sqlite3.connect(path)
    sql = db.execute("SELECT sql FROM sqlite_master WHERE name='requests'").fetchone()[0]
    db.close()
    assert "WITHOUT ROWID" in sql


def test_requests_packed_with_zlib_by_an_older_version_stay_readable_beside_new_ones(
    tmp_path: Path,
) -> None:
    import zlib

    from memearena.store.requests import unpack

    path = tmp_path / "run.db"
    with RunStore(path) as s:
        pool = ModelPool({"m": sim_cfg()}, store=s, backends={"m": FakeBackend()})
        run(pool.complete("m", user("old"), role="target"))
        old_key = s.calls()[0].request_hash
    db = sqlite3.connect(path)
    body, zdict = db.execute(
        "SELECT r.body, d.body FROM requests r JOIN request_dicts d ON d.id = r.dict"
    ).fetchone()
    assert bytes(body)[:4] == b"\x28\xb5\x2f\xfd"  # a Zstandard frame
    co = zlib.compressobj(6, zdict=zdict)  # as versions before Zstandard packed it
    zbody = co.compress(unpack(body, zdict).encode()) + co.flush()
    db.execute("UPDATE requests SET body=? WHERE key=?", (zbody, old_key))
    db.commit()
    db.close()
    with RunStore(path) as s:
        pool = ModelPool({"m": sim_cfg()}, store=s, backends={"m": FakeBackend()})
        run(pool.complete("m", user("new"), role="target"))
        got = [s.request(c.request_hash) for c in s.calls()]
        assert [r["messages"][0]["content"][0]["text"] for r in got] == ["old", "new"]
        out = io.StringIO()
        assert s.write_export("requests", out, "jsonl") == 2
        keys = {json.loads(line)["key"] for line in out.getvalue().splitlines()}
        assert keys == {c.request_hash for c in s.calls()}


def test_each_image_sent_is_kept_once_by_its_hash_beside_the_run(store: RunStore) -> None:
    import base64

    png = b"\x89PNG\r\n\x1a\n" + b"meme pixels" * 20
    sha = hashlib.sha256(png).hexdigest()
    part = ImagePart("data:image/png;base64," + base64.b64encode(png).decode(), sha)
    pool = ModelPool({"m": sim_cfg()}, store=store, backends={"m": FakeBackend()})
    for q in ("q1", "q2"):  # two requests showing one image: one file
        run(pool.complete("m", [Message("user", (TextPart(q), part))], role="target"))
    folder = store.path.parent / "images" / sha[:2]
    assert [p.name for p in folder.iterdir()] == [f"{sha}.png"]
    assert (folder / f"{sha}.png").read_bytes() == png
    # A part whose bytes do not hash to its name is never kept under that name.
    run(pool.complete("m", _image_message("q3"), role="target"))
    assert not (store.path.parent / "images" / "ab").exists()
