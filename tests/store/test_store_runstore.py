"""The run database: artifacts, calls, errors, snapshots, exports and crash safety."""

from __future__ import annotations

import csv
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memearena.errors import StoreError
from memearena.store import SCHEMA_VERSION, CallRecord, RunStore, artifact_key


@pytest.fixture
def store(tmp_path: Path) -> RunStore:
    s = RunStore(tmp_path / "run" / "run.db")
    yield s
    s.close()


def _call(model: str, status: str, cost: float = 0.0, **kw) -> CallRecord:
    return CallRecord("h" * 64, model, "target", status, cost_usd=cost, **kw)


def test_artifact_key_is_a_deterministic_join():
    assert artifact_key("fhm:42", "ctx1", "gpt-4o") == "fhm:42|ctx1|gpt-4o"
    assert artifact_key("a", 3, None) == "a|3|None"


def test_artifact_first_write_wins(store):
    assert store.put_artifact("answer", "k1", {"text": "first", "n": [1, 2]})
    assert not store.put_artifact("answer", "k1", {"text": "second"})
    assert store.get_artifact("answer", "k1") == {"text": "first", "n": [1, 2]}
    assert store.has_artifact("answer", "k1")
    assert not store.has_artifact("answer", "k2")
    assert store.get_artifact("answer", "k2") is None
    assert store.get_artifact("other", "k1") is None


def test_artifacts_are_ordered_by_key_and_counted(store):
    for k in ["b", "c", "a"]:
        store.put_artifact("ctx", k, {"k": k})
    store.put_artifact("verdict", "z", {"w": "tie"})
    assert [k for k, _ in store.artifacts("ctx")] == ["a", "b", "c"]
    assert store.artifacts("ctx")[0][1] == {"k": "a"}
    assert store.count_artifacts("ctx") == 3
    assert store.count_artifacts() == 4
    assert store.count_artifacts("none") == 0


def test_artifacts_keep_unicode(store):
    store.put_artifact("t", "ü", {"text": "Ünïcødé 🙂"})
    assert store.get_artifact("t", "ü") == {"text": "Ünïcødé 🙂"}


def test_errors_are_recorded_with_reasons_and_cleared(store):
    store.record_error("answer", "k1", "refusal", "I'm sorry")
    store.record_error("answer", "k2", "unparseable", "no verdict")
    store.record_error("verdict", "k9", "timeout")
    store.record_error("answer", "k1", "timeout", "retried")  # latest failure replaces
    errs = store.errors("answer")
    assert [(e.key, e.reason, e.detail) for e in errs] == [
        ("k1", "timeout", "retried"),
        ("k2", "unparseable", "no verdict"),
    ]
    assert len(store.errors()) == 3
    store.clear_errors("answer", "k1")
    assert [e.key for e in store.errors("answer")] == ["k2"]


def test_snapshots_append_and_latest_wins(store):
    assert store.latest_snapshot() is None
    store.save_snapshot({"seed": 0}, {"judge": "abc"})
    time.sleep(0.01)
    store.save_snapshot({"seed": 1}, {"judge": "def"})
    snap = store.latest_snapshot()
    assert snap is not None
    assert snap["config"] == {"seed": 1} and snap["prompt_hashes"] == {"judge": "def"}
    n = sqlite3.connect(store.path).execute("SELECT COUNT(*) FROM snapshots").fetchone()[0]
    assert n == 2


def test_calls_round_trip_and_usage_summary(store):
    store.record_call(_call("a", "ok", 0.5, input_tokens=10, output_tokens=5, latency_s=1.0))
    store.record_call(_call("a", "cached"))
    store.record_call(_call("a", "refusal", 0.25, input_tokens=4, output_tokens=2))
    store.record_call(_call("b", "error", error="HTTP 500", attempts=7))
    store.record_call(_call("b", "budget", error="over budget"))
    calls = store.calls()
    assert [c.status for c in calls] == ["ok", "cached", "refusal", "error", "budget"]
    assert calls[3].error == "HTTP 500" and calls[3].attempts == 7
    assert all(c.created_at > 0 for c in calls)
    s = store.usage_summary()
    assert s["a"]["calls"] == 3 and s["a"]["cached"] == 1 and s["a"]["refusals"] == 1
    assert s["a"]["input_tokens"] == 14 and s["a"]["cost_usd"] == pytest.approx(0.75)
    assert s["a"]["latency_s"] == pytest.approx(1.0)
    assert s["b"]["errors"] == 1 and s["b"]["budget"] == 1 and s["b"]["calls"] == 2
    assert store.total_cost() == pytest.approx(0.75)


