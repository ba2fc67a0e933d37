"""Stored requests packed and unpacked in many threads at once come back byte for byte: no
Zstandard context is shared between threads (the viewer unpacks in several page threads)."""

from __future__ import annotations

import random
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor

from memearena.store.requests import REQUESTS_SCHEMA, RequestPacker, unpack

_THREADS = 8
_ROUNDS = 6


def _payloads() -> dict[str, list[str]]:
    """Per role, requests sharing a template (what the role's dictionary holds) with bodies
    of their own, tens of KiB each."""
    rng = random.Random(7)
    words = [f"w{n}" for n in range(2000)]
    out: dict[str, list[str]] = {}
    for role in ("a.judge", "a.answer", "b.score", "b.rewrite"):
        head = f"[1, {{'role': '{role}'}}, " + " ".join(rng.choices(words, k=3000))
        out[role] = [head + " ".join(rng.choices(words, k=4000 + 500 * i)) for i in range(12)]
    return out


def test_many_threads_pack_and_unpack_different_requests_at_once() -> None:
    db = sqlite3.connect(":memory:", check_same_thread=False)
    db.execute("CREATE TABLE calls (request_hash TEXT)")
    db.executescript(REQUESTS_SCHEMA)
    packer = RequestPacker(db)
    payloads = _payloads()
    # Packed once in this thread (each role's dictionary written here): the reference bodies.
    stored = [
        (role, text, *packer.pack(role, text)) for role, texts in payloads.items() for text in texts
    ]
    dicts = {int(i): bytes(b) for i, b in db.execute("SELECT id, body FROM request_dicts")}
    barrier = threading.Barrier(_THREADS, timeout=60)

    def work(seed: int) -> list[str]:
        rng = random.Random(seed)
        wrong: list[str] = []
        for _ in range(_ROUNDS):
            order = rng.sample(range(len(stored)), len(stored))
            barrier.wait()  # every thread starts the round together
            for k in order:
                role, text, d, body = stored[k]
                # A failure is recorded, not raised: every thread keeps to the rounds.
                try:
                    if unpack(body, dicts[d]) != text:
                        wrong.append(f"unpack {role} #{k}: other bytes")
                except Exception as e:
                    wrong.append(f"unpack {role} #{k}: {e}")
                try:
                    if packer.pack(role, text) != (d, body):
                        wrong.append(f"pack {role} #{k}: other bytes")
                except Exception as e:
                    wrong.append(f"pack {role} #{k}: {e}")
        return wrong

    with ThreadPoolExecutor(_THREADS) as ex:
        results = list(ex.map(work, range(_THREADS)))
    wrong = [w for got in results for w in got]
    assert wrong == [], f"{len(wrong)} wrong, e.g. {wrong[:3]}"
    db.close()
