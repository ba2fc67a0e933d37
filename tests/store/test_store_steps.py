"""Group-committed step outcomes, batched look-ups, member views, image hashes, the run lock."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memearena.errors import RunLockedError
from memearena.store import RunLock, RunStore


def test_steps_ending_together_share_one_commit_and_first_write_wins(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "run.db")
    store.put_artifact("k", "old", {"v": "first"})
    store.record_error("k", "b", "model error: boom")

    async def go() -> list[dict[str, object] | None]:
        return list(
            await asyncio.gather(
                store.commit_step("k", "a", {"v": 1}),
                store.commit_step("k", "a", {"v": 2}),  # same key in the same batch
                store.commit_step("k", "old", {"v": "second"}),  # stored before
                store.commit_step("k", "b", {"v": 3}, clear_error=True),
                store.commit_step("k", "c", None, error=("model error: x", "")),
            )
        )

    got = asyncio.run(go())
    assert got == [{"v": 1}, {"v": 1}, {"v": "first"}, {"v": 3}, None]
    # committed: a fresh connection sees every row
    other = RunStore(tmp_path / "run.db")
    assert other.get_artifacts("k", ["a", "b", "old", "c", "zz"]) == {
        "a": {"v": 1},
        "b": {"v": 3},
        "old": {"v": "first"},
    }
    assert [(e.key, e.reason) for e in other.errors("k")] == [("c", "model error: x")]
    other.close()
    store.close()


def test_batched_lookup_spans_chunks(tmp_path: Path) -> None:
    with RunStore(tmp_path / "run.db") as store:
        for i in range(1200):
            store.put_artifact("k", f"key{i}", {"i": i})
        got = store.get_artifacts("k", [f"key{i}" for i in range(0, 2400, 2)])
    assert len(got) == 600 and got["key1198"] == {"i": 1198}


def test_member_views_stream_in_seq_order_with_their_artifacts(tmp_path: Path) -> None:
    with RunStore(tmp_path / "run.db") as store:
        store.put_artifact("v", "k1", {"w": "A"})
        store.put_artifact("v", "k2", {"w": "B"})
        store.add_members("view", "m2", [("m2\x1fx", 2, "k2", "k1", None)])
        store.add_members("view", "m1", [("m1\x1fx", 1, "k1", "gone", None)])
        store.add_members("view", "m1", [("m1\x1fy", 3, None, None, "r")])
        rows = list(store.iter_members("view", ("v", "v", None)))
        assert [r[0] for r in rows] == ["m1\x1fx", "m2\x1fx", "m1\x1fy"]
        assert rows[0][2] == ({"w": "A"}, None, None)  # a missing artifact is None
        assert rows[1][2] == ({"w": "B"}, {"w": "A"}, None)
        assert rows[2][1] == (None, None, "r")
        only_m1 = [r[0] for r in store.iter_members("view", coord_prefix="m1\x1f")]
        assert only_m1 == ["m1\x1fx", "m1\x1fy"]
        assert store.count_members("view") == 3
        store.clear_view("view")
        assert list(store.iter_members("view")) == []


def test_member_views_read_by_coord_keep_each_items_members_together(tmp_path: Path) -> None:
    """Run order can interleave two items (one moved, one not); read by coord, an item's
    members come together, as a per-meme aggregation needs."""
    with RunStore(tmp_path / "run.db") as store:
        store.add_members("view", "m2", [("m2\x1fx", 2, None, None, None)])
        store.add_members("view", "m1", [("m1\x1fx", 1, None, None, None)])
        store.add_members("view", "m1", [("m1\x1fy", 3, None, None, None)])
        assert [r[0] for r in store.iter_members("view")] == ["m1\x1fx", "m2\x1fx", "m1\x1fy"]
        by_coord = [r[0] for r in store.iter_members("view", by_coord=True)]
        assert by_coord == ["m1\x1fx", "m1\x1fy", "m2\x1fx"]


def test_items_are_dropped_moved_and_retained_with_their_completion_records(
    tmp_path: Path,
) -> None:
    with RunStore(tmp_path / "run.db") as store:
        for n, item in enumerate(["a", "b", "c"]):
            store.add_members("v", item, [(f"{item}\x1f1", (n << 32) | 1, None, None, None)])
            store.add_members("w", item, [(f"{item}\x1f1", (n << 32) | 1, None, None, None)])
            store.mark_item_done(item, f"d-{item}", n, {"judgments": 2})
        assert store.item_done("b") == ("d-b", 1, {"judgments": 2})
        store.drop_item("b")  # every view, and its completion record
        assert store.item_done("b") is None
        assert [r[0] for r in store.iter_members("w")] == ["a\x1f1", "c\x1f1"]
        store.move_item("c", 2, 0, 32)  # c now comes first, keeping its position within
        store.move_item("a", 0, 1, 32)
        assert [r[0] for r in store.iter_members("v")] == ["c\x1f1", "a\x1f1"]
        assert store.item_done("c") == ("d-c", 0, {"judgments": 2})
        store.retain_items(["c"])
        assert [r[0] for r in store.iter_members("v")] == ["c\x1f1"]
        assert store.item_done("a") is None and store.item_done("c") is not None


def test_image_hash_is_recalled_only_for_the_same_file_state(tmp_path: Path) -> None:
    with RunStore(tmp_path / "run.db") as store:
        store.put_image_sha("/x.png", 10, 5, "r1", "abc")
        assert store.image_sha("/x.png", 10, 5, "r1") == "abc"
        assert store.image_sha("/x.png", 11, 5, "r1") is None  # size changed
        assert store.image_sha("/x.png", 10, 6, "r1") is None  # mtime changed
        assert store.image_sha("/x.png", 10, 5, "r2") is None  # another preparation
        store.set_meta("digest", "d1")
        store.set_meta("digest", "d2")
        assert store.get_meta("digest") == "d2" and store.get_meta("nope") is None


def test_a_second_holder_of_a_run_lock_is_refused_naming_the_pid(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from memearena.store import RunLock;"
            f"RunLock({str(tmp_path)!r}).acquire(); print('locked', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(RunLockedError, match=f"in use by pid {holder.pid};"):
            RunLock(tmp_path).acquire()
    finally:
        holder.kill()
        holder.wait()
    # the OS drops a dead holder's lock: the directory is usable again
    with RunLock(tmp_path) as lock:
        assert (tmp_path / "run.lock").read_text().strip() == str(os.getpid())
        assert lock.path.exists()