def test_export_jsonl_and_csv(store, tmp_path):
    store.put_artifact("ctx", "k2", {"text": "two, with comma", "n": 2})
    store.put_artifact("ctx", "k1", {"text": "one\nline"})
    store.record_call(_call("a", "ok", 0.1, response="hi"))
    store.record_error("ctx", "k3", "refusal", "detail")

    assert store.export("artifacts", tmp_path / "a.jsonl", "jsonl") == 2
    rows = [json.loads(x) for x in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert [r["key"] for r in rows] == ["k1", "k2"] and rows[1]["value"]["n"] == 2

    assert store.export("artifacts", tmp_path / "a.csv", "csv") == 2
    with (tmp_path / "a.csv").open(newline="") as f:
        got = list(csv.DictReader(f))
    assert json.loads(got[0]["value"]) == {"text": "one\nline"}

    assert store.export("calls", tmp_path / "c.csv", "csv") == 1
    with (tmp_path / "c.csv").open(newline="") as f:
        call = next(csv.DictReader(f))
    assert call["status"] == "ok" and call["response"] == "hi"

    assert store.export("errors", tmp_path / "e.jsonl", "jsonl") == 1
    err = json.loads((tmp_path / "e.jsonl").read_text())
    assert (err["kind"], err["key"], err["reason"]) == ("ctx", "k3", "refusal")


def test_database_is_wal_with_schema_version(store):
    db = sqlite3.connect(store.path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_reopening_keeps_everything(tmp_path):
    s = RunStore(tmp_path / "run.db")
    s.put_artifact("k", "a", {"v": 1})
    s.close()
    s2 = RunStore(tmp_path / "run.db")
    assert s2.get_artifact("k", "a") == {"v": 1}
    s2.close()


def test_unusable_file_is_a_one_line_store_error(tmp_path):
    bad = tmp_path / "run.db"
    bad.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError) as e:
        RunStore(bad)
    assert str(bad) in str(e.value) and "\n" not in str(e.value)


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "run.db"
    sqlite3.connect(path).execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    with pytest.raises(StoreError, match="newer"):
        RunStore(path)


_WRITER = """
import sys
from pathlib import Path
from memearena.store import CallRecord, RunStore
store = RunStore(Path(sys.argv[1]))
n = int(sys.argv[2])
for i in range(n):
    key = f"item{i:05d}"
    if store.has_artifact("answer", key):
        continue
    store.put_artifact("answer", key, {"i": i, "text": "x" * 500})
    store.record_call(CallRecord(key, "m", "target", "ok", response="x" * 200))
print("done")
"""


def test_sigkill_mid_run_leaves_a_usable_database_and_rerun_has_no_duplicates(tmp_path):
    db = tmp_path / "run.db"
    script = tmp_path / "writer.py"
    script.write_text(_WRITER)
    n = 5_000
    proc = subprocess.Popen([sys.executable, str(script), str(db), str(n)])
    deadline = time.monotonic() + 30
    written = 0
    while time.monotonic() < deadline and written < 300:  # wait until it is mid-run
        time.sleep(0.05)
        if db.exists():
            try:
                with RunStore(db) as peek:
                    written = peek.count_artifacts("answer")
            except StoreError:
                written = 0
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL

    check = sqlite3.connect(db)
    assert check.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    check.close()
    store = RunStore(db)
    partial = store.count_artifacts("answer")
    assert 300 <= partial < n  # killed mid-run, nothing lost that was committed
    store.close()

    done = subprocess.run(
        [sys.executable, str(script), str(db), str(n)], capture_output=True, text=True
    )
    assert done.stdout.strip() == "done"
    store = RunStore(db)
    keys = [k for k, _ in store.artifacts("answer")]
    assert len(keys) == len(set(keys)) == n
    assert all(v["text"] == "x" * 500 for _, v in store.artifacts("answer"))
    # At most the one call in flight at the kill lacks its record; none is duplicated.
    recorded = [c.request_hash for c in store.calls()]
    assert len(recorded) == len(set(recorded)) >= n - 1


def test_artifact_key_order_is_kept_and_snapshot_accepts_paths(store, tmp_path):
    store.put_artifact("ctx", "k", {"high": 1, "moderate": 2, "unrelated": 3, "a": 0})
    assert list(store.get_artifact("ctx", "k")) == ["high", "moderate", "unrelated", "a"]
    store.save_snapshot({"data": [{"path": tmp_path / "x.jsonl"}]}, {})
    assert store.latest_snapshot()["config"]["data"][0]["path"] == str(tmp_path / "x.jsonl")


def test_record_calls_commits_all_in_one_transaction_or_none(store):
    store.record_calls([_call("a", "ok", 0.5, response="x"), _call("b", "cached")])
    store.record_calls([])
    assert [(c.model, c.status) for c in store.calls()] == [("a", "ok"), ("b", "cached")]
    assert all(c.created_at > 0 for c in store.calls())
    bad = CallRecord(None, "c", "target", "ok")  # type: ignore[arg-type]  # NOT NULL column
    with pytest.raises(StoreError, match="write failed"):
        store.record_calls([_call("c", "ok"), bad])
    assert len(store.calls()) == 2  # the batch was rolled back whole
    store.record_call(_call("d", "error", error="boom"))  # and the store is still usable
    assert [c.model for c in store.calls()] == ["a", "b", "d"]


def test_usage_summary_of_one_method_counts_only_its_roles(store):
    store.record_call(CallRecord("h" * 64, "m", "arena.judge", "ok", cost_usd=0.5))
    store.record_call(CallRecord("h" * 64, "m", "adapt.score", "ok", cost_usd=0.25))
    store.record_call(CallRecord("h" * 64, "n", "adapt.answer", "refusal"))
    assert store.usage_summary("arena.")["m"]["cost_usd"] == pytest.approx(0.5)
    adapt = store.usage_summary("adapt.")
    assert adapt["m"]["calls"] == 1 and adapt["n"]["refusals"] == 1
    assert store.usage_summary()["m"]["calls"] == 2
    assert store.usage_summary("judge_audit.") == {}


def _sent_row(call_id: str) -> tuple:
    """A ``sent`` record as the model stack lays it out (CallRecord's fields, in order)."""
    return ("h", "m", "t", "sent", 0, 0, 0.0, 0.0, 0, None, None, time.time(), call_id, 0.5, None)


def _settled(call_id: str, text: str) -> tuple:
    return ("ok", 3, 2, 0.1, 0.01, 1, None, text, time.time(), None, call_id)


def test_records_and_settlements_written_together_are_one_transaction(store):
    store.write_call_rows([_sent_row("a")], [])
    store.write_call_rows([_sent_row("b")], [_settled("a", "answer a")])
    assert [(c.call_id, c.status, c.response) for c in store.calls()] == [
        ("a", "ok", "answer a"),
        ("b", "sent", None),
    ]
    # A duplicate call id fails the insert: the settlement in the same write is not applied.
    with pytest.raises(StoreError):
        store.write_call_rows([_sent_row("a")], [_settled("b", "answer b")])
    assert [(c.call_id, c.status) for c in store.calls()] == [("a", "ok"), ("b", "sent")]
    store.write_call_rows([], [_settled("b", "answer b")])
    assert store.calls()[1].status == "ok"


def _on_disk(path, sql: str) -> int:
    """What another connection reads now: what a kill -9 would leave."""
    other = sqlite3.connect(path)
    try:
        return int(other.execute(sql).fetchone()[0])
    finally:
        other.close()


def test_queued_steps_ride_in_the_call_rows_transaction_after_the_calls(store):
    import asyncio

    arts = "SELECT COUNT(*) FROM artifacts"

    async def go() -> None:
        # A step returns once queued: seen by this store's look-ups, not yet on disk; the
        # model layer's next commit carries it, written after the calls, all or none.
        assert await store.commit_step("k", "s1", {"v": 1}) == {"v": 1}
        assert store.pending_steps and _on_disk(store.path, arts) == 0
        assert store.get_artifact("k", "s1") == {"v": 1}
        store.write_call_rows([_sent_row("a")], [])
        assert not store.pending_steps and _on_disk(store.path, arts) == 1
        # A failed write stores none of the steps it carried, and the next step is told.
        await store.commit_step("k", "s2", {"v": 2})
        with pytest.raises(StoreError):
            store.write_call_rows([_sent_row("a")], [])  # a duplicate call id
        assert store.get_artifact("k", "s2") is None
        with pytest.raises(StoreError, match="write failed"):
            await store.commit_step("k", "s3", {"v": 3})
        assert await store.commit_step("k", "s3", {"v": 3}) == {"v": 3}  # told once

    asyncio.run(go())
    assert store.get_artifact("k", "s3") == {"v": 3}
    assert [c.call_id for c in store.calls()] == ["a"]


def test_the_process_has_one_page_cache_budget_for_all_its_stores(store: RunStore, tmp_path: Path):
    from memearena.store.runstore import PROCESS_HEAP_KIB

    other = RunStore(tmp_path / "other" / "run.db")
    try:
        # SQLite's soft heap limit is process-wide: any connection, even one to another
        # database, reports the budget the stores set.
        probe = sqlite3.connect(":memory:")
        (limit,) = probe.execute("PRAGMA soft_heap_limit").fetchone()
        probe.close()
        assert limit == PROCESS_HEAP_KIB * 1024
    finally:
        other.close()


def test_call_spend_is_iter_calls_filtered_in_sqlite(store):
    """The Judge audit's cost and latency per call: the same values in the same order as
    filtering ``iter_calls`` (its bootstrap draws by position), cached and over-budget left out."""
    calls = [
        CallRecord("h" * 64, m, role, status, cost_usd=cost, latency_s=secs)
        for m, role, status, cost, secs in [
            ("a", "judge_audit.score", "ok", 0.5, 1.25),
            ("b", "judge_audit.pairwise", "ok", 0.125, 0.5),
            ("a", "judge_audit.score", "cached", 0.0, 0.0),
            ("a", "judge_audit.respond", "ok", 0.75, 2.0),
            ("b", "judge_audit.score", "budget", 0.0, 0.0),
            ("b", "judge_audit.score", "refusal", 0.25, 0.75),
            ("a", "judge_audit.pairwise", "error", 0.0, 3.0),
        ]
    ]
    store.record_calls(calls)
    roles = ("judge_audit.score", "judge_audit.pairwise")
    want = [
        (c.model, c.cost_usd, c.latency_s)
        for c in store.iter_calls()
        if c.role in roles and c.status not in ("cached", "budget")
    ]
    assert list(store.call_spend(roles)) == want and len(want) == 4
    assert list(store.call_spend(())) == []
