"""Runs the viewer tests read: the demo (``demo_run``, tests/conftest.py) and a hostile copy of it
whose memes, answers and model names carry markup and script."""

from __future__ import annotations

import json
import shutil
import sqlite3
import zlib
from pathlib import Path

import pytest

from memearena.store.requests import unpack

BEACON = "__BEACON__"
"""Replaced by the beacon server's address in the payloads (``hostile_run(beacon_url)``)."""

PAGES = (
    "/",
    "/r/0/",
    "/r/0/arena",
    "/r/0/memes",
    "/r/0/meme?id=demo:m01",
    "/r/0/battles",
    "/r/0/calls",
    "/r/0/call/1",
    "/r/0/adapt",
    "/r/0/adapt/records?model=sim-aurora&category=Race",
    "/r/0/adapt/chain/1",
    "/r/0/judge-audit",
    "/r/0/judge-audit/pairs?bias_type=text_dominance",
)
"""One page of each kind of a demo run directory (the first run of the viewer)."""


PAYLOADS = (
    f"<script>fetch('{BEACON}/script')</script>",
    f"<img src=x onerror=\"fetch('{BEACON}/onerror')\">",
    f"</script><script>new Image().src='{BEACON}/close-script'</script>",
    f"javascript:fetch('{BEACON}/javascript-url')",
    f'"><svg onload="fetch(\'{BEACON}/svg\')">',
)

HOSTILE_MODEL = "sim-aurora<script>fetch('__BEACON__/model')</script>"


@pytest.fixture(scope="session")
def judge_audit_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Judge-audit-only run directory (the bundled offline example), once a session."""
    from importlib.resources import files

    from memearena.config import load_config
    from memearena.engine.lifecycle import run_method

    cfg = load_config(Path(str(files("memearena") / "examples" / "judge-audit.yaml")))
    from concurrent.futures import ThreadPoolExecutor

    run = tmp_path_factory.mktemp("view-audit") / "audit"
    # In a thread of its own: a browser test's event loop may be running in this one.
    with ThreadPoolExecutor(1) as ex:
        ex.submit(run_method, "judge_audit", cfg, run, show_progress=False).result()
    return run


def _replace_everywhere(db: sqlite3.Connection, old: str, new: str) -> None:
    db.execute("UPDATE calls SET model=replace(model, ?, ?)", (old, new))
    for col in ("coord", "ref1", "ref2", "ref3"):
        db.execute(f"UPDATE members SET {col}=replace({col}, ?, ?)", (old, new))
    db.execute(
        "UPDATE OR IGNORE artifacts SET key=replace(key, ?, ?) WHERE kind IN ('answer', 'verdict')",
        (old, new),
    )


def make_hostile(src: Path, dst: Path, beacon: str) -> Path:
    """A copy of a run whose meme texts, answers and one model's name hold ``PAYLOADS``
    (pointing at ``beacon``)."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("run.lock", "cache.sqlite"))
    payloads = [p.replace(BEACON, beacon) for p in PAYLOADS]
    hostile = " ".join(payloads)
    model = HOSTILE_MODEL.replace(BEACON, beacon)
    db = sqlite3.connect(dst / "run.db")
    # Every answer of one target becomes the payloads.
    db.execute(
        "UPDATE artifacts SET value=json_set(value, '$.text', ?) WHERE kind='answer'"
        " AND key LIKE '%|sim-borealis|%'",
        (hostile,),
    )
    # Every meme's text, as its context request recorded it.
    zdicts = {i: bytes(b) for i, b in db.execute("SELECT id, body FROM request_dicts")}
    ctx_keys = [
        k.rsplit("|", 1)[-1]
        for (k,) in db.execute("SELECT key FROM artifacts WHERE kind='context'")
    ]
    for key in ctx_keys:
        d, body = db.execute("SELECT dict, body FROM requests WHERE key=?", (key,)).fetchone()
        text = unpack(body, zdicts[d])
        payload = json.loads(text)
        for _role, parts in payload[2]:
            for part in parts:
                if part[0] == "text" and "<meme_text>\n" in part[1]:
                    head, rest = part[1].split("<meme_text>\n", 1)
                    _, tail = rest.split("\n</meme_text>", 1)
                    part[1] = f"{head}<meme_text>\nHOSTILE {hostile}\n</meme_text>{tail}"
        raw = json.dumps(payload, ensure_ascii=False).encode()
        co = zlib.compressobj(6, zdict=zdicts[d])  # a body as older runs packed it: still read
        db.execute("UPDATE requests SET body=? WHERE key=?", (co.compress(raw) + co.flush(), key))
    _replace_everywhere(db, "sim-aurora", model)
    db.commit()
    db.close()
    enc = json.dumps(model)[1:-1]
    for name in ("leaderboard.json", "battles.jsonl"):
        p = dst / name
        p.write_text(p.read_text(encoding="utf-8").replace("sim-aurora", enc), encoding="utf-8")
    return dst
